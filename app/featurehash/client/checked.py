"""Each operation's answer held to its request: the `*_expect` functions say before sending what the answer must
be (featurehash.client.answers.Expect: content type, bytes, .npy layout), the others read a 2xx answer into the
operation's result or raise AnswerMismatch. `spec` is the map's spec when the client has seen it (then widths
are the map's: output_dim for features, n_components for one-hot indices and codes), else None (then rows,
dtypes, field types and the answer's own consistency are checked, and widths taken as they come)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import scipy.sparse as sp

from ..maps import OneHotFeatures
from ..lsh.banding import band_key_dtype
from ..protocol import schemas
from .answers import (JSON_HEADROOM, MAX_WIDTH, NEIGHBOUR_BYTES, NONZEROS_PER_CHARACTER, NUMBER_BYTES,
                      Expect, NpyLayout, document, json_bytes, matrix, mismatch, npy_bytes, row_lengths)
from .results import BandedCodes, KernelAnswer
from .wire import NPY, Answer

INT64 = np.dtype(np.int64)


def _kind(spec: dict | None) -> str | None:
    kind = spec.get("features") if spec else None
    return kind if kind in ("dense", "one_hot", "sparse") else None


# -- transform ----------------------------------------------------------------------------------------------

def features_expect(spec: dict | None, rows: int, dtype: str, npy: bool, text_units: int | None) -> Expect:
    kind, dtype = _kind(spec), np.dtype(dtype)
    if npy:
        dense = NpyLayout(rows, spec["output_dim"] if kind == "dense" else None, dtype)
        one_hot = NpyLayout(rows, spec["n_components"] if kind == "one_hot" else None, INT64)
        if kind is None:
            return Expect(NPY, npy_bytes(dense), npy=dense, one_hot_npy=one_hot)
        layout = one_hot if kind == "one_hot" else dense
        return Expect(NPY, npy_bytes(layout), npy=layout, one_hot_npy=layout)
    if kind in ("dense", "one_hot"):
        return Expect(max_bytes=json_bytes(rows * spec["output_dim" if kind == "dense" else "n_components"], rows))
    if kind == "sparse":
        nonzeros = rows * spec["output_dim"]
        if text_units is not None:  # n-grams of the text, each column at most once a row
            nonzeros = min(nonzeros, NONZEROS_PER_CHARACTER * (text_units + rows))
        return Expect(max_bytes=json_bytes(2 * nonzeros, 2 * rows))
    return Expect(max_bytes=json_bytes(2 * rows * MAX_WIDTH, 2 * rows))  # dense, one-hot or sparse


def features(answer: Answer, spec: dict | None, rows: int, dtype: str):
    kind, status = _kind(spec), answer.status
    if answer.array is not None:
        one_hot = "X-Feature-Dim" in answer.headers
        if kind is not None and one_hot != (kind == "one_hot"):
            raise mismatch(status, f"{kind} features (the map's)", "one-hot features" if one_hot else "dense features")
        if not one_hot:
            return answer.array
        return _one_hot(status, answer.array, answer.headers.get("X-Feature-Scale"),
                        answer.headers["X-Feature-Dim"], spec)
    try:
        parsed = orjson.loads(answer.content)
    except orjson.JSONDecodeError as error:
        raise mismatch(status, "a JSON document of features", f"no JSON ({error})") from None
    if kind is None and isinstance(parsed, dict):
        kind = "sparse" if "values" in parsed else "one_hot" if "indices" in parsed else "dense"
    if kind == "sparse":
        body = document(status, answer.content, schemas.SparseFeaturesResponse, parsed)
        return _csr(status, body, rows, spec, np.float64 if dtype == "float64" else np.float32)
    if kind == "one_hot":
        body = document(status, answer.content, schemas.OneHotFeaturesResponse, parsed)
        indices = matrix(status, body["indices"], rows, spec and spec["n_components"], INT64, "one-hot indices")
        return _one_hot(status, indices, body["scale"], body["dim"], spec)
    body = document(status, answer.content, schemas.DenseFeatures, parsed)
    return matrix(status, body["features"], rows, spec and spec["output_dim"], np.dtype(dtype), "features")


def _one_hot(status: int, indices: np.ndarray, scale: Any, dim: Any, spec: dict | None) -> OneHotFeatures:
    try:
        dim, scale = int(dim), float(scale)
    except (TypeError, ValueError):
        raise mismatch(status, "an integer dim and a number scale", f"dim {dim!r}, scale {scale!r}") from None
    if spec is not None and dim != spec["output_dim"]:
        raise mismatch(status, f"dim {spec['output_dim']} (the map's output_dim)", f"dim {dim}")
    if not (math.isfinite(scale) and scale > 0):
        raise mismatch(status, "a positive finite scale", f"scale {scale}")
    if indices.size and (indices.min() < 0 or indices.max() >= dim):
        raise mismatch(status, f"one-hot indices in [0, {dim})", f"[{indices.min()}, {indices.max()}]")
    return OneHotFeatures(indices, scale, dim)


def _csr(status: int, body: dict[str, Any], rows: int, spec: dict | None, dtype) -> sp.csr_matrix:
    """Sparse features answered as {"dim", "indices": [[...]], "values": [[...]]}, one list per row."""
    dim = body["dim"]
    if spec is not None and dim != spec["output_dim"]:
        raise mismatch(status, f"dim {spec['output_dim']} (the map's output_dim)", f"dim {dim}")
    row_lengths(status, body["indices"], rows, "rows of indices")
    row_lengths(status, body["values"], rows, "rows of values")
    lengths = [len(row) for row in body["indices"]]
    if lengths != [len(row) for row in body["values"]]:
        raise mismatch(status, "as many values as indices in every row", "rows that differ")
    indptr = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    indices = np.fromiter((i for row in body["indices"] for i in row), np.int64, count=int(indptr[-1]))
    values = np.fromiter((v for row in body["values"] for v in row), np.float64, count=int(indptr[-1]))
    if indices.size and (indices.min() < 0 or indices.max() >= dim):
        raise mismatch(status, f"column indices in [0, {dim})", f"[{indices.min()}, {indices.max()}]")
    return sp.csr_matrix((values.astype(dtype), indices, indptr), shape=(rows, dim))


# -- hash and kernel ----------------------------------------------------------------------------------------

def _codes_width(spec: dict | None) -> int | None:
    return spec["n_components"] if spec and spec.get("has_hash") else None


def codes_expect(spec: dict | None, rows: int, bands: int | None, npy: bool) -> Expect:
    k = _codes_width(spec)
    if npy:
        layout = NpyLayout(rows, k, INT64)
        return Expect(NPY, npy_bytes(layout), npy=layout)
    keys = 0 if bands is None else rows * bands * (band_key_dtype(bands).itemsize // 4 + 3)
    return Expect(max_bytes=json_bytes(rows * (k or MAX_WIDTH), rows) + keys)


def codes(answer: Answer, spec: dict | None, rows: int, bands: int | None):
    if answer.array is not None:
        return answer.array
    body = document(answer.status, answer.content, schemas.HashResponse)
    found = matrix(answer.status, body["codes"], rows, _codes_width(spec), INT64, "codes")
    if bands is None:
        return found
    keys = body.get("band_keys")
    if keys is None or len(keys) != rows or any(len(row) != bands for row in keys):
        got = "none" if keys is None else f"{len(keys)} rows of {sorted({len(row) for row in keys})[:3]}"
        raise mismatch(answer.status, f"{rows} rows of {bands} band keys", got)
    return BandedCodes(found, np.array(keys, dtype=band_key_dtype(bands)).reshape(rows, bands))


def kernel_expect(x_rows: int, y_rows: int) -> Expect:
    return Expect(max_bytes=json_bytes(2 * x_rows * y_rows, 2 * x_rows))


def kernel(answer: Answer, x_rows: int, y_rows: int) -> KernelAnswer:
    body = document(answer.status, answer.content, schemas.KernelResponse)
    return KernelAnswer(*(matrix(answer.status, body[name], x_rows, y_rows, np.float64, f"{name} kernel")
                          for name in ("estimate", "exact")))


# -- maps, indexes, items -----------------------------------------------------------------------------------

def map_spec(answer: Answer, map_id: str | None = None, request: dict[str, Any] | None = None) -> dict[str, Any]:
    """A spec: the one asked for by id, or the one made of `request` (its method and the sizes it gives)."""
    spec = document(answer.status, answer.content, schemas.MapSpecResponse)
    wanted = {"id": map_id} if map_id is not None else {
        key: request[key] for key in ("method", "input_dim", "n_components", "seed") if request.get(key) is not None}
    _same(answer.status, spec, wanted, "map")
    return spec


def _same(status: int, found: dict[str, Any], wanted: dict[str, Any], what: str) -> None:
    for key, value in wanted.items():
        if found.get(key) != value:
            raise mismatch(status, f"the {what} with {key} {value!r} (the request's)", f"{key} {found.get(key)!r}")


def page_expect(limit: int, item_bytes: int) -> Expect:
    return Expect(max_bytes=limit * item_bytes + JSON_HEADROOM)


def page(answer: Answer, model, key: str, limit: int) -> dict[str, Any]:
    found = document(answer.status, answer.content, model)
    if len(found[key]) > limit:
        raise mismatch(answer.status, f"at most {limit} {key} (the page's limit)", f"{len(found[key])}")
    return found


def index_info(answer: Answer, index_id: str | None = None, request: dict[str, Any] | None = None) -> dict:
    info = document(answer.status, answer.content, schemas.IndexResponse)
    if index_id is not None:
        wanted = {"id": index_id}
    else:
        wanted = {key: request[key] for key in ("map_id", "bands", "rows") if key in request}
        if "name" in request:
            wanted["id"] = request["name"]
    _same(answer.status, info, wanted, "index")
    return info


def added(answer: Answer, rows: int) -> dict[str, Any]:
    found = document(answer.status, answer.content, schemas.AddItemsResponse)
    if found["added"] + found["replaced"] != rows or min(found["added"], found["replaced"]) < 0:
        raise mismatch(answer.status, f"{rows} items added or replaced (the batch's)",
                       f"{found['added']} added, {found['replaced']} replaced")
    return found


def deleted_expect(request_bytes: int) -> Expect:
    return Expect(max_bytes=request_bytes + JSON_HEADROOM)  # "missing" holds some of the ids sent


def deleted(answer: Answer, ids: list[str]) -> dict[str, Any]:
    found = document(answer.status, answer.content, schemas.DeleteItemsResponse)
    asked = set(ids)
    if not set(found["missing"]) <= asked or found["removed"] + len(set(found["missing"])) != len(asked):
        raise mismatch(answer.status, f"the {len(asked)} ids asked for, each removed or missing",
                       f"{found['removed']} removed and missing {found['missing'][:5]}")
    return found


def query_expect(rows: int, top_k: int) -> Expect:
    return Expect(max_bytes=rows * (top_k * NEIGHBOUR_BYTES + 4 * NUMBER_BYTES) + JSON_HEADROOM)


def query(answer: Answer, rows: int, top_k: int) -> dict[str, Any]:
    found = document(answer.status, answer.content, schemas.IndexQueryResponse)
    for key in ("results", "candidates", "estimated_recall", "rows_probed"):
        row_lengths(answer.status, found[key], rows, key)
    longest = max((len(row) for row in found["results"]), default=0)
    if longest > top_k:
        raise mismatch(answer.status, f"at most top_k={top_k} neighbours a row", f"{longest}")
    return found


def duplicates(answer: Answer, threshold: float | None, mode: str, min_cluster_size: int) -> dict[str, Any]:
    found = document(answer.status, answer.content, schemas.DuplicatesResponse)
    _same(answer.status, found, {"mode": mode, **({"threshold": threshold} if threshold is not None else {})},
          "duplicates")
    smallest = min((len(cluster["members"]) for cluster in found["clusters"]), default=min_cluster_size)
    if smallest < min_cluster_size:
        raise mismatch(answer.status, f"clusters of at least {min_cluster_size} members", f"one of {smallest}")
    return found
