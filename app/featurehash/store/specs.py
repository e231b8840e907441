"""Feature-map specs in Redis.

Layout (prefix configurable): `{prefix}map:{id}` holds the resolved spec as JSON and
`{prefix}maps` is a sorted set of ids (all scores 0, so it lists in id order and pages
with ZRANGEBYLEX). Create and delete are one script each (Redis at maxmemory refuses a MULTI, and deleting must
free memory then): create writes only if the id is absent, so concurrent creates of one spec agree on a single
winner, and counts the new spec's bytes to the tenant that pays for it, refusing it past that tenant's
stored-bytes limit (featurehash.store.map_accounting: `{prefix}map_charge:{id}` records who paid). With
durability "aof" both return only once Redis's append-only file has the write (featurehash.store.durability),
else WriteRefused. `{prefix}alias:{request id}` names the map a request (the spec as posted, defaults resolved,
nothing fitted) made, so posting it again answers from the store without fitting; `{prefix}map_aliases:{id}`
lists a map's aliases, deleted with it.
"""

from __future__ import annotations

from typing import Any

import orjson
from redis.asyncio import Redis

from . import map_accounting as accounting
from .durability import READINESS_COMMANDS, WriteRefused, check_durability, readiness_refusal
from .map_accounting import MapBytesExceeded, MapCharge, MapPayer, SpecTooLarge
from .redis_steps import MAX_TRANSACTION_ATTEMPTS, RoundTrip, TransactionConflict, persisted, run_async


class SpecStore:
    """The maps of one key prefix. `max_spec_bytes`: a new spec whose JSON is longer is refused (SpecTooLarge)."""

    def __init__(self, redis: Redis, prefix: str = "featurehash:", durability: str = "reply",
                 max_spec_bytes: int | None = None):
        self.redis = redis
        self._prefix = prefix
        self._index = f"{prefix}maps"
        self.durability = check_durability(durability)
        self.max_spec_bytes = max_spec_bytes

    def _key(self, map_id: str) -> str:
        return f"{self._prefix}map:{map_id}"

    def _alias_key(self, request_id: str) -> str:
        return f"{self._prefix}alias:{request_id}"

    def _aliases_key(self, map_id: str) -> str:
        return f"{self._prefix}map_aliases:{map_id}"

    async def create(self, spec: dict[str, Any], alias: str | None = None, payer: MapPayer | None = None) -> bool:
        """Store a resolved spec; True if it was new, False if it already existed. `alias` (the id of the
        request that made it, `maps.requested_spec`) then names it too: set only if absent, so an alias never
        moves to another map, and listed with the map so that deleting the map deletes it. A new map's bytes are
        counted to `payer` (None: to nobody), and refused past its limit (MapBytesExceeded: nothing stored); a
        map that existed counts nothing. SpecTooLarge past max_spec_bytes, unless the map is stored already."""
        return await run_async(self.redis, self._create_steps(spec, alias, payer))

    def _create_steps(self, spec: dict[str, Any], alias: str | None, payer: MapPayer | None):
        map_id = spec["id"]
        key, value = self._key(map_id), orjson.dumps(spec)
        if self.max_spec_bytes is not None and len(value) > self.max_spec_bytes:
            (stored,) = yield RoundTrip([("EXISTS", key)])
            if stored:
                return False
            raise SpecTooLarge(accounting.largest_field(spec), len(value), self.max_spec_bytes)
        charge = MapCharge(None) if payer is None else MapCharge(payer.tenant, len(value))
        charge_key = self._charge_key(map_id)
        keys = [key, self._index, charge_key, charge_key if payer is None else self._total_key(payer.tenant)]
        args = [value, map_id, charge.encode(), len(value), -1 if payer is None or payer.limit is None else payer.limit]
        if alias is not None:
            keys, args = keys + [self._alias_key(alias), self._aliases_key(map_id)], args + [alias]
        (reply,) = yield RoundTrip([("EVAL", accounting.CREATE, len(keys), *keys, *args)])
        if int(reply[0]) == accounting.OVER_LIMIT:
            raise MapBytesExceeded(payer.limit, int(reply[1]), len(value), map_id)
        yield from persisted(self.durability, key)  # also when it existed: that write may be the unpersisted one
        return int(reply[0]) == accounting.CREATED

    def _charge_key(self, map_id: str) -> str:
        return f"{self._prefix}map_charge:{map_id}"

    def _total_key(self, tenant: str) -> bytes:
        return accounting.total_key(self._prefix, tenant)

    async def check_room(self, payer: MapPayer, map_id: str) -> None:
        """MapBytesExceeded (needed None) if the payer is at or past its limit, so that no new map fits, and no
        map `map_id` is stored (posting a stored one costs nothing): a refusal before a map is built. Without a
        limit, nothing is asked of Redis. The create's own check is the one that holds across workers."""
        if payer.limit is not None:
            await run_async(self.redis, self._room_steps(payer, map_id))

    def _room_steps(self, payer: MapPayer, map_id: str):
        used, stored = yield RoundTrip([("GET", self._total_key(payer.tenant)), ("EXISTS", self._key(map_id))])
        if int(used or 0) >= payer.limit and not stored:
            raise MapBytesExceeded(payer.limit, int(used or 0), None)

    async def charge(self, map_id: str) -> MapCharge:
        """Who paid for a stored map, and how much (tenant None: nobody, or no such map)."""
        return MapCharge.decode(await self.redis.get(self._charge_key(map_id)))

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

    async def delete(self, map_id: str) -> MapCharge | None:
        """Delete the map; what it was counted as (its bytes given back to that tenant), or None if absent."""
        return await run_async(self.redis, self._delete_steps(map_id))

    def _delete_steps(self, map_id: str):
        """The spec, its listing, its charge and the aliases of the requests that made it (an alias written
        meanwhile is left behind: `get_by_alias` then finds no spec and drops it, and the next create builds the
        map anew)."""
        key, aliases_key, charge_key = self._key(map_id), self._aliases_key(map_id), self._charge_key(map_id)
        for _ in range(MAX_TRANSACTION_ATTEMPTS):
            aliases, read = yield RoundTrip([("SMEMBERS", aliases_key), ("GET", charge_key)])
            charge = MapCharge.decode(read)
            alias_keys = [self._alias_key(a.decode() if isinstance(a, bytes) else a) for a in sorted(aliases)]
            total = charge_key if charge.tenant is None else self._total_key(charge.tenant)
            keys = [key, self._index, charge_key, total, aliases_key, *alias_keys]
            (deleted,) = yield RoundTrip([("EVAL", accounting.DELETE, len(keys), *keys, map_id, charge.encode())])
            if deleted != accounting.CHARGE_CHANGED:
                yield from persisted(self.durability, key)
                return charge if deleted else None
        raise TransactionConflict(f"{MAX_TRANSACTION_ATTEMPTS} attempts met map {map_id!r} deleted and created "
                                  "again meanwhile")

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
