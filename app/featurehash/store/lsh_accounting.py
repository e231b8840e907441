"""What a tenant's LSH indexes hold, counted on every write (featurehash.store.index.compact.scripts.WRITE).

Counted bytes are the bytes of the values an item puts in Redis: its record (`width`: fingerprints and bucket
identities), its tail (the kept vector, then its id), its id-map entry (the id and a 4-byte number) and 4 bytes
per bucket membership, all as written; not Redis's per-key and allocator overhead (the index's measured memory
is ~1.4x the count: featurehash.store.lsh_layout), nor an index's few configuration keys. Each layout-3 index
keeps its own count (`P size`, in its slot); every write adds its change there in the same script that writes
the items, and the script sizes the batch first: a batch that would take the tenant past its limit writes
nothing (StoredBytesExceeded). Deleting an index drops its count in the script that drops the index.

Standalone Redis: the script also keeps the tenant's total (`{tenant key prefix}stored-bytes`) and checks the
limit against it, atomically: the limit is never passed. The same total counts the maps the tenant created
(featurehash.store.map_accounting), so one limit bounds its maps and indexes together.

Redis Cluster: the tenant's total would lie in another slot than the index, and one script cannot touch both;
the total is the sum of the counts of the indexes in the tenant's registry (`tenant_usage_steps`). Before each
batch a writer with a limit reads the counts of the tenant's other indexes (the registry, then every count at
once: two round trips, not a snapshot) and gives the script the allowance, limit - others; the script checks
its own index's count + the batch <= allowance, atomically in the index's slot. So writes to one index never
pass the limit together (each script sees the others' bytes in that index's count), but a batch written to
ANOTHER index of the tenant between a writer's read and its script is not seen: with w writers on w different
indexes at once, the tenant may end past its limit by what the other w - 1 wrote meanwhile, at most w - 1
batches (a batch: featurehash.store.index.compact.steps.COMPACT_BATCH_OPERATIONS bucket operations), and every
later write is then refused. A tenant without a limit costs no extra read. An index created but not yet in
the registry (its create crashed in between, until repeated) is not seen by the others' reads.

Indexes of layouts 1-2 and items written before counting began are not counted; removing them never takes a
count below zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from .lsh_layout import IndexLayout, shard_tags
from .redis_steps import RoundTrip


@dataclass(frozen=True)
class StoredBytes:
    """The tenant's total (a Redis key) and its limit (None: counted, never refused)."""

    key: bytes
    limit: int | None = None


def tenant_total_key(tenant_key_prefix: str) -> bytes:
    return f"{tenant_key_prefix}stored-bytes".encode()


def shards_key(tenant_key_prefix: str) -> bytes:
    """Hash beside the registry (its slot): index name -> shards, for the sharded indexes
    (featurehash.store.index.sharded), whose counts lie in their shards' slots."""
    return IndexLayout.registry(tenant_key_prefix) + b":shards"


def size_keys(tenant_key_prefix: str, name: str, shards: int) -> list[bytes]:
    """The keys counting an index's bytes: its own, or each shard's."""
    if not shards:
        return [IndexLayout(tenant_key_prefix, name).size]
    return [IndexLayout(tenant_key_prefix, tag).size for tag in shard_tags(name, shards)]


def tenant_usage_steps(tenant_key_prefix: str, leave_out: bytes | None = None):
    """Steps: the sum of the counts of the tenant's registered indexes but the count key `leave_out` (its total
    on a Redis Cluster). The registry and its shard counts (one slot), then every count in one non-transactional
    pipeline, which a cluster client sends to every node at once (as its mget_nonatomic): each count is read
    atomically, the sum is not."""
    names, sharded = yield RoundTrip([("ZRANGE", IndexLayout.registry(tenant_key_prefix), 0, -1),
                                      ("HGETALL", shards_key(tenant_key_prefix))])
    keys = [key for name in names for key in size_keys(tenant_key_prefix, name.decode(), int(sharded.get(name, 0)))
            if key != leave_out]
    if not keys:
        return 0
    counts = yield RoundTrip([("GET", key) for key in keys])
    return sum(int(count or 0) for count in counts)


class StoredBytesExceeded(Exception):
    """A write that would take the tenant past its stored-bytes limit; nothing of the refused batch was written
    (`stored`: items of the same request written by earlier batches, which stay and stay counted)."""

    def __init__(self, limit: int, used: int, needed: int, stored: int = 0):
        super().__init__(f"{used} + {needed} > {limit}")
        self.limit, self.used, self.needed, self.stored = limit, used, needed, stored
