"""Create, open, list and delete LSH indexes (featurehash.store.index.handles) in Redis.

An index is created under a name the user picks (or one generated): its keys are
`{key_prefix}index:{{name}}:*` (featurehash.store.lsh_layout; the braces are a Redis Cluster
hash tag, so one index lives on one slot), the same in every run and process, and it is
registered in the sorted set `{key_prefix}indexes`. Creating a name again with the same map,
banding, vector storage and forest returns the stored index (idempotent); another
configuration is a conflict. Deleting forgets the index atomically (its meta key goes and a
`deleting` marker appears in its slot), so it stops serving at once everywhere, then SCANs its
keys (on the node of its slot) and UNLINKs them page by page; the marker stays until that
finishes, a crash mid-way is finished by the next delete, and the name cannot be reused
meanwhile. Writers watch the meta key, so none can write under a deleted index once its
cleanup has started. The registry is another slot, so it is updated by its own command
after the index's script: a crash in between leaves a created index unlisted until its
create is repeated, or a deleted name listed (listing skips names without a meta key).

Each tenant has its own names (`tenant`, featurehash.store.lsh_layout.tenant_key_prefix): "default" keeps
the prefix above, another tenant's keys and registry sit under `{key_prefix}tenant:{tenant}:`, and the set
`{key_prefix}tenants` lists the tenants that created an index (a map's users are looked for there).

Indexes created before the hash-tagged layout (layout 1) are found by name in their old keys
and keep working there, deletion included (standalone Redis, where they were made).
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from dataclasses import replace
from typing import Any, Awaitable, Callable

import orjson
import scipy.sparse as sp

from ..lsh.banding import check_bands, choose_bands
from ..lsh.similarity import has_exact_similarity
from ..maps import FeatureMap, InputError, create_map
from .index.handles import AsyncLSHIndex, IndexConflict, IndexNotFound, LSHIndex
from .index.migration import copy_page_steps, finish_steps, source_left_steps, start_steps
from .index.sharded.placement import shards_for
from .lsh_layout import (DEFAULT_TENANT, LATEST_LAYOUT, MAX_BANDS, MAX_SHARDS, NAME_PATTERN, IndexConfig, IndexLayout,
                         check_fraction, check_name, check_positive_int, shard_tags, tenant_key_prefix, tenants_key)
from .lsh_vectors import VECTOR_STORAGE
from .durability import check_durability
from .lsh_accounting import StoredBytes, shards_key, tenant_total_key, tenant_usage_steps
from .redis_steps import RoundTrip, Scan, check_client, is_cluster, persisted, run_async, run_sync

DEFAULT_THRESHOLD = 0.8
DEFAULT_RECALL_AT_THRESHOLD = 0.9
SCAN_COUNT = 1000
UNLINK_KEYS = 200  # keys per UNLINK while deleting an index
DEFAULT_EXPECTED_ITEMS = 100_000
MAX_EXPECTED_ITEMS = 2**32 - 1
MAX_FOREST_LEVELS = 8  # each level adds L buckets per item

# Atomic create in the index's slot: refuse a name whose keys are still being deleted; else SET NX.
# KEYS: meta, deleting marker.
_CREATE_SCRIPT = """
if redis.call('EXISTS', KEYS[2]) == 1 then return {'deleting'} end
local existing = redis.call('GET', KEYS[1])
if existing then return {'exists', existing} end
redis.call('SET', KEYS[1], ARGV[1])
return {'created'}
"""
# Atomic drop of the index's identity in its slot: the meta key goes, the marker comes (or stays,
# when a crashed delete left only the marker). Its other keys are then SCANned and UNLINKed. The
# index's counted bytes leave the tenant's total (featurehash.store.lsh_accounting; KEYS: meta, marker, size, the
# tenant's total unless on a cluster, where dropping the count gives the bytes back; ARGV: the marker's value, the
# index's shards, so that a delete that crashed is finished over every shard). The marker is set only after a
# DEL that removed something: Redis at maxmemory refuses a script whose first write may grow memory, and
# deleting must work then.
_DROP_SCRIPT = """
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('SET', KEYS[2], ARGV[1])
  local size = tonumber(redis.call('GET', KEYS[3]) or '0')
  if KEYS[4] and size > 0 and redis.call('DECRBY', KEYS[4], size) <= 0 then redis.call('DEL', KEYS[4]) end
  redis.call('DEL', KEYS[3])
  return 1
end
return redis.call('EXISTS', KEYS[2])
"""
# The same for a layout-1 index (standalone Redis only: its keys span slots).
_LAYOUT1_DROP_SCRIPT = """
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZADD', KEYS[3], 0, ARGV[1])
  return 1
end
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 1 end
return 0
"""


def check_forest_rows(forest_rows: Any, rows: int) -> tuple[int, ...]:
    """Distinct row counts below `rows`, at most MAX_FOREST_LEVELS of them, sorted descending."""
    if forest_rows is None:
        return ()
    if not isinstance(forest_rows, (list, tuple)) or len(forest_rows) > MAX_FOREST_LEVELS:
        raise InputError("forest_rows", f"expected a list of at most {MAX_FOREST_LEVELS} row counts")
    levels = [check_positive_int(value, "forest_rows") for value in forest_rows]
    if len(set(levels)) != len(levels) or any(value >= rows for value in levels):
        raise InputError("forest_rows", f"distinct row counts below the bands' rows ({rows})")
    return tuple(sorted(levels, reverse=True))


MAX_DENSE_STORED_DIM = 2**20


def plan_index(feature_map: FeatureMap, *, name: str | None = None, bands: int | None = None,
               rows: int | None = None, threshold: float = DEFAULT_THRESHOLD,
               recall_at_threshold: float = DEFAULT_RECALL_AT_THRESHOLD, vectors: str = "none",
               forest_rows: list[int] | None = None, expected_items: int | None = None,
               layout: int = LATEST_LAYOUT, shards: int | str | None = None) -> IndexConfig:
    """The configuration of a new index: banding given, or chosen for the threshold; `vectors`
    ("none", "sparse", "float32", "float16") keeps each item's vector for exact re-ranking;
    `forest_rows` (row counts below `rows`) also stores each band's shorter prefixes, the levels a
    query with a target recall widens to (featurehash.store.index.handles); `expected_items` (default
    DEFAULT_EXPECTED_ITEMS) sizes a layout-3 index's partitions (featurehash.store.index.compact.keys: up to ~1.5x
    as many items keep its compact memory, more still work at about twice the bucket memory); `layout` 2
    makes an index of the previous layout (a key per record and per bucket); `shards` (layout 3) spreads it over
    that many shards, each under a hash tag of its own (so over every master of a Redis Cluster;
    featurehash.store.index.sharded), "auto" one per ITEMS_PER_SHARD expected items (at least 2); None keeps one
    slot."""
    if layout not in (2, LATEST_LAYOUT):
        raise InputError("layout", f"2 or {LATEST_LAYOUT}")
    expected_items = DEFAULT_EXPECTED_ITEMS if expected_items is None else check_positive_int(expected_items,
                                                                                              "expected_items")
    if shards == "auto":
        shards = shards_for(expected_items)
    elif shards is not None:
        shards = check_positive_int(shards, "shards")
        if shards > MAX_SHARDS or layout < 3:
            raise InputError("shards", f"1 to {MAX_SHARDS} shards, of a layout-{LATEST_LAYOUT} index")
    if expected_items > MAX_EXPECTED_ITEMS * (shards or 1):
        raise InputError("expected_items", f"at most {MAX_EXPECTED_ITEMS} a shard (uint32 item numbers)")
    if vectors not in VECTOR_STORAGE:
        raise InputError("vectors", f"one of {', '.join(VECTOR_STORAGE)}")
    if not feature_map.has_hash:
        raise InputError("map_id", f"'{feature_map.spec.method}' maps have no discrete codes (has_hash is false): "
                         "index a map that hashes, such as gcws, minhash or binning")
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
    if vectors != "none" and not has_exact_similarity(feature_map):
        raise InputError("vectors", f"no exact kernel to re-rank '{feature_map.spec.method}' codes: use \"none\"")
    if vectors in ("float32", "float16") and feature_map.input_dim > MAX_DENSE_STORED_DIM:
        # Each item would be stored (and first made) as a dense row: 4 GiB at a text stage's 2^30 columns.
        raise InputError("vectors", f"'{vectors}' keeps every item as a dense row of the map's {feature_map.input_dim} "
                         f"columns (at most {MAX_DENSE_STORED_DIM}): use \"sparse\"")
    return IndexConfig(name=name, map_spec=feature_map.describe(), n_codes=n_codes, bands=bands, rows=rows,
                       threshold=threshold, recall_at_threshold=recall_at_threshold, bands_chosen_by=chosen_by,
                       vectors=vectors, forest_rows=check_forest_rows(forest_rows, rows), layout=layout,
                       expected_items=expected_items if layout >= 3 else 0, shards=shards or 0)


class _RegistrySteps:
    def __init__(self, redis, key_prefix: str = "featurehash:", durability: str = "reply",
                 tenant: str = DEFAULT_TENANT, *, stored_bytes_limit: int | None = None):
        check_client(redis)
        self.stored_bytes_limit = stored_bytes_limit
        self.durability = check_durability(durability)
        self.redis = redis
        self.base_prefix, self.tenant = key_prefix, tenant
        self.key_prefix = tenant_key_prefix(key_prefix, tenant)
        self._tenants = tenants_key(key_prefix)
        self._registry = IndexLayout.registry(self.key_prefix)
        self._deleting = IndexLayout.deleting(self.key_prefix)
        self.stored_bytes_key = tenant_total_key(self.key_prefix)  # featurehash.store.lsh_accounting

    def stored_bytes(self, limit: int | None = None) -> StoredBytes:
        """The tenant's count, limited by `limit` (else this registry's stored_bytes_limit)."""
        return StoredBytes(self.stored_bytes_key, self.stored_bytes_limit if limit is None else limit)

    def _used_steps(self):
        if is_cluster(self.redis):  # no total there: the sum of the indexes' counts (lsh_accounting)
            return (yield from tenant_usage_steps(self.key_prefix))
        (used,) = yield RoundTrip([("GET", self.stored_bytes_key)])
        return int(used or 0)

    def _create_steps(self, config: IndexConfig):
        layout = IndexLayout(self.key_prefix, config.name, config.layout)
        meta = config.to_json()
        older = IndexLayout(self.key_prefix, config.name, 1)
        (stored,) = yield RoundTrip([("GET", older.meta)])
        if stored is None:
            (reply,) = yield RoundTrip([("EVAL", _CREATE_SCRIPT, 2, layout.meta, layout.deleting_marker, meta)])
            if reply[0] == b"deleting":
                raise IndexConflict("name", f"index {config.name!r} is still being deleted; retry shortly")
            stored_config = config if reply[0] == b"created" else IndexConfig.from_json(reply[1])
            shard_metas = [] if not stored_config.shards or not stored_config.same_index(config) else \
                [IndexLayout(self.key_prefix, tag).meta for tag in shard_tags(config.name, stored_config.shards)]
            if shard_metas:  # each shard's copy of the meta, which its scripts check (also repairs a crash before)
                yield RoundTrip([("SET", key, reply[1] if reply[0] != b"created" else meta) for key in shard_metas]
                                + [("HSET", shards_key(self.key_prefix), config.name, stored_config.shards)])
            # also repairs a crash before it; a tenant other than "default" is noted where map deletion looks
            yield RoundTrip([("ZADD", self._registry, 0, config.name)]
                            + ([("SADD", self._tenants, self.tenant)] if self.tenant != DEFAULT_TENANT else []))
            yield from persisted(self.durability, layout.meta, self._registry, *shard_metas)
            if reply[0] == b"created":
                return config, meta, True
            stored = reply[1]
        existing = IndexConfig.from_json(stored)
        if not existing.same_index(config):
            raise IndexConflict("name", f"index {config.name!r} exists over map {existing.map_spec['id']} with "
                                f"bands={existing.bands}, rows={existing.rows}, vectors={existing.vectors!r}, "
                                f"forest_rows={list(existing.forest_rows)}; delete it or pick another name")
        return existing, stored, False

    def _tenants_steps(self):
        (members,) = yield RoundTrip([("SMEMBERS", self._tenants)])
        return sorted({DEFAULT_TENANT} | {member.decode() for member in members})

    def _layout(self, name: str, version: int = LATEST_LAYOUT) -> IndexLayout:
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise IndexNotFound(name)  # no index can have that name
        return IndexLayout(self.key_prefix, name, version)

    def _load_steps(self, name: str):
        """(configuration, stored meta, item count): the current layout first, then layout 1."""
        for version in (LATEST_LAYOUT, 1):
            layout = self._layout(name, version)
            commands = [("MGET", layout.meta, layout.count)] if version == LATEST_LAYOUT else \
                [("GET", layout.meta), ("GET", layout.count)]  # layout 1's keys may lie on two slots
            replies = yield RoundTrip(commands)
            meta, count = replies[0] if version == LATEST_LAYOUT else replies
            if meta is not None:
                config = IndexConfig.from_json(meta)
                if config.shards:
                    count = yield from self._shard_items_steps(config)
                elif config.migrating_to is not None:  # the items not moved yet, and those moved
                    count = int(count or 0) + (yield from self._shard_items_steps(IndexConfig.from_json(
                        orjson.dumps(config.migrating_to))))
                return config, meta, int(count or 0)
        raise IndexNotFound(name)

    def _shard_items_steps(self, config: IndexConfig):
        """The items of a sharded index: the sum of its shards' counts (one round trip)."""
        counts = yield RoundTrip([("GET", IndexLayout(self.key_prefix, tag).count)
                                  for tag in shard_tags(config.name, config.shards)])
        return sum(int(count or 0) for count in counts)

    def _describe_steps(self, name: str):
        config, _, items = yield from self._load_steps(name)
        return config.describe(self._layout(name, config.layout), items)

    def _list_steps(self, after: str | None, limit: int):
        start = b"(" + after.encode() if after else b"-"
        (names,) = yield RoundTrip([("ZRANGEBYLEX", self._registry, start, b"+", "LIMIT", 0, limit + 1)])
        page, more = [name.decode() for name in names[:limit]], len(names) > limit
        layouts = [IndexLayout(self.key_prefix, name) for name in page]
        found = yield RoundTrip([("MGET", layout.meta, layout.count) for layout in layouts])  # one slot each
        older = [IndexLayout(self.key_prefix, name, 1) for (meta, _), name in zip(found, page) if meta is None]
        if older:
            replies = iter((yield RoundTrip([command for layout in older
                                             for command in (("GET", layout.meta), ("GET", layout.count))])))
            old_found = {layout.name: (next(replies), next(replies)) for layout in older}
            found = [old_found.get(name, pair) if pair[0] is None else pair for name, pair in zip(page, found)]
        described = []
        for name, (meta, count) in zip(page, found):
            if meta is not None:  # else registered but deleted (or its create crashed before writing it)
                config = IndexConfig.from_json(meta)
                if config.shards:
                    count = yield from self._shard_items_steps(config)
                described.append(config.describe(IndexLayout(self.key_prefix, name, config.layout), int(count or 0)))
        return described, (page[-1] if more else None)

    def _delete_steps(self, name: str):
        """Forget the index at once, then UNLINK its keys page by page; the number of keys removed."""
        layout = self._layout(name)
        meta, marker = yield RoundTrip([("GET", layout.meta), ("GET", layout.deleting_marker)])
        shards = IndexConfig.from_json(meta).shards if meta is not None else int(marker or 0)
        (existed,) = yield RoundTrip([self._drop_command(layout, shards)])
        if existed:
            yield RoundTrip([("ZREM", self._registry, name), ("HDEL", shards_key(self.key_prefix), name)])
            removed = 0
            for tag in shard_tags(name, shards) if shards else ():  # each shard as an index of its own
                shard = IndexLayout(self.key_prefix, tag)
                yield RoundTrip([self._drop_command(shard, shards)])
                removed += yield from self._unlink_steps(shard)
            removed += yield from self._unlink_steps(layout, keep=layout.deleting_marker)
            yield RoundTrip([("DEL", layout.deleting_marker)])
            yield from persisted(self.durability, layout.meta, self._registry)
            return removed
        return (yield from self._delete_layout1_steps(name))

    def _migrate_steps(self, name: str, shards, expected_items: int | None, report):
        """Moves the index into the sharded layout (featurehash.store.index.migration): started (or resumed), every
        item copied, the cutover, the source's keys unlinked. Returns what it did."""
        config, meta, items = yield from self._load_steps(name)
        if config.migrating_to is None:
            if config.shards and shards in (None, config.shards):
                return {"index": name, "moved": 0, "shards": config.shards, "from_layout": config.layout,
                        "already": True}
            if config.shards:
                raise InputError("shards", f"index {name!r} already has {config.shards} shards: re-sharding is not "
                                 "supported (create a new index)")
            expected = expected_items or max(config.expected_items, 2 * items, DEFAULT_EXPECTED_ITEMS)
            count = shards_for(expected) if shards == "auto" else (shards or 1)
            target = plan_index(create_map(config.map_spec), name=name, bands=config.bands, rows=config.rows,
                                vectors=config.vectors, forest_rows=list(config.forest_rows) or None,
                                expected_items=expected, shards=count)
            target = replace(target, threshold=config.threshold, recall_at_threshold=config.recall_at_threshold,
                             bands_chosen_by=config.bands_chosen_by)
            source = LSHIndex(self.redis, config, create_map(config.map_spec), self.key_prefix, meta=meta)
            yield RoundTrip([("HSET", shards_key(self.key_prefix), name, count)])
            meta = yield from start_steps(source, target, [IndexLayout(self.key_prefix, tag).meta
                                                           for tag in shard_tags(name, count)])
            config = IndexConfig.from_json(meta)
        index = LSHIndex(self.redis, config, create_map(config.map_spec), self.key_prefix, meta=meta,
                         durability=self.durability, stored_bytes=self.stored_bytes())
        moved = 0
        for _ in range(3):  # one pass reads every item (none is written to the source); more only if one was missed
            cursor = None
            while True:
                count, cursor = yield from copy_page_steps(index, cursor)
                moved += count
                report(moved)
                if cursor is None:
                    break
            if not (yield from source_left_steps(index)):
                break
        else:
            raise IndexConflict("index_id", f"index {name!r} still holds items after three passes; run it again")
        target_meta = index.migration._meta
        yield from finish_steps(index, meta, target_meta, IndexLayout(self.key_prefix, name))
        keep = index.layout.meta if config.layout >= 2 else None
        unlinked = yield from self._unlink_steps(index.layout, keep=keep)
        yield from persisted(self.durability, IndexLayout(self.key_prefix, name).meta)
        return {"index": name, "moved": moved, "shards": index.migration.config.shards, "from_layout": config.layout,
                "keys_unlinked": unlinked}

    def _drop_command(self, layout: IndexLayout, shards: int) -> tuple:
        """_DROP_SCRIPT over one index's (or shard's) keys, its bytes leaving the tenant's total."""
        totals = () if is_cluster(self.redis) else (self.stored_bytes_key,)
        return ("EVAL", _DROP_SCRIPT, 3 + len(totals), layout.meta, layout.deleting_marker, layout.size, *totals,
                shards)

    def _delete_layout1_steps(self, name: str):
        layout = self._layout(name, 1)
        meta, pending = yield RoundTrip([("EXISTS", layout.meta), ("ZSCORE", self._deleting, name)])
        if not meta and pending is None:  # checked apart first: on a cluster the script below is cross-slot
            raise IndexNotFound(name)
        (existed,) = yield RoundTrip([("EVAL", _LAYOUT1_DROP_SCRIPT, 3, layout.meta, self._registry, self._deleting,
                                       name)])
        if not existed:
            raise IndexNotFound(name)
        removed = yield from self._unlink_steps(layout)
        yield RoundTrip([("ZREM", self._deleting, name)])
        yield from persisted(self.durability, layout.meta, self._registry)
        return removed

    def _unlink_steps(self, layout: IndexLayout, keep: bytes | None = None):
        cursor, removed = 0, 0
        while True:
            cursor, keys = yield Scan(layout.scan_pattern(), cursor, SCAN_COUNT, layout.meta)
            keys = [key for key in keys if key != keep]
            for start in range(0, len(keys), UNLINK_KEYS):  # a command at a time: Redis frees small keys in place
                removed += (yield RoundTrip([("UNLINK", *keys[start:start + UNLINK_KEYS])]))[0]
            if int(cursor) == 0:
                return removed


class LSHIndexes(_RegistrySteps):
    """Create, open, list and delete indexes over a sync `redis.Redis`.

    `durability="aof"`: every write (create, delete, add, remove) returns only once Redis's append-only
    file has it, else raises WriteRefused (featurehash.store.durability; one more round trip per write),
    as the service does. The default "reply" returns on Redis's reply: the write then survives a restart
    only as far as the server's own persistence goes. A write Redis refuses (full memory or disk, a
    read-only replica) raises WriteRefused either way."""

    def create(self, feature_map: FeatureMap, **options: Any) -> LSHIndex:
        """A new index (options: name, bands, rows, threshold, recall_at_threshold, vectors,
        forest_rows; see plan_index), or the stored one of that name if it has the same map,
        banding, vectors and forest (`.created` tells)."""
        config, meta, created = run_sync(self.redis, self._create_steps(plan_index(feature_map, **options)))
        index = LSHIndex(self.redis, config, feature_map, self.key_prefix, meta=meta, durability=self.durability,
                         stored_bytes=self.stored_bytes())
        index.created = created
        return index

    def open(self, name: str, feature_map: FeatureMap | None = None) -> LSHIndex:
        """The stored index; its map is rebuilt from the stored spec unless given."""
        config, meta, items = run_sync(self.redis, self._load_steps(name))
        return LSHIndex(self.redis, config, feature_map or create_map(config.map_spec), self.key_prefix,
                        meta=meta, items=items, durability=self.durability, stored_bytes=self.stored_bytes())

    def describe(self, name: str) -> dict[str, Any]:
        return run_sync(self.redis, self._describe_steps(name))

    def list(self, *, after: str | None = None, limit: int = 100) -> tuple[list[dict[str, Any]], str | None]:
        return run_sync(self.redis, self._list_steps(after, limit))

    def delete(self, name: str) -> int:
        return run_sync(self.redis, self._delete_steps(name))

    def migrate(self, name: str, *, shards: int | str | None = None, expected_items: int | None = None,
                progress: Callable[[int], Any] | None = None) -> dict[str, Any]:
        """Move an index into the sharded layout (S = `shards`, "auto", or 1) while it serves: queries answer and
        writes land throughout, and a crash is resumed by calling it again (featurehash.store.index.migration).
        `progress(items moved so far)` after each page."""
        return run_sync(self.redis, self._migrate_steps(name, shards, expected_items, progress or (lambda moved: None)))

    def used_bytes(self) -> int:
        """The bytes the tenant holds, as counted: on a standalone Redis its total (its indexes and the maps it
        created, featurehash.store.map_accounting); on a Redis Cluster its indexes' (lsh_accounting)."""
        return run_sync(self.redis, self._used_steps())

    def tenants(self) -> list[str]:
        """"default" and every tenant that has created an index (under this key prefix)."""
        return run_sync(self.redis, self._tenants_steps())

    def for_tenant(self, tenant: str) -> "LSHIndexes":
        """The same Redis and settings, acting on `tenant`'s indexes."""
        return LSHIndexes(self.redis, self.base_prefix, self.durability, tenant)


class AsyncLSHIndexes(_RegistrySteps):
    """The same over `redis.asyncio.Redis`; `load` + `bind` let the caller supply a cached map."""

    def __init__(self, redis, key_prefix: str = "featurehash:",
                 offload: Callable[..., Awaitable[Any]] = asyncio.to_thread, durability: str = "reply",
                 tenant: str = DEFAULT_TENANT):
        super().__init__(redis, key_prefix, durability, tenant)
        self.offload = offload

    def for_tenant(self, tenant: str) -> "AsyncLSHIndexes":
        """The same Redis and settings, acting on `tenant`'s indexes."""
        return AsyncLSHIndexes(self.redis, self.base_prefix, self.offload, self.durability, tenant)

    async def tenants(self) -> list[str]:
        """"default" and every tenant that has created an index (under this key prefix)."""
        return await run_async(self.redis, self._tenants_steps(), self.offload)

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
             items: int | None = None, stored_bytes_limit: int | None = None) -> AsyncLSHIndex:
        """The index, its writes refused past `stored_bytes_limit` (else this registry's) for its tenant."""
        return AsyncLSHIndex(self.redis, config, feature_map, self.key_prefix, meta=meta, items=items,
                             offload=self.offload, durability=self.durability,
                             stored_bytes=self.stored_bytes(stored_bytes_limit))

    async def used_bytes(self) -> int:
        """The bytes the tenant holds, as counted: on a standalone Redis its total (its indexes and the maps it
        created, featurehash.store.map_accounting); on a Redis Cluster its indexes' (lsh_accounting)."""
        return await run_async(self.redis, self._used_steps(), self.offload)

    async def open(self, name: str, feature_map: FeatureMap | None = None) -> AsyncLSHIndex:
        config, meta, items = await self.load(name)
        return self.bind(config, meta, feature_map or create_map(config.map_spec), items)

    async def describe(self, name: str) -> dict[str, Any]:
        return await run_async(self.redis, self._describe_steps(name), self.offload)

    async def list(self, *, after: str | None = None, limit: int = 100) -> tuple[list[dict[str, Any]], str | None]:
        return await run_async(self.redis, self._list_steps(after, limit), self.offload)

    async def delete(self, name: str) -> int:
        return await run_async(self.redis, self._delete_steps(name), self.offload)
