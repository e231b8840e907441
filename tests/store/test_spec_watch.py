"""SpecWatch on a real redis-server: what it trusts, and what makes it stop trusting."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio

from featurehash.store.spec_watch import SpecWatch
from service_support import RedisProcess

PREFIX = "watch-test:"


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    server = RedisProcess(tmp_path_factory.mktemp("watch-redis")).start()
    yield server
    server.stop()


async def eventually(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


async def up_watch(url: str) -> SpecWatch:
    watch = SpecWatch(url, PREFIX, max_staleness=0.5, connect_timeout=2)
    watch.start()
    epoch = watch.epoch
    assert await eventually(lambda: watch.epoch != epoch and watch._fresh_until > time.monotonic())
    return watch


def test_a_confirmed_id_is_trusted_until_its_key_changes_or_the_db_is_flushed(redis_server):
    async def scenario():
        store = redis.asyncio.Redis.from_url(redis_server.url)
        watch = await up_watch(redis_server.url)
        try:
            watch.confirm("m1", watch.epoch)
            watch.confirm("m2", watch.epoch)
            assert watch.confirmed("m1") and watch.confirmed("m2")
            await store.set(f"{PREFIX}other:m1", b"x")  # outside the map prefix: no effect
            await store.delete(f"{PREFIX}map:m1")  # a delete of a missing key notifies nothing either
            await store.set(f"{PREFIX}map:m1", b"{}")
            assert await eventually(lambda: not watch.confirmed("m1"), timeout=0.5)
            assert watch.confirmed("m2")
            await store.flushdb()
            assert await eventually(lambda: not watch.confirmed("m2"), timeout=0.5)
        finally:
            await watch.stop()
            await store.aclose()
    asyncio.run(scenario())


def test_a_read_that_raced_an_invalidation_is_not_trusted(redis_server):
    async def scenario():
        store = redis.asyncio.Redis.from_url(redis_server.url)
        watch = await up_watch(redis_server.url)
        try:
            before_read = watch.epoch
            await store.set(f"{PREFIX}map:m3", b"{}")
            assert await eventually(lambda: watch.epoch != before_read, timeout=0.5)
            watch.confirm("m3", before_read)
            assert not watch.confirmed("m3")
        finally:
            await watch.stop()
            await store.aclose()
    asyncio.run(scenario())


def test_nothing_is_trusted_while_redis_is_down_and_confirmations_restart_after(redis_server):
    async def scenario():
        watch = await up_watch(redis_server.url)
        try:
            watch.confirm("m4", watch.epoch)
            assert watch.confirmed("m4")
            redis_server.stop()
            assert await eventually(lambda: not watch.confirmed("m4"), timeout=0.6)
            redis_server.start()
            epoch = watch.epoch
            assert await eventually(lambda: watch.epoch != epoch and watch._fresh_until > time.monotonic(),
                                    timeout=10)
            assert not watch.confirmed("m4")  # revalidated by the next store read, not carried over
        finally:
            if not redis_server.running():
                redis_server.start()
            await watch.stop()
    asyncio.run(scenario())
