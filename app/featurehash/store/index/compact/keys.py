"""Layout 3 of an LSH index: its keys, their sizing and the packing of what they hold (no I/O).

The layout and its memory are explained in featurehash.store.lsh_layout. In short: items get compact
uint32 numbers; an item's record (b-bit fingerprints and the 32-bit identities of its buckets) is a
fixed-width slot of a chunk string; buckets are fields of hash-partitioned Redis hashes whose values
are packed uint32 numbers (a set key of its own once past 16 members); ids map to numbers and back
through partitioned hashes. Redis keeps hashes of <= 128 entries and values of <= 64 bytes as one
listpack (ziplist in 6.2) of a few bytes an entry, which is what the sizing aims at.
"""

from __future__ import annotations

import hashlib
import math
import re

import numpy as np

from ....lsh.band_kernels import band_identities
from ....lsh.banding import band_digests
from .kernels import probe_addresses

FINGERPRINT_BITS = 8           # b-bit minwise hashing (featurehash.lsh.matches.b_bit_match_fractions)
HASH_FILL = 48                 # mean entries of a partition hash at the expected item count (listpack: <= 128)
MAX_PARTITION_BITS = 24
INLINE_MEMBERS = 16            # 16 x 4 bytes = 64: Redis's hash-max-listpack-value default
TAIL_FIELDS = 64               # numbers per number -> (vector, id) hash
CHUNK_BYTES = 2**17 - 64       # a record chunk: just under a 128 KiB allocator size class
_U32 = np.dtype("<u4")


def partition_bits(entries: float) -> int:
    """log2 of the partitions that spread `entries` hash fields HASH_FILL to a hash."""
    return min(MAX_PARTITION_BITS, max(0, math.ceil(math.log2(max(1.0, entries / HASH_FILL)))))


def pack_strings(strings: list[bytes]) -> tuple[bytes, bytes]:
    """(uint32 lengths, concatenation): how variable-length strings ride in two script arguments."""
    return np.fromiter((len(s) for s in strings), _U32, len(strings)).tobytes(), b"".join(strings)


class CompactLayout:
    """Keys and packing of a layout-3 index (`prefix` as IndexLayout's; `config` an IndexConfig).

    P r<chunk u32 BE>               records: chunk_items slots of `width` bytes (zeros: free)
    P u<partition u32 BE>           hash: id (UTF-8) -> item number; partition of BLAKE2b(id)
    P t<number // 64, u32 BE>       hash: number % 64 -> the item's vector bytes (if kept), then its id
    P b<level u8><partition u32 BE> hash: bucket field -> packed uint32 LE item numbers, or "" when
                                    the bucket has overflowed into:
    P o<level><partition><field>    set of item numbers (a bucket of more than INLINE_MEMBERS)
    P next, P free                  the last number given out; a list of removed numbers, reused first
    """

    def __init__(self, prefix: bytes, config):
        self.prefix = prefix
        self.n_codes, self.bands, self.rows = config.n_codes, config.bands, config.rows
        self.level_rows = config.levels
        self.bucket_bits = partition_bits(config.expected_items * config.bands)
        self.id_bits = partition_bits(config.expected_items)
        self.field_bytes = max(1, math.ceil((32 - self.bucket_bits) / 8))
        self.width = self.n_codes * FINGERPRINT_BITS // 8 + 4 * self.bands * len(self.level_rows)
        self.chunk_items = max(1, CHUNK_BYTES // self.width)
        self.address_stride = 5 + self.field_bytes
        self.next, self.free = prefix + b"next", prefix + b"free"

    # -- numbers, ids, records ---------------------------------------------------------------------

    def id_partitions(self, ids: list[bytes]) -> bytes:
        """Each id's partition of the id -> number map (uint32 BE), from its BLAKE2b."""
        shift = 64 - self.id_bits
        parts = [int.from_bytes(hashlib.blake2b(item_id, digest_size=8).digest(), "big") >> shift if self.id_bits
                 else 0 for item_id in ids]
        return np.array(parts, dtype=">u4").tobytes()

    def chunk_key(self, number: int) -> bytes:
        return self.prefix + b"r" + (number // self.chunk_items).to_bytes(4, "big")

    def identities(self, fingerprints: np.ndarray) -> np.ndarray:
        """(n, L x levels) uint32: the top 32 bits of each band digest (lsh.banding.band_digests), level 0 (the bands)
        first; compiled for a few rows (a query), numpy's for batches (the same bits)."""
        if fingerprints.shape[0] <= 64:
            return band_identities(fingerprints, self.bands, self.rows, self.level_rows)
        per_level = [band_digests(fingerprints, self.bands, self.rows, None if level == 0 else rows)
                     for level, rows in enumerate(self.level_rows)]
        return (np.hstack(per_level) >> np.uint64(32)).astype(np.uint32)

    def pack_records(self, fingerprints: np.ndarray, identities: np.ndarray) -> bytes:
        """Fixed-width records: the low FINGERPRINT_BITS of each fingerprint, then the identities."""
        low = (fingerprints & np.uint32(2**FINGERPRINT_BITS - 1)).astype(np.uint8)
        return np.hstack([low, np.ascontiguousarray(identities, _U32).view(np.uint8)]).tobytes()

    def unpack_records(self, blob: bytes) -> tuple[np.ndarray, np.ndarray]:
        """(b-bit fingerprints (m, k) uint8, identities (m, L x levels) uint32) of packed records."""
        raw = np.frombuffer(blob, np.uint8).reshape(-1, self.width)
        return raw[:, :self.n_codes], np.ascontiguousarray(raw[:, self.n_codes:]).view(_U32)

    # -- bucket addresses and the write script's operations ------------------------------------------

    def bucket_keys(self, rows: np.ndarray, identities: np.ndarray, levels: slice = slice(None)) -> np.ndarray:
        """Distinct (row, level, identity) triples as uint64 (row << 40 | level << 32 | identity) of the
        rows' identities (their columns `levels`); an item is once in a bucket even if two bands meet there."""
        level_of = (np.arange(identities.shape[1], dtype=np.uint64) // np.uint64(self.bands))[levels]
        keys = (rows.astype(np.uint64)[:, None] << np.uint64(40)) | (level_of << np.uint64(32)) \
            | identities[:, levels].astype(np.uint64)
        return np.unique(keys)

    def _addresses(self, keys: np.ndarray) -> np.ndarray:
        """(m, address_stride) bytes: level, partition (u32 BE), field (field_bytes BE) of bucket keys."""
        identity = keys & np.uint64(0xFFFFFFFF)
        partition = identity >> np.uint64(32 - self.bucket_bits) if self.bucket_bits else np.zeros_like(identity)
        field = identity & np.uint64((1 << (32 - self.bucket_bits)) - 1)
        out = np.empty((keys.size, self.address_stride), np.uint8)
        out[:, 0] = (keys >> np.uint64(32)) & np.uint64(0xFF)
        out[:, 1:5] = partition.astype(">u4").view(np.uint8).reshape(-1, 4)
        out[:, 5:] = field.astype(">u4").view(np.uint8).reshape(-1, 4)[:, 4 - self.field_bytes:]
        return out

    def operations(self, leaving: np.ndarray, joining: np.ndarray, numbers: np.ndarray) -> tuple[bytes, ...]:
        """The write script's bucket changes, from (row, level, identity) keys (bucket_keys) the rows'
        items leave and join; `numbers` are the rows' item numbers. Grouped so Redis reads and writes
        each partition hash once and touches each bucket once: (partition heads (level u8 + partition
        u32 BE), buckets per head (u32), each bucket's field, its (leaving, joining) counts (u16 BE pairs),
        the members: each bucket's leaving numbers then its joining ones, u32 LE)."""
        keys = np.concatenate([leaving, joining])
        joins = np.concatenate([np.zeros(leaving.size, bool), np.ones(joining.size, bool)])
        order = np.lexsort((joins, keys & np.uint64(0xFFFFFFFFFF)))
        keys, joins = keys[order], joins[order]
        members = numbers[(keys >> np.uint64(40)).astype(np.int64)].astype(_U32)
        bucket = keys & np.uint64(0xFFFFFFFFFF)
        starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]]) if keys.size else np.empty(0, np.int64)
        joined = np.add.reduceat(joins.astype(_U32), starts) if keys.size else np.empty(0, _U32)
        sizes = np.diff(np.r_[starts, keys.size]).astype(_U32)
        counts = np.column_stack([sizes - joined, joined]).astype(">u2")  # a batch has < 2^16 items
        addresses = self._addresses(keys[starts])
        head = addresses[:, :5]
        heads = np.flatnonzero(np.r_[True, (head[1:] != head[:-1]).any(axis=1)]) if starts.size \
            else np.empty(0, np.int64)
        per_head = np.diff(np.r_[heads, starts.size]).astype(_U32)
        return (head[heads].tobytes(), per_head.tobytes(), addresses[:, 5:].tobytes(), counts.tobytes(),
                members.tobytes())

    def probe_addresses(self, identities: np.ndarray, rows: np.ndarray, levels: np.ndarray) -> bytes:
        """The L bucket addresses of identities' `rows` (int64), row i at level levels[i], row after row (a query
        probes them): the bytes _addresses gives, in one compiled call (compact.kernels)."""
        return probe_addresses(identities, rows, levels, self.bands, self.bucket_bits, self.field_bytes).tobytes()

    def bucket_scan_pattern(self, level: int) -> bytes:
        """SCAN MATCH pattern of a level's partition hashes (the prefix's glob characters escaped; each of the 4
        partition bytes matched by '?', and a level byte that is a glob character escaped too)."""
        head = self.prefix + b"b" + level.to_bytes(1, "big")
        return re.sub(rb"([*?\[\]\\])", rb"\\\1", head) + b"????"

    def bucket_hash(self, level: int, partition: int) -> bytes:
        return self.prefix + b"b" + level.to_bytes(1, "big") + partition.to_bytes(4, "big")

    def overflow_set(self, hash_key: bytes, field: bytes) -> bytes:
        return self.prefix + b"o" + hash_key[len(self.prefix) + 1:] + field


def members_of(value: bytes) -> np.ndarray:
    """The item numbers of a packed bucket value."""
    return np.frombuffer(value, _U32).astype(np.int64)
