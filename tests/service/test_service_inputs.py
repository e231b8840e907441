"""Hostile input through HTTP (issue 27): lone surrogates, names and ids with line ends and control
characters, header and query bytes that are not UTF-8, compressed bodies, malformed .npy headers,
unknown routes and methods: each is a 4xx in the one error body naming what is wrong, never a 5xx or
a dropped connection; and the OpenAPI document says what the server does (security, maxima, nulls,
examples that work).

One server of its own (embedded Redis), started once for the module.
"""

from __future__ import annotations

import io
import socket
import uuid

import httpx
import numpy as np
import pytest
from jsonschema import Draft202012Validator

from featurehash.protocol.schemas import EXAMPLE_GCWS, EXAMPLE_HASHING, EXAMPLE_RFF, EXAMPLE_TEXT_GCWS
from featurehash.service.config import Settings
from featurehash.service.app import create_app
from featurehash.maps import InputError
from featurehash.npy.stream import open_rows
from service_support import JSON, NPY, ServiceProcess, load_npy, npy_bytes, race_map_delete_with_index_create

GCWS = {"method": "gcws", "input_dim": 4, "n_components": 16, "seed": 27}
ROW = [0.25, 0.5, 0.75, 1.0]
INDEX = "inputs"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = ServiceProcess("inputs", tmp_path_factory.mktemp("serve-inputs"), max_batch_rows=64)
    process.start().wait_ready()
    yield process
    assert not process.terminate()


@pytest.fixture(scope="module")
def http(server):
    with server.client(timeout=30.0) as client:
        yield client


@pytest.fixture(scope="module")
def gcws(http) -> str:
    map_id = http.post("/v1/maps", json=GCWS).json()["id"]
    created = http.post("/v1/indexes", json={"map_id": map_id, "name": INDEX, "bands": 4, "rows": 2})
    assert created.status_code == 201, created.text
    return map_id


def _refused(response: httpx.Response, status: int, field: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == JSON
    assert response.json() == {"detail": response.json()["detail"], "field": field}
    assert response.json()["detail"].startswith(f"{field}: ")


def _npy_with_header(shape: str, data: bytes, version: int = 1, fortran: bool = False) -> bytes:
    header = f"{{'descr': '<f8', 'fortran_order': {fortran}, 'shape': {shape}, }}".encode()
    header += b" " * (118 - len(header)) + b"\n"
    length = len(header).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + length + header + data


def _object_npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([ROW], dtype=object), allow_pickle=True)
    return buffer.getvalue()


EIGHT = np.ones(8).tobytes()
NPY_BODIES = {
    "negative_rows": _npy_with_header("(-1, 4)", EIGHT),
    "negative_width": _npy_with_header("(1, -4)", EIGHT),
    "two_negative": _npy_with_header("(-2, -2)", EIGHT),
    "overflowing_int64": _npy_with_header("(3037000500, 3037000500)", EIGHT),
    "trailing_bytes": _npy_with_header("(2, 4)", EIGHT + b"extra!!!"),
    "short_data": _npy_with_header("(3, 4)", EIGHT),
    "version_3_trailing_bytes": _npy_with_header("(2, 4)", EIGHT + b"x", version=3),
    "fortran_negative": _npy_with_header("(-1, 4)", EIGHT, fortran=True),
    "object_dtype": _object_npy(),
}


@pytest.mark.parametrize("name", NPY_BODIES)
@pytest.mark.parametrize("route", ["hash", "items"])
def test_malformed_npy_headers_are_422s_naming_the_body(http, gcws, name, route):
    path = f"/v1/maps/{gcws}/hash" if route == "hash" else f"/v1/indexes/{INDEX}/items"
    params = {"ids": ["a", "b"]} if route == "items" else None
    _refused(http.post(path, params=params, content=NPY_BODIES[name], headers={"Content-Type": NPY}), 422, "body")


@pytest.mark.parametrize("name", NPY_BODIES)
def test_the_cli_file_reader_refuses_the_same_npy_files(tmp_path, name):
    """`featurehash transform FILE` maps its input (npy_stream.open_rows): bytes left over after the data,
    which numpy.load maps without a word, and shapes whose size overflows int64 are refused too."""
    path = tmp_path / f"{name}.npy"
    path.write_bytes(NPY_BODIES[name])
    with pytest.raises(InputError) as refused:
        open_rows(str(path))
    assert refused.value.field == str(path)


def test_fortran_ordered_npy_bodies_are_read_as_numpy_wrote_them(http, gcws):
    """numpy.save writes fortran_order True for any F-contiguous array (a transposed matrix, many
    DataFrame.to_numpy() results): read correctly, not refused."""
    X = np.random.default_rng(27).random((5, 4))
    answers = [http.post(f"/v1/maps/{gcws}/hash", content=npy_bytes(array), headers={"Content-Type": NPY,
                                                                                      "Accept": NPY})
               for array in (X, np.asfortranarray(X))]
    assert [answer.status_code for answer in answers] == [200, 200]
    np.testing.assert_array_equal(load_npy(answers[0].content), load_npy(answers[1].content))


def _json(text: str) -> dict:
    return {"content": text.encode(), "headers": {"Content-Type": JSON}}


# (method, path, request keywords, status, field); paths may name {gcws} and {index}.
CASES = {
    "surrogate_map_id": ("POST", "/v1/indexes", _json('{"map_id": "\\ud800"}'), 422, "map_id"),
    "surrogate_item_id": ("POST", "/v1/indexes/{index}/items", _json('{"ids": ["\\udfff"], "vectors": [[1, 2, 3, 4]]}'),
                          422, "ids[0]"),
    "surrogate_deleted_id": ("POST", "/v1/indexes/{index}/items/delete", _json('{"ids": ["a", "\\ud800x"]}'),
                             422, "ids[1]"),
    "surrogate_params_key": ("POST", "/v1/maps", _json('{"method": "rff", "input_dim": 4, "n_components": 8, '
                                                       '"params": {"\\ud800": 1}}'), 422, "params"),
    "surrogate_method_with_nan": ("POST", "/v1/maps", _json('{"method": "\\ud800", "input_dim": NaN}'), 422, "method"),
    "name_with_trailing_newline": ("POST", "/v1/indexes", {"json": {"map_id": "{gcws}", "name": "x\n"}}, 422, "name"),
    "name_with_trailing_newline_only_in_path": ("GET", "/v1/indexes/{index}%0A", {}, 404, "index_id"),
    "item_id_nel_c1": ("POST", "/v1/indexes/{index}/items", {"json": {"ids": ["a\u0085b"], "vectors": [ROW]}},
                       422, "ids[0]"),
    "item_id_c1_end": ("POST", "/v1/indexes/{index}/items", {"json": {"ids": ["ok", "\u009f"],
                                                                      "vectors": [ROW, ROW]}}, 422, "ids[1]"),
    "item_id_line_separator": ("POST", "/v1/indexes/{index}/items", {"json": {"ids": ["a\u2028"], "vectors": [ROW]}},
                               422, "ids[0]"),
    "item_id_c1_in_path": ("DELETE", "/v1/indexes/{index}/items/a%C2%85", {}, 422, "item_id"),
    "item_id_invalid_utf8_in_path": ("DELETE", "/v1/indexes/{index}/items/%FF", {}, 422, "item_id"),
    "item_ids_header_not_utf8": ("POST", "/v1/indexes/{index}/items",
                                 {"content": npy_bytes(np.ones((1, 4))),
                                  "headers": {"Content-Type": NPY, "X-Item-Ids": b'["\xff"]'}}, 422, "x-item-ids"),
    "ids_query_not_utf8": ("POST", "/v1/indexes/{index}/items?ids=%ED%A0%80",
                           {"content": npy_bytes(np.ones((1, 4))), "headers": {"Content-Type": NPY}}, 422, "ids"),
    "cursor_not_utf8": ("GET", "/v1/maps?after=%FF%FE", {}, 422, "after"),
    "query_name_not_utf8": ("GET", "/v1/indexes?%FF=1", {}, 422, "query"),
    "gzip_body": ("POST", "/v1/maps", {"content": b"\x1f\x8b\x08\x00", "headers": {"Content-Type": JSON,
                                                                                  "Content-Encoding": "gzip"}},
                  415, "content-encoding"),
    "deflate_npy_body": ("POST", "/v1/maps/{gcws}/hash", {"content": b"x\x9c", "headers": {
        "Content-Type": NPY, "Content-Encoding": "deflate"}}, 415, "content-encoding"),
    "unknown_route": ("GET", "/v2/maps", {}, 404, "path"),
    "unknown_asset": ("GET", "/docs-assets/none.js", {}, 404, "path"),
    "deeply_nested_json": ("POST", "/v1/maps", {"content": b"[" * 100_000 + b"]" * 100_000,
                                                "headers": {"Content-Type": JSON}}, 422, "body"),
    "integer_past_python_limit": ("POST", "/v1/maps", _json('{"method": "rff", "input_dim": ' + "9" * 5000 + "}"),
                                  422, "body"),
    "huge_integer_bands": ("POST", "/v1/maps/{gcws}/hash", _json('{"vectors": [[1, 2, 3, 4]], "bands": '
                                                                 + "9" * 400 + ', "x": NaN}'), 422, "bands"),
}


@pytest.mark.parametrize("name", CASES)
def test_bad_input_is_a_4xx_naming_the_field(http, gcws, name):
    method, path, request, status, field = CASES[name]
    path = path.replace("{gcws}", gcws).replace("{index}", INDEX)
    if "json" in request:
        request = {"json": {key: (value.replace("{gcws}", gcws) if isinstance(value, str) else value)
                            for key, value in request["json"].items()}}
    _refused(http.request(method, path, **request), status, field)


def test_the_index_named_with_a_newline_was_never_created(http, gcws):
    assert http.post("/v1/indexes", json={"map_id": gcws, "name": "nl\n"}).status_code == 422
    names = [index["name"] for index in http.get("/v1/indexes", params={"limit": 1000}).json()["indexes"]]
    assert not [name for name in names if name.startswith("nl")]


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("PUT", "/v1/maps", "GET, POST"),
    ("POST", "/v1/indexes/{index}", "DELETE, GET"),   # two routes share the path
    ("GET", "/v1/maps/{gcws}/transform", "POST"),
    ("POST", "/docs-assets/swagger-ui.css", "GET, HEAD"),   # the mounted assets' own list
])
def test_a_wrong_method_is_a_405_naming_it_with_every_allowed_method(http, gcws, method, path, allowed):
    answer = http.request(method, path.replace("{gcws}", gcws).replace("{index}", INDEX))
    _refused(answer, 405, "method")
    assert answer.headers["Allow"] == allowed


def test_item_ids_in_the_header_are_utf8_and_round_trip(http, gcws):
    """Raw UTF-8 in X-Item-Ids was read as Latin-1 ("é" stored as "Ã©"); JSON escapes work too."""
    X = np.diag([1.0, 2.0, 3.0, 4.0])[:2]
    added = http.post(f"/v1/indexes/{INDEX}/items", content=npy_bytes(X),
                      headers={"Content-Type": NPY, "X-Item-Ids": '["é-raw", "\\u00e9-escaped"]'.encode()})
    assert added.status_code == 200, added.text
    found = http.post(f"/v1/indexes/{INDEX}/query", json={"vectors": X.tolist(), "top_k": 1}).json()
    assert [row[0]["id"] for row in found["results"]] == ["é-raw", "é-escaped"]
    removed = http.post(f"/v1/indexes/{INDEX}/items/delete", json={"ids": ["é-raw", "é-escaped"]}).json()
    assert removed == {"removed": 2, "missing": []}


def _raw_exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


RAW_REQUESTS = {
    "non_ascii_path_byte": b"GET /v1/maps/\xff HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "nul_in_a_header": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Foo: a\x00b\r\nConnection: close\r\n\r\n",
    "bad_content_length": b"POST /v1/maps HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\nConnection: close\r\n\r\n",
    "newline_name_json": (b"POST /v1/indexes HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 40\r\nConnection: close\r\n\r\n" + b'{"map_id": "{gcws}", "name": "x\\n"}'),
}


@pytest.mark.parametrize("name", RAW_REQUESTS)
def test_bytes_httpx_would_not_send_get_an_answer_not_a_dropped_connection(server, gcws, name):
    request = RAW_REQUESTS[name].replace(b"{gcws}", gcws.encode())
    if name == "newline_name_json":  # the length above was for the placeholder
        head, body = request.split(b"\r\n\r\n", 1)
        request = head.replace(b"Content-Length: 40", b"Content-Length: %d" % len(body)) + b"\r\n\r\n" + body
    status_line = _raw_exchange(server.port, request).split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 4"), status_line


def test_a_map_delete_racing_an_index_create_never_leaves_an_index_over_a_deleted_map(http, server):
    """Before: the DELETE answered 204 and the POST 201 (an index over a map deleted without ?force)
    in 128 of 150 races. Now each checks again after writing, so one always sees the other."""
    outcomes = []
    with server.client() as other:
        for attempt in range(12):
            map_id = http.post("/v1/maps", json={**GCWS, "seed": 27_000 + attempt}).json()["id"]
            name = f"race-{uuid.uuid4().hex[:8]}"
            answers = race_map_delete_with_index_create(http, other, map_id, name)
            outcomes.append(answers)
            map_there = http.get(f"/v1/maps/{map_id}").status_code == 200
            index_there = http.get(f"/v1/indexes/{name}").status_code == 200
            assert answers != (204, 201), outcomes
            assert not index_there or map_there, outcomes   # no index outlives its map without ?force
            assert answers[0] in (204, 409) and answers[1] in (201, 404), outcomes
            http.delete(f"/v1/indexes/{name}")
            http.delete(f"/v1/maps/{map_id}", params={"force": "true"})


# -- the OpenAPI document --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def document(http):
    return http.get("/openapi.json").json()


def _validator(document: dict, name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": document["components"]})


def test_without_an_api_key_no_operation_declares_bearer_security(document):
    assert "securitySchemes" not in document["components"]
    assert not [path for path, operations in document["paths"].items() for operation in operations.values()
                if "security" in operation]


def test_with_an_api_key_the_api_routes_declare_bearer_security():
    keyed = create_app(Settings(api_key="secret", redis_url="redis://127.0.0.1:1/0")).openapi()
    scheme = keyed["components"]["securitySchemes"]["HTTPBearer"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer") and "scope" in scheme["description"]
    for path, operations in keyed["paths"].items():
        for operation in operations.values():
            scope = operation.get("x-required-scope")
            assert (scope in ("read", "write", "admin")) == path.startswith("/v1/"), path
            if scope is not None:  # the scope is the role of the Bearer requirement (OpenAPI 3.1)
                assert operation["security"] == [{"HTTPBearer": [scope]}], path
                assert f"Requires the `{scope}` scope." in operation["description"]


def test_limits_the_server_enforces_are_in_the_schemas(document):
    schemas = document["components"]["schemas"]
    create = schemas["CreateIndexRequest"]["properties"]
    assert create["bands"]["anyOf"][0]["maximum"] == 2**16 - 1
    assert create["rows"]["anyOf"][0]["maximum"] == 2**22
    assert create["name"]["anyOf"][0]["pattern"] == "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
    assert schemas["IndexQueryRequest"]["properties"]["top_k"]["maximum"] == 1000
    hash_bands = next(p for p in document["paths"]["/v1/maps/{map_id}/hash"]["post"]["parameters"]
                      if p["name"] == "bands")
    assert hash_bands["schema"]["minimum"] == 1 and "anyOf" not in hash_bands["schema"]
    ids = _validator(document, "AddItemsRequest")
    for refused in ("a/b", "a\\b", "a\u0085", "\u2028", "a\x00", ".", "..", ""):
        assert not ids.is_valid({"ids": [refused], "vectors": [ROW]}), refused
    assert ids.is_valid({"ids": ["é ?#%"], "vectors": [ROW]})


@pytest.mark.parametrize(("model", "fields"), [("VectorsRequest", ("vectors", "sparse_vectors")),
                                               ("KernelRequest", ("x", "sparse_x", "y", "sparse_y")),
                                               ("IndexQueryRequest", ("vectors", "top_k"))])
def test_fields_the_server_refuses_as_null_are_not_nullable(document, http, gcws, model, fields):
    validator = _validator(document, model)
    for field in fields:
        assert not validator.is_valid({field: None}), (model, field)
    # and the server does refuse them
    assert http.post(f"/v1/maps/{gcws}/transform", json={"vectors": None}).status_code == 422
    assert http.post(f"/v1/indexes/{INDEX}/query", json={"vectors": [ROW], "top_k": None}).status_code == 422


def test_the_documented_examples_are_valid_and_work_in_order(document, http):
    """What /docs puts in "Try it out": each example body validates against its schema, and in this order
    (maps, features, index, items, query) each gets a 2xx from a fresh server."""
    bodies = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {}).get(JSON)
            if content is None:
                continue
            assert content.get("examples"), (method, path)
            name = content["schema"]["$ref"].rsplit("/", 1)[1]
            for example in content["examples"].values():
                _validator(document, name).validate(example["value"])
            bodies[path] = [example["value"] for example in content["examples"].values()]
    assert bodies["/v1/maps"] == [EXAMPLE_RFF, EXAMPLE_GCWS, EXAMPLE_HASHING, EXAMPLE_TEXT_GCWS]
    ids = []
    for body in bodies["/v1/maps"]:
        created = http.post("/v1/maps", json=body)
        assert created.status_code in (200, 201), created.text
        ids.append(created.json()["id"])
    rff, gcws, hashing, text_gcws = ids
    http.delete("/v1/indexes/docs")
    http.delete("/v1/indexes/texts")
    steps = [(f"/v1/maps/{rff}/transform", "/v1/maps/{map_id}/transform"),
             (f"/v1/maps/{gcws}/transform", "/v1/maps/{map_id}/transform"),
             (f"/v1/maps/{gcws}/hash", "/v1/maps/{map_id}/hash"),
             (f"/v1/maps/{rff}/kernel", "/v1/maps/{map_id}/kernel"),
             ("/v1/indexes", "/v1/indexes"),
             ("/v1/indexes/docs/items", "/v1/indexes/{index_id}/items"),
             ("/v1/indexes/docs/query", "/v1/indexes/{index_id}/query"),
             ("/v1/indexes/docs/duplicates", "/v1/indexes/{index_id}/duplicates"),
             ("/v1/indexes/docs/items/delete", "/v1/indexes/{index_id}/items/delete")]
    for url, template in steps:
        for body in bodies[template][:2 if template.endswith("/query") else 1]:  # the query by vectors, by ids
            answer = http.post(url, json=body)
            assert 200 <= answer.status_code < 300, (url, answer.text)
    assert http.get("/v1/indexes/docs").json()["map_id"] == gcws
    assert http.delete("/v1/indexes/docs").status_code == 204
    # The text examples (the second of each): the hashing map, the GCWS map over text and its index "texts".
    text_steps = [(f"/v1/maps/{hashing}/transform", "/v1/maps/{map_id}/transform"),
                  (f"/v1/maps/{text_gcws}/hash", "/v1/maps/{map_id}/hash"),
                  (f"/v1/maps/{hashing}/kernel", "/v1/maps/{map_id}/kernel"),
                  ("/v1/indexes", "/v1/indexes"),
                  ("/v1/indexes/texts/items", "/v1/indexes/{index_id}/items"),
                  ("/v1/indexes/texts/query", "/v1/indexes/{index_id}/query")]
    for url, template in text_steps:
        answer = http.post(url, json=bodies[template][1])
        assert 200 <= answer.status_code < 300, (url, answer.text)
    assert http.get("/v1/indexes/texts").json()["map_id"] == text_gcws
    assert http.delete("/v1/indexes/texts").status_code == 204
