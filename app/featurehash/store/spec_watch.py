"""Which stored specs this process may trust without asking Redis, kept true by Redis itself.

Redis server-assisted client-side caching (CLIENT TRACKING, Redis >= 6) in broadcast mode:
a dedicated connection turns tracking on for every key under `{prefix}map:` and redirects
the invalidations to a second connection subscribed to `__redis__:invalidate` (RESP2, so
they arrive as pub/sub messages). Any write or delete of a spec key, from any client, and
FLUSHDB/FLUSHALL reach every replica there. A request that saw a spec in the store marks its
id confirmed; a confirmed id is served without a round trip while the channel is fresh.

Fresh means: a heartbeat PING sent at time t came back on both connections, and now is
before t + max_staleness. Redis queues broadcast invalidations before it answers the
deleting client, and the PONG follows them on the same connection, so every delete answered
before t has been applied here by then: a deleted map stops serving on every replica within
`max_staleness` seconds of its DELETE returning (in practice within a few milliseconds, when
the invalidation arrives). When the channel is down, slow, or reconnecting, nothing is
trusted and each request asks the store as before; after a reconnect (e.g. a Redis restart)
all confirmations are void, so every cached map is revalidated by its next request.
"""

from __future__ import annotations

import asyncio
import logging
import time

from redis.asyncio import Redis
from redis.exceptions import RedisError

logger = logging.getLogger("featurehash.spec_watch")
_MAX_CONFIRMED = 65536  # ids, not maps: past it start over (each is re-confirmed by one store read)


class SpecWatch:
    def __init__(self, url: str, prefix: str, *, max_staleness: float, connect_timeout: float):
        self._url = url
        self._key_prefix = f"{prefix}map:"
        self.max_staleness = max_staleness
        self._interval = max_staleness / 4
        self._connect_timeout = connect_timeout
        self._confirmed: set[str] = set()
        self._fresh_until = 0.0  # monotonic time; 0 = nothing is trusted
        self.epoch = 0  # bumped on every invalidation and reconnect: a read racing one is not trusted
        self._task: asyncio.Task | None = None
        self._stopping = False

    # -- what requests call --------------------------------------------------------------
    def confirmed(self, map_id: str) -> bool:
        return map_id in self._confirmed and time.monotonic() < self._fresh_until

    def confirm(self, map_id: str, epoch: int) -> None:
        """Trust `map_id` from now on if nothing was invalidated since `epoch` was read (before the store read)."""
        if epoch == self.epoch and self._fresh_until:
            if len(self._confirmed) >= _MAX_CONFIRMED:
                self._confirmed.clear()
            self._confirmed.add(map_id)

    def forget(self, map_id: str) -> None:
        self._confirmed.discard(map_id)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        if self.max_staleness > 0:
            self._task = asyncio.create_task(self._run(), name="spec-watch")

    async def stop(self) -> None:
        """Cancel the watch, again if a read swallowed the cancellation, and never wait long for it."""
        if self._task is None:
            return
        self._stopping = True
        for _ in range(20):
            self._task.cancel()
            done, _ = await asyncio.wait({self._task}, timeout=0.1)
            if done:
                break
        self._void()

    def _void(self) -> None:
        self._fresh_until = 0.0
        self.epoch += 1
        self._confirmed.clear()

    async def _run(self) -> None:
        backoff = self._interval
        while not self._stopping:
            try:
                await self._watch()
            except asyncio.CancelledError:
                self._void()
                raise
            except (RedisError, OSError, asyncio.TimeoutError) as exc:
                if self._fresh_until:
                    logger.warning("spec invalidation channel down (%s): asking the store on every request", exc)
                self._void()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            else:
                backoff = self._interval

    async def _watch(self) -> None:
        client = Redis.from_url(self._url, protocol=2, socket_connect_timeout=self._connect_timeout)
        listener = client.connection_pool.make_connection()
        tracker = client.connection_pool.make_connection()
        try:
            await listener.connect()
            await tracker.connect()
            await listener.send_command("CLIENT", "ID")
            listener_id = await listener.read_response()
            await listener.send_command("SUBSCRIBE", "__redis__:invalidate")
            await self._read(listener, self._connect_timeout)  # the subscribe confirmation
            await tracker.send_command("CLIENT", "TRACKING", "ON", "REDIRECT", listener_id,
                                       "BCAST", "PREFIX", self._key_prefix)
            await tracker.read_response()
            self._void()  # a new channel: whatever happened while there was none is unknown
            logger.info("spec invalidation channel up: confirmed maps are served without a store read")
            while not self._stopping:
                await self._heartbeat(listener, tracker)
        finally:
            await listener.disconnect()
            await tracker.disconnect()
            await client.aclose()

    async def _heartbeat(self, listener, tracker) -> None:
        sent = time.monotonic()
        await listener.send_command("PING")
        await tracker.send_command("PING")
        if await self._read(tracker, self.max_staleness) is None:
            raise asyncio.TimeoutError("no PONG from the tracking connection")
        while True:  # invalidations queued before our PING come first
            remaining = sent + self.max_staleness - time.monotonic()
            message = await self._read(listener, max(remaining, 0.001))
            if message is None:
                raise asyncio.TimeoutError("no PONG on the invalidation channel")
            if self._handle(message) == "pong":
                break
        self._fresh_until = sent + self.max_staleness
        while (remaining := sent + self._interval - time.monotonic()) > 0:
            message = await self._read(listener, remaining)
            if message is not None:
                self._handle(message)

    @staticmethod
    async def _read(connection, timeout: float):
        return await connection.read_response(timeout=timeout)

    def _handle(self, message) -> str:
        kind = message[0].decode() if isinstance(message[0], bytes) else message[0]
        if kind == "message":
            keys = message[2]
            self.epoch += 1
            if keys is None:  # FLUSHDB / FLUSHALL
                self._confirmed.clear()
            else:
                skip = len(self._key_prefix)
                for key in keys:
                    self._confirmed.discard(key[skip:].decode() if isinstance(key, bytes) else key[skip:])
        return kind
