"""Every operation of the OpenAPI document carries examples (bodies, path and query parameters) that succeed
when sent as they are: read from the served document, ordered (creates first, then items, reads, deletes last),
sent to a fresh server of their own (embedded Redis), each answered 2xx. "Try it out" in /docs sends the same."""

from __future__ import annotations

import pytest

from featurehash.maps.registry import resolve_spec
from featurehash.protocol.examples import EXAMPLE_MAP_IDS, EXAMPLE_SPECS
from service_support import JSON, ServiceProcess

# Query parameters documented without an example, and why.
WITHOUT_EXAMPLE = {("add_items", "ids"): "for .npy bodies only: a JSON body carries its ids and refuses ?ids="}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = ServiceProcess("examples", tmp_path_factory.mktemp("serve-examples"))
    process.start().wait_ready()
    yield process
    assert not process.terminate()


@pytest.fixture(scope="module")
def document(server):
    with server.client() as http:
        return http.get("/openapi.json").json()


def _operations(document) -> list[tuple[str, str, dict]]:
    """(method, path, operation): creates (a POST to a collection) first in document order (maps before the
    indexes over them), then item additions, the rest, and every deletion in reverse order (items, indexes,
    then maps)."""
    listed = [(method, path, operation) for path, operations in document["paths"].items()
              for method, operation in operations.items()]

    def rank(position: int) -> tuple[int, int]:
        method, path, _ = listed[position]
        if method == "delete" or path.endswith("/delete"):
            return 3, -position
        if method == "post" and "{" not in path:
            return 0, position
        return (1 if method == "post" and path.endswith("/items") else 2), position

    return [listed[position] for position in sorted(range(len(listed)), key=rank)]


def _examples(node: dict) -> list[dict]:
    return list(node.get("examples", {}).values())


def _requests(operation: dict):
    """(path parameters, query parameters, JSON body or None) for each example: every body example (with the
    path parameters it names in x-parameters, else the defaults), or for an operation without a body each
    example of each path parameter."""
    parameters = operation.get("parameters", [])
    defaults = {p["name"]: _examples(p)[0]["value"] for p in parameters if p["in"] == "path"}
    query = {p["name"]: _examples(p)[0]["value"] for p in parameters if p["in"] == "query" and _examples(p)}
    body = operation.get("requestBody", {}).get("content", {}).get(JSON)
    if body is not None:
        for example in _examples(body):
            yield {**defaults, **example.get("x-parameters", {})}, query, example["value"]
        return
    variants = [{**defaults, p["name"]: example["value"]} for p in parameters if p["in"] == "path"
                for example in _examples(p)]
    for path in [dict(t) for t in dict.fromkeys(tuple(v.items()) for v in variants)] or [{}]:
        yield path, query, None


def test_the_example_map_ids_are_the_ids_of_the_example_specs():
    assert {name: resolve_spec(spec).id for name, spec in EXAMPLE_SPECS.items()} == EXAMPLE_MAP_IDS


def test_every_operation_has_examples_for_its_body_and_parameters(document):
    for method, path, operation in _operations(document):
        for parameter in operation.get("parameters", []):
            key = (operation["operationId"], parameter["name"])
            assert _examples(parameter) or key in WITHOUT_EXAMPLE, (method, path, parameter["name"])
        body = operation.get("requestBody", {}).get("content", {}).get(JSON)
        assert body is None or _examples(body), (method, path)


def test_every_example_succeeds_sent_as_it_is_in_order(document, server):
    sent, created = [], []
    with server.client(timeout=120.0) as http:
        for method, path, operation in _operations(document):
            for path_parameters, query, body in _requests(operation):
                url = path.format(**path_parameters)
                answer = http.request(method, url, params=query, json=body)
                assert 200 <= answer.status_code < 300, (method, url, query, body, answer.text)
                sent.append(operation["operationId"])
                if operation["operationId"] == "create_map":
                    created.append(answer.json()["id"])
        # a fresh server: the examples made everything they used, and the deletes left nothing
        assert http.get("/v1/maps").json()["maps"] == [] and http.get("/v1/indexes").json()["indexes"] == []
    assert sorted(created) == sorted(EXAMPLE_MAP_IDS.values())   # the path parameters' ids are the server's
    operations = {operation["operationId"] for _, _, operation in _operations(document)}
    assert set(sent) == operations
    assert sent.index("create_index") < sent.index("add_items") < sent.index("query_index") \
        < sent.index("delete_items") < sent.index("delete_index") < sent.index("delete_map")


def test_a_form_of_nulls_is_told_that_one_input_is_required(server):
    """What an older /docs sent ("Try it out" filling every field with null): a 422 saying an input is missing,
    not that two were sent."""
    with server.client() as http:
        gcws = http.post("/v1/maps", json=EXAMPLE_SPECS["gcws"]).json()["id"]
        refused = http.post(f"/v1/maps/{gcws}/transform", json={"vectors": None, "sparse_vectors": None})
        y_nulls = http.post(f"/v1/maps/{gcws}/kernel", json={"x": [[1, 2, 3, 4]], "y": None, "sparse_y": None})
        assert http.delete(f"/v1/maps/{gcws}").status_code == 204
    assert refused.status_code == 422 and refused.json()["field"] == "vectors"
    assert "one input is required" in refused.json()["detail"] and "not both" not in refused.json()["detail"]
    assert y_nulls.status_code == 422 and y_nulls.json()["field"] == "y" and "leave out" in y_nulls.json()["detail"]
