"""What a tenant's LSH indexes hold, counted on every write (featurehash.store.lsh_compact_scripts.WRITE).

Counted bytes are the bytes of the values an item puts in Redis: its record (`width`: fingerprints and bucket
identities), its tail (the kept vector, then its id), its id-map entry (the id and a 4-byte number) and 4 bytes
per bucket membership, all as written; not Redis's per-key and allocator overhead (the index's measured memory
is ~1.4x the count: featurehash.store.lsh_layout), nor an index's few configuration keys. Each layout-3 index
keeps its own count (`P size`, in its slot); every write adds its change there in the same script that writes
the items, and, on a standalone Redis, to the tenant's total (`{tenant key prefix}stored-bytes`) too, after
checking the tenant's limit: a batch that would pass it writes nothing (StoredBytesExceeded). Deleting an index
subtracts its count from the tenant's in the script that drops it. A Redis Cluster cannot run one script over an
index's slot and the tenant's total: there only the per-index counts are kept (and no limit is enforced).
Indexes of layouts 1-2 and items written before counting began are not counted; removing them never takes a
count below zero.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoredBytes:
    """The tenant's total (a Redis key) and its limit (None: counted, never refused)."""

    key: bytes
    limit: int | None = None


def tenant_total_key(tenant_key_prefix: str) -> bytes:
    return f"{tenant_key_prefix}stored-bytes".encode()


class StoredBytesExceeded(Exception):
    """A write that would take the tenant past its stored-bytes limit; nothing of the refused batch was written
    (`stored`: items of the same request written by earlier batches, which stay and stay counted)."""

    def __init__(self, limit: int, used: int, needed: int, stored: int = 0):
        super().__init__(f"{used} + {needed} > {limit}")
        self.limit, self.used, self.needed, self.stored = limit, used, needed, stored
