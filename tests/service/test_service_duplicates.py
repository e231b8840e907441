"""Queries by stored ids and POST /v1/indexes/{name}/duplicates through a real `featurehash serve`.

The answers must be the library's (featurehash.store on the server's own Redis, as in
test_service_indexes.py); a server with small limits refuses large indexes up front (422 naming index_id).
Bad input is covered by the BAD table of test_service_indexes.py.
"""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import orjson
import pytest
import redis.asyncio

from featurehash.maps import InputError, create_map
from featurehash.service.api.duplicates import bounded_duplicates
from featurehash.service.config import Settings
from featurehash.store import AsyncLSHIndexes
from service_support import JSON, RedisProcess
from test_service_indexes import (GCWS64, near_copies, positive_rows, post_json, results_as_tuples,  # noqa: F401
                                  server_redis)

NDJSON = "application/x-ndjson"


def library_document(found) -> dict:
    document = dataclasses.asdict(found)
    document["clusters"] = [{"representative": c["representative"], "members": c["members"]}
                            for c in document["clusters"]]
    return document


def families(seed: int, n_families: int, size: int) -> np.ndarray:
    base = positive_rows(seed, n_families) ** 8  # skewed rows: unrelated ones are far apart (GMM ~0.2)
    return np.vstack([near_copies(base, seed + copy, 0.02) if copy else base for copy in range(size)])


def test_query_by_ids_and_duplicates_are_the_library(main_server, server_redis):
    indexes, _ = server_redis
    X = families(40, 1100, 2)  # > 1,000 clusters: the JSON answer streams in chunks
    ids = [f"d{i:05d}" for i in range(X.shape[0])]
    with main_server.client() as http:
        spec = http.post("/v1/maps", json=GCWS64).json()
        created = http.post("/v1/indexes", json={"map_id": spec["id"], "name": "svc-dup", "threshold": 0.9,
                                                 "vectors": "float32"})
        assert created.status_code == 201, created.text
        added = post_json(http, "/v1/indexes/svc-dup/items", {"ids": ids, "vectors": X.tolist()})
        assert added.status_code == 200, added.text
        library = indexes.open("svc-dup")

        asked = {"ids": ids[:5] + ids[1100:1102], "top_k": 3, "min_similarity": 0.1}
        answer = post_json(http, "/v1/indexes/svc-dup/query", asked)
        assert answer.status_code == 200, answer.text
        expected = library.query_items(asked["ids"], top_k=3, min_similarity=0.1)
        assert results_as_tuples(answer.json()) == expected.results
        assert answer.json()["candidates"] == expected.candidates
        assert results_as_tuples(answer.json())[0][0][0] == ids[1100]  # its near copy, itself left out

        streamed = post_json(http, "/v1/indexes/svc-dup/duplicates", {"threshold": 0.9})
        assert streamed.status_code == 200 and streamed.headers["content-type"].startswith(JSON)
        assert "content-length" not in streamed.headers  # chunked: streamed
        found = library.duplicates(0.9)
        assert streamed.json() == library_document(found) and len(found.clusters) > 1000
        assert streamed.json()["clusters"][0] == {"representative": ids[0], "members": [ids[0], ids[1100]]}

        lines = http.post("/v1/indexes/svc-dup/duplicates", headers={"Content-Type": JSON, "Accept": NDJSON},
                          content=orjson.dumps({"threshold": 0.9, "mode": "representatives", "min_cluster_size": 2}))
        assert lines.status_code == 200 and lines.headers["content-type"].startswith(NDJSON)
        head, *clusters = [orjson.loads(line) for line in lines.content.splitlines()]
        expected = library_document(library.duplicates(0.9, mode="representatives"))
        assert clusters == expected.pop("clusters") and head == expected

        small = post_json(http, "/v1/indexes/svc-dup/duplicates", {})
        assert small.status_code == 200 and small.json()["threshold"] == 0.9 and small.json()["verify"] == "exact"
        assert http.delete("/v1/indexes/svc-dup").status_code == 204


def test_large_indexes_are_refused_up_front_naming_index_id(tmp_path):
    """The route's bound (featurehash.service.api.duplicates.bounded_duplicates) with small limits: at most 100
    items within 0.01 s of estimated CPU, on a Redis of its own (no server needed to set the limits)."""
    settings = Settings(max_duplicates_items=100, request_work_seconds=0.01)
    m = create_map(GCWS64)
    server = RedisProcess(tmp_path / "redis").start()
    cases = {  # name: (items, bands, rows, what the refusal says)
        "many": (101, 16, 4, "FEATUREHASH_MAX_DUPLICATES_ITEMS"),
        "wide": (60, 32, 2, "scanning the 32 buckets"),      # 60 x 32 x 6 us > 0.01 s
        "pairs": (80, 16, 4, "more candidate pairs"),        # 8 families of 10: >= 360 pairs, ~76 fit
        "fits": (20, 16, 4, None)}

    async def run():
        connection = redis.asyncio.Redis.from_url(server.url)
        try:
            indexes = AsyncLSHIndexes(connection, "fh:")
            for name, (items, bands, rows, refusal) in cases.items():
                index = await indexes.create(m, name=name, bands=bands, rows=rows)
                X = families(50, items // 10, 10) if items % 10 == 0 else positive_rows(51, items)
                await index.add([f"{name}{i}" for i in range(items)], X)
                index = await indexes.open(name)  # knows its item count, as the route's does
                if refusal is None:
                    assert (await bounded_duplicates(index, settings, 0.9, "components", 2)).clusters
                    continue
                with pytest.raises(InputError) as refused:
                    await bounded_duplicates(index, settings, 0.9, "components", 2)
                assert refused.value.field == "index_id" and refusal in refused.value.message
                assert "featurehash dedup" in refused.value.message
        finally:
            await connection.aclose()

    try:
        asyncio.run(run())
    finally:
        server.stop()
