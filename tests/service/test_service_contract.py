"""The HTTP API as a contract: the OpenAPI document, the offline docs pages, query parameters with every
body type, Location, request ids and the access log, and deleting a map that indexes use."""

from __future__ import annotations

import json
import re
import uuid

import numpy as np
import pytest
from openapi_spec_validator import validate

from featurehash.maps import METHODS
from service_support import JSON, NPY, load_npy, npy_bytes, wait_until

ERROR_REF = "#/components/schemas/ErrorResponse"
VECTOR_ROUTES = ("/v1/maps/{map_id}/transform", "/v1/maps/{map_id}/hash", "/v1/maps/{map_id}/kernel",
                 "/v1/indexes/{index_id}/items", "/v1/indexes/{index_id}/query")


@pytest.fixture(scope="module")
def document(embedded_server):
    with embedded_server.client() as http:
        return http.get("/openapi.json").json()


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_openapi_document_is_valid_and_every_ref_resolves(document):
    validate(document)
    schemas = document["components"]["schemas"]
    refs = {node["$ref"] for node in _walk(document) if "$ref" in node}
    assert refs and all(ref.startswith("#/components/schemas/") for ref in refs)
    assert {ref.rsplit("/", 1)[1] for ref in refs} <= set(schemas)
    assert not [node for node in _walk(document) if "$defs" in node]
    # shared models are referenced, never inlined: only SparseVector and SparseFeaturesResponse have these
    inlined = [node for node in _walk(document) if {"indices", "values"} <= set(node.get("properties", {}))]
    assert sorted(inlined, key=lambda node: node["title"]) == [schemas["SparseFeaturesResponse"],
                                                                schemas["SparseVector"]]
    assert "HTTPValidationError" not in schemas


COMPUTING = {("post", "/v1/maps", "201"), ("post", "/v1/maps/{map_id}/transform", "200"),
             ("post", "/v1/maps/{map_id}/hash", "200"), ("post", "/v1/maps/{map_id}/kernel", "200"),
             ("post", "/v1/indexes/{index_id}/items", "200"), ("post", "/v1/indexes/{index_id}/query", "200"),
             ("post", "/v1/indexes/{index_id}/duplicates", "200")}


def test_the_compiled_header_is_declared_where_a_request_can_compile(document):
    declared = {(method, path, status): response["headers"]["X-Featurehash-Compiled"]
                for path, operations in document["paths"].items() for method, operation in operations.items()
                for status, response in operation["responses"].items()
                if "X-Featurehash-Compiled" in response.get("headers", {})}
    assert set(declared) == COMPUTING
    pattern = re.compile(declared["post", "/v1/maps/{map_id}/transform", "200"]["schema"]["pattern"])
    from featurehash.service.first_calls import header_value
    assert pattern.match(header_value([1.25, 0.5]).decode()) and pattern.match(header_value([0.0, 0.0004]).decode())
    assert "Location" in document["paths"]["/v1/maps"]["post"]["responses"]["201"]["headers"]


def test_every_route_declares_its_bodies_and_errors_with_the_one_error_model(document):
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert any(status.startswith("2") for status in responses), (method, path)
            for status, response in responses.items():
                if status.startswith("2") and status != "204":
                    assert response.get("content"), (method, path, status)
                if int(status) >= 400:
                    assert response["content"] == {"application/json": {"schema": {"$ref": ERROR_REF}}}, \
                        (method, path, status)
            if path.startswith("/v1/"):
                assert {"401", "422", "503"} <= set(responses), (method, path)
    for path in VECTOR_ROUTES:
        body = document["paths"][path]["post"]["requestBody"]["content"]
        assert body[NPY]["schema"] == {"type": "string", "format": "binary"}
        assert body[JSON]["schema"]["$ref"].startswith("#/components/schemas/")
    for path in ("/v1/maps/{map_id}/transform", "/v1/maps/{map_id}/hash"):
        assert NPY in document["paths"][path]["post"]["responses"]["200"]["content"]
    assert document["paths"]["/healthz"]["get"]["responses"]["200"]["content"][JSON]["schema"]["$ref"].endswith(
        "/HealthResponse")
    assert document["paths"]["/readyz"]["get"]["responses"]["503"]["content"][JSON]["schema"]["$ref"] == ERROR_REF
    assert "text/plain" in document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    for path in ("/v1/maps", "/v1/indexes"):
        assert "Location" in document["paths"][path]["post"]["responses"]["201"]["headers"]
    method = document["components"]["schemas"]["CreateMapRequest"]["properties"]["method"]["description"]
    assert all(name in method for name in METHODS)


def test_docs_pages_load_every_asset_from_the_service(embedded_server):
    with embedded_server.client() as http:
        for page in ("/docs", "/redoc"):
            html = http.get(page)
            assert html.status_code == 200 and "text/html" in html.headers["content-type"]
            urls = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url:\s*'([^']+)'|spec-url="([^"]+)\"""",
                              html.text)
            urls = [next(part for part in match if part) for match in urls]
            assert len(urls) >= 2, (page, html.text)
            for url in urls:
                assert url.startswith("/") and not url.startswith("//"), (page, url)
                assert http.get(url).status_code == 200, (page, url)
            assert "http://" not in html.text and "https://" not in html.text, page


def test_bands_as_a_query_parameter_work_with_npy_and_json_bodies(service_client, main_maps):
    gcws = main_maps["gcws"]["id"]
    X = np.random.default_rng(3).random((5, 16))
    by_json = service_client.post(f"/v1/maps/{gcws}/hash", json={"vectors": X.tolist(), "bands": 4}).json()
    by_npy = service_client.post(f"/v1/maps/{gcws}/hash", params={"bands": 4}, content=npy_bytes(X),
                                 headers={"Content-Type": NPY}).json()
    by_query = service_client.post(f"/v1/maps/{gcws}/hash", params={"bands": 4}, json={"vectors": X.tolist()}).json()
    assert by_npy == by_json == by_query and len(by_npy["band_keys"][0]) == 4
    both = service_client.post(f"/v1/maps/{gcws}/hash", params={"bands": 4}, json={"vectors": X.tolist(), "bands": 2})
    assert both.status_code == 422 and both.json()["field"] == "bands"


def test_unknown_query_parameters_are_refused_naming_them(service_client, main_maps):
    rff = main_maps["rff"]["id"]
    body = npy_bytes(np.ones((2, 16)))
    refused = service_client.post(f"/v1/maps/{rff}/transform", params={"bands": 4}, content=body,
                                  headers={"Content-Type": NPY})
    assert refused.status_code == 422 and refused.json() == {
        "detail": "bands: this route takes no query parameter 'bands'", "field": "bands"}
    fine = service_client.post(f"/v1/maps/{rff}/transform", params={"dtype": "float64"}, content=body,
                               headers={"Content-Type": NPY, "Accept": NPY})
    assert fine.status_code == 200 and load_npy(fine.content).dtype == np.float64


def test_plain_routes_validate_their_query_like_declared_parameters(service_client, main_maps):
    """/transform and /hash read dtype and bands themselves: a bad value is the 422 FastAPI gave."""
    rff, gcws = main_maps["rff"]["id"], main_maps["gcws"]["id"]
    body = {"vectors": [[0.5] * 16]}
    bad_dtype = service_client.post(f"/v1/maps/{rff}/transform", params={"dtype": "float16"}, json=body)
    assert bad_dtype.status_code == 422 and bad_dtype.json() == {
        "detail": "dtype: Input should be 'float32' or 'float64'", "field": "dtype"}
    bad_bands = service_client.post(f"/v1/maps/{gcws}/hash", params={"bands": "four"}, json=body)
    assert bad_bands.status_code == 422 and bad_bands.json()["field"] == "bands"
    assert "valid integer" in bad_bands.json()["detail"]
    last_wins = service_client.post(f"/v1/maps/{rff}/transform", params=[("dtype", "float16"), ("dtype", "float64")],
                                    content=npy_bytes(np.ones((1, 16))), headers={"Content-Type": NPY, "Accept": NPY})
    assert last_wins.status_code == 200 and load_npy(last_wins.content).dtype == np.float64
    missing = service_client.post("/v1/maps/nope/transform", json=body)
    assert missing.status_code == 404 and missing.json()["field"] == "map_id"


def test_hash_on_a_dense_map_and_a_3d_array_are_422s_that_say_what_to_do(service_client, main_maps):
    dense = service_client.post(f"/v1/maps/{main_maps['rff']['id']}/hash", json={"vectors": [[1.0] * 16]})
    assert dense.status_code == 422 and dense.json()["field"] == "method" and "no discrete codes" in dense.text
    cube = service_client.post(f"/v1/maps/{main_maps['rff']['id']}/transform", content=npy_bytes(np.ones((2, 3, 16))),
                               headers={"Content-Type": NPY})
    assert cube.status_code == 422
    assert "got 3-D; reshape it to (n, 16)" in cube.json()["detail"]
    assert "[vector]" not in cube.text


def test_created_maps_and_indexes_have_a_location(service_client):
    spec = {"method": "gcws", "input_dim": 4, "n_components": 8, "seed": 901}
    created = service_client.post("/v1/maps", json=spec)
    assert created.status_code in (200, 201)
    location = created.headers["Location"]
    assert location == f"/v1/maps/{created.json()['id']}"
    assert service_client.get(location).json() == created.json()
    name = f"loc-{uuid.uuid4().hex[:8]}"
    index = service_client.post("/v1/indexes", json={"map_id": created.json()["id"], "name": name, "bands": 4,
                                                     "rows": 2})
    assert index.status_code == 201 and index.headers["Location"] == f"/v1/indexes/{name}"
    assert service_client.get(index.headers["Location"]).json()["name"] == name
    assert service_client.delete(index.headers["Location"]).status_code == 204


def test_request_ids_are_echoed_and_every_request_is_one_json_log_line(main_server, main_maps):
    mine = f"test-{uuid.uuid4().hex}"
    with main_server.client() as http:
        answer = http.get(f"/v1/maps/{main_maps['rff']['id']}", headers={"X-Request-ID": mine})
        assert answer.headers["X-Request-ID"] == mine
        made = http.get("/v1/maps/nope", headers={"X-Request-ID": "no " + "x" * 200}).headers["X-Request-ID"]
        assert re.fullmatch(r"[0-9a-f]{32}", made)

    def logged(request_id):
        for line in main_server.log_path.read_text(errors="replace").splitlines():
            if request_id in line and line.startswith("{"):
                return json.loads(line)
        return None

    assert wait_until(lambda: logged(made) is not None, timeout=5)
    entry = logged(mine)
    assert entry["method"] == "GET" and entry["route"] == "/v1/maps/{map_id}" and entry["status"] == 200
    assert entry["duration_ms"] >= 0 and set(entry) == {"time", "method", "route", "status", "duration_ms",
                                                        "request_id", "tenant", "key_id"}
    assert (entry["tenant"], entry["key_id"]) == ("default", "anonymous")  # an open server: everyone's
    assert logged(made)["status"] == 404


def test_deleting_a_map_that_an_index_uses_is_a_409_unless_forced(service_client):
    spec = {"method": "gcws", "input_dim": 4, "n_components": 8, "seed": 902 + uuid.uuid4().int % 10**6}
    map_id = service_client.post("/v1/maps", json=spec).json()["id"]
    name = f"uses-{uuid.uuid4().hex[:8]}"
    assert service_client.post("/v1/indexes", json={"map_id": map_id, "name": name, "bands": 4,
                                                    "rows": 2}).status_code == 201
    # Disjoint supports: no two rows share a GCWS code whatever the (random) seed, so only "a" matches.
    X = np.diag(np.random.default_rng(5).random(4) + 0.5)[:3]
    assert service_client.post(f"/v1/indexes/{name}/items", json={"ids": ["a", "b", "c"],
                                                                  "vectors": X.tolist()}).status_code == 200
    refused = service_client.delete(f"/v1/maps/{map_id}")
    assert refused.status_code == 409 and refused.json()["field"] == "map_id" and repr(name) in refused.text
    assert service_client.get(f"/v1/maps/{map_id}").status_code == 200
    assert service_client.delete(f"/v1/maps/{map_id}", params={"force": "true"}).status_code == 204
    assert service_client.get(f"/v1/maps/{map_id}").status_code == 404
    found = service_client.post(f"/v1/indexes/{name}/query", json={"vectors": X[:1].tolist(), "top_k": 1}).json()
    assert found["results"][0][0] == {"id": "a", "similarity": 1.0}
    assert service_client.delete(f"/v1/maps/{map_id}").status_code == 404
    assert service_client.delete(f"/v1/indexes/{name}").status_code == 204
