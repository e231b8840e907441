"""Each operation once, as a generator of requests (`Operation`) that the sync and the async client
drive: it checks its inputs by the service's rules first (`checks`), then yields its calls and reads
their answers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

import scipy.sparse as sp

from ..maps import MapSpec, OneHotFeatures
from ..maps.lsh import band_key_dtype
from ..protocol.text_inputs import TEXT_KINDS
from ..store.lsh_layout import check_positive_int
from . import checks
from .results import BandedCodes, KernelAnswer
from .wire import (
    ITEM_IDS_HEADER_BYTES,
    NPY,
    Operation,
    _as_npy,
    _Call,
    _is_npy,
    _items_call,
    _json_call,
    _load_npy,
    _page,
    _rows_field,
    _segment,
    _vectors_call,
)


# What create_map takes: the spec as featurehash.create_map does (a dict, a resolved spec posted back, or a
# featurehash.maps.MapSpec), or its method's name with the other fields as keywords.
SpecArgument = str | Mapping[str, Any] | MapSpec | None
KEYWORD_ORDER = ("method", "input_dim", "n_components", "seed", "params", "input")


def map_request(spec: SpecArgument, **keywords: Any) -> dict[str, Any]:
    """The body of POST /v1/maps; TypeError for a spec given both ways (its fields are checked by the service's
    model afterwards, as for any body)."""
    if isinstance(spec, MapSpec):
        spec = spec.to_dict()
    given = [key for key in KEYWORD_ORDER if keywords.get(key) is not None]
    if isinstance(spec, Mapping):
        if given:
            raise TypeError(f"create_map: give {given[0]!r} inside the spec dict, or the method name and keywords; "
                            "not both")
        return dict(spec)
    if spec is not None and keywords.get("method") is not None:
        raise TypeError("create_map: the method given twice (as the spec and as method=)")
    body = {key: keywords[key] for key in given}
    return body if spec is None else {"method": spec, **body}


def _csr(body: dict[str, Any], dtype) -> sp.csr_matrix:
    """Sparse features answered as {"dim", "indices": [[...]], "values": [[...]]}."""
    lengths = [len(row) for row in body["indices"]]
    indptr = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    indices = np.fromiter((i for row in body["indices"] for i in row), np.int64, count=int(indptr[-1]))
    values = np.fromiter((v for row in body["values"] for v in row), np.float64, count=int(indptr[-1]))
    return sp.csr_matrix((values.astype(dtype), indices, indptr), shape=(len(lengths), body["dim"]))


def _band_key_array(keys: list[list[str]], bands: int) -> np.ndarray:
    """The answer's band keys as the library's band_keys gives them: an (n, bands) str array."""
    return np.array(keys, dtype=band_key_dtype(bands)).reshape(len(keys), bands)


class _Operations:
    """Each operation: checks its inputs as the service would (featurehash.client.checks: a refusal raises
    FeatureHashError before any request), yields the requests it needs, receives their (2xx) answers and
    returns the result. `known` holds the maps and indexes this client has seen, whose inputs it checks."""

    def __init__(self) -> None:
        self.known = checks.KnownMaps()

    def create_map(self, spec: SpecArgument = None, input_dim: int | None = None, n_components: int | None = None,
                   *, method: str | None = None, seed: int | None = None, params: dict[str, Any] | None = None,
                   input: dict[str, Any] | None = None) -> Operation:
        body = map_request(spec, method=method, input_dim=input_dim, n_components=n_components, seed=seed,
                           params=params, input=input)
        call = _json_call("POST", "/v1/maps", body)
        checks.create_map_body(call.content)
        return self.known.learn_map((yield call).json())

    def get_map(self, map_id: str) -> Operation:
        return self.known.learn_map((yield _Call("GET", f"/v1/maps/{_segment(map_id)}")).json())

    def list_maps(self, *, after: str | None = None, limit: int = 100) -> Operation:
        page = (yield _Call("GET", "/v1/maps", params=_page(limit, after))).json()
        for spec in page["maps"]:
            self.known.learn_map(spec)
        return page

    def delete_map(self, map_id: str, *, force: bool = False) -> Operation:
        yield _Call("DELETE", f"/v1/maps/{_segment(map_id)}", params={"force": "true"} if force else None)

    def transform(self, map_id: str, X=None, *, binary: bool = True, dtype: str = "float32",
                  **text: Any) -> Operation:
        checks.query_param(dtype, "dtype", checks.DTYPE)
        feature_map = self.known.for_map(map_id)
        path, params = f"/v1/maps/{_segment(map_id)}/transform", {"dtype": dtype}
        rows = checks.text_rows("vectors", X, text, feature_map)
        if rows is None:
            X = checks.vectors(X, "vectors", feature_map, not _as_npy(X, binary))
        checks.features_of(feature_map)
        response = yield (_vectors_call(path, X, "vectors", binary, params=params,
                                        headers={"Accept": NPY} if binary else None) if rows is None
                          else _json_call("POST", path, rows, params=params))
        if _is_npy(response):
            array = _load_npy(response)
            if "X-Feature-Dim" in response.headers:
                return OneHotFeatures(array, float(response.headers["X-Feature-Scale"]),
                                      int(response.headers["X-Feature-Dim"]))
            return array
        body = orjson.loads(response.content)
        if "values" in body:   # a hashing map's sparse features
            return _csr(body, np.float64 if dtype == "float64" else np.float32)
        if "indices" in body:
            return OneHotFeatures(np.asarray(body["indices"], dtype=np.int64), body["scale"], body["dim"])
        return np.asarray(body["features"], dtype=np.float64 if dtype == "float64" else np.float32)

    def hash(self, map_id: str, X=None, *, bands: int | None = None, binary: bool = True, **text: Any) -> Operation:
        binary = binary and all(text.get(kind) is None for kind in TEXT_KINDS)   # text travels as JSON
        checks.bands_option(bands, _as_npy(X, binary))
        feature_map = self.known.for_map(map_id)
        rows = checks.text_rows("vectors", X, text, feature_map)
        if rows is None:
            X = checks.vectors(X, "vectors", feature_map, not _as_npy(X, binary))
        checks.codes_for(feature_map, X if rows is None else next(iter(rows.values())), bands)
        params = {"bands": bands} if bands is not None else None
        path = f"/v1/maps/{_segment(map_id)}/hash"
        response = yield (_vectors_call(path, X, "vectors", binary, options=params,
                                        headers={"Accept": NPY} if binary else None) if rows is None
                          else _json_call("POST", path, {**rows, **(params or {})}))
        if _is_npy(response):
            return _load_npy(response)
        body = orjson.loads(response.content)
        codes = np.asarray(body["codes"], dtype=np.int64)
        return BandedCodes(codes, _band_key_array(body["band_keys"], bands)) if bands is not None else codes

    def kernel(self, map_id: str, X=None, Y=None, *, binary: bool = True, **text: Any) -> Operation:
        path, feature_map = f"/v1/maps/{_segment(map_id)}/kernel", self.known.for_map(map_id)
        x_text = checks.text_rows("x", X, text, feature_map)
        y_text = checks.text_rows("y", Y, {kind: text.get(f"y_{kind}") for kind in TEXT_KINDS}, feature_map)
        if x_text is not None or y_text is not None:
            x_rows = x_text or _rows_field(checks.vectors(X, "x", feature_map, True), "x")
            y_rows = y_text or ({} if Y is None else _rows_field(checks.vectors(Y, "y", feature_map, True), "y"))
            answer = (yield _json_call("POST", path, {**x_rows, **y_rows})).json()
            return KernelAnswer(np.asarray(answer["estimate"]), np.asarray(answer["exact"]))
        as_json = Y is not None or not _as_npy(X, binary)
        X = checks.vectors(X, "x", feature_map, as_json)
        if Y is None:
            call = _vectors_call(path, X, "x", binary)
        else:
            Y = checks.vectors(Y, "y", feature_map, True)
            call = _json_call("POST", path, {**_rows_field(X, "x"), **_rows_field(Y, "y")})
        answer = (yield call).json()
        return KernelAnswer(np.asarray(answer["estimate"]), np.asarray(answer["exact"]))

    def create_index(self, map_id: str, *, name: str | None = None, bands: int | None = None,
                     rows: int | None = None, threshold: float | None = None,
                     recall_at_threshold: float | None = None, vectors: str | None = None,
                     forest_rows: list[int] | None = None, expected_items: int | None = None) -> Operation:
        options = {"name": name, "bands": bands, "rows": rows, "threshold": threshold,
                   "recall_at_threshold": recall_at_threshold, "vectors": vectors, "forest_rows": forest_rows,
                   "expected_items": expected_items}
        body = {"map_id": map_id, **{key: value for key, value in options.items() if value is not None}}
        call = _json_call("POST", "/v1/indexes", body)
        checks.create_index_body(call.content, self.known.for_map(map_id) if isinstance(map_id, str) else None)
        return self.known.learn_index((yield call).json())

    def get_index(self, index_id: str) -> Operation:
        return self.known.learn_index((yield _Call("GET", f"/v1/indexes/{_segment(index_id)}")).json())

    def list_indexes(self, *, after: str | None = None, limit: int = 100) -> Operation:
        page = (yield _Call("GET", "/v1/indexes", params=_page(limit, after))).json()
        for info in page["indexes"]:
            self.known.learn_index(info)
        return page

    def list_tenants(self) -> Operation:
        return (yield _Call("GET", "/v1/tenants")).json()["tenants"]

    def delete_index(self, index_id: str) -> Operation:
        self.known.forget_index(index_id)
        yield _Call("DELETE", f"/v1/indexes/{_segment(index_id)}")

    def add_items(self, index_id: str, ids: list[str], X=None, *, binary: bool = True, batch_rows: int = 1000,
                  **text: Any) -> Operation:
        path = f"/v1/indexes/{_segment(index_id)}/items"
        rows = checks.text_rows("vectors", X, text, self.known.for_index(index_id))
        if rows is not None:
            return (yield from self._add_text_items(path, ids, rows, batch_rows))
        binary = _as_npy(X, binary)
        X = checks.vectors(X, "vectors", self.known.for_index(index_id), not binary)
        path = f"/v1/indexes/{_segment(index_id)}/items"
        if X.ndim != 2:  # unchecked (the map is unknown here): sent whole, for the service to name its dimension
            return (yield _items_call(path, list(ids), X, binary)).json()
        ids = checks.item_ids(ids, X.shape[0])  # every row has its id, or nothing is sent
        check_positive_int(batch_rows, "batch_rows")  # a client-side count
        total = {"added": 0, "replaced": 0, "items": 0}
        start = 0
        while start < len(ids):
            stop = min(len(ids), start + batch_rows)
            while binary and stop - start > 1 and len(json.dumps(ids[start:stop])) > ITEM_IDS_HEADER_BYTES:
                stop = start + (stop - start) // 2
            answer = (yield _items_call(path, ids[start:stop], X[start:stop], binary)).json()
            total = {"added": total["added"] + answer["added"], "replaced": total["replaced"] + answer["replaced"],
                     "items": answer["items"]}
            start = stop
        return total

    def _add_text_items(self, path: str, ids: list[str], rows: dict[str, list], batch_rows: int) -> Operation:
        (field, text), = rows.items()
        ids = checks.item_ids(ids, len(text))
        check_positive_int(batch_rows, "batch_rows")
        total = {"added": 0, "replaced": 0, "items": 0}
        for start in range(0, len(ids), batch_rows):
            answer = (yield _json_call("POST", path, {"ids": ids[start:start + batch_rows],
                                                      field: text[start:start + batch_rows]})).json()
            total = {"added": total["added"] + answer["added"], "replaced": total["replaced"] + answer["replaced"],
                     "items": answer["items"]}
        return total

    def delete_item(self, index_id: str, item_id: str) -> Operation:
        checks.deletable_item_id(item_id)
        yield _Call("DELETE", f"/v1/indexes/{_segment(index_id)}/items/{_segment(item_id)}")

    def delete_items(self, index_id: str, ids: list[str]) -> Operation:
        call = _json_call("POST", f"/v1/indexes/{_segment(index_id)}/items/delete", {"ids": ids})
        checks.delete_items_body(call.content)
        return (yield call).json()

    def query_index(self, index_id: str, X, *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None, binary: bool = True, **text: Any) -> Operation:
        feature_map = self.known.for_index(index_id)
        in_query = all(text.get(kind) is None for kind in TEXT_KINDS) and _as_npy(X, binary)
        options = {"top_k": top_k, "min_similarity": min_similarity}
        if target_recall is not None:
            options["target_recall"] = target_recall
        fractions = checks.query_options(options, in_query)
        rows = checks.text_rows("vectors", X, text, feature_map)
        if rows is None:
            X = checks.vectors(X, "vectors", feature_map, not in_query)
        checks.fractions(fractions)
        path = f"/v1/indexes/{_segment(index_id)}/query"
        response = yield (_vectors_call(path, X, "vectors", binary, options=options) if rows is None
                          else _json_call("POST", path, {**rows, **options}))
        return orjson.loads(response.content)

    def query_items(self, index_id: str, ids: list[str], *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None) -> Operation:
        options = {"top_k": top_k, "min_similarity": min_similarity}
        if target_recall is not None:
            options["target_recall"] = target_recall
        fractions = checks.query_options(options, False)
        body = {"ids": list(ids) if isinstance(ids, tuple) else ids, **options}
        checks.query_ids(body)
        checks.fractions(fractions)
        response = yield _json_call("POST", f"/v1/indexes/{_segment(index_id)}/query", body)
        return orjson.loads(response.content)

    def duplicates(self, index_id: str, threshold: float | None = None, *, mode: str = "components",
                   min_cluster_size: int = 2) -> Operation:
        body = {**({"threshold": threshold} if threshold is not None else {}), "mode": mode,
                "min_cluster_size": min_cluster_size}
        call = _json_call("POST", f"/v1/indexes/{_segment(index_id)}/duplicates", body)
        checks.duplicates_body(call.content)
        return orjson.loads((yield call).content)

    def healthz(self) -> Operation:
        return (yield _Call("GET", "/healthz")).json()

    def readyz(self) -> Operation:
        return (yield _Call("GET", "/readyz")).json()
