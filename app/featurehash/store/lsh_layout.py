"""Where an LSH index lives in Redis, and how its values are packed.

Keys (P = `{key_prefix}index:{{name}}:`, the index name in braces as a Redis Cluster hash tag,
so that every key of one index hashes to one slot and its scripts, transactions and
pipelines are valid on a cluster; the name is chosen by the user, so the keys of an index
are the same in every run and every process, and an index is found again by name):

    {key_prefix}indexes      sorted set of index names (scores 0: lists in name order)
    P meta                   JSON: the index's configuration and its map's resolved spec
    P count                  number of items (integer string)
    P deleting               present while the index's keys are being removed
    P i<8 bytes>             item record: the k code fingerprints (uint32 little-endian),
                             then the item's vector if the index keeps them
                             (featurehash.store.lsh_vectors), then the item id (UTF-8)
    P b<2 bytes><8 bytes>    bucket: a set of item numbers; band (big-endian u16) and the
                             band's 64-bit digest (featurehash.lsh.banding.band_digests)
    P p<1 byte><2 bytes><8 bytes>  bucket of a shorter prefix (forest level): its row
                             count, the band, the digest of the band's first rows codes

Layout 3 (new indexes; featurehash.store.index.compact.keys): the same prefix, meta, count and deleting
keys, and instead of a key per record and per bucket, Redis hashes small enough to stay one listpack
(ziplist in Redis 6.2: at most hash-max-listpack-entries 128 fields of at most -value 64 bytes, the
defaults, which it does not change):

    P r<u32>                 records of chunk_items items: fixed-width slots, item number n at
                             n % chunk_items; a slot is the low 8 bits of the k fingerprints, then the
                             32-bit identities (top half of the band digest) of its L x levels buckets
    P u<u32>                 id -> number, the id's partition (BLAKE2b top bits); 2^id_bits of them
    P t<u32>                 number % 64 -> the vector (if kept) then the id, for numbers n // 64
    P b<level><u32>          a partition of the buckets of one level (the identity's top bucket_bits):
                             field = the identity's other bits, value = the members (uint32 LE each)
    P o<level><u32><field>   a bucket of more than 16 members (64 bytes), a set (field value "")
    P next, P free           the last item number given (INCRBY), removed numbers (reused first)
    P size                   the bytes the index's items hold, as counted on every write (beside the tenant's
                             total `{tenant prefix}stored-bytes` on a standalone Redis; on a Redis Cluster the
                             tenant's total is the sum of these: featurehash.store.lsh_accounting)

Partitions are sized at creation from `expected_items` (default 100,000): about 48 fields a hash at
that count, so up to ~2.5x as many items keep them under 128; beyond, Redis converts the fullest
hashes to hashtables (~3x their memory) and everything still works. There is no resplitting: an
index that outgrows its sizing is migrated into the sharded layout with a larger expected_items
(featurehash.store.index.migration, `featurehash migrate-index`; also the way out of layouts 1 and 2, which stay
readable and writable as they are). Item numbers are uint32 from `P next` (4,294,967,295 at most per index), so bucket
members take 4 bytes; the maps `u` and `t` turn ids into numbers and back. A record chunk is
allocated whole when first written (so Redis does not keep growth slack) and freed only with the
index: removed items leave a zeroed slot, which the next new item reuses. Removing an item reads
its bucket identities from its record; a query by stored id can probe those identities and rank
with its stored fingerprints.

Fingerprints keep b = 8 bits (b-bit minwise hashing, Li & Konig 2010): two codes' 8-bit fingerprints
agree with probability P = s + (1 - s) / 256, and (m - 1/256) / (1 - 1/256), clipped to [0, 1], is
the similarity estimate (featurehash.lsh.matches.b_bit_match_fractions). Its sd, sqrt(P (1 - P) / k) /
(1 - 1/256), is that of the full fingerprints times ~1.004 at s = 0.7 and ~1.01 at s = 0.3: the ranking
noise 8 bits add is under 1% of what k codes have anyway. An identity of 32 bits lets a foreign item
share a bucket by chance with probability ~N 2^-32 a band (0.001 per query at N = 10^6, L = 35):
a spurious candidate, which ranking scores by its real estimate.

Memory of layout 3, per item: the record k + 4 L bytes, ~6 bytes of listpack a bucket membership, the
two id maps ~2 x (id + 4) bytes and per-key overhead amortised over ~48 fields; a bucket that more than 16
items share is a set key of its own. Writing costs Redis a few tens of us of CPU an item at L = 35. The
measured figures: docs/benchmarks.md, "LSH indexes in Redis" (bench/bench_lsh_scale.py,
bench/results/lsh_scale.txt).

Sharded indexes (`shards` S >= 1; featurehash.store.index.sharded): the index's meta at P above, and S
layout-3 shards, each with the keys above (its own meta copy, count, size, records, buckets) under the prefix
of its hash tag `name/s.j` (shard_tags). The registry keeps `{key_prefix}indexes:shards`, a hash of name ->
S, so the tenant's usage finds every shard's count.

Layout versions: indexes created before hash tags (meta without "layout", read as layout 1)
keep their keys `{key_prefix}index:{name}:*` and are opened, queried, written and deleted
there as before (standalone Redis only); a name is looked up in both places. Layout 2 (the
keys above) was the default until layout 3; `plan_index(..., layout=2)` still makes one. Layout 1 used a global `{key_prefix}indexes:deleting`
set, which a cluster cannot update in one script with the index's keys; layout 2 keeps the
marker inside the index's slot instead.

In layout 2, an item's number is the top 63 bits of BLAKE2b(id) (so no id -> number table is stored,
and writers need no allocation step); the record keeps the id, which is how a query
turns numbers back into ids and how the rare number collision is detected. Buckets hold
numbers as integers, which Redis stores as an intset (8 bytes a member). A bucket key is
removed by Redis when its last member leaves. Removing an item recomputes its band
digests from the stored fingerprints, so nothing else per item is stored.

Memory of layout 2: a record takes 4 bytes a code + the id + ~110 bytes of key, object and allocator
overhead; a bucket holding one item ~100 B, each further member 8 B. So an item costs about 4 k + 110 + 100 L
bytes when its buckets are its own, less when near duplicates share them (measured: docs/benchmarks.md, "LSH
indexes in Redis", bench/bench_lsh.py). The bucket keys dominate for small k: prefer short index
names (part of every key) and the fewest bands that meet the recall (what choose_bands does).
A stored vector adds 4 d bytes (float32), 2 d + 4 (float16) or 4 + 8 nnz (sparse); each
forest level adds L buckets per item.
"""

from __future__ import annotations

import hashlib
import numbers
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import orjson
from redis.crc import key_slot

from ..maps.errors import InputError
from ..lsh.banding import FINGERPRINT_DTYPE, collision_probability, half_point
from .lsh_vectors import VectorCodec

# Matched whole (fullmatch): `re.match` with a trailing `$` also accepted a name ending in "\n".
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_ITEM_ID_BYTES = 512
_GLOB_SPECIALS = re.compile(rb"([*?\[\]\\])")


def check_name(name: Any, field: str = "name") -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InputError(field, "1-64 characters from A-Z a-z 0-9 _ . -, starting with a letter or digit")
    return name


# Control characters (C0, DEL and C1: U+0080-U+009F, which Latin-1 header and log handling turns into
# bytes some servers refuse or treat as line ends, e.g. NEL U+0085), the line and paragraph separators
# (line ends to JavaScript and many log tools), and lone surrogates (no UTF-8 form at all).
_NOT_IN_A_SEGMENT = re.compile(r"[/\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def is_path_segment(item_id: str) -> bool:
    """Whether an id travels as exactly one URL path segment whatever a client or proxy normalises:
    '.' and '..' are dot segments (removed with the segment before them), '/' and '\\' split segments
    (even percent-encoded, some proxies decode them), control characters and line separators are
    refused or mangled by many servers and logs."""
    return item_id not in (".", "..") and _NOT_IN_A_SEGMENT.search(item_id) is None


def check_item_ids(ids: Any, rows: int, field: str = "ids") -> list[str]:
    """A list of `rows` distinct non-empty strings of at most MAX_ITEM_ID_BYTES bytes."""
    if not isinstance(ids, list) or not all(isinstance(item_id, str) for item_id in ids):
        raise InputError(field, "expected a list of strings")
    if len(ids) != rows:
        raise InputError(field, f"{len(ids)} ids for {rows} vectors: send one id per vector")
    seen: dict[str, int] = {}
    for row, item_id in enumerate(ids):
        if not is_path_segment(item_id):
            raise InputError(f"{field}[{row}]", f"{item_id!r} cannot be one URL path segment (an item is deleted "
                             "at .../items/<id>): ids may not be '.' or '..', nor hold '/', '\\', control "
                             "characters (U+0000-U+001F, U+007F-U+009F), U+2028, U+2029 or lone surrogates")
        if not item_id or len(item_id.encode()) > MAX_ITEM_ID_BYTES:
            raise InputError(f"{field}[{row}]", f"ids must be 1 to {MAX_ITEM_ID_BYTES} bytes of UTF-8")
        if item_id in seen:
            raise InputError(f"{field}[{row}]", f"duplicate id {item_id!r} (also at row {seen[item_id]})")
        seen[item_id] = row
    return ids


def distinct_ids(ids: Any, field: str = "ids") -> list[str]:
    """The ids of a removal: a list of strings, repeats dropped (first occurrence kept, order kept)."""
    if not isinstance(ids, list) or not all(isinstance(item_id, str) for item_id in ids):
        raise InputError(field, "expected a list of strings")
    return list(dict.fromkeys(ids))


def check_query_ids(ids: Any, field: str = "ids") -> list[str]:
    """Ids of stored items to look up: a non-empty list of strings of 1 to MAX_ITEM_ID_BYTES bytes of UTF-8
    (repeats allowed; an id no item has is for the lookup to report)."""
    if not isinstance(ids, list) or not ids:
        raise InputError(field, "expected a non-empty list of item ids (strings)")
    for row, item_id in enumerate(ids):
        try:
            size = len(item_id.encode()) if isinstance(item_id, str) else 0
        except UnicodeEncodeError:
            size = 0
        if not 1 <= size <= MAX_ITEM_ID_BYTES:
            raise InputError(f"{field}[{row}]", f"expected an item id: a string of 1 to {MAX_ITEM_ID_BYTES} bytes "
                             "of UTF-8")
    return ids


def check_positive_int(value: Any, field: str) -> int:
    if type(value) is int and value >= 1:  # the usual case, without the ABC check (~1 us; a query checks two)
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(field, "must be a positive integer")
    return int(value)


def check_fraction(value: Any, field: str) -> float:
    if type(value) is float and 0.0 <= value <= 1.0:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
        raise InputError(field, "must be a number in [0, 1]")
    return float(value)


def item_number(item_id: str) -> int:
    """A stable 63-bit number for an id (BLAKE2b): the same in every process and run."""
    return int.from_bytes(hashlib.blake2b(item_id.encode(), digest_size=8).digest(), "big") >> 1


LATEST_LAYOUT = 3
LAYOUTS = (1, 2, 3)
DEFAULT_TENANT = "default"


def tenant_key_prefix(key_prefix: str, tenant: str) -> str:
    """The key prefix a tenant's indexes live under. "default" keeps `key_prefix` itself, so the keys of
    indexes made before tenants (all of them the default tenant's) are found as they are; another tenant's
    are `{key_prefix}tenant:{tenant}:`, whose registry and index keys (`...:index:{name}:*`, the hash tag
    still the name) no pattern of another tenant, nor the map store's `{key_prefix}map:*`, matches.
    Tenant names are [a-z0-9][a-z0-9_-]* (featurehash.service.auth.keys): no ':', braces or glob characters."""
    return key_prefix if tenant == DEFAULT_TENANT else f"{key_prefix}tenant:{tenant}:"


def tenants_key(key_prefix: str) -> bytes:
    """The set of tenants other than "default" that have created an index (where map deletion looks)."""
    return f"{key_prefix}tenants".encode()


CLUSTER_SLOTS = 16384
MAX_SHARDS = 256


@lru_cache(maxsize=1024)
def shard_tags(name: str, shards: int) -> tuple[str, ...]:
    """Each shard's hash tag `name/s.j` (its keys are IndexLayout(key_prefix, tag)'s): j is the smallest integer
    that puts the tag's slot in the s-th of `shards` equal slot ranges (featurehash.store.index.sharded.placement)."""
    tags = []
    for shard in range(shards):
        low, high = shard * CLUSTER_SLOTS // shards, (shard + 1) * CLUSTER_SLOTS // shards
        attempt = 0
        while not low <= key_slot(f"{name}/{shard}.{attempt}".encode()) < high:
            attempt += 1
        tags.append(f"{name}/{shard}.{attempt}")
    return tuple(tags)


class IndexLayout:
    """The key names of one index (bytes, since bucket and record keys are binary). `version` 3:
    compact records and partitioned buckets (featurehash.store.index.compact.keys) under layout 2's hash-tagged
    prefix (one cluster slot per index); 2: a key per record and per bucket; 1: the keys of indexes
    created before hash tags."""

    def __init__(self, key_prefix: str, name: str, version: int = LATEST_LAYOUT):
        if version not in LAYOUTS:
            raise ValueError(f"unknown index layout {version}")
        self.key_prefix = key_prefix
        self.name = name
        self.version = version
        self.prefix = (f"{key_prefix}index:{{{name}}}:" if version >= 2 else f"{key_prefix}index:{name}:").encode()
        self.meta = self.prefix + b"meta"
        self.count = self.prefix + b"count"
        self.size = self.prefix + b"size"  # the bytes its items hold (layout 3; featurehash.store.lsh_accounting)
        self.deleting_marker = self.prefix + b"deleting"

    @staticmethod
    def registry(key_prefix: str) -> bytes:
        return f"{key_prefix}indexes".encode()

    @staticmethod
    def deleting(key_prefix: str) -> bytes:
        """Layout 1's set of names whose keys are still being removed."""
        return f"{key_prefix}indexes:deleting".encode()

    def record(self, number: int) -> bytes:
        return self.prefix + b"i" + number.to_bytes(8, "big")

    def buckets(self, digests: np.ndarray, prefix_rows: int | None = None) -> list[list[bytes]]:
        """Bucket keys of digest rows (n, L): one list of L keys per row; `prefix_rows` names a
        forest level (digests of each band's first prefix_rows codes), None the index's bands."""
        n, bands = digests.shape
        head = self.prefix + (b"b" if prefix_rows is None else b"p" + prefix_rows.to_bytes(1, "big"))
        heads = [head + band.to_bytes(2, "big") for band in range(bands)]
        raw = np.ascontiguousarray(digests, dtype="<u8").tobytes()
        return [[heads[band] + raw[8 * (row * bands + band):8 * (row * bands + band + 1)] for band in range(bands)]
                for row in range(n)]

    def scan_pattern(self) -> bytes:
        """MATCH pattern for every key of the index (glob characters of the prefix escaped)."""
        return _GLOB_SPECIALS.sub(rb"\\\1", self.prefix) + b"*"

    def bucket_scan_pattern(self) -> bytes:
        """MATCH pattern for the level-0 bucket keys (`P b...`) of the index."""
        return _GLOB_SPECIALS.sub(rb"\\\1", self.prefix) + b"b*"


def pack_record(fingerprints: np.ndarray, item_id: str, vector: bytes = b"") -> bytes:
    return np.ascontiguousarray(fingerprints, dtype=FINGERPRINT_DTYPE).tobytes() + vector + item_id.encode()


def unpack_records(records: list[bytes], n_codes: int) -> tuple[np.ndarray, list[str]]:
    """Fingerprints (m, k) and ids of packed records of a codes-only index."""
    fingerprints, ids, _ = unpack_records_and_vectors(records, n_codes, None)
    return fingerprints, ids


def unpack_records_and_vectors(records: list[bytes], n_codes: int, codec: VectorCodec | None):
    """Fingerprints (m, k), ids and the stored vectors (None without a codec) of packed records."""
    width = n_codes * FINGERPRINT_DTYPE.itemsize
    fingerprints = np.frombuffer(b"".join(record[:width] for record in records), dtype=FINGERPRINT_DTYPE)
    tails = [record[width:] for record in records]
    vectors = None
    if codec is not None:
        vectors, tails = codec.unpack(tails)
    return fingerprints.reshape(len(records), n_codes), [tail.decode() for tail in tails], vectors


MAX_BANDS = 2**16 - 1  # the band number is 2 bytes of a bucket key


@dataclass(frozen=True)
class IndexConfig:
    """What `P meta` holds: the index's name, its map's resolved spec, its banding, the stored
    vectors' encoding, the forest levels, the key layout and (layout 3) the expected item count. Fields added later have defaults
    that describe the indexes created before them (codes only, no forest, layout 1)."""

    name: str
    map_spec: dict[str, Any]
    n_codes: int
    bands: int
    rows: int
    threshold: float
    recall_at_threshold: float
    bands_chosen_by: str  # "threshold" (choose_bands) or "request" (bands/rows given)
    vectors: str = "none"  # featurehash.store.lsh_vectors.VECTOR_STORAGE
    forest_rows: tuple[int, ...] = ()  # shorter band prefixes also stored, descending
    layout: int = 1
    expected_items: int = 0  # layout 3: sizes its partitions (featurehash.store.index.compact.keys); 0 before
    shards: int = 0  # layout 3: S >= 1 shards under tags of their own (featurehash.store.index.sharded); 0: one slot
    # while featurehash.store.index.migration moves the items into another layout: that layout's configuration
    migrating_to: dict[str, Any] | None = None

    def to_json(self) -> bytes:
        fields = asdict(self)
        for added_later in ("expected_items", "shards", "migrating_to"):  # a meta without them stays what earlier releases read
            if not fields[added_later]:
                del fields[added_later]
        return orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)

    @classmethod
    def from_json(cls, raw: bytes) -> "IndexConfig":
        fields = orjson.loads(raw)
        fields["forest_rows"] = tuple(fields.get("forest_rows", ()))
        return cls(**fields)

    @property
    def levels(self) -> tuple[int, ...]:
        """Row counts probed, level 0 first: the bands' own rows, then the forest's prefixes."""
        return (self.rows, *self.forest_rows)

    def same_index(self, other: "IndexConfig") -> bool:
        """Whether `other` asks for this stored index (map, banding, vectors and forest)."""
        return ((self.map_spec["id"], self.bands, self.rows, self.vectors, self.forest_rows)
                == (other.map_spec["id"], other.bands, other.rows, other.vectors, other.forest_rows))

    def describe(self, layout: "IndexLayout", items: int) -> dict[str, Any]:
        """The index as returned to clients: configuration, S-curve facts, item count, key prefix."""
        return {
            "id": self.name, "name": self.name, "map_id": self.map_spec["id"], "method": self.map_spec["method"],
            "n_codes": self.n_codes, "bands": self.bands, "rows": self.rows, "threshold": self.threshold,
            "recall_at_threshold": self.recall_at_threshold, "bands_chosen_by": self.bands_chosen_by,
            "collision_probability_at_threshold": float(collision_probability(self.threshold, self.bands, self.rows)),
            "half_point": half_point(self.bands, self.rows),
            "vectors": self.vectors, "ranking": "codes" if self.vectors == "none" else "exact",
            "forest_rows": list(self.forest_rows),
            "items": items, "key_prefix": layout.prefix.decode(), "shards": self.shards or 1,
        }
