"""Per-key request limits in the service: requests per second and concurrent requests (429 with Retry-After).

`RequestQuotas.admit(request, principal)` runs once the key and its scope are checked (deps.Requires,
deps.checked_state):
a key without limits costs nothing (no Redis); a key with either takes one atomic script, one round trip
(featurehash.store.request_limits: GCRA on Redis's clock, leases with an expiry). A lease is given back by the
request middleware just before the last byte of the answer is sent (`release`), so a client that waits for its
answer before sending the next request is never refused by its own previous one; leases held by this worker are
renewed every lease_seconds / 3 while their requests run, so a crashed worker's leases lapse by themselves.

A key with a rate and no concurrency limit is served from a small local reservation: a worker takes several
requests' worth of tokens from the shared bucket in one round trip (`Reservation`) and admits that many requests
without Redis for up to rate_reservation_seconds. Every admitted request still took a token of the one bucket, so
the limit holds across workers and replicas (over any window a key gets at most burst + rate x (window +
rate_reservation_seconds)); what a worker took and did not use is given back on its next round trip, so tokens
do not strand in a worker the key's traffic left. The size follows the worker's demand: what it used of its last
reservation (twice that when it used all of it), at most rate x rate_reservation_seconds. A key whose traffic is
spread thin (fewer than 2 requests per worker per reservation time) takes one token per request: a round trip
each, as without reservation. A refusal is remembered for as long as the bucket said it would stay empty: the
requests of a key hammering past its limit are refused by the worker without a round trip.

Concurrency limits have no local part: a lease is global, one round trip to take it (with the rate, in one
script) and one to give it back, awaited before the answer's last byte (a reply not waited for could reach Redis
after the client's next request, through another worker, and refuse it). bench/bench_quotas.py measures what
each costs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass

from fastapi import Request
from redis.exceptions import RedisError

from ..auth import Principal
from ..auth.keys import API_KEY_ID, OPEN_KEY_ID
from ..config import Settings
from ...store.request_limits import CONCURRENCY, RATE, AsyncRequestLimits
from .metrics import QUOTA_REFUSALS

logger = logging.getLogger("featurehash")
LEASE = "quota_lease"   # request.state key: (quotas, key id, lease id) until the answer is sent


class TooManyRequests(Exception):
    """429: the key is past `limit` (RATE or CONCURRENCY); `retry_after` whole seconds."""

    def __init__(self, principal: Principal, limit: str, value: float, retry_after: int):
        super().__init__(limit)
        self.principal, self.limit, self.value, self.retry_after = principal, limit, value, retry_after


@dataclass
class Reservation:
    """Tokens of a key's rate this worker took at once: `size` granted, `left` unused, usable until `until`; or
    (`refused`) the bucket's answer that it has none until `until`."""

    size: int
    left: int
    until: float
    refused: bool = False


class RequestQuotas:
    """The service's gate in front of every authenticated request (one per worker)."""

    def __init__(self, redis, settings: Settings):
        self.settings = settings
        self.limits = AsyncRequestLimits(redis, settings.key_prefix, burst_seconds=settings.rate_burst_seconds,
                                         lease_seconds=settings.lease_seconds)
        self.held: dict[str, set[bytes]] = {}
        self.reservations: dict[str, Reservation] = {}
        self._renewer: asyncio.Task | None = None

    def limits_of(self, principal: Principal) -> tuple[float | None, int | None]:
        """(requests per second, concurrent requests) of a key: its own, else the settings' defaults for keys of
        the keys file (FEATUREHASH_API_KEY's key and an open service's callers have none)."""
        limits = principal.limits
        rate, concurrent = limits.requests_per_second, limits.concurrent_requests
        if principal.key_id in (API_KEY_ID, OPEN_KEY_ID):
            return rate, concurrent
        return (rate if rate is not None else self.settings.default_requests_per_second,
                concurrent if concurrent is not None else self.settings.default_concurrent_requests)

    async def admit(self, request: Request, principal: Principal) -> None:
        rate, concurrent = self.limits_of(principal)
        if rate is None and concurrent is None:
            return
        if concurrent is None and rate * self.settings.rate_reservation_seconds >= 2:
            await self._admit_reserved(principal, rate)
            return
        admission = await self.limits.admit(principal.key_id, rate, concurrent)
        if not admission.admitted:
            QUOTA_REFUSALS.labels(principal.tenant, admission.limit).inc()
            if admission.limit == RATE:
                raise TooManyRequests(principal, RATE, rate, max(1, math.ceil(admission.retry_after)))
            raise TooManyRequests(principal, CONCURRENCY, concurrent, self.settings.retry_after_seconds)
        if admission.lease is not None:
            request.scope.setdefault("state", {})[LEASE] = (self, principal.key_id, admission.lease)
            self.held.setdefault(principal.key_id, set()).add(admission.lease)
            if self._renewer is None or self._renewer.done():
                self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())

    async def _admit_reserved(self, principal: Principal, rate: float) -> None:
        """Admit from this worker's reservation of the key's rate, taking a new one when it is used up or old."""
        reservation = self.reservations.get(principal.key_id)
        now = time.monotonic()
        if reservation is not None and now < reservation.until:
            if reservation.left > 0:
                reservation.left -= 1
                return
            if reservation.refused:  # the bucket had nothing until then: refused here, without asking Redis again
                QUOTA_REFUSALS.labels(principal.tenant, RATE).inc()
                raise TooManyRequests(principal, RATE, rate, max(1, math.ceil(reservation.until - now)))
        cap = max(1, math.floor(rate * self.settings.rate_reservation_seconds))
        if reservation is None:
            want, unused = 1, 0
        else:
            used = reservation.size - reservation.left
            want, unused = min(cap, max(1, 2 * used if reservation.left == 0 else used)), reservation.left
        # the unused tokens go back with this trip, so the reservation left here has none (until it is filled)
        mine = self.reservations[principal.key_id] = Reservation(0, 0, now)
        granted, wait = await self.limits.take(principal.key_id, rate, want, unused)
        if not granted:
            mine.until, mine.refused = time.monotonic() + wait, True
            QUOTA_REFUSALS.labels(principal.tenant, RATE).inc()
            raise TooManyRequests(principal, RATE, rate, max(1, math.ceil(wait)))
        now = time.monotonic()
        current = self.reservations.get(principal.key_id)
        if current is not mine and current is not None and now < current.until and not current.refused:
            current.size, current.left = current.size + granted - 1, current.left + granted - 1  # a trip of the
            return                                                     # same key came back first: one reservation
        mine.size, mine.left, mine.until = granted, granted - 1, now + self.settings.rate_reservation_seconds
        self.reservations[principal.key_id] = mine

    async def release(self, key_id: str, lease: bytes) -> None:
        leases = self.held.get(key_id)
        if leases is not None:
            leases.discard(lease)
            if not leases:
                del self.held[key_id]
        try:
            await self.limits.release(key_id, lease)
        except RedisError:  # the lease lapses by itself (lease_seconds); the answer is not spoilt for it
            logger.warning("could not give back a concurrency lease of key %r; it lapses in %.0f s", key_id,
                           self.settings.lease_seconds)

    async def _renew_forever(self) -> None:
        while self.held:
            await asyncio.sleep(self.settings.lease_seconds / 3)
            try:
                await self.limits.renew({key_id: list(leases) for key_id, leases in self.held.items()})
            except RedisError:
                logger.warning("could not renew %d concurrency leases", sum(map(len, self.held.values())))

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()


def tenant_stored_bytes(ring, tenant: str, principal: Principal) -> int | None:
    """The stored-bytes limit of the tenant whose indexes a request writes: the caller's own, or (an admin acting
    with ?tenant=) the one the keys file gives that tenant (None: unlimited)."""
    if tenant == principal.tenant:
        return principal.limits.stored_bytes
    return next((other.limits.stored_bytes for other in ring.principals.values() if other.tenant == tenant), None)


async def release_lease(scope) -> None:
    """Give back the request's lease, if it holds one (the middleware, before the answer's last byte)."""
    state = scope.get("state")
    held = state.pop(LEASE, None) if state else None
    if held is not None:
        quotas, key_id, lease = held
        await quotas.release(key_id, lease)
