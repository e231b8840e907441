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
    index.duplicates(0.9).clusters           # near-duplicate clusters among the items (duplicates.py)
    index.remove(["a", "b"]); indexes.delete("docs")
    index.enable_near_cache()                # opt-in: queries read a local replica (compact/near/cache.py)

`AsyncLSHIndexes` / `AsyncLSHIndex` do the same over redis.asyncio (the service uses them); both
accept Redis Cluster clients (every key of an index, or of one shard of a sharded index, shares one hash slot).
This module is one index (items and queries); featurehash.store.lsh_indexes creates, lists and
deletes them. The numerics (fingerprints, band digests, the S-curve, ranking) are
featurehash.lsh, the key layout featurehash.store.lsh_layout; each operation is written once as a
generator of steps (featurehash.store.redis_steps) that a sync or an async driver runs: queries
(featurehash.store.index.queries), writes (writes.py), duplicates (duplicates.py), over the hooks of the
storage layout chosen here when the index is opened (featurehash.store.index.state.LayoutSteps): layouts 1
and 2 in featurehash.store.index.keyed, S shards of layout 3 in featurehash.store.index.sharded, layout 3 in
featurehash.store.index.compact (with its near cache, a
wrapper of layout 3's hooks whose probe reads the replica: featurehash.store.index.compact.near).

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
Layout-3 indexes (the default; featurehash.store.index.compact.keys) do the same with Lua scripts that
check what was read and write a whole batch in one call (featurehash.store.index.compact.steps).
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
import copy
from typing import Any, Awaitable, Callable

import orjson

from ..lsh_layout import IndexConfig, IndexLayout, shard_tags
from ..redis_steps import RoundTrip, run_async, run_sync
from .compact.keys import CompactLayout
from .compact.near.cache import NearCache, NearCachedSteps
from .compact.steps import CompactSteps
from .duplicates import DEFAULT_MAX_PAIRS, DuplicateCluster, Duplicates, duplicates_steps
from .keyed import KeyedSteps
from .migration import (migrating_add_steps, migrating_query_items_steps, migrating_query_steps,
                        migrating_remove_steps, refuse_duplicates_steps)
from .sharded.steps import ShardedSteps, shard_config
from .queries import CandidateBounds, QueryResult, query_items_steps, query_steps
from .state import IndexConflict, IndexNotFound, IndexState, ItemNotFound
from .writes import add_steps, remove_steps

__all__ = ["AsyncLSHIndex", "CandidateBounds", "DuplicateCluster", "Duplicates", "IndexConflict", "IndexNotFound",
           "ItemNotFound", "LSHIndex", "QueryResult"]


class _IndexHandle(IndexState):
    """One index's state and the storage layout's hooks (`steps`), chosen here once: layout 3 (the default)
    or the keyed layouts 1 and 2. The operations (queries, writes, duplicates) are written once over them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.compact: CompactLayout | None = None
        if self.config.shards:
            self.steps = ShardedSteps(self, [self._shard_steps(tag) for tag in shard_tags(self.name, self.config.shards)])
        elif self.config.layout >= 3:
            self.compact = CompactLayout(self.layout.prefix, self.config)
            self.steps = CompactSteps(self, self.compact)
        else:
            self.steps = KeyedSteps(self)
        self.near_cache: NearCache | _NearCaches | None = None  # LSHIndex.enable_near_cache
        self.migration: _IndexHandle | None = None  # the layout the items are moving into (migration.py)
        if self.config.migrating_to is not None:
            target = IndexConfig.from_json(orjson.dumps(self.config.migrating_to))
            self.migration = _IndexHandle(self.redis, target, self.feature_map, self.layout.key_prefix,
                                          meta=target.to_json(), durability=self.durability,
                                          stored_bytes=self.stored_bytes)

    # the operations, over the layout or, while the index migrates, over both (migration.py)
    def _add(self, ids, X):
        return (migrating_add_steps if self.migration else add_steps)(self, ids, X)

    def _remove(self, ids):
        return (migrating_remove_steps if self.migration else remove_steps)(self, ids)

    def _query(self, *args):
        return (migrating_query_steps if self.migration else query_steps)(self, *args)

    def _query_items(self, *args):
        return (migrating_query_items_steps if self.migration else query_items_steps)(self, *args)

    def _duplicates(self, *args):
        return (refuse_duplicates_steps if self.migration else duplicates_steps)(self, *args)

    def _shard_steps(self, tag: str) -> CompactSteps:
        """Layout 3's hooks over one shard: this index's state with the shard's keys."""
        shard = copy.copy(self)
        shard.layout = IndexLayout(self.layout.key_prefix, tag, 3)
        return CompactSteps(shard, CompactLayout(shard.layout.prefix, shard_config(self.config, self.config.shards)))

    def _describe_steps(self):
        meta, count = (yield RoundTrip([("MGET", self.layout.meta, self.layout.count)]))[0]
        self._check_meta(meta)
        if self.config.shards:
            count = yield from self.steps.items_steps()
        if self.migration is not None:
            count = int(count or 0) + (yield from self.migration.steps.items_steps())
        return self.config.describe(self.layout, int(count or 0))

    # the layout's reads by their former names (tests and tools)
    def _query_plan(self, X):
        return self.steps.plan(X)

    def _records_steps(self, numbers):
        return self.steps.records_steps(numbers)

    def _numbers_steps(self, ids):
        return self.steps._numbers_steps(ids)

    def _shared_buckets_steps(self, cursor: int, count: int):
        return self.steps.shared_buckets_steps(cursor, count)

    def _code_similarities(self, query, items):
        return self.steps.code_similarities(query, items)


class _NearCaches:
    """The near caches of a sharded index's shards, used as one."""

    def __init__(self, caches: list[NearCache]):
        self.caches = caches

    @property
    def strict(self) -> bool:
        return self.caches[0].strict

    @strict.setter
    def strict(self, value: bool) -> None:
        for cache in self.caches:
            cache.strict = value

    def refresh(self) -> None:
        for cache in self.caches:
            cache.refresh()

    def note_write(self) -> None:
        for cache in self.caches:
            cache.note_write()

    def close(self) -> None:
        for cache in self.caches:
            cache.close()


class LSHIndex(_IndexHandle):
    """An index over a sync `redis.Redis` (batch jobs). Get one from LSHIndexes."""

    def add(self, ids: list[str], X) -> dict[str, int]:
        """Add or replace items (one id per row of X): {"added", "replaced", "items"}."""
        try:
            return run_sync(self.redis, self._add(ids, X))
        finally:
            self._wrote()

    def remove(self, ids: list[str]) -> list[str]:
        """Remove items by id; returns the ids that were stored."""
        try:
            return run_sync(self.redis, self._remove(ids))
        finally:
            self._wrote()

    def enable_near_cache(self, *, strict: bool = False) -> "LSHIndex":
        """Keep a local replica of this (layout-3) index that queries read instead of Redis, kept coherent by
        Redis's invalidation pushes (featurehash.store.index.compact.near.cache: what it costs, and the bound on how
        soon another client's write is seen; `strict`: a PING before each query closes it). Loads it now."""
        if self.config.layout < 3:
            raise ValueError(f"index {self.name!r} has layout {self.config.layout}; the near cache reads layout 3")
        if self.near_cache is None and self.config.shards:  # a replica of each shard, each with its connection
            caches = [NearCache(self.redis, shard.layout.prefix, shard.layout.meta, self._meta, shard.compact,
                                with_records=self.codec is None, strict=strict) for shard in self.steps.shards]
            self.near_cache = _NearCaches(caches)
            self.steps = self.steps.mapped(lambda at, shard: NearCachedSteps(shard, caches[at]))
        elif self.near_cache is None:
            self.near_cache = NearCache(self.redis, self.layout.prefix, self.layout.meta, self._meta, self.compact,
                                        with_records=self.codec is None, strict=strict)
            self.steps = NearCachedSteps(self.steps, self.near_cache)
        self.near_cache.strict = strict
        self.near_cache.refresh()
        return self

    def disable_near_cache(self) -> None:
        """Drop the replica and its connection; queries go to Redis again."""
        cache, self.near_cache = self.near_cache, None
        if cache is not None:
            self.steps = self.steps.mapped(lambda at, shard: shard.inner) if self.config.shards else self.steps.inner
            cache.close()

    def _wrote(self) -> None:
        if self.near_cache is not None:  # this process reads its own writes: a PING before the next query
            self.near_cache.note_write()

    def query(self, X, *, top_k: int = 10, min_similarity: float = 0.0, target_recall: float | None = None,
              max_candidates: int | None = None, max_total_candidates: int | None = None) -> QueryResult:
        """The top_k neighbours of each row of X; with target_recall, the search widens over the
        forest levels until the S-curve promises it at the k-th result's similarity. `max_candidates`: a row
        takes its buckets in band order until they held that many members (layout 3; None: every bucket);
        `max_total_candidates`: past that many in all, InputError naming it (featurehash.store.index.queries.
        CandidateBounds). Each Redis call of a query does bounded work, whatever the buckets hold."""
        bounds = CandidateBounds(max_candidates, max_total_candidates)
        return run_sync(self.redis, self._query(X, top_k, min_similarity, target_recall, bounds))

    def query_items(self, ids: list[str], *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None, max_candidates: int | None = None,
                    max_total_candidates: int | None = None) -> QueryResult:
        """query() for stored items named by id, from their stored fingerprints (and vectors, for
        exact ranking); each item is left out of its own results. ItemNotFound names an unknown id."""
        bounds = CandidateBounds(max_candidates, max_total_candidates)
        return run_sync(self.redis, self._query_items(ids, top_k, min_similarity, target_recall, bounds))

    def duplicates(self, threshold: float | None = None, *, mode: str = "components",
                   max_pairs: int = DEFAULT_MAX_PAIRS, min_cluster_size: int = 2) -> Duplicates:
        """The clusters of near-duplicates among the stored items, pairs >= threshold (default: the
        index's); featurehash.store.index.duplicates says how, and what it costs."""
        return run_sync(self.redis, self._duplicates(threshold, mode, max_pairs, min_cluster_size))

    def describe(self) -> dict[str, Any]:
        return run_sync(self.redis, self._describe_steps())


class AsyncLSHIndex(_IndexHandle):
    """An index over `redis.asyncio.Redis`; CPU steps run through `offload` (a worker thread)."""

    def __init__(self, *args, offload: Callable[..., Awaitable[Any]] = asyncio.to_thread, **kwargs):
        super().__init__(*args, **kwargs)
        self.offload = offload

    async def add(self, ids: list[str], X) -> dict[str, int]:
        return await run_async(self.redis, self._add(ids, X), self.offload)

    async def remove(self, ids: list[str]) -> list[str]:
        return await run_async(self.redis, self._remove(ids), self.offload)

    async def query(self, X, *, top_k: int = 10, min_similarity: float = 0.0, target_recall: float | None = None,
                    max_candidates: int | None = None, max_total_candidates: int | None = None) -> QueryResult:
        bounds = CandidateBounds(max_candidates, max_total_candidates)
        return await run_async(self.redis, self._query(X, top_k, min_similarity, target_recall, bounds),
                               self.offload)

    async def query_items(self, ids: list[str], *, top_k: int = 10, min_similarity: float = 0.0,
                          target_recall: float | None = None, max_candidates: int | None = None,
                          max_total_candidates: int | None = None) -> QueryResult:
        bounds = CandidateBounds(max_candidates, max_total_candidates)
        return await run_async(self.redis, self._query_items(ids, top_k, min_similarity, target_recall, bounds),
                               self.offload)

    async def duplicates(self, threshold: float | None = None, *, mode: str = "components",
                         max_pairs: int = DEFAULT_MAX_PAIRS, min_cluster_size: int = 2) -> Duplicates:
        return await run_async(self.redis, self._duplicates(threshold, mode, max_pairs, min_cluster_size),
                               self.offload)

    async def describe(self) -> dict[str, Any]:
        return await run_async(self.redis, self._describe_steps(), self.offload)
