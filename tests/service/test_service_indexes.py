"""/v1/indexes through a real `featurehash serve` and real Redis (embedded, and $REDIS_URL's).

The answers must be the library's: the tests open the same index with featurehash.store.index.handles
on the server's own Redis (the embedded server's unix socket, or $REDIS_URL under the
server's key prefix) and compare. Bad input is a 4xx naming the field and leaves the
store as it was; an index and its items survive a restart of the service.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import redis
import scipy.sparse as sp

import featurehash.client.operations
from featurehash.client import FeatureHashAPIError, FeatureHashClient
from featurehash.maps.kernels import gmm
from featurehash.lsh.banding import code_fingerprints
from featurehash.maps import METHODS, create_map
from featurehash.store import LSHIndexes, plan_index
from service_support import (JSON, MAIN_MAX_BATCH_ROWS, NPY, ServiceProcess, list_all, npy_bytes, sparse_rows,
                             start_all)
from lsh_support import assert_layout_consistent, code_estimates

D = 16
GCWS64 = {"method": "gcws", "input_dim": D, "n_components": 64, "seed": 71}
INDEX_KEYS = {"id", "name", "map_id", "method", "n_codes", "bands", "rows", "threshold", "recall_at_threshold",
              "bands_chosen_by", "collision_probability_at_threshold", "half_point", "items", "key_prefix", "vectors",
              "ranking", "forest_rows", "shards"}


def positive_rows(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).random((n, D)) + 0.01


def near_copies(X: np.ndarray, seed: int, noise: float = 0.05) -> np.ndarray:
    return X * (1.0 + noise * np.random.default_rng(seed).random(X.shape))


def post_json(http, path: str, document, **kwargs):
    return http.post(path, content=json.dumps(document), headers={"Content-Type": JSON}, **kwargs)


def results_as_tuples(body: dict) -> list[list[tuple[str, float]]]:
    return [[(found["id"], found["similarity"]) for found in row] for row in body["results"]]


def all_indexes(http) -> list[dict]:
    described, after = [], None
    while True:
        page = http.get("/v1/indexes", params={"limit": 1000, **({"after": after} if after else {})}).json()
        described += page["indexes"]
        after = page["next"]
        if after is None:
            return described


@pytest.fixture(scope="module")
def server_redis(main_server, main_servers):
    """(LSHIndexes on the server's own Redis and key prefix, the raw client)."""
    if main_server.name == "external":
        client, prefix = redis.Redis.from_url(main_servers.external_url), main_servers.external_prefix
    else:
        client, prefix = redis.Redis(unix_socket_path=str(main_server.data_dir / "redis.sock")), "featurehash:"
    yield LSHIndexes(client, prefix), client
    client.close()


@pytest.fixture(scope="module")
def fixture_index(main_server) -> dict:
    """An index over a k = 64 GCWS map with 200 items (ids "f0".."f199", rows positive_rows(1, 200))."""
    with main_server.client() as http:
        spec = http.post("/v1/maps", json=GCWS64).json()
        created = http.post("/v1/indexes", json={"map_id": spec["id"], "name": "svc-fixture", "threshold": 0.7})
        assert created.status_code in (200, 201), created.text
        X = positive_rows(1, 200)
        added = post_json(http, "/v1/indexes/svc-fixture/items", {"ids": [f"f{i}" for i in range(200)],
                                                                   "vectors": X.tolist()})
        assert added.status_code == 200, added.text
    return {"spec": spec, "index": created.json(), "X": X}


# -- the index resource -----------------------------------------------------------------------------

def test_create_get_list_delete(service_client, main_maps):
    gcws = main_maps["gcws"]  # k = 16
    request = {"map_id": gcws["id"], "name": "svc-basic", "threshold": 0.5}
    first = service_client.post("/v1/indexes", json=request)
    assert first.status_code == 201, first.text
    body = first.json()
    assert set(body) == INDEX_KEYS
    plan = plan_index(create_map(gcws), name="svc-basic", threshold=0.5)
    assert (body["bands"], body["rows"], body["n_codes"]) == (plan.bands, plan.rows, 16)
    assert body["bands_chosen_by"] == "threshold" and body["collision_probability_at_threshold"] >= 0.9
    assert body["items"] == 0 and body["key_prefix"].endswith("index:{svc-basic}:")

    again = service_client.post("/v1/indexes", json=request)
    assert again.status_code == 200 and again.json() == body
    conflict = service_client.post("/v1/indexes", json={**request, "bands": 2, "rows": 2})
    assert conflict.status_code == 409 and conflict.json()["field"] == "name"
    given = service_client.post("/v1/indexes", json={"map_id": gcws["id"], "name": "svc-given", "bands": 4})
    assert given.status_code == 201 and (given.json()["bands"], given.json()["rows"]) == (4, 4)
    assert given.json()["bands_chosen_by"] == "request"
    unnamed = service_client.post("/v1/indexes", json={"map_id": gcws["id"]})
    assert unnamed.status_code == 201 and unnamed.json()["name"].startswith("ix-")

    assert service_client.get("/v1/indexes/svc-basic").json() == body
    listed = all_indexes(service_client)
    assert [d["name"] for d in listed] == sorted(d["name"] for d in listed)
    assert {"svc-basic", "svc-given", unnamed.json()["name"]} <= {d["name"] for d in listed}
    page = service_client.get("/v1/indexes", params={"limit": 1}).json()
    assert len(page["indexes"]) == 1 and page["next"] == page["indexes"][0]["name"]

    for name in ("svc-basic", "svc-given", unnamed.json()["name"]):
        deleted = service_client.delete(f"/v1/indexes/{name}")
        assert deleted.status_code == 204 and deleted.content == b""
    vectors = {"vectors": positive_rows(2, 1).tolist()}
    for response in (service_client.get("/v1/indexes/svc-basic"), service_client.delete("/v1/indexes/svc-basic"),
                     post_json(service_client, "/v1/indexes/svc-basic/query", vectors),
                     post_json(service_client, "/v1/indexes/svc-basic/items", {"ids": ["a"], **vectors}),
                     service_client.delete("/v1/indexes/svc-basic/items/a")):
        assert response.status_code == 404, response.text
        assert response.json()["field"] == "index_id" and "svc-basic" in response.json()["detail"]
    assert "svc-basic" not in {d["name"] for d in all_indexes(service_client)}
    assert service_client.post("/v1/indexes", json=request).status_code == 201  # the name is free again
    assert service_client.delete("/v1/indexes/svc-basic").status_code == 204


def test_items_and_queries_are_the_library_in_every_encoding(main_server, server_redis):
    indexes, raw = server_redis
    X = positive_rows(3, 60)
    ids = [f"e{i}" for i in range(60)]
    with main_server.client() as http:
        spec = http.post("/v1/maps", json=GCWS64).json()
        assert http.post("/v1/indexes", json={"map_id": spec["id"], "name": "svc-encodings",
                                              "threshold": 0.7}).status_code == 201
        path = "/v1/indexes/svc-encodings"
        Xs = sp.csr_matrix(X[20:30])
        answers = [
            post_json(http, f"{path}/items", {"ids": ids[:20], "vectors": X[:20].tolist()}),
            post_json(http, f"{path}/items", {"ids": ids[20:30], "sparse_vectors": sparse_rows(Xs)}),
            http.post(f"{path}/items", content=npy_bytes(X[30:45]),
                      headers={"Content-Type": NPY, "X-Item-Ids": json.dumps(ids[30:45])}),
            http.post(f"{path}/items", content=npy_bytes(X[45:]), headers={"Content-Type": NPY},
                      params=[("ids", item_id) for item_id in ids[45:]]),
        ]
        assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
        assert [a.json() for a in answers] == [{"added": 20, "replaced": 0, "items": 20},
                                               {"added": 10, "replaced": 0, "items": 30},
                                               {"added": 15, "replaced": 0, "items": 45},
                                               {"added": 15, "replaced": 0, "items": 60}]

        Q = near_copies(X[:12], 4)
        by_json = post_json(http, f"{path}/query", {"vectors": Q.tolist(), "top_k": 5})
        by_npy = http.post(f"{path}/query", content=npy_bytes(Q), headers={"Content-Type": NPY},
                           params={"top_k": 5})
        by_sparse = post_json(http, f"{path}/query", {"sparse_vectors": sparse_rows(sp.csr_matrix(Q)), "top_k": 5})
        assert by_json.status_code == 200, by_json.text
        assert by_json.json() == by_npy.json() == by_sparse.json()
        body = by_json.json()
        assert set(body) == {"results", "candidates", "estimated_recall", "rows_probed"} and len(body["results"]) == 12
        assert [row[0]["id"] for row in body["results"]] == ids[:12]
        library = indexes.open("svc-encodings").query(Q, top_k=5)
        assert results_as_tuples(body) == library.results and body["candidates"] == library.candidates
        assert body["estimated_recall"] == library.estimated_recall and body["rows_probed"] == [4] * 12
        floor = post_json(http, f"{path}/query", {"vectors": Q.tolist(), "top_k": 60, "min_similarity": 0.8})
        assert results_as_tuples(floor.json()) == indexes.open("svc-encodings").query(
            Q, top_k=60, min_similarity=0.8).results
        assert all(found["similarity"] >= 0.8 for row in floor.json()["results"] for found in row)
        assert_layout_consistent(raw, indexes.open("svc-encodings"))
        assert http.delete(f"{path}").status_code == 204


def test_exact_reranking_and_target_recall_over_http(main_server, server_redis):
    """An index keeping float16 vectors with a forest: similarities are the exact GMM of the stored
    vectors, target_recall widens the search (JSON body or query parameter with .npy), and the
    answers are the library's."""
    indexes, raw = server_redis
    X = positive_rows(21, 120)
    Q = near_copies(X[:6], 22, noise=0.6)
    with main_server.client() as http:
        spec = http.post("/v1/maps", json=GCWS64).json()
        created = http.post("/v1/indexes", json={"map_id": spec["id"], "name": "svc-exact", "bands": 8, "rows": 8,
                                                 "vectors": "float16", "forest_rows": [6, 4, 2]})
        assert created.status_code == 201, created.text
        assert (created.json()["vectors"], created.json()["ranking"], created.json()["forest_rows"]) == (
            "float16", "exact", [6, 4, 2])
        path = "/v1/indexes/svc-exact"
        assert post_json(http, f"{path}/items", {"ids": [f"x{i}" for i in range(120)],
                                                 "vectors": X.tolist()}).status_code == 200
        plain = post_json(http, f"{path}/query", {"vectors": Q.tolist(), "top_k": 5}).json()
        wide = post_json(http, f"{path}/query", {"vectors": Q.tolist(), "top_k": 5, "target_recall": 0.95}).json()
        by_npy = http.post(f"{path}/query", content=npy_bytes(Q), headers={"Content-Type": NPY},
                           params={"top_k": 5, "target_recall": 0.95}).json()
        assert wide == by_npy
        assert plain["rows_probed"] == [8] * 6 and min(wide["rows_probed"]) < 8
        assert all(r >= 0.95 or rows == 2 for r, rows in zip(wide["estimated_recall"], wide["rows_probed"]))
        library = indexes.open("svc-exact").query(Q, top_k=5, target_recall=0.95)
        assert results_as_tuples(wide) == library.results and wide["estimated_recall"] == library.estimated_recall
        exact = gmm(Q, X)
        for q, row in enumerate(wide["results"]):
            for found in row:  # float16 storage: ~1e-3 relative per entry
                assert abs(found["similarity"] - exact[q, int(found["id"][1:])]) < 2e-3
        bad = post_json(http, f"{path}/query", {"vectors": Q.tolist(), "target_recall": 1.5})
        assert bad.status_code == 422 and bad.json()["field"] == "target_recall"
        for field, value in (("vectors", "float64"), ("forest_rows", [9])):
            refused = http.post("/v1/indexes", json={"map_id": spec["id"], "name": "svc-bad", "bands": 8, "rows": 8,
                                                     field: value})
            assert refused.status_code == 422 and refused.json()["field"].startswith(field), refused.text
        assert_layout_consistent(raw, indexes.open("svc-exact"))
        assert http.delete(path).status_code == 204


def test_replaced_and_deleted_items_never_come_back(main_server, server_redis):
    indexes, raw = server_redis
    X, Y = positive_rows(5, 30), positive_rows(6, 30)
    ids = [f"r{i}" for i in range(30)]
    with main_server.client() as http:
        spec = http.post("/v1/maps", json=GCWS64).json()
        path = "/v1/indexes/svc-replace"
        assert http.post("/v1/indexes", json={"map_id": spec["id"], "name": "svc-replace", "bands": 16,
                                              "rows": 4}).status_code == 201
        post_json(http, f"{path}/items", {"ids": ids, "vectors": X.tolist()})
        replaced = post_json(http, f"{path}/items", {"ids": ids[:10], "vectors": Y[:10].tolist()})
        assert replaced.json() == {"added": 0, "replaced": 10, "items": 30}
        for item_id in ("r20", "r21"):
            assert http.delete(f"{path}/items/{item_id}").status_code == 204
        gone = http.delete(f"{path}/items/r20")
        assert gone.status_code == 404 and gone.json()["field"] == "item_id"

        everything = post_json(http, f"{path}/query", {"vectors": X.tolist(), "top_k": 30}).json()["results"]
        returned = {found["id"] for row in everything for found in row}
        assert not returned & {"r20", "r21"}
        m, index = create_map(GCWS64), indexes.open("svc-replace")
        new_codes, old_codes = code_fingerprints(m.hash(Y[:10])), code_fingerprints(m.hash(X[:10]))
        for row in range(10):  # a replaced item answers only with its new vector's similarity (the index's estimate)
            for found in everything[row]:
                if found["id"] == ids[row]:
                    estimate = code_estimates(index, old_codes[row:row + 1], new_codes[row:row + 1])[0, 0]
                    assert found["similarity"] == estimate < 1.0
        fresh = post_json(http, f"{path}/query", {"vectors": Y[:10].tolist(), "top_k": 1}).json()["results"]
        assert [row[0] for row in fresh] == [{"id": item_id, "similarity": 1.0} for item_id in ids[:10]]
        stored = assert_layout_consistent(raw, indexes.open("svc-replace"))
        assert set(stored) == set(ids) - {"r20", "r21"}
        assert http.get(path).json()["items"] == 28
        assert http.delete(path).status_code == 204


def test_an_index_outlives_its_map_and_item_ids_may_hold_any_segment_character(main_server):
    """Ids may hold anything a URL path carries as one segment (the client percent-encodes it); '/' and
    '\\' are refused (servers and proxies decode %2F before routing), so are '.' and '..'."""
    with main_server.client() as http:
        spec = http.post("/v1/maps", json={**GCWS64, "seed": 72}).json()
        assert http.post("/v1/indexes", json={"map_id": spec["id"], "name": "svc-orphan",
                                              "threshold": 0.8}).status_code == 201
        odd = ["a b c", "ü-ñ", "?x=1&y", "%2F", "#top", "..."]
        X = positive_rows(7, len(odd))
        assert post_json(http, "/v1/indexes/svc-orphan/items", {"ids": odd, "vectors": X.tolist()}).status_code == 200
        assert http.delete(f"/v1/maps/{spec['id']}").status_code == 409  # indexes use it
        assert http.delete(f"/v1/maps/{spec['id']}", params={"force": "true"}).status_code == 204
        answer = post_json(http, "/v1/indexes/svc-orphan/query", {"vectors": X.tolist(), "top_k": 1})
        assert answer.status_code == 200, answer.text
        assert [row[0]["id"] for row in answer.json()["results"]] == odd
    with FeatureHashClient(main_server.url) as client:
        for item_id in odd:
            client.delete_item("svc-orphan", item_id)
        assert client.get_index("svc-orphan")["items"] == 0
        client.delete_index("svc-orphan")


@pytest.mark.skipif("binning" not in METHODS, reason="the binning map is not in this build")
def test_binning_maps_index_too(service_client):
    spec = service_client.post("/v1/maps", json={"method": "binning", "input_dim": D, "n_components": 64,
                                                 "seed": 73, "params": {"gamma": 0.3}}).json()
    created = service_client.post("/v1/indexes", json={"map_id": spec["id"], "name": "svc-binning", "threshold": 0.6})
    assert created.status_code == 201, created.text
    assert created.json()["method"] == "binning" and created.json()["n_codes"] == 64
    X = np.random.default_rng(8).normal(size=(50, D))
    post_json(service_client, "/v1/indexes/svc-binning/items", {"ids": [f"b{i}" for i in range(50)],
                                                                "vectors": X.tolist()})
    answer = post_json(service_client, "/v1/indexes/svc-binning/query", {"vectors": (X[:5] + 0.01).tolist(),
                                                                        "top_k": 1}).json()
    assert [row[0]["id"] for row in answer["results"]] == [f"b{i}" for i in range(5)]
    assert service_client.delete("/v1/indexes/svc-binning").status_code == 204


def test_python_client_round_trip(main_server, server_redis, monkeypatch):
    indexes, _ = server_redis
    X = positive_rows(9, 120)
    ids = [f"client-item-{i:04d}" for i in range(120)]
    monkeypatch.setattr(featurehash.client.operations, "ITEM_IDS_HEADER_BYTES", 400)  # forces several binary requests
    with FeatureHashClient(main_server.url) as client:
        spec = client.create_map("gcws", D, 64, seed=74)
        created = client.create_index(spec["id"], name="svc-client", threshold=0.75)
        assert client.get_index("svc-client") == created
        assert "svc-client" in {d["name"] for d in client.list_indexes(limit=1000)["indexes"]}
        assert client.add_items("svc-client", ids[:70], X[:70], binary=True) == {"added": 70, "replaced": 0,
                                                                                 "items": 70}
        assert client.add_items("svc-client", ids[60:], X[60:], batch_rows=25) == {"added": 50, "replaced": 10,
                                                                                   "items": 120}
        Q = near_copies(X[:7], 10)
        by_json = client.query_index("svc-client", Q, top_k=3)
        assert client.query_index("svc-client", Q, top_k=3, binary=True) == by_json
        assert results_as_tuples(by_json) == indexes.open("svc-client").query(Q, top_k=3).results
        client.delete_item("svc-client", ids[0])
        with pytest.raises(FeatureHashAPIError) as missing:
            client.delete_item("svc-client", ids[0])
        assert (missing.value.status, missing.value.field) == (404, "item_id")
        with pytest.raises(FeatureHashAPIError) as bad:
            client.query_index("svc-client", Q, top_k=0)
        assert (bad.value.status, bad.value.field) == (422, "top_k")
        client.delete_index("svc-client")
        with pytest.raises(FeatureHashAPIError) as gone:
            client.get_index("svc-client")
        assert (gone.value.status, gone.value.field) == (404, "index_id")


def test_openapi_lists_the_index_routes(service_client):
    paths = service_client.get("/openapi.json").json()["paths"]
    expected = {"/v1/indexes": {"get", "post"}, "/v1/indexes/{index_id}": {"get", "delete"},
                "/v1/indexes/{index_id}/items": {"post"}, "/v1/indexes/{index_id}/items/{item_id}": {"delete"},
                "/v1/indexes/{index_id}/query": {"post"}, "/v1/indexes/{index_id}/duplicates": {"post"}}
    for path, methods in expected.items():
        assert path in paths and methods <= set(paths[path]), path
    assert {"application/json", NPY} <= set(paths["/v1/indexes/{index_id}/items"]["post"]["requestBody"]["content"])


# -- bad input: a 4xx naming the field, nothing changed ------------------------------------------------

ROW = [float(i + 1) for i in range(D)]
IX = "/v1/indexes/svc-fixture"
BAD = {
    # create
    "create_missing_map_id": ("POST", "/v1/indexes", {"name": "x"}, 422, "map_id"),
    "create_map_id_not_a_string": ("POST", "/v1/indexes", {"map_id": 5}, 422, "map_id"),
    "create_unknown_map": ("POST", "/v1/indexes", {"map_id": "gcws-v1-000000000000000000000000"}, 404, "map_id"),
    "create_map_without_hash": ("POST", "/v1/indexes", {"map_id": "{rff}"}, 422, "map_id"),
    "create_bands_times_rows_over_k": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "bands": 16, "rows": 8}, 422,
                                       "bands"),
    "create_bands_zero": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "bands": 0}, 422, "bands"),
    "create_bands_bool": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "bands": True}, 422, "bands"),
    "create_rows_string": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "rows": "4"}, 422, "rows"),
    "create_rows_over_k": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "rows": 65}, 422, "rows"),
    "create_threshold_over_1": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "threshold": 1.5}, 422, "threshold"),
    "create_threshold_string": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "threshold": "high"}, 422,
                                "threshold"),
    "create_threshold_nan": ("POST", "/v1/indexes", b'{"map_id": "{gcws64}", "threshold": NaN}', 422, "threshold"),
    "create_recall_1": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "recall_at_threshold": 1}, 422,
                        "recall_at_threshold"),
    "create_bad_name": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "name": "no spaces"}, 422, "name"),
    "create_name_not_a_string": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "name": 7}, 422, "name"),
    "create_unknown_key": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "colour": "blue"}, 422, "colour"),
    "create_existing_name_other_banding": ("POST", "/v1/indexes", {"map_id": "{gcws64}", "name": "svc-fixture",
                                                                   "bands": 2, "rows": 2}, 409, "name"),
    "create_invalid_json": ("POST", "/v1/indexes", b'{"map_id": ', 422, "body"),
    "create_npy": ("POST", "/v1/indexes", np.ones((1, D)), 415, "content-type"),
    # items
    "add_unknown_index": ("POST", "/v1/indexes/nope/items", {"ids": ["a"], "vectors": [ROW]}, 404, "index_id"),
    "add_missing_ids": ("POST", f"{IX}/items", {"vectors": [ROW]}, 422, "ids"),
    "add_ids_count": ("POST", f"{IX}/items", {"ids": ["a", "b"], "vectors": [ROW]}, 422, "ids"),
    "add_duplicate_ids": ("POST", f"{IX}/items", {"ids": ["a", "a"], "vectors": [ROW, ROW]}, 422, "ids[1]"),
    "add_ids_not_strings": ("POST", f"{IX}/items", {"ids": [1], "vectors": [ROW]}, 422, "ids"),
    "add_empty_id": ("POST", f"{IX}/items", {"ids": [""], "vectors": [ROW]}, 422, "ids[0]"),
    "add_missing_vectors": ("POST", f"{IX}/items", {"ids": ["a"]}, 422, "vectors"),
    "add_wrong_dimension": ("POST", f"{IX}/items", {"ids": ["a"], "vectors": [ROW[:-1]]}, 422, "vectors"),
    "add_nan": ("POST", f"{IX}/items", b'{"ids": ["a"], "vectors": [[NaN' + b", 1.0" * (D - 1) + b"]]}", 422,
                "vectors"),
    "add_zero_vector": ("POST", f"{IX}/items", {"ids": ["a"], "vectors": [[0.0] * D]}, 422, "vectors"),
    "add_empty_batch": ("POST", f"{IX}/items", {"ids": [], "vectors": []}, 422, "vectors"),
    "add_too_many_rows": ("POST", f"{IX}/items", {"ids": [str(i) for i in range(MAIN_MAX_BATCH_ROWS + 1)],
                                                  "vectors": [ROW] * (MAIN_MAX_BATCH_ROWS + 1)}, 422, "vectors"),
    "add_sparse_out_of_range": ("POST", f"{IX}/items", {"ids": ["a"], "sparse_vectors": [
        {"indices": [D], "values": [1.0]}]}, 422, "sparse_vectors[0].indices"),
    "add_npy_without_ids": ("POST", f"{IX}/items", np.ones((1, D)), 422, "ids"),
    "add_npy_ids_header_not_json": ("POST", f"{IX}/items", (np.ones((1, D)), {"X-Item-Ids": "a,b"}), 422, "ids"),
    "add_npy_ids_header_and_query": ("POST", f"{IX}/items?ids=a", (np.ones((1, D)), {"X-Item-Ids": '["a"]'}), 422,
                                     "ids"),
    "add_json_with_query_ids": ("POST", f"{IX}/items?ids=b", {"ids": ["a"], "vectors": [ROW]}, 422, "ids"),
    "add_text_plain": ("POST", f"{IX}/items", (b'{"ids": ["a"], "vectors": [[1]]}', {"Content-Type": "text/plain"}),
                       415, "content-type"),
    # query
    "query_unknown_index": ("POST", "/v1/indexes/nope/query", {"vectors": [ROW]}, 404, "index_id"),
    "query_name_that_cannot_exist": ("POST", "/v1/indexes/no%20such/query", {"vectors": [ROW]}, 404, "index_id"),
    "query_top_k_zero": ("POST", f"{IX}/query", {"vectors": [ROW], "top_k": 0}, 422, "top_k"),
    "query_top_k_too_big": ("POST", f"{IX}/query", {"vectors": [ROW], "top_k": 1001}, 422, "top_k"),
    "query_top_k_string": ("POST", f"{IX}/query", {"vectors": [ROW], "top_k": "5"}, 422, "top_k"),
    "query_top_k_float": ("POST", f"{IX}/query", {"vectors": [ROW], "top_k": 2.5}, 422, "top_k"),
    "query_min_similarity_over_1": ("POST", f"{IX}/query", {"vectors": [ROW], "min_similarity": 1.5}, 422,
                                    "min_similarity"),
    "query_min_similarity_string": ("POST", f"{IX}/query", {"vectors": [ROW], "min_similarity": "x"}, 422,
                                    "min_similarity"),
    "query_wrong_dimension": ("POST", f"{IX}/query", {"vectors": [ROW + [1.0]]}, 422, "vectors"),
    "query_zero_vector": ("POST", f"{IX}/query", {"vectors": [[0.0] * D]}, 422, "vectors"),
    "query_npy_top_k_not_a_number": ("POST", f"{IX}/query?top_k=abc", np.ones((1, D)), 422, "top_k"),
    "query_invalid_json": ("POST", f"{IX}/query", b'{"vectors": [[1', 422, "body"),
    "query_ids_and_vectors": ("POST", f"{IX}/query", {"ids": ["f1"], "vectors": [ROW]}, 422, "ids"),
    "query_ids_not_strings": ("POST", f"{IX}/query", {"ids": ["f1", 2]}, 422, "ids[1]"),
    "query_ids_unknown": ("POST", f"{IX}/query", {"ids": ["f1", "nope"]}, 404, "item_id"),
    # duplicates
    "duplicates_unknown_index": ("POST", "/v1/indexes/nope/duplicates", {}, 404, "index_id"),
    "duplicates_threshold_zero": ("POST", f"{IX}/duplicates", {"threshold": 0}, 422, "threshold"),
    "duplicates_bad_mode": ("POST", f"{IX}/duplicates", {"mode": "chains"}, 422, "mode"),
    "duplicates_npy": ("POST", f"{IX}/duplicates", np.ones((1, D)), 415, "content-type"),
    # other routes
    "get_unknown_index": ("GET", "/v1/indexes/nope", None, 404, "index_id"),
    "delete_unknown_index": ("DELETE", "/v1/indexes/nope", None, 404, "index_id"),
    "delete_unknown_item": ("DELETE", f"{IX}/items/nope", None, 404, "item_id"),
    "list_limit_zero": ("GET", "/v1/indexes?limit=0", None, 422, "limit"),
}


def _request_parts(body, ids: dict[str, str]):
    headers: dict[str, str] = {}
    if isinstance(body, tuple):
        body, headers = body
    if isinstance(body, np.ndarray):
        return npy_bytes(body), {"Content-Type": NPY, **headers}
    if isinstance(body, bytes):
        for name, value in ids.items():
            body = body.replace(f"{{{name}}}".encode(), value.encode())
        return body, {"Content-Type": JSON, **headers}
    if body is None:
        return None, headers
    text = json.dumps(body)
    for name, value in ids.items():
        text = text.replace(f"{{{name}}}", value)
    return text.encode(), {"Content-Type": JSON, **headers}


def _snapshot(http, query: list) -> tuple:
    answer = post_json(http, f"{IX}/query", {"vectors": query, "top_k": 20}).json()
    return all_indexes(http), list_all(http), answer


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_is_a_4xx_naming_the_field_and_changes_nothing(main_server, main_maps, fixture_index, case):
    method, path, body, status, field = BAD[case]
    ids = {"rff": main_maps["rff"]["id"], "gcws64": fixture_index["spec"]["id"]}
    content, headers = _request_parts(body, ids)
    query = fixture_index["X"][:4].tolist()
    with main_server.client() as http:
        before = _snapshot(http, query)
        response = http.request(method, path, content=content, headers=headers)
        assert response.status_code == status, response.text[:500]
        assert response.headers["content-type"].startswith(JSON)
        answer = response.json()
        assert answer["field"] == field, answer
        assert answer["detail"].startswith(f"{field}: "), answer
    with main_server.client() as fresh:
        assert _snapshot(fresh, query) == before


# -- restarts ------------------------------------------------------------------------------------------

def test_an_index_survives_a_restart(tmp_path):
    """Items added, replaced and removed before a SIGTERM restart are exactly as left afterwards."""
    X = positive_rows(11, 80)
    ids = [f"p{i}" for i in range(80)]
    Q = near_copies(X[:10], 12)
    server = start_all([ServiceProcess("index-before", tmp_path / "data")])[0]
    try:
        with server.client() as http:
            spec = http.post("/v1/maps", json=GCWS64).json()
            created = http.post("/v1/indexes", json={"map_id": spec["id"], "name": "kept", "threshold": 0.7}).json()
            post_json(http, "/v1/indexes/kept/items", {"ids": ids, "vectors": X.tolist()})
            post_json(http, "/v1/indexes/kept/items", {"ids": ids[:5], "vectors": positive_rows(13, 5).tolist()})
            assert http.delete("/v1/indexes/kept/items/p7").status_code == 204
            described = http.get("/v1/indexes/kept").json()
            answer = post_json(http, "/v1/indexes/kept/query", {"vectors": Q.tolist(), "top_k": 10}).json()
    finally:
        problems = server.terminate()
    assert not problems, problems
    assert described == {**created, "items": 79}
    assert all(found["id"] != "p7" for row in answer["results"] for found in row)
    firsts = [row[0]["id"] for row in answer["results"]]  # near copies of X[:10]: replaced ones are not found
    assert [first == item_id for first, item_id in zip(firsts, ids[:10])] == [False] * 5 + [True] * 2 + [False, True,
                                                                                                        True]

    again = start_all([ServiceProcess("index-after", tmp_path / "data", port=server.port)])[0]
    try:
        with again.client() as http:
            assert http.get("/v1/indexes/kept").json() == described
            assert post_json(http, "/v1/indexes/kept/query", {"vectors": Q.tolist(), "top_k": 10}).json() == answer
            assert http.delete("/v1/indexes/kept").status_code == 204
    finally:
        problems = again.terminate()
    assert not problems, problems
