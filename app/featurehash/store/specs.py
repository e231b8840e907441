"""Feature-map specs in Redis.

Layout (prefix configurable): `{prefix}map:{id}` holds the resolved spec as JSON and
`{prefix}maps` is a sorted set of ids (all scores 0, so it lists in id order and pages
with ZRANGEBYLEX). Create touches both in one MULTI/EXEC, delete in one script (Redis at
maxmemory refuses a MULTI, and deleting must free memory then); SET NX makes concurrent
creates of one spec agree on a single winner. With durability "aof" both return only once
Redis's append-only file has the write (featurehash.store.durability), else WriteRefused.
`{prefix}alias:{request id}` names the map a request (the spec as posted, defaults resolved, nothing
fitted) made, so posting it again answers from the store without fitting; `{prefix}map_aliases:{id}`
lists a map's aliases, deleted with it.
"""

from __future__ import annotations

from typing import Any

import orjson
from redis.asyncio import Redis

from .durability import READINESS_COMMANDS, WriteRefused, check_durability, readiness_refusal
from .redis_steps import RoundTrip, persisted, run_async

# KEYS: the spec, the id index, then its aliases' set and alias keys. ARGV: the id. Every command shrinks
# memory: allowed at maxmemory.
_DELETE_SCRIPT = """
local deleted = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
return deleted
"""


class SpecStore:
    def __init__(self, redis: Redis, prefix: str = "featurehash:", durability: str = "reply"):
        self.redis = redis
        self._prefix = prefix
        self._index = f"{prefix}maps"
        self.durability = check_durability(durability)

    def _key(self, map_id: str) -> str:
        return f"{self._prefix}map:{map_id}"

    def _alias_key(self, request_id: str) -> str:
        return f"{self._prefix}alias:{request_id}"

    def _aliases_key(self, map_id: str) -> str:
        return f"{self._prefix}map_aliases:{map_id}"

    async def create(self, spec: dict[str, Any], alias: str | None = None) -> bool:
        """Store a resolved spec; True if it was new, False if it already existed. `alias` (the id of the
        request that made it, `maps.requested_spec`) then names it too: set only if absent, so an alias never
        moves to another map, and listed with the map so that deleting the map deletes it."""
        return await run_async(self.redis, self._create_steps(spec, alias))

    def _create_steps(self, spec: dict[str, Any], alias: str | None):
        map_id = spec["id"]
        key = self._key(map_id)
        commands = [("SET", key, orjson.dumps(spec), "NX"), ("ZADD", self._index, 0, map_id)]
        if alias is not None:
            commands += [("SET", self._alias_key(alias), map_id, "NX"), ("SADD", self._aliases_key(map_id), alias)]
        created, *_ = yield RoundTrip(commands, atomic=True)
        yield from persisted(self.durability, key)  # also when it existed: that write may be the unpersisted one
        return bool(created)

    async def get_by_alias(self, request_id: str) -> dict[str, Any] | None:
        """The stored spec a request made before (`create`'s alias), or None (never made, or deleted since)."""
        map_id = await self.redis.get(self._alias_key(request_id))
        if map_id is None:
            return None
        spec = await self.get(map_id.decode() if isinstance(map_id, bytes) else map_id)
        if spec is None:   # left by a create that raced a delete: dropped, so the next create sets it again
            await self.redis.delete(self._alias_key(request_id))
        return spec

    async def get(self, map_id: str) -> dict[str, Any] | None:
        raw = await self.redis.get(self._key(map_id))
        return None if raw is None else orjson.loads(raw)

    async def delete(self, map_id: str) -> bool:
        return await run_async(self.redis, self._delete_steps(map_id))

    def _delete_steps(self, map_id: str):
        """The spec, its listing and the aliases of the requests that made it (an alias written meanwhile is
        left behind: `get_by_alias` then finds no spec and drops it, and the next create builds the map anew)."""
        key, aliases_key = self._key(map_id), self._aliases_key(map_id)
        (aliases,) = yield RoundTrip([("SMEMBERS", aliases_key)])
        alias_keys = [self._alias_key(a.decode() if isinstance(a, bytes) else a) for a in sorted(aliases)]
        keys = [key, self._index, aliases_key, *alias_keys]
        (deleted,) = yield RoundTrip([("EVAL", _DELETE_SCRIPT, len(keys), *keys, map_id)])
        yield from persisted(self.durability, key)
        return bool(deleted)

    async def list(self, *, after: str | None, limit: int) -> tuple[list[dict[str, Any]], str | None]:
        """Up to `limit` specs with ids after `after`, and the cursor of the next page (or None)."""
        start = f"({after}" if after else "-"
        ids = await self.redis.zrangebylex(self._index, start, "+", start=0, num=limit + 1)
        ids = [i.decode() if isinstance(i, bytes) else i for i in ids]
        page, more = ids[:limit], len(ids) > limit
        if not page:
            return [], None
        raws = await self.redis.mget([self._key(i) for i in page])
        specs = [orjson.loads(raw) for raw in raws if raw is not None]
        return specs, (page[-1] if more else None)

    async def write_refusal(self) -> WriteRefused | None:
        """Why Redis would refuse (or not persist) a write now, from INFO in one round trip (no write)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for command in READINESS_COMMANDS:
                pipe.execute_command(*command)
            persistence, memory, replication = await pipe.execute()
        return readiness_refusal(persistence, memory, replication, self.durability)
