"""Per-key request limits in Redis: a rate and a number of concurrent requests, checked in one atomic script.

Keys (K = `{key_prefix}quota:{<key id>}:`; the braces are a Redis Cluster hash tag, so a key's two keys
share a slot and one script may touch both):

    K rate     the GCRA's theoretical arrival time (TAT), microseconds of Redis's clock (expires when idle)
    K leases   sorted set: the lease ids of the requests running now, scored by their expiry (ms)

Rate: GCRA (the generic cell rate algorithm of ATM, ITU-T I.371; a token bucket kept as one number). With
emission interval T = 1 / rate and burst B requests (`burst_seconds` x rate, at least 1), a request at time
`now` is admitted iff max(TAT, now) + T - now <= B T, and then TAT = max(TAT, now) + T. A refused request
could be admitted at max(TAT, now) + T - B T: its wait is the Retry-After. Over any window of t seconds a key
gets at most B + t / T requests, whichever worker or replica serves them: the clock is Redis's (TIME), not
the servers'.

Concurrency: a request takes a lease (a random id, scored with its expiry) if fewer than the limit are held,
and gives it back (ZREM) when its answer is sent. Expired leases are dropped by the same script before it
counts, so a worker that crashed holding leases stops counting against the key after `lease_seconds`; a
request that runs longer has its lease renewed (`renew`, every lease_seconds / 3 by the service).

A request with both limits is checked as one: refused by either, it takes neither a token nor a lease.
`take` reserves several requests' worth of the rate at once (a worker serving them without Redis) and gives back
what a previous reservation left unused: every request admitted still took a token of the shared bucket.
Each operation is a generator of steps (featurehash.store.redis_steps) run by a sync or an async driver.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .redis_steps import RoundTrip, run_async, run_sync

# KEYS: rate, leases. ARGV: interval (us; 0: no rate limit), burst (us: B x interval), concurrent limit (0: none),
# lease id, lease time (ms). Returns {0} admitted, {1, wait in us} refused by the rate, {2, wait in ms until the
# first lease expires} refused by concurrency.
ADMIT = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local interval, burst, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat
if interval > 0 then
  tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now) + interval
  if tat - now > burst then return {1, tat - burst - now} end
end
if limit > 0 then
  local ms = math.floor(now / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
  if redis.call('ZCARD', KEYS[2]) >= limit then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {2, tonumber(first[2]) - ms}
  end
  local lease = tonumber(ARGV[5])
  redis.call('ZADD', KEYS[2], ms + lease, ARGV[4])
  redis.call('PEXPIRE', KEYS[2], lease)
end
if interval > 0 then
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
end
return {0}
"""

# Up to `want` requests' worth of the rate at once (a worker's local reservation), after giving back `unused`
# tokens of its previous one (TAT moves back by as many intervals: as if they had never been taken; max(TAT, now)
# keeps a full bucket from being overfilled). KEYS: rate. ARGV: interval (us), burst (us), want, unused.
# Returns {granted >= 1} or {0, wait in us until one request's worth is free}.
TAKE = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local interval, burst, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0') - tonumber(ARGV[4]) * interval, now)
local granted = math.min(want, math.floor((burst - (tat - now)) / interval))
if granted < 1 then
  if tonumber(ARGV[4]) > 0 then redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1) end
  return {0, tat + interval - burst - now}
end
tat = tat + granted * interval
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
return {granted}
"""

# KEYS: leases. ARGV: lease time (ms), then the lease ids to extend (only those still held: ZADD XX).
RENEW = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local until_ms = math.floor((tonumber(clock[1]) * 1000000 + tonumber(clock[2])) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', until_ms, ARGV[i]) end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1])) end
return 0
"""

RATE, CONCURRENCY = "requests_per_second", "concurrent_requests"


@dataclass(frozen=True)
class Admission:
    """A request's answer: admitted (with its lease when the key has a concurrency limit), or refused by
    `limit` (RATE or CONCURRENCY) for `retry_after` seconds (the rate's is exact, concurrency's the time
    until the oldest lease would expire, an upper bound: a request usually ends much sooner)."""

    admitted: bool
    lease: bytes | None = None
    limit: str | None = None
    retry_after: float = 0.0


class _LimitSteps:
    def __init__(self, redis, key_prefix: str = "featurehash:", *, burst_seconds: float = 1.0,
                 lease_seconds: float = 60.0):
        self.redis = redis
        self.key_prefix = key_prefix
        self.burst_seconds = burst_seconds
        self.lease_ms = max(1, int(lease_seconds * 1000))

    def keys(self, key_id: str) -> tuple[bytes, bytes]:
        """The rate and leases keys of a key id (names from the keys file: no braces)."""
        head = f"{self.key_prefix}quota:{{{key_id}}}:".encode()
        return head + b"rate", head + b"leases"

    def _gcra(self, requests_per_second: float | None) -> tuple[int, int]:
        """(interval, burst) in microseconds; (0, 0) without a rate."""
        if not requests_per_second:
            return 0, 0
        interval = max(1, round(1e6 / requests_per_second))
        return interval, interval * max(1, math.floor(requests_per_second * self.burst_seconds))

    def _take_steps(self, key_id: str, requests_per_second: float, want: int, unused: int = 0):
        """(tokens granted, 0) or (0, seconds until one is free): a reservation of up to `want` requests of the
        rate, after giving back `unused` tokens of the previous one."""
        interval, burst = self._gcra(requests_per_second)
        (reply,) = yield RoundTrip([("EVAL", TAKE, 1, self.keys(key_id)[0], interval, burst, want, unused)])
        granted = int(reply[0])
        return (granted, 0.0) if granted else (0, int(reply[1]) / 1e6)

    def _admit_steps(self, key_id: str, requests_per_second: float | None, concurrent_requests: int | None):
        interval, burst = self._gcra(requests_per_second)
        lease = os.urandom(12).hex().encode() if concurrent_requests else b""
        (reply,) = yield RoundTrip([("EVAL", ADMIT, 2, *self.keys(key_id), interval, burst,
                                     concurrent_requests or 0, lease, self.lease_ms)])
        outcome = int(reply[0])
        if outcome == 0:
            return Admission(True, lease or None)
        if outcome == 1:
            return Admission(False, limit=RATE, retry_after=int(reply[1]) / 1e6)
        return Admission(False, limit=CONCURRENCY, retry_after=max(0, int(reply[1])) / 1e3)

    def _release_steps(self, key_id: str, lease: bytes):
        yield RoundTrip([("ZREM", self.keys(key_id)[1], lease)])

    def _renew_steps(self, held: dict[str, list[bytes]]):
        """Extend every lease held (key id -> lease ids): one round trip, one script a key."""
        if held:
            yield RoundTrip([("EVAL", RENEW, 1, self.keys(key_id)[1], self.lease_ms, *leases)
                             for key_id, leases in held.items() if leases])


class RequestLimits(_LimitSteps):
    """Over a sync `redis.Redis` (tests, tools)."""

    def admit(self, key_id: str, requests_per_second: float | None = None,
              concurrent_requests: int | None = None) -> Admission:
        return run_sync(self.redis, self._admit_steps(key_id, requests_per_second, concurrent_requests))

    def take(self, key_id: str, requests_per_second: float, want: int, unused: int = 0) -> tuple[int, float]:
        return run_sync(self.redis, self._take_steps(key_id, requests_per_second, want, unused))

    def release(self, key_id: str, lease: bytes) -> None:
        run_sync(self.redis, self._release_steps(key_id, lease))

    def renew(self, held: dict[str, list[bytes]]) -> None:
        run_sync(self.redis, self._renew_steps(held))


class AsyncRequestLimits(_LimitSteps):
    """Over `redis.asyncio.Redis` (the service)."""

    async def admit(self, key_id: str, requests_per_second: float | None = None,
                    concurrent_requests: int | None = None) -> Admission:
        return await run_async(self.redis, self._admit_steps(key_id, requests_per_second, concurrent_requests))

    async def take(self, key_id: str, requests_per_second: float, want: int, unused: int = 0) -> tuple[int, float]:
        return await run_async(self.redis, self._take_steps(key_id, requests_per_second, want, unused))

    async def release(self, key_id: str, lease: bytes) -> None:
        await run_async(self.redis, self._release_steps(key_id, lease))

    async def renew(self, held: dict[str, list[bytes]]) -> None:
        await run_async(self.redis, self._renew_steps(held))
