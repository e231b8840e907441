"""Feature-map specs in Redis.

Layout (prefix configurable): `{prefix}map:{id}` holds the resolved spec as JSON and
`{prefix}maps` is a sorted set of ids (all scores 0, so it lists in id order and pages
with ZRANGEBYLEX). Create and delete touch both in one MULTI/EXEC; SET NX makes
concurrent creates of one spec agree on a single winner.
"""

from __future__ import annotations

from typing import Any

import orjson
from redis.asyncio import Redis


class SpecStore:
    def __init__(self, redis: Redis, prefix: str = "featurehash:"):
        self.redis = redis
        self._prefix = prefix
        self._index = f"{prefix}maps"

    def _key(self, map_id: str) -> str:
        return f"{self._prefix}map:{map_id}"

    async def create(self, spec: dict[str, Any]) -> bool:
        """Store a resolved spec; True if it was new, False if it already existed."""
        map_id = spec["id"]
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self._key(map_id), orjson.dumps(spec), nx=True)
            pipe.zadd(self._index, {map_id: 0})
            created, _ = await pipe.execute()
        return bool(created)

    async def get(self, map_id: str) -> dict[str, Any] | None:
        raw = await self.redis.get(self._key(map_id))
        return None if raw is None else orjson.loads(raw)

    async def delete(self, map_id: str) -> bool:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._key(map_id))
            pipe.zrem(self._index, map_id)
            deleted, _ = await pipe.execute()
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

    async def ping(self) -> bool:
        return bool(await self.redis.ping())
