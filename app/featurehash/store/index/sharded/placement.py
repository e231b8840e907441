"""Where the shards of a sharded index live and which shard holds an item (no I/O).

Shard s of index `name` keeps its keys under the hash tag `{name/s.j}` (featurehash.store.lsh_layout.shard_tags): a name cannot hold '/', so no other
index's keys share them, and j is the smallest integer that puts the tag's Redis Cluster slot (CRC16 of the
tag mod 16384) in the s-th of S equal slot ranges. Redis Cluster's default slot split gives each of M masters
one contiguous range, so with S a multiple of M every master holds S / M shards (and with S < M, the shards
lie on S distinct masters when the ranges are a master's each); on a single Redis the tags only name keys.
An item lives on shard BLAKE2b-64(id, salted) mod S: the same in every process, independent of the bits that
pick its id partition inside the shard (compact.keys.CompactLayout.id_partitions, an unsalted BLAKE2b).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from ...lsh_layout import MAX_SHARDS

# the items `shards="auto"` plans a shard for: a fraction of a 25 GB master at k = 256, L = 21 (docs/benchmarks.md)
ITEMS_PER_SHARD = 8_000_000
_SHARD_SALT = b"fh-item-shard"  # BLAKE2b salt: at most 16 bytes


def shards_for(expected_items: int) -> int:
    """The shards `shards="auto"` gives an index of `expected_items`: one per ITEMS_PER_SHARD, at least 2."""
    return min(MAX_SHARDS, max(2, math.ceil(expected_items / ITEMS_PER_SHARD)))


def shard_of(ids: list[bytes], shards: int) -> np.ndarray:
    """The shard of each UTF-8 id (int64)."""
    if shards == 1:
        return np.zeros(len(ids), np.int64)
    digests = b"".join(hashlib.blake2b(item_id, digest_size=8, salt=_SHARD_SALT).digest() for item_id in ids)
    return (np.frombuffer(digests, ">u8") % np.uint64(shards)).astype(np.int64)
