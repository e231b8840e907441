"""FEATUREHASH_PRELOAD_KERNELS: a worker loads every method's compiled kernels at startup, on a background
thread, and /readyz answers 503 (field "kernels") until they are in. In-process app, no Redis: once the
kernels are in, readiness is the store's alone (here 503 "store")."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import httpx
import pytest

from featurehash.service import compile_cache
from featurehash.service.config import Settings
from featurehash.service.app import create_app

NO_REDIS = "redis://127.0.0.1:1/0"


@contextlib.asynccontextmanager
async def started(settings: Settings):
    """The app with its lifespan started (as uvicorn starts it), and a client calling it in process."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            yield client


async def _ready_field(client: httpx.AsyncClient) -> str | None:
    answer = await client.get("/readyz")
    return None if answer.status_code == 200 else answer.json()["field"]


async def _field_within(client: httpx.AsyncClient, wanted: str, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await _ready_field(client) == wanted:
            return True
        await asyncio.sleep(0.02)
    return False


def test_readyz_waits_for_the_preloaded_kernels(monkeypatch):
    release, calls = threading.Event(), []

    def warm():
        calls.append(threading.current_thread().name)
        assert release.wait(10)
        return ["rff {}"]

    async def check():
        async with started(Settings(REDIS_URL=NO_REDIS, preload_kernels=True)) as client:
            answer = await client.get("/readyz")
            assert answer.status_code == 503 and answer.json()["field"] == "kernels"
            assert answer.headers["Retry-After"] == "1"
            assert await _ready_field(client) == "kernels"   # still loading: the warm-up has not returned
            release.set()
            assert await _field_within(client, "store")

    monkeypatch.setattr(compile_cache, "warm", warm)
    asyncio.run(check())
    assert calls == ["featurehash-preload"]   # once, off the event loop's thread


def test_a_failed_preload_is_logged_and_does_not_keep_the_worker_unready(monkeypatch, caplog):
    def warm():
        raise RuntimeError("no compiler today")

    async def check():
        async with started(Settings(REDIS_URL=NO_REDIS, preload_kernels=True)) as client:
            assert await _field_within(client, "store")

    monkeypatch.setattr(compile_cache, "warm", warm)
    asyncio.run(check())
    assert any("loading the compiled kernels failed" in record.getMessage() for record in caplog.records)


def test_off_by_default_and_set_from_the_environment(monkeypatch):
    monkeypatch.setattr(compile_cache, "warm", lambda: pytest.fail("warmed although preload_kernels is off"))
    monkeypatch.delenv("FEATUREHASH_PRELOAD_KERNELS", raising=False)
    assert Settings().preload_kernels is False

    async def check():
        async with started(Settings(REDIS_URL=NO_REDIS)) as client:
            assert await _ready_field(client) == "store"

    asyncio.run(check())
    monkeypatch.setenv("FEATUREHASH_PRELOAD_KERNELS", "1")
    assert Settings().preload_kernels is True
