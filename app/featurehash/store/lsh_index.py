"""An LSH near-neighbour index over a hash-bearing feature map (GCWS, binning), in Redis.

    import redis
    from featurehash.maps import create_map
    from featurehash.store import LSHIndexes

    indexes = LSHIndexes(redis.Redis.from_url(url), key_prefix="featurehash:")
    index = indexes.create(create_map(spec), name="docs", threshold=0.7,  # or indexes.open("docs")
                           vectors="float32", forest_rows=[3, 2])  # optional: exact ranking, widening
    index.add(ids, X)                        # adds or replaces, in pipelined transactions
    index.query(Q, top_k=10).results         # [[(id, similarity), ...] per row of Q]
    index.query(Q, target_recall=0.9).estimated_recall  # widened until the S-curve promises 0.9
    index.remove(["a", "b"]); indexes.delete("docs")

`AsyncLSHIndexes` / `AsyncLSHIndex` do the same over redis.asyncio (the service uses them); both
accept Redis Cluster clients (every key of an index shares one hash slot).
This module is one index (items and queries); featurehash.store.lsh_indexes creates, lists and
deletes them. The numerics (fingerprints, band digests, the S-curve, ranking) are
featurehash.maps.lsh, the key layout featurehash.store.lsh_layout; each operation is written once as a
generator of steps (featurehash.store.redis_steps) that a sync or an async driver runs.

Writes: an add is cut into batches of about WRITE_BATCH_COMMANDS Redis commands, each one
optimistic transaction: WATCH the meta key and the items' records, MGET them, then MULTI
with one script call that, per item, SREMs it from the buckets it leaves, SADDs it to those
it joins and SETs its record, then INCRBYs the count. A concurrent write to one of the
same items makes EXEC fail and the batch is redone; the index being deleted (or replaced)
meanwhile makes it fail for good. A removal reads the meta key and the records, then one
script checks that they are still as read (SHA-1) and only then DELs the records, SREMs
them from their buckets and DECRBYs the count (else it reads again): no MULTI, which Redis
at maxmemory refuses whatever it holds, so deleting frees memory then. So a record and its
bucket memberships change together: a replaced or removed item never stays in a bucket it
left, and nothing is written under a deleted index's keys. With durability "aof" an add or
a removal returns only once Redis's append-only file has it (featurehash.store.durability).
Queries: one pipelined round trip of SUNIONs (one per query vector over its L buckets),
one of MGETs of the candidates' records, then re-ranking: by the exact similarity of the
map's kernel (featurehash.maps.lsh.exact_similarities) when the index keeps vectors
(`vectors`: "sparse", "float32", "float16"; featurehash.store.lsh_vectors), else by the
match fraction of all k fingerprints. A candidate whose record is gone is skipped.

With exact re-ranking a true neighbour of similarity s is returned exactly when it became a
candidate, with probability P(s) = 1 - (1 - s^r)^L (the S-curve; the ranking adds no noise,
which with codes-only ranking costs about a fifth of the found neighbours at k = 256). Recall
you can ask for (`target_recall`): after re-ranking, the k-th result's similarity s_k bounds
the similarity of every true top-k item from below, so P(s_k) bounds the expected recall
from below; it is returned as `estimated_recall`. While it is below the target, the search
widens. Of the three ways to widen (probe more bands, multi-probe, a forest of prefix
lengths), the forest is used: more bands cannot help an index whose L bands already cover
the k codes (the planner's usual case), and multi-probing needs neighbouring bucket values,
which GCWS codes (argmin samples) do not have. Instead the index may store, for each band,
the buckets of its first r' < r codes for a few r' (`forest_rows`); two vectors that share a
band share all its prefixes, so the level with r' rows finds a superset, with the S-curve
1 - (1 - s^r')^L. The query jumps to the first level whose curve reaches the target at s_k
(the deepest if none does), fetches only the new candidates, re-ranks and checks again.
Each level costs L more buckets per item (memory and insert time); without a forest the
query reports the recall it achieved and cannot widen.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import numpy as np
import scipy.sparse as sp

from ..maps import FeatureMap, InputError
from ..maps.lsh import (band_digests, best_matches, code_fingerprints, collision_probability, exact_similarities,
                        match_fractions)
from .lsh_layout import (IndexConfig, IndexLayout, check_fraction, check_item_ids, check_positive_int, item_number,
                         pack_record, unpack_records_and_vectors)
from .lsh_vectors import VectorCodec
from .durability import check_durability
from .redis_steps import (MAX_TRANSACTION_ATTEMPTS, Compute, RoundTrip, Transaction, TransactionConflict, check_client,
                          persisted, run_async, run_sync)

WRITE_BATCH_COMMANDS = 10_000   # per transaction: bounds how long its script blocks Redis (~10 ms)
READ_BATCH_KEYS = 10_000        # keys per MGET
# CPU steps at most this big run on the caller's event loop (AsyncLSHIndex): a thread hop costs
# more than they do. Hashing (nonzero inputs x codes, GCWS ~4 ns each) or comparing this many
# fingerprints takes ~0.1-0.3 ms.
INLINE_ROWS = 8
INLINE_COMPARISONS = 2**18
INLINE_HASH_WORK = 2**16

# One transaction's writes as one script call: Redis runs them in a loop, where thousands of
# pipelined commands would cost ~20 us each to pack and parse in redis-py. KEYS, per item: its
# record, the buckets it leaves, those it joins; the count last. ARGV: the count change, then per
# item its number, how many buckets it leaves and joins, and its record.
_WRITE_SCRIPT = """
local key = 1
for a = 2, #ARGV, 4 do
  local number, leaving, joining, record = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), ARGV[a + 3]
  redis.call('SET', KEYS[key], record)
  key = key + 1
  for _ = 1, leaving do redis.call('SREM', KEYS[key], number); key = key + 1 end
  for _ = 1, joining do redis.call('SADD', KEYS[key], number); key = key + 1 end
end
return redis.call('INCRBY', KEYS[key], ARGV[1])
"""


# Removes items if the index (its meta key) and their records are still as read: else nil, and
# nothing is written. KEYS: meta, count, then per item its record and its buckets. ARGV: the meta's
# SHA-1, then per item its number, its record's SHA-1 and how many buckets it is in. Its first write
# is a DEL (Redis at maxmemory refuses a script's first write only if that may grow memory).
_REMOVE_SCRIPT = """
if redis.sha1hex(redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return false end
local key = 3
for a = 2, #ARGV, 3 do
  local record = redis.call('GET', KEYS[key])
  if not record or redis.sha1hex(record) ~= ARGV[a + 1] then return false end
  key = key + 1 + tonumber(ARGV[a + 2])
end
key = 3
for a = 2, #ARGV, 3 do
  local number, buckets = ARGV[a], tonumber(ARGV[a + 2])
  redis.call('DEL', KEYS[key])
  for b = 1, buckets do redis.call('SREM', KEYS[key + b], number) end
  key = key + 1 + buckets
end
return redis.call('DECRBY', KEYS[2], (#ARGV - 1) / 3)
"""


class IndexNotFound(LookupError):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class ItemNotFound(LookupError):
    def __init__(self, item_id: str):
        super().__init__(item_id)
        self.item_id = item_id


class IndexConflict(Exception):
    """The request clashes with the index's stored state (HTTP 409); `field` names what."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class QueryResult:
    results: list[list[tuple[str, float]]]  # per query vector: (id, similarity), best first
    candidates: list[int]                   # per query vector: distinct items re-ranked
    # per query vector: the S-curve's probability that an item as similar as the k-th result
    # (or as min_similarity, when fewer were found) became a candidate, at the level probed
    estimated_recall: list[float] = field(default_factory=list)
    rows_probed: list[int] = field(default_factory=list)  # per query vector: the band prefix length used


def _small_input(X, n_codes: int) -> bool:
    """Few rows whose hashing costs less than a thread hop."""
    rows = X.shape[0] if sp.issparse(X) or isinstance(X, np.ndarray) else len(X)
    if rows > INLINE_ROWS:
        return False
    try:
        entries = X.nnz if sp.issparse(X) else np.count_nonzero(np.asarray(X, dtype=np.float64))
    except (TypeError, ValueError):
        return False  # not numbers: the map's check reports it, from the worker thread as usual
    return entries * n_codes <= INLINE_HASH_WORK


# -- one index: items and queries -------------------------------------------------------------

class _CandidatePool:
    """The records a query batch fetched so far, decoded, sorted by item number."""

    def __init__(self, config: IndexConfig, codec: VectorCodec | None):
        self.config, self.codec = config, codec
        self.fetched = np.empty(0, np.int64)  # every number asked for (records gone included)
        self.numbers = np.empty(0, np.int64)  # those with a record
        self.fingerprints = np.empty((0, config.n_codes), np.uint32)
        self.ids: list[str] = []
        self.vectors = None

    def missing(self, numbers: np.ndarray) -> np.ndarray:
        return np.setdiff1d(numbers, self.fetched, assume_unique=True)

    def add(self, numbers: np.ndarray, records: list[bytes | None]) -> None:
        self.fetched = np.union1d(self.fetched, numbers)
        live = [row for row, record in enumerate(records) if record is not None]
        if not live:
            return
        fingerprints, ids, vectors = unpack_records_and_vectors([records[row] for row in live], self.config.n_codes,
                                                                self.codec)
        all_numbers = np.concatenate([self.numbers, numbers[live]])
        order = np.argsort(all_numbers, kind="stable")
        self.numbers = all_numbers[order]
        self.fingerprints = np.vstack([self.fingerprints, fingerprints])[order]
        joined = self.ids + ids
        self.ids = [joined[row] for row in order]
        if vectors is not None:
            if self.vectors is not None:
                vectors = sp.vstack([self.vectors, vectors], format="csr") if sp.issparse(vectors) \
                    else np.vstack([self.vectors, vectors])
            self.vectors = vectors[order]

    def rows_of(self, numbers: np.ndarray) -> np.ndarray:
        """Positions of the numbers that have a record."""
        rows = np.searchsorted(self.numbers, numbers)
        inside = rows < self.numbers.size
        rows, numbers = rows[inside], numbers[inside]
        return rows[self.numbers[rows] == numbers]


class _IndexSteps:
    """The operations on one index as step generators (no I/O)."""

    def __init__(self, redis, config: IndexConfig, feature_map: FeatureMap, key_prefix: str,
                 meta: bytes | None = None, items: int | None = None, durability: str = "reply"):
        check_client(redis)
        self.durability = check_durability(durability)
        if feature_map.spec.id != config.map_spec["id"]:
            raise ValueError(f"index {config.name!r} is over map {config.map_spec['id']}, not {feature_map.spec.id}")
        self.redis = redis
        self.config = config
        self.feature_map = feature_map
        self.layout = IndexLayout(key_prefix, config.name, config.layout)
        self.codec = VectorCodec.for_storage(config.vectors, feature_map.input_dim)
        self.items_when_opened = items
        self.created = False
        self._meta = config.to_json() if meta is None else meta

    @property
    def name(self) -> str:
        return self.config.name

    def _fingerprints(self, X) -> np.ndarray:
        codes = self.feature_map.hash(X)
        if codes.shape[1] != self.config.n_codes:
            raise InputError("vectors", f"the map gave {codes.shape[1]} codes, the index expects {self.config.n_codes}")
        return code_fingerprints(codes)

    def _encode(self, X) -> tuple[np.ndarray, list[bytes] | None]:
        """Fingerprints and, if the index keeps vectors, each row's packed vector."""
        X = self.feature_map.check(X, "vectors")
        return self._fingerprints(X), None if self.codec is None else self.codec.pack(X)

    def _level_keys(self, fingerprints: np.ndarray, level: int) -> list[list[bytes]]:
        """Per row, its L bucket keys at a level (0: the bands; then the forest's prefixes)."""
        if level == 0:
            return self.layout.buckets(band_digests(fingerprints, self.config.bands, self.config.rows))
        prefix = self.config.levels[level]
        return self.layout.buckets(band_digests(fingerprints, self.config.bands, self.config.rows, prefix), prefix)

    def _bucket_keys(self, fingerprints: np.ndarray) -> list[list[bytes]]:
        """Per row, every bucket it belongs to (all levels)."""
        per_level = [self._level_keys(fingerprints, level) for level in range(len(self.config.levels))]
        return [[key for keys in row for key in keys] for row in zip(*per_level)]

    def _check_meta(self, stored: bytes | None) -> None:
        if stored is None:
            raise IndexNotFound(self.name)
        if stored != self._meta:
            raise IndexConflict("index_id", f"index {self.name!r} was deleted and created again with another "
                                "configuration during the request; retry")

    def _batch_size(self) -> int:
        return max(1, WRITE_BATCH_COMMANDS // (2 * self.config.bands * len(self.config.levels) + 2))

    def _add_steps(self, ids, X):
        fingerprints, vectors = yield Compute(self._encode, (X,), inline=_small_input(X, self.config.n_codes))
        ids = check_item_ids(ids, fingerprints.shape[0])
        item_numbers = [item_number(item_id) for item_id in ids]
        added, total = 0, self.items_when_opened
        for start in range(0, len(ids), self._batch_size()):
            batch = slice(start, start + self._batch_size())
            records = [self.layout.record(number) for number in item_numbers[batch]]
            outcome: dict[str, int] = {}
            writes = functools.partial(self._upsert_commands, ids[batch], item_numbers[batch], fingerprints[batch],
                                       None if vectors is None else vectors[batch], records, start, outcome)
            replies = yield Transaction([self.layout.meta, *records], ("MGET", self.layout.meta, *records), writes,
                                        inline=len(records) <= INLINE_ROWS)
            added, total = added + outcome["added"], int(replies[-1])
        yield from persisted(self.durability, self.layout.meta)
        return {"added": added, "replaced": len(ids) - added, "items": total}

    def _unpack(self, records: list[bytes]) -> tuple[np.ndarray, list[str]]:
        fingerprints, ids, _ = unpack_records_and_vectors(records, self.config.n_codes, self.codec)
        return fingerprints, ids

    def _upsert_commands(self, ids, item_numbers, fingerprints, vectors, records, offset, outcome,
                         read) -> list[tuple]:
        self._check_meta(read[0])
        stored = read[1:]
        new_keys = self._bucket_keys(fingerprints)
        old_keys: dict[int, list[bytes]] = {}
        replaced = [row for row, record in enumerate(stored) if record is not None]
        if replaced:
            old_fingerprints, old_ids = self._unpack([stored[row] for row in replaced])
            for row, old_id, keys in zip(replaced, old_ids, self._bucket_keys(old_fingerprints)):
                if old_id != ids[row]:
                    raise InputError(f"ids[{offset + row}]", f"its 63-bit item number equals that of stored item "
                                     f"{old_id!r} (odds about n^2 / 2^64); use another id")
                old_keys[row] = keys
        writes = []
        for row, number in enumerate(item_numbers):
            previous = old_keys.get(row)
            if previous is None:
                leaving, joining = [], new_keys[row]
            else:  # only the buckets that change: re-adding an unchanged vector writes just its record
                now, before = set(new_keys[row]), set(previous)
                leaving = [key for key in previous if key not in now]
                joining = [key for key in new_keys[row] if key not in before]
            record = pack_record(fingerprints[row], ids[row], b"" if vectors is None else vectors[row])
            writes.append((records[row], number, leaving, joining, record))
        outcome["added"] = len(item_numbers) - len(replaced)
        return [self._write_command(writes, outcome["added"])]

    def _write_command(self, writes: list[tuple], count_change: int) -> tuple:
        """The _WRITE_SCRIPT call for (record key, number, buckets left, buckets joined, record)."""
        keys, args = [], [count_change]
        for record_key, number, leaving, joining, record in writes:
            keys += [record_key, *leaving, *joining]
            args += [number, len(leaving), len(joining), record]
        return ("EVAL", _WRITE_SCRIPT, len(keys) + 1, *keys, self.layout.count, *args)

    def _remove_steps(self, ids):
        """Per batch: read the records, then one script deletes those still as read (else read again).
        No MULTI: Redis at maxmemory refuses any command queued in one, and deleting must free memory
        then. The script's first write is a DEL, after which Redis lets it finish (featurehash.store.durability)."""
        if not isinstance(ids, list) or not all(isinstance(item_id, str) for item_id in ids):
            raise InputError("ids", "expected a list of strings")
        ids = list(dict.fromkeys(ids))
        removed: list[str] = []
        for start in range(0, len(ids), self._batch_size()):
            batch = ids[start:start + self._batch_size()]
            item_numbers = [item_number(item_id) for item_id in batch]
            records = [self.layout.record(number) for number in item_numbers]
            for _ in range(MAX_TRANSACTION_ATTEMPTS):
                (read,) = yield RoundTrip([("MGET", self.layout.meta, *records)])
                outcome: dict[str, list[str]] = {}
                command = yield Compute(self._remove_command, (batch, item_numbers, records, outcome, read),
                                        inline=len(records) <= INLINE_ROWS)
                if command is None or (yield RoundTrip([command]))[0] is not None:
                    break
            else:
                raise TransactionConflict(f"{MAX_TRANSACTION_ATTEMPTS} attempts met concurrent changes to the same "
                                          "items")
            removed += outcome["removed"]
        yield from persisted(self.durability, self.layout.meta)
        return removed

    def _remove_command(self, ids, item_numbers, records, outcome, read) -> tuple | None:
        """The _REMOVE_SCRIPT call for the stored items among those read (None: none is stored)."""
        self._check_meta(read[0])
        present = [row for row, record in enumerate(read[1:]) if record is not None]
        keys, args, outcome["removed"] = [], [hashlib.sha1(read[0]).hexdigest()], []
        if present:
            fingerprints, stored_ids = self._unpack([read[1 + row] for row in present])
            for row, stored_id, buckets in zip(present, stored_ids, self._bucket_keys(fingerprints)):
                if stored_id == ids[row]:  # else another id's record under the same number: this one is not stored
                    keys += [records[row], *buckets]
                    args += [item_numbers[row], hashlib.sha1(read[1 + row]).hexdigest(), len(buckets)]
                    outcome["removed"].append(ids[row])
        if not outcome["removed"]:
            return None
        return ("EVAL", _REMOVE_SCRIPT, len(keys) + 2, self.layout.meta, self.layout.count, *keys, *args)

    # -- queries ---------------------------------------------------------------------------------

    def _query_plan(self, X) -> tuple[Any, np.ndarray, list[list[list[bytes]]]]:
        """The checked vectors, their fingerprints and their bucket keys at every level."""
        X = self.feature_map.check(X, "vectors")
        fingerprints = self._fingerprints(X)
        return X, fingerprints, [self._level_keys(fingerprints, level) for level in range(len(self.config.levels))]

    def _query_steps(self, X, top_k: int, min_similarity: float, target_recall: float | None = None):
        """Probe level 0 (the bands); re-rank; while the S-curve at the k-th result's similarity is
        below `target_recall`, probe the shortest-needed forest level and re-rank the union."""
        top_k = check_positive_int(top_k, "top_k")
        min_similarity = check_fraction(min_similarity, "min_similarity")
        if target_recall is not None:
            target_recall = check_fraction(target_recall, "target_recall")
        X, fingerprints, level_keys = yield Compute(self._query_plan, (X,),
                                                    inline=_small_input(X, self.config.n_codes))
        n = fingerprints.shape[0]
        pool = _CandidatePool(self.config, self.codec)
        found = [np.empty(0, np.int64) for _ in range(n)]
        level = [0] * n
        outcome: list[tuple] = [None] * n
        active = list(range(n))
        while active:
            unions = yield RoundTrip([("SUNION", *level_keys[level[q]][q]) for q in active])
            for q, members in zip(active, unions):
                found[q] = np.union1d(found[q], np.fromiter((int(m) for m in members), np.int64, len(members)))
            wanted = pool.missing(np.unique(np.concatenate([found[q] for q in active])))
            records: list[bytes | None] = []
            if wanted.size:
                keys = [self.layout.record(int(number)) for number in wanted]
                replies = yield RoundTrip([("MGET", *keys[start:start + READ_BATCH_KEYS])
                                           for start in range(0, len(keys), READ_BATCH_KEYS)])
                records = [record for reply in replies for record in reply]
            total = sum(found[q].size for q in active)
            small = len(active) <= INLINE_ROWS and total * self.config.n_codes <= INLINE_COMPARISONS
            ranked = yield Compute(self._rank, (X, fingerprints, active, found, pool, wanted, records, top_k,
                                                min_similarity), inline=small)
            widen = []
            for q, (best, count, kth) in zip(active, ranked):
                rows = self.config.levels[level[q]]
                recall = float(collision_probability(kth, self.config.bands, rows))
                outcome[q] = (best, count, recall, rows)
                if target_recall is not None and recall < target_recall and level[q] + 1 < len(self.config.levels):
                    level[q] = self._next_level(kth, target_recall, level[q])
                    widen.append(q)
            active = widen
        return QueryResult(*(list(column) for column in zip(*outcome))) if n else QueryResult([], [], [], [])

    def _next_level(self, similarity: float, target_recall: float, level: int) -> int:
        """The first deeper level whose S-curve reaches the target at `similarity`, else the deepest."""
        for deeper in range(level + 1, len(self.config.levels)):
            if collision_probability(similarity, self.config.bands, self.config.levels[deeper]) >= target_recall:
                return deeper
        return len(self.config.levels) - 1

    def _rank(self, X, fingerprints, active, found, pool, wanted, records, top_k, min_similarity) -> list[tuple]:
        """Per active query: ((id, similarity) best first, candidates ranked, the k-th similarity)."""
        if wanted.size:
            pool.add(wanted, records)
        ranked = []
        for q in active:
            rows = pool.rows_of(found[q])  # drops the candidates whose record is gone
            if self.codec is None or rows.size == 0:
                similarities = match_fractions(fingerprints[q], pool.fingerprints[rows])
            else:
                query = X[q].toarray().ravel() if sp.issparse(X) else np.asarray(X[q], dtype=np.float64)
                similarities = exact_similarities(self.config.map_spec["method"], self.config.map_spec["params"],
                                                  query, pool.vectors[rows])
            best = best_matches(similarities, pool.numbers[rows], top_k, min_similarity)
            kth = float(similarities[best[top_k - 1]]) if best.size >= top_k else min_similarity
            ranked.append(([(pool.ids[rows[i]], float(similarities[i])) for i in best], int(rows.size), kth))
        return ranked

    def _describe_steps(self):
        meta, count = (yield RoundTrip([("MGET", self.layout.meta, self.layout.count)]))[0]
        self._check_meta(meta)
        return self.config.describe(self.layout, int(count or 0))


class LSHIndex(_IndexSteps):
    """An index over a sync `redis.Redis` (batch jobs). Get one from LSHIndexes."""

    def add(self, ids: list[str], X) -> dict[str, int]:
        """Add or replace items (one id per row of X): {"added", "replaced", "items"}."""
        return run_sync(self.redis, self._add_steps(ids, X))

    def remove(self, ids: list[str]) -> list[str]:
        """Remove items by id; returns the ids that were stored."""
        return run_sync(self.redis, self._remove_steps(ids))

    def query(self, X, *, top_k: int = 10, min_similarity: float = 0.0,
              target_recall: float | None = None) -> QueryResult:
        """The top_k neighbours of each row of X; with target_recall, the search widens over the
        forest levels until the S-curve promises it at the k-th result's similarity."""
        return run_sync(self.redis, self._query_steps(X, top_k, min_similarity, target_recall))

    def describe(self) -> dict[str, Any]:
        return run_sync(self.redis, self._describe_steps())


class AsyncLSHIndex(_IndexSteps):
    """An index over `redis.asyncio.Redis`; CPU steps run through `offload` (a worker thread)."""

    def __init__(self, *args, offload: Callable[..., Awaitable[Any]] = asyncio.to_thread, **kwargs):
        super().__init__(*args, **kwargs)
        self.offload = offload

    async def add(self, ids: list[str], X) -> dict[str, int]:
        return await run_async(self.redis, self._add_steps(ids, X), self.offload)

    async def remove(self, ids: list[str]) -> list[str]:
        return await run_async(self.redis, self._remove_steps(ids), self.offload)

    async def query(self, X, *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None) -> QueryResult:
        return await run_async(self.redis, self._query_steps(X, top_k, min_similarity, target_recall), self.offload)

    async def describe(self) -> dict[str, Any]:
        return await run_async(self.redis, self._describe_steps(), self.offload)
