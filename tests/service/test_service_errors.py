"""Bad input through HTTP: always a 4xx naming the field, never a 500, and the store untouched.

Each case is one request against the main server (embedded Redis, and external Redis
when REDIS_URL is set). The maps it refers to come from `main_maps`: "rff" (input_dim
16, cos_sin) and "gcws" (input_dim 16, k = 16 samples).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

from service_support import JSON, MAIN_MAX_BATCH_ROWS, MAIN_MAX_BODY_BYTES, NPY, list_all, npy_bytes

D = 16  # input_dim of the "rff" and "gcws" maps
ROW = [float(i + 1) for i in range(D)]


@dataclass
class Case:
    path: str                       # may name {rff} or {gcws}
    status: int
    field: str
    json: Any = None                # sent with Python's json (repr floats)
    raw: bytes | Callable[[], Any] | None = None
    content_type: str | None = JSON
    method: str = "POST"
    params: dict = field(default_factory=dict)


def npy(array) -> bytes:
    return npy_bytes(np.asarray(array))


def npy_case(path: str, array, field_name: str = "vectors", status: int = 422) -> Case:
    return Case(path, status, field_name, raw=npy(array), content_type=NPY)


def literal(path: str, text: str, field_name: str, status: int = 422, content_type: str = JSON) -> Case:
    return Case(path, status, field_name, raw=text.encode(), content_type=content_type)


def _object_npy() -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.array([ROW], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def _chunked_oversize():
    chunk = b" " * 65536
    for _ in range(MAIN_MAX_BODY_BYTES // len(chunk) + 2):
        yield chunk


def _create(**spec) -> Case:
    field_name = spec.pop("_field")
    return Case("/v1/maps", 422, field_name, json=spec)


T, H, K = "/v1/maps/{rff}/transform", "/v1/maps/{gcws}/hash", "/v1/maps/{rff}/kernel"
GT, GK = "/v1/maps/{gcws}/transform", "/v1/maps/{gcws}/kernel"


CASES = {
    # -- vectors: shape, values ----------------------------------------------------------------------
    "wrong_dimension": Case(T, 422, "vectors", json={"vectors": [ROW[:-1]]}),
    "wrong_dimension_npy": npy_case(T, [ROW[:-1]]),
    "wrong_dimension_sparse_is_out_of_range": Case(T, 422, "sparse_vectors[0].indices",
                                                   json={"sparse_vectors": [{"indices": [D], "values": [1.0]}]}),
    "nan_literal": literal(T, '{"vectors": [[NaN' + ", 1.0" * (D - 1) + "]]}", "vectors"),
    "inf_literal": literal(T, '{"vectors": [[Infinity' + ", 1.0" * (D - 1) + "]]}", "vectors"),
    "minus_inf_literal_sparse": literal(T, '{"sparse_vectors": [{"indices": [0], "values": [-Infinity]}]}',
                                        "vectors"),
    "overflowing_float": literal(T, '{"vectors": [[1e400' + ", 1.0" * (D - 1) + "]]}", "vectors"),
    "nan_npy": npy_case(T, [[np.nan] + ROW[1:]]),
    "inf_npy_float32": npy_case(T, np.array([[np.inf] + ROW[1:]], dtype=np.float32)),
    "empty_batch": Case(T, 422, "vectors", json={"vectors": []}),
    "empty_batch_sparse": Case(T, 422, "vectors", json={"sparse_vectors": []}),
    "empty_batch_npy": npy_case(T, np.zeros((0, D))),
    "ragged_rows": Case(T, 422, "vectors", json={"vectors": [ROW, ROW[:-2]]}),
    "nested_rows": Case(T, 422, "vectors", json={"vectors": [[[1.0]] * D]}),
    "rows_not_lists": Case(T, 422, "vectors", json={"vectors": [{"a": 1}]}),
    "vectors_not_a_list": Case(T, 422, "vectors", json={"vectors": "1,2,3"}),
    "non_numeric_values": Case(T, 422, "vectors", json={"vectors": [["a"] + ROW[1:]]}),
    "null_value": Case(T, 422, "vectors", json={"vectors": [[None] + ROW[1:]]}),
    # Python's int too large for a float: OverflowError escapes _dense_rows -> 500
    "huge_integer": Case(T, 422, "vectors", raw=('{"vectors": [[' + "9" * 400 + ", 1.0" * (D - 1) + "]]}").encode()),
    "missing_vectors": Case(T, 422, "vectors", json={"rows": [ROW]}),
    "vectors_and_sparse_vectors": Case(T, 422, "vectors", json={"vectors": [ROW], "sparse_vectors": []}),
    "too_many_rows": npy_case(T, np.ones((MAIN_MAX_BATCH_ROWS + 1, D))),
    "string_npy": npy_case(T, np.array([["a"] * D])),
    "one_d_npy": npy_case(T, ROW),
    "complex_npy": npy_case(T, np.ones((1, D), dtype=np.complex128)),
    # -- sparse rows --------------------------------------------------------------------------------------
    "sparse_index_out_of_range": Case(T, 422, "sparse_vectors[1].indices", json={"sparse_vectors": [
        {"indices": [0], "values": [1.0]}, {"indices": [3, D + 5], "values": [1.0, 2.0]}]}),
    "sparse_negative_index": Case(T, 422, "sparse_vectors[0].indices",
                                  json={"sparse_vectors": [{"indices": [-1], "values": [1.0]}]}),
    "sparse_length_mismatch": Case(T, 422, "sparse_vectors[0]",
                                   json={"sparse_vectors": [{"indices": [0, 1], "values": [1.0]}]}),
    "sparse_non_numeric_values": Case(T, 422, "sparse_vectors[0].values",
                                      json={"sparse_vectors": [{"indices": [0], "values": ["x"]}]}),
    "sparse_row_not_an_object": Case(T, 422, "sparse_vectors[0]", json={"sparse_vectors": [[0, 1.0]]}),
    # nested lists: scipy raises ValueError("data, indices, and indptr should be 1-D") -> 500
    "sparse_nested_values": Case(T, 422, "sparse_vectors[0]",
                                 json={"sparse_vectors": [{"indices": [[0]], "values": [[1.0]]}]}),
    "sparse_fractional_index": Case(T, 422, "sparse_vectors[0].indices",
                                    json={"sparse_vectors": [{"indices": [1.5], "values": [1.0]}]}),
    # -- all-zero vectors ----------------------------------------------------------------------------------
    "zero_vector_gcws_transform": Case(GT, 422, "vectors", json={"vectors": [ROW, [0.0] * D]}),
    "zero_vector_gcws_hash": Case(H, 422, "vectors", json={"vectors": [[0.0] * D]}),
    "zero_vector_gcws_hash_sparse": Case(H, 422, "vectors",
                                         json={"sparse_vectors": [{"indices": [2], "values": [0.0]}]}),
    "zero_vector_gcws_hash_npy": npy_case(H, np.zeros((2, D))),
    "zero_vector_nrff": Case("/v1/maps/{nrff}/transform", 422, "vectors", json={"vectors": [[0.0] * D]}),
    "zero_vector_gcws_kernel_x": Case(GK, 422, "x", json={"x": [[0.0] * D]}),
    # -- hash: bands, method --------------------------------------------------------------------------------
    "bands_not_dividing_k": Case(H, 422, "bands", json={"vectors": [ROW], "bands": 3}),
    "bands_zero": Case(H, 422, "bands", json={"vectors": [ROW], "bands": 0}),
    "bands_over_k": Case(H, 422, "bands", json={"vectors": [ROW], "bands": 32}),
    "bands_string": Case(H, 422, "bands", json={"vectors": [ROW], "bands": "4"}),
    "bands_bool": Case(H, 422, "bands", json={"vectors": [ROW], "bands": True}),
    "hash_on_rff_map": Case("/v1/maps/{rff}/hash", 422, "method", json={"vectors": [ROW]}),
    # -- kernel ---------------------------------------------------------------------------------------------
    "kernel_missing_x": Case(K, 422, "x", json={"y": [ROW]}),
    "kernel_wrong_dimension_y": Case(K, 422, "y", json={"x": [ROW], "y": [ROW[:3]]}),
    "kernel_nan_x": literal(K, '{"x": [[NaN' + ", 1.0" * (D - 1) + "]]}", "x"),
    # -- body, content type, size ------------------------------------------------------------------------------
    "malformed_npy": Case(T, 422, "body", raw=npy(np.ones((2, D)))[:60] + b"garbage", content_type=NPY),
    "npy_without_header": Case(T, 422, "body", raw=b"1,2,3", content_type=NPY),
    "npy_needing_pickle": Case(T, 422, "body", raw=_object_npy(), content_type=NPY),
    "invalid_json": literal(T, '{"vectors": [[1, 2', "body"),
    "json_not_an_object": Case(T, 422, "body", json=[ROW]),
    "text_plain_transform": literal(T, json.dumps({"vectors": [ROW]}), "content-type", 415, "text/plain"),
    "text_plain_hash": literal(H, json.dumps({"vectors": [ROW]}), "content-type", 415, "text/plain"),
    "text_plain_kernel": literal(K, json.dumps({"x": [ROW]}), "content-type", 415, "text/plain"),
    "text_plain_create": literal("/v1/maps", json.dumps({"method": "rff", "input_dim": 4, "n_components": 8}),
                                 "content-type", 415, "text/plain"),
    "oversize_body": Case(T, 413, "body", raw=b" " * (MAIN_MAX_BODY_BYTES + 1)),
    "oversize_body_chunked": Case(T, 413, "body", raw=_chunked_oversize),
    "oversize_body_create": Case("/v1/maps", 413, "body", raw=b" " * (MAIN_MAX_BODY_BYTES + 1)),
    "dtype_not_a_float_type": Case(T, 422, "dtype", json={"vectors": [ROW]}, params={"dtype": "int8"}),
    # -- unknown maps, list parameters ------------------------------------------------------------------------
    "unknown_map_transform": Case("/v1/maps/rff-v1-000000000000000000000000/transform", 404, "map_id",
                                  json={"vectors": [ROW]}),
    "unknown_map_hash": Case("/v1/maps/nope/hash", 404, "map_id", json={"vectors": [ROW]}),
    "unknown_map_kernel": Case("/v1/maps/nope/kernel", 404, "map_id", json={"x": [ROW]}),
    "unknown_map_get": Case("/v1/maps/nope", 404, "map_id", method="GET", content_type=None),
    "unknown_map_delete": Case("/v1/maps/nope", 404, "map_id", method="DELETE", content_type=None),
    "list_limit_zero": Case("/v1/maps", 422, "limit", method="GET", content_type=None, params={"limit": 0}),
    "list_limit_too_big": Case("/v1/maps", 422, "limit", method="GET", content_type=None, params={"limit": 10**6}),
    "list_limit_not_a_number": Case("/v1/maps", 422, "limit", method="GET", content_type=None,
                                    params={"limit": "ten"}),
    # -- create: bad specs ---------------------------------------------------------------------------------------
    "gamma_negative": _create(method="rff", input_dim=4, n_components=8, params={"gamma": -1}, _field="params.gamma"),
    "gamma_nan_literal": literal("/v1/maps", '{"method": "rff", "input_dim": 4, "n_components": 8, '
                                 '"params": {"gamma": NaN}}', "params.gamma"),
    "gamma_string": _create(method="rff", input_dim=4, n_components=8, params={"gamma": "big"}, _field="params.gamma"),
    "unknown_method": _create(method="fourier", input_dim=4, n_components=8, _field="method"),
    "odd_n_components_cos_sin": _create(method="rff", input_dim=4, n_components=7, _field="n_components"),
    "unknown_param_key": _create(method="rff", input_dim=4, n_components=8, params={"gama": 1.0},
                                 _field="params.gama"),
    "unknown_kernel": _create(method="rff", input_dim=4, n_components=8, params={"kernel": "cauchy"},
                              _field="params.kernel"),
    "unknown_top_level_key": _create(method="rff", input_dim=4, n_components=8, colour="blue", _field="colour"),
    "missing_n_components": _create(method="rff", input_dim=4, _field="n_components"),
    "zero_input_dim": _create(method="rff", input_dim=0, n_components=8, _field="input_dim"),
    "fractional_input_dim": _create(method="rff", input_dim=4.5, n_components=8, _field="input_dim"),
    "negative_seed": _create(method="rff", input_dim=4, n_components=8, seed=-1, _field="seed"),
    "params_not_an_object": _create(method="rff", input_dim=4, n_components=8, params=[1], _field="params"),
    "gcws_bits_too_many": _create(method="gcws", input_dim=4, n_components=8, params={"bits": 30},
                                  _field="params.bits"),
    "gcws_power_zero": _create(method="gcws", input_dim=4, n_components=8, params={"power": 0},
                               _field="params.power"),
    "map_too_large": _create(method="rff", input_dim=2**20, n_components=2**20, _field="n_components"),
    "id_not_matching_content": _create(method="rff", input_dim=4, n_components=8, id="rff-v1-000000000000000000000000",
                                       _field="id"),
    "create_invalid_json": literal("/v1/maps", '{"method": ', "body"),
}


def _params():
    for name, case in CASES.items():
        yield pytest.param(case, id=name) if isinstance(case, Case) else case


@pytest.mark.parametrize("case", list(_params()))
def test_bad_input_is_a_4xx_naming_the_field_and_changes_nothing(main_server, main_maps, case: Case):
    ids = {name: spec["id"] for name, spec in main_maps.items()}
    path = case.path.format(**ids)
    headers = {"Content-Type": case.content_type} if case.content_type else {}
    if case.json is not None:
        content = json.dumps(case.json).encode()
    else:
        content = case.raw() if callable(case.raw) else case.raw
    with main_server.client() as http:
        before = list_all(http)
        response = http.request(case.method, path, content=content, headers=headers, params=case.params)
        assert response.status_code == case.status, response.text[:500]
        assert 400 <= response.status_code < 500
        assert response.headers["content-type"].startswith(JSON)
        body = response.json()
        assert body["field"] == case.field, body
        assert body["detail"].startswith(f"{case.field}: "), body
        with main_server.client() as fresh:  # the server closes a connection after some errors
            assert list_all(fresh) == before
            assert fresh.get("/healthz").status_code == 200
