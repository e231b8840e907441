"""Create, open, list and delete LSH indexes (featurehash.store.lsh_index) in Redis.

An index is created under a name the user picks (or one generated): its keys are
`{key_prefix}index:{name}:*` (featurehash.store.lsh_layout), the same in every run and process,
and it is registered in the sorted set `{key_prefix}indexes`. Creating a name again with the
same map and banding returns the stored index (idempotent); another configuration is a
conflict. Deleting forgets the index atomically (meta key and registration), so it stops
serving at once everywhere, then SCANs its keys and UNLINKs them page by page; the name is
kept in `{key_prefix}indexes:deleting` until that finishes, a crash mid-way is finished by
the next delete, and the name cannot be reused meanwhile. Writers watch the meta key, so
none can write under a deleted index once its cleanup has started.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from typing import Any, Awaitable, Callable

import scipy.sparse as sp

from ..maps import FeatureMap, InputError, create_map
from ..maps.lsh import check_bands, choose_bands
from .lsh_index import AsyncLSHIndex, IndexConflict, IndexNotFound, LSHIndex
from .lsh_layout import (MAX_BANDS, NAME_PATTERN, IndexConfig, IndexLayout, check_fraction, check_name,
                         check_positive_int)
from .redis_steps import RoundTrip, check_client, run_async, run_sync

DEFAULT_THRESHOLD = 0.8
DEFAULT_RECALL_AT_THRESHOLD = 0.9
SCAN_COUNT = 1000

# Atomic create: refuse a name whose keys are still being deleted; otherwise SET NX + register.
_CREATE_SCRIPT = """
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return {'deleting'} end
local existing = redis.call('GET', KEYS[1])
if existing then return {'exists', existing} end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return {'created'}
"""
# Atomic drop of the index's identity; its other keys are then SCANned and UNLINKed. The name
# stays in the `deleting` set until that finishes, so a crash mid-way is resumed by the next delete.
_DROP_SCRIPT = """
local existed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if existed == 1 or redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  redis.call('ZADD', KEYS[3], 0, ARGV[1])
  return 1
end
return 0
"""


def plan_index(feature_map: FeatureMap, *, name: str | None = None, bands: int | None = None,
               rows: int | None = None, threshold: float = DEFAULT_THRESHOLD,
               recall_at_threshold: float = DEFAULT_RECALL_AT_THRESHOLD) -> IndexConfig:
    """The configuration of a new index: banding given, or chosen for the threshold."""
    if not feature_map.has_hash:
        raise InputError("map_id", f"'{feature_map.spec.method}' maps have no discrete codes (has_hash is false): "
                         "index a map that hashes, such as gcws or binning")
    name = f"ix-{secrets.token_hex(8)}" if name is None else check_name(name)
    threshold = check_fraction(threshold, "threshold")
    recall_at_threshold = check_fraction(recall_at_threshold, "recall_at_threshold")
    # the width of the codes comes from the map itself: one sparse nonzero is a valid input for any map
    probe = sp.csr_matrix(([1.0], ([0], [0])), shape=(1, feature_map.input_dim))
    n_codes = int(feature_map.hash(probe).shape[1])
    if bands is None and rows is None:
        bands, rows = choose_bands(n_codes, threshold, recall_at_threshold, max_bands=MAX_BANDS)
        chosen_by = "threshold"
    else:
        bands = None if bands is None else check_positive_int(bands, "bands")
        rows = None if rows is None else check_positive_int(rows, "rows")
        for given, field in ((bands, "bands"), (rows, "rows")):
            if given is not None and given > n_codes:
                raise InputError(field, f"exceeds the map's {n_codes} codes per vector")
        bands, rows = bands or n_codes // rows, rows or n_codes // bands
        chosen_by = "request"
    check_bands(n_codes, bands, rows)
    if bands > MAX_BANDS:
        raise InputError("bands", f"at most {MAX_BANDS}")
    return IndexConfig(name=name, map_spec=feature_map.describe(), n_codes=n_codes, bands=bands, rows=rows,
                       threshold=threshold, recall_at_threshold=recall_at_threshold, bands_chosen_by=chosen_by)


class _RegistrySteps:
    def __init__(self, redis, key_prefix: str = "featurehash:"):
        check_client(redis)
        self.redis = redis
        self.key_prefix = key_prefix
        self._registry = IndexLayout.registry(key_prefix)
        self._deleting = IndexLayout.deleting(key_prefix)

    def _create_steps(self, config: IndexConfig):
        layout = IndexLayout(self.key_prefix, config.name)
        meta = config.to_json()
        (reply,) = yield RoundTrip([("EVAL", _CREATE_SCRIPT, 3, layout.meta, self._registry, self._deleting,
                                     config.name, meta)])
        status = reply[0]
        if status == b"deleting":
            raise IndexConflict("name", f"index {config.name!r} is still being deleted; retry shortly")
        if status == b"exists":
            stored = IndexConfig.from_json(reply[1])
            same = (stored.map_spec["id"], stored.bands, stored.rows) == (config.map_spec["id"], config.bands,
                                                                          config.rows)
            if not same:
                raise IndexConflict("name", f"index {config.name!r} exists over map {stored.map_spec['id']} with "
                                    f"bands={stored.bands}, rows={stored.rows}; delete it or pick another name")
            return stored, reply[1], False
        return config, meta, True

    def _layout(self, name: str) -> IndexLayout:
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise IndexNotFound(name)  # no index can have that name
        return IndexLayout(self.key_prefix, name)

    def _load_steps(self, name: str):
        layout = self._layout(name)
        meta, count = (yield RoundTrip([("MGET", layout.meta, layout.count)]))[0]
        if meta is None:
            raise IndexNotFound(name)
        return IndexConfig.from_json(meta), meta, int(count or 0)

    def _describe_steps(self, name: str):
        config, _, items = yield from self._load_steps(name)
        return config.describe(self._layout(name), items)

    def _list_steps(self, after: str | None, limit: int):
        start = b"(" + after.encode() if after else b"-"
        (names,) = yield RoundTrip([("ZRANGEBYLEX", self._registry, start, b"+", "LIMIT", 0, limit + 1)])
        page, more = [name.decode() for name in names[:limit]], len(names) > limit
        if not page:
            return [], None
        layouts = [IndexLayout(self.key_prefix, name) for name in page]
        (metas,) = yield RoundTrip([("MGET", *[key for layout in layouts for key in (layout.meta, layout.count)])])
        described = [IndexConfig.from_json(meta).describe(layout, int(count or 0))
                     for layout, meta, count in zip(layouts, metas[::2], metas[1::2]) if meta is not None]
        return described, (page[-1] if more else None)

    def _delete_steps(self, name: str):
        """Forget the index at once, then UNLINK its keys page by page; the number of keys removed."""
        layout = self._layout(name)
        (existed,) = yield RoundTrip([("EVAL", _DROP_SCRIPT, 3, layout.meta, self._registry, self._deleting, name)])
        if not existed:
            raise IndexNotFound(name)
        cursor, removed = 0, 0
        while True:
            ((cursor, keys),) = yield RoundTrip([("SCAN", cursor, "MATCH", layout.scan_pattern(), "COUNT", SCAN_COUNT)])
            if keys:
                removed += (yield RoundTrip([("UNLINK", *keys)]))[0]
            if cursor == 0:
                break
        yield RoundTrip([("ZREM", self._deleting, name)])
        return removed


class LSHIndexes(_RegistrySteps):
    """Create, open, list and delete indexes over a sync `redis.Redis`."""

    def create(self, feature_map: FeatureMap, **options: Any) -> LSHIndex:
        """A new index (options: name, bands, rows, threshold, recall_at_threshold), or the
        stored one of that name if it has the same map and banding (`.created` tells)."""
        config, meta, created = run_sync(self.redis, self._create_steps(plan_index(feature_map, **options)))
        index = LSHIndex(self.redis, config, feature_map, self.key_prefix, meta=meta)
        index.created = created
        return index

    def open(self, name: str, feature_map: FeatureMap | None = None) -> LSHIndex:
        """The stored index; its map is rebuilt from the stored spec unless given."""
        config, meta, items = run_sync(self.redis, self._load_steps(name))
        return LSHIndex(self.redis, config, feature_map or create_map(config.map_spec), self.key_prefix,
                        meta=meta, items=items)

    def describe(self, name: str) -> dict[str, Any]:
        return run_sync(self.redis, self._describe_steps(name))

    def list(self, *, after: str | None = None, limit: int = 100) -> tuple[list[dict[str, Any]], str | None]:
        return run_sync(self.redis, self._list_steps(after, limit))

    def delete(self, name: str) -> int:
        return run_sync(self.redis, self._delete_steps(name))


class AsyncLSHIndexes(_RegistrySteps):
    """The same over `redis.asyncio.Redis`; `load` + `bind` let the caller supply a cached map."""

    def __init__(self, redis, key_prefix: str = "featurehash:",
                 offload: Callable[..., Awaitable[Any]] = asyncio.to_thread):
        super().__init__(redis, key_prefix)
        self.offload = offload

    async def create(self, feature_map: FeatureMap, **options: Any) -> AsyncLSHIndex:
        config = await self.offload(functools.partial(plan_index, feature_map, **options))
        config, meta, created = await run_async(self.redis, self._create_steps(config), self.offload)
        index = self.bind(config, meta, feature_map)
        index.created = created
        return index

    async def load(self, name: str) -> tuple[IndexConfig, bytes, int]:
        """(configuration, stored meta, item count) of an index, or IndexNotFound."""
        return await run_async(self.redis, self._load_steps(name), self.offload)

    def bind(self, config: IndexConfig, meta: bytes, feature_map: FeatureMap,
             items: int | None = None) -> AsyncLSHIndex:
        return AsyncLSHIndex(self.redis, config, feature_map, self.key_prefix, meta=meta, items=items,
                             offload=self.offload)

    async def open(self, name: str, feature_map: FeatureMap | None = None) -> AsyncLSHIndex:
        config, meta, items = await self.load(name)
        return self.bind(config, meta, feature_map or create_map(config.map_spec), items)

    async def describe(self, name: str) -> dict[str, Any]:
        return await run_async(self.redis, self._describe_steps(name), self.offload)

    async def list(self, *, after: str | None = None, limit: int = 100) -> tuple[list[dict[str, Any]], str | None]:
        return await run_async(self.redis, self._list_steps(after, limit), self.offload)

    async def delete(self, name: str) -> int:
        return await run_async(self.redis, self._delete_steps(name), self.offload)
