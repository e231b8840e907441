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
    index.query_items(["a"], top_k=10)       # neighbours of stored items (each left out of its own)
    index.duplicates(0.9).clusters           # near-duplicate clusters among the items (lsh_duplicates)
    index.remove(["a", "b"]); indexes.delete("docs")
    index.enable_near_cache()                # opt-in: queries read a local replica (lsh_near_cache)

`AsyncLSHIndexes` / `AsyncLSHIndex` do the same over redis.asyncio (the service uses them); both
accept Redis Cluster clients (every key of an index shares one hash slot).
This module is one index (items and queries); featurehash.store.lsh_indexes creates, lists and
deletes them. The numerics (fingerprints, band digests, the S-curve, ranking) are
featurehash.lsh, the key layout featurehash.store.lsh_layout; each operation is written once as a
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
Layout-3 indexes (the default; featurehash.store.lsh_compact) do the same with Lua scripts that
check what was read and write a whole batch in one call (featurehash.store.lsh_compact_steps).
Queries: one pipelined round trip of SUNIONs (one per query vector over its L buckets),
one of MGETs of the candidates' records, then re-ranking: by the exact similarity of the
map's kernel (featurehash.lsh.similarity) when the index keeps vectors
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
from typing import Any, Awaitable, Callable

import numpy as np

from ..lsh.banding import band_digests, code_fingerprints
from ..lsh.similarity import similarity_of
from ..maps import FeatureMap, InputError
from .durability import check_durability
from .lsh_layout import IndexConfig, IndexLayout, unpack_records_and_vectors
from .lsh_near_cache import NearCache
from .lsh_accounting import StoredBytes
from .lsh_compact import CompactLayout
from .lsh_compact_queries import _CompactQuerySteps
from .lsh_compact_steps import _CompactSteps
from .lsh_duplicates import DEFAULT_MAX_PAIRS, DuplicateCluster, Duplicates, _DuplicateSteps
from .lsh_queries import CandidateBounds, ItemNotFound, QueryResult, _QuerySteps
from .lsh_vectors import VectorCodec
from .lsh_writes import _WriteSteps
from .redis_steps import RoundTrip, check_client, run_async, run_sync


class IndexNotFound(LookupError):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class IndexConflict(Exception):
    """The request clashes with the index's stored state (HTTP 409); `field` names what."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# -- one index: items and queries -------------------------------------------------------------


class _IndexSteps(_CompactSteps, _CompactQuerySteps, _WriteSteps, _QuerySteps, _DuplicateSteps):
    """The operations on one index as step generators (no I/O)."""

    def __init__(self, redis, config: IndexConfig, feature_map: FeatureMap, key_prefix: str,
                 meta: bytes | None = None, items: int | None = None, durability: str = "reply",
                 stored_bytes: StoredBytes | None = None):
        check_client(redis)
        self.stored_bytes = stored_bytes  # the tenant's count and limit (featurehash.store.lsh_accounting)
        self.durability = check_durability(durability)
        if feature_map.spec.id != config.map_spec["id"]:
            raise ValueError(f"index {config.name!r} is over map {config.map_spec['id']}, not {feature_map.spec.id}")
        self.redis = redis
        self.config = config
        self.feature_map = feature_map
        self.layout = IndexLayout(key_prefix, config.name, config.layout)
        self.compact = CompactLayout(self.layout.prefix, config) if config.layout >= 3 else None
        self.codec = VectorCodec.for_storage(config.vectors, feature_map.input_dim)
        # the exact similarity of the map's code family (featurehash.lsh.similarity), when vectors are kept
        self.similarity = None if self.codec is None else similarity_of(feature_map)
        self.items_when_opened = items
        self.created = False
        self.near_cache: NearCache | None = None  # LSHIndex.enable_near_cache
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

    def _unpack(self, records: list[bytes]) -> tuple[np.ndarray, list[str]]:
        fingerprints, ids, _ = unpack_records_and_vectors(records, self.config.n_codes, self.codec)
        return fingerprints, ids

    # -- queries ---------------------------------------------------------------------------------

    def _describe_steps(self):
        meta, count = (yield RoundTrip([("MGET", self.layout.meta, self.layout.count)]))[0]
        self._check_meta(meta)
        return self.config.describe(self.layout, int(count or 0))


class LSHIndex(_IndexSteps):
    """An index over a sync `redis.Redis` (batch jobs). Get one from LSHIndexes."""

    def add(self, ids: list[str], X) -> dict[str, int]:
        """Add or replace items (one id per row of X): {"added", "replaced", "items"}."""
        try:
            return run_sync(self.redis, self._add_steps(ids, X))
        finally:
            self._wrote()

    def remove(self, ids: list[str]) -> list[str]:
        """Remove items by id; returns the ids that were stored."""
        try:
            return run_sync(self.redis, self._remove_steps(ids))
        finally:
            self._wrote()

    def enable_near_cache(self, *, strict: bool = False) -> "LSHIndex":
        """Keep a local replica of this (layout-3) index that queries read instead of Redis, kept coherent by
        Redis's invalidation pushes (featurehash.store.lsh_near_cache: what it costs, and the bound on how soon
        another client's write is seen; `strict`: a PING before each query closes it). Loads it now."""
        if self.config.layout < 3:
            raise ValueError(f"index {self.name!r} has layout {self.config.layout}; the near cache reads layout 3")
        if self.near_cache is None:
            self.near_cache = NearCache(self.redis, self.layout.prefix, self.layout.meta, self._meta, self.compact,
                                        with_records=self.codec is None, strict=strict)
        self.near_cache.strict = strict
        self.near_cache.refresh()
        return self

    def disable_near_cache(self) -> None:
        """Drop the replica and its connection; queries go to Redis again."""
        cache, self.near_cache = self.near_cache, None
        if cache is not None:
            cache.close()

    def _wrote(self) -> None:
        if self.near_cache is not None:  # this process reads its own writes: a PING before the next query
            self.near_cache.note_write()

    def query(self, X, *, top_k: int = 10, min_similarity: float = 0.0, target_recall: float | None = None,
              max_candidates: int | None = None, max_total_candidates: int | None = None) -> QueryResult:
        """The top_k neighbours of each row of X; with target_recall, the search widens over the
        forest levels until the S-curve promises it at the k-th result's similarity. `max_candidates`: a row
        takes its buckets in band order until they held that many members (layout 3; None: every bucket);
        `max_total_candidates`: past that many in all, InputError naming it (featurehash.store.lsh_queries.
        CandidateBounds). Each Redis call of a query does bounded work, whatever the buckets hold."""
        bounds = CandidateBounds(max_candidates, max_total_candidates)
        return run_sync(self.redis, self._query_steps(X, top_k, min_similarity, target_recall, bounds))

    def query_items(self, ids: list[str], *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None, max_candidates: int | None = None,
                    max_total_candidates: int | None = None) -> QueryResult:
        """query() for stored items named by id, from their stored fingerprints (and vectors, for
        exact ranking); each item is left out of its own results. ItemNotFound names an unknown id."""
        bounds = CandidateBounds(max_candidates, max_total_candidates)
        return run_sync(self.redis, self._query_items_steps(ids, top_k, min_similarity, target_recall, bounds))

    def duplicates(self, threshold: float | None = None, *, mode: str = "components",
                   max_pairs: int = DEFAULT_MAX_PAIRS, min_cluster_size: int = 2) -> Duplicates:
        """The clusters of near-duplicates among the stored items, pairs >= threshold (default: the
        index's); featurehash.store.lsh_duplicates says how, and what it costs."""
        return run_sync(self.redis, self._duplicates_steps(threshold, mode, max_pairs, min_cluster_size))

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

    async def query(self, X, *, top_k: int = 10, min_similarity: float = 0.0, target_recall: float | None = None,
                    max_candidates: int | None = None, max_total_candidates: int | None = None) -> QueryResult:
        bounds = CandidateBounds(max_candidates, max_total_candidates)
        return await run_async(self.redis, self._query_steps(X, top_k, min_similarity, target_recall, bounds),
                               self.offload)

    async def query_items(self, ids: list[str], *, top_k: int = 10, min_similarity: float = 0.0,
                          target_recall: float | None = None, max_candidates: int | None = None,
                          max_total_candidates: int | None = None) -> QueryResult:
        bounds = CandidateBounds(max_candidates, max_total_candidates)
        return await run_async(self.redis, self._query_items_steps(ids, top_k, min_similarity, target_recall, bounds),
                               self.offload)

    async def duplicates(self, threshold: float | None = None, *, mode: str = "components",
                         max_pairs: int = DEFAULT_MAX_PAIRS, min_cluster_size: int = 2) -> Duplicates:
        return await run_async(self.redis, self._duplicates_steps(threshold, mode, max_pairs, min_cluster_size),
                               self.offload)

    async def describe(self) -> dict[str, Any]:
        return await run_async(self.redis, self._describe_steps(), self.offload)
