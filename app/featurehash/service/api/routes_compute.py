"""/v1/maps/{id}/transform, /hash and /kernel.

Each request flows one way: raw body -> decode -> validate -> map (cached) -> numpy ->
encode. Small requests (a body and an answer of a few vectors: online scoring) run right
on the event loop, where a thread-pool hop would cost more than the work; everything else
runs in the thread pool, so the event loop (and /healthz) stays responsive while large
batches are computed; answers are computed and encoded chunk by chunk (`streams`), so
their size never sets a request's memory.

/transform and /hash are plain routes (`PlainRoute`: no FastAPI parameters or dependencies; `checked_state`
and `query_value` make the same checks), so a single vector costs little more than the framework itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np
import orjson
import scipy.sparse as sp
from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter
from starlette.concurrency import run_in_threadpool

from ...maps import FeatureMap, InputError
from ...maps.base import DenseFeatureMap
from ...lsh.banding import band_keys
from ...maps.spec import MAX_COMPONENTS
from .admission import read_body, reserve_work
from ...protocol.codecs import JSON, parse_body, wants_npy
from ...protocol.options import check_bands_value
from ...protocol.text_inputs import takes_text
from .responses import json_response
from .deps import READ, SCOPE_EXTENSION, checked_state, get_state, query_value, refuse_unknown_query
from .errors import NotAcceptable
from .lanes import run_batch
from .metrics import BATCH_ROWS
from .plain_route import PlainRoute
from .state import ServiceState, n_rows
from ...protocol.examples import MAP_ID_EXAMPLES, TEXT_MAP, query_examples
from ...protocol.schemas import (COMPILED, NPY_CONTENT, DenseFeatures, HashRequest, HashResponse, KernelRequest, KernelResponse,
                      OneHotFeaturesResponse, SparseFeaturesResponse, VectorsRequest, body_doc, errors, operation_id,
                      plain_route_doc)
from .streams import RowResult, json_answer, npy_answer

router = APIRouter(prefix="/v1/maps/{map_id}", tags=["features"], responses=errors(401, 403, 404, 413, 415, 422, 429, 503),
                   generate_unique_id_function=operation_id, route_class=PlainRoute)
PLAIN_READ = {SCOPE_EXTENSION: "read"}  # what checked_state(request) requires, for the OpenAPI document
MAP_ID = {"name": "map_id", "schema": {"title": "Map Id", "type": "string"}, "examples": MAP_ID_EXAMPLES}
DTYPE = TypeAdapter(Literal["float32", "float64"])
DTYPE_QUERY = {"name": "dtype", "schema": {"default": "float32", "enum": ["float32", "float64"], "title": "Dtype",
                                           "type": "string"},
               "examples": query_examples("float32", "dense features as float32 (the default)")}
BANDS = TypeAdapter(int | None)
BANDS_DESCRIPTION = "LSH bands, for any body type (a JSON body may carry it instead)"
BANDS_QUERY = {"name": "bands", "description": BANDS_DESCRIPTION,
               "schema": {"type": "integer", "minimum": 1, "maximum": MAX_COMPONENTS,
                          "description": BANDS_DESCRIPTION, "title": "Bands"},
               "examples": query_examples(4, "4 bands of the example maps' 16 (or 64) codes: their band keys too")}
TRANSFORM_ROWS, HASH_ROWS, KERNEL_ROWS = (BATCH_ROWS.labels(name) for name in ("transform", "hash", "kernel"))
ONE_HOT_HEADERS = {"X-Feature-Dim": {"description": "one-hot maps with an .npy answer: the feature dimension",
                                     "schema": {"type": "integer"}},
                   "X-Feature-Scale": {"description": "one-hot maps with an .npy answer: the value of each one",
                                       "schema": {"type": "number"}}}


# A hashing map's sparse answer is encoded whole up to this many nonzeros (~1.3 MB of JSON), else streamed.
SPARSE_INLINE_NONZEROS = 65536
SPARSE_CHUNK_ROWS = 1024
# Inline (on the event loop) below these: at most ~1 ms of work even for the costliest per-element maps.
INLINE_BODY_BYTES = 32 * 1024
INLINE_OUTPUT_ELEMENTS = 4096


async def _run(raw: bytes, prepare, answer):
    """`answer(prepare())`: the decode inline for a small body, the rest inline for a small answer."""
    if len(raw) > INLINE_BODY_BYTES:
        return await run_batch(lambda: answer(prepare()))
    prepared = prepare()
    if prepared[0] * prepared[1] > INLINE_OUTPUT_ELEMENTS:
        return await run_batch(answer, prepared)
    return answer(prepared)


def _check_output_size(rows: int, width: int, limit: int) -> None:
    if rows * width > limit:
        raise InputError("vectors", f"{rows} rows x {width} outputs exceed this service's limit of {limit} numbers "
                         "per answer (FEATUREHASH_MAX_OUTPUT_ELEMENTS); split the batch")


async def _prepare(request: Request, state: ServiceState):
    raw = await read_body(request)
    feature_map = await state.load_map(request.path_params["map_id"])
    return raw, feature_map


def _dense_features(feature_map: DenseFeatureMap, X, dtype: np.dtype, npy: bool, settings) -> Response:
    feature_map.require_features()

    def compute(rows: slice) -> np.ndarray:
        out = np.empty((rows.stop - rows.start, feature_map.output_dim), dtype=dtype)
        feature_map.features_into(X[rows], out, first_row=rows.start)
        return out

    result = RowResult(X.shape[0], feature_map.output_dim, dtype, compute, settings.stream_chunk_bytes,
                       settings.stream_threads)
    if result.chunks > 1:  # before any byte is sent: a bad row is a 422, not a cut stream (one chunk is
        feature_map.refuse_overflow(X, dtype=dtype)  # computed whole first, and refused like this)
    return npy_answer(result) if npy else json_answer({}, "features", result)


def _one_hot_features(feature_map: FeatureMap, X, npy: bool, settings) -> Response:
    first = feature_map.transform(X[:1])  # dim and scale lead the answer
    result = RowResult(X.shape[0], first.indices.shape[1], np.dtype(np.int64),
                       lambda rows: feature_map.transform(X[rows]).indices, settings.stream_chunk_bytes,
                       settings.stream_threads)
    if npy:
        return npy_answer(result, headers={"X-Feature-Dim": str(first.dim), "X-Feature-Scale": repr(first.scale)})
    return json_answer({"dim": first.dim, "scale": first.scale}, "indices", result)


@router.post("/transform", openapi_extra={**plain_route_doc(VectorsRequest, (MAP_ID,), (DTYPE_QUERY,), TEXT_MAP),
                                          **PLAIN_READ},
             responses={200: {"model": DenseFeatures | OneHotFeaturesResponse | SparseFeaturesResponse,
                              "content": NPY_CONTENT, "headers": {**ONE_HOT_HEADERS, **COMPILED},
                              "description": "dense features, a one-hot map's indices, or a hashing map's sparse "
                                             "features (JSON only); .npy with Accept: application/x-npy"},
                        **errors(406)})
async def transform(request: Request):
    state = await checked_state(request)
    dtype = query_value(request, "dtype", DTYPE, "float32")
    raw, feature_map = await _prepare(request, state)
    content_type, accept = request.headers.get("content-type"), request.headers.get("accept")
    settings = state.settings

    if getattr(feature_map, "text_input", False) and wants_npy(accept):
        raise NotAcceptable("accept", "a hashing map's features are sparse, answered as JSON ({\"dim\", "
                            "\"indices\", \"values\"}); ask for application/json")

    def prepare():
        body = parse_body(raw, content_type)
        X, field, spent = state.input_rows(body, "vectors", feature_map)
        rows = n_rows(X)
        TRANSFORM_ROWS.observe(rows)
        width = feature_map.spec.n_components if feature_map.one_hot else feature_map.output_dim
        if hasattr(X, "shape"):  # a hashing map's sparse answer is bounded by the request's characters
            _check_output_size(rows, width, settings.max_output_elements)
        state.check_work(feature_map, X, field, spent=spent)
        return rows, width, X

    def answer(prepared):
        X = prepared[2]
        if getattr(feature_map, "text_input", False):
            return _sparse_features(feature_map.transform(X, dtype=np.dtype(dtype)))
        if feature_map.one_hot:
            return _one_hot_features(feature_map, X, wants_npy(accept), settings)
        return _dense_features(feature_map, X, np.dtype(dtype), wants_npy(accept), settings)

    return await _run(raw, prepare, answer)


@router.post("/hash", openapi_extra={**plain_route_doc(HashRequest, (MAP_ID,), (BANDS_QUERY,), TEXT_MAP),
                                     **PLAIN_READ},
             responses={200: {"model": HashResponse, "content": NPY_CONTENT, "headers": COMPILED,
                              "description": "codes; .npy with Accept: application/x-npy (JSON whenever bands "
                                             "are asked for: codes and band keys)"}})
async def hash_vectors(request: Request):
    state = await checked_state(request)
    query_bands = query_value(request, "bands", BANDS, None)
    raw, feature_map = await _prepare(request, state)
    content_type, accept = request.headers.get("content-type"), request.headers.get("accept")
    settings = state.settings

    def prepare():
        body = parse_body(raw, content_type)
        bands = _bands(body, query_bands)
        check_bands_value(bands)
        if bands is not None and wants_npy(accept):
            raise NotAcceptable("accept", "codes with band keys are two arrays (integers and strings), answered as "
                                "JSON: leave out Accept: application/x-npy, or ask for the codes alone")
        X, field, spent = state.input_rows(body, "vectors", feature_map)
        if not feature_map.has_hash:   # the answer says the map has no codes
            feature_map.hash(None)
        HASH_ROWS.observe(X.shape[0])
        k = feature_map.spec.n_components
        _check_output_size(X.shape[0], k, settings.max_output_elements)
        state.check_work(feature_map, X, field, multiplier=1.0 if bands is None else 2.0,  # band keys hash again
                         spent=spent)
        return X.shape[0], k, X, bands

    def answer(prepared):
        _, k, X, bands = prepared
        if bands is not None or not X.shape[0]:  # a map without codes says so here (else the first chunk does)
            feature_map.hash(X[:1])
        codes = RowResult(X.shape[0], k, np.dtype(np.int64), lambda rows: feature_map.hash(X[rows]),
                          settings.stream_chunk_bytes, settings.stream_threads)
        if bands is None:
            return npy_answer(codes) if wants_npy(accept) else json_answer({}, "codes", codes)
        band_keys(np.zeros((1, k), dtype=np.int64), bands)  # a bad band count is refused before streaming

        def keys():  # computed again after the codes: the answer never holds all of them
            yield "band_keys", RowResult(X.shape[0], bands, np.dtype(np.int64),
                                         lambda rows: band_keys(feature_map.hash(X[rows]), bands).tolist(),
                                         settings.stream_chunk_bytes, settings.stream_threads)

        return json_answer({}, "codes", codes, tail=keys)

    return await _run(raw, prepare, answer)


def _bands(body, query_bands: int | None):
    in_body = None if isinstance(body, np.ndarray) else body.get("bands")
    if in_body is not None and query_bands is not None:
        raise InputError("bands", "given both in the body and as ?bands=; send one")
    return query_bands if in_body is None else in_body


@router.post("/kernel", openapi_extra=body_doc(KernelRequest, text_with=TEXT_MAP),
             responses={200: {"model": KernelResponse, "headers": COMPILED}},
             dependencies=[Depends(READ), Depends(refuse_unknown_query)])
async def kernel(request: Request, map_id: str = Path(openapi_examples=MAP_ID_EXAMPLES),
                 state: ServiceState = Depends(get_state)):
    raw, feature_map = await _prepare(request, state)
    content_type = request.headers.get("content-type")
    settings = state.settings

    def work():
        body = parse_body(raw, content_type)
        # Text is priced twice too (the estimate and the exact kernel each analyse it).
        X, x_field, spent = state.input_rows(body, "x", feature_map, multiplier=2.0)
        Y, y_field = X, x_field
        if not isinstance(body, np.ndarray):
            given = state.input_rows(body, "y", feature_map, required=False, multiplier=2.0)
            if given is not None:
                Y, y_field, y_spent = given
                spent += y_spent
        KERNEL_ROWS.observe(n_rows(X))
        _check_kernel_size(feature_map, n_rows(X), None if Y is X else n_rows(Y), settings)
        # The estimate transforms x and y, the exact kernel reads them again: priced as two transforms.
        state.check_work(feature_map, X if Y is X else _stacked(X, Y), x_field if Y is X else y_field,
                         multiplier=2.0, spent=spent)
        estimate, exact = feature_map.kernel(X, Y), feature_map.exact_kernel(X, Y)
        if not (np.isfinite(estimate).all() and np.isfinite(exact).all()):
            raise InputError(x_field, "the kernel is not finite for these vectors (they overflow the map's "
                             "arithmetic); rescale them")
        return json_response({"estimate": estimate, "exact": exact})

    return await run_in_threadpool(work)


def _sparse_features(features) -> Response:
    """A CSR matrix as {"dim", "indices": [[...]], "values": [[...]]} (one list per row), the bytes orjson writes
    for the whole document. The matrix is bounded by the request's characters (FEATUREHASH_MAX_REQUEST_CHARS);
    past SPARSE_INLINE_NONZEROS its JSON (~20 bytes a nonzero) streams, encoded SPARSE_CHUNK_ROWS rows at a
    time on the thread pool (Starlette iterates a plain generator there), so the answer is never held whole."""
    if features.nnz <= SPARSE_INLINE_NONZEROS:
        splits = features.indptr[1:-1]
        return json_response({"dim": features.shape[1], "indices": np.split(features.indices, splits),
                              "values": np.split(features.data, splits)})

    def rows_of(array: np.ndarray) -> Iterator[bytes]:
        for start in range(0, features.shape[0], SPARSE_CHUNK_ROWS):
            stop = min(features.shape[0], start + SPARSE_CHUNK_ROWS)
            bounds = features.indptr[start:stop + 1]
            chunk = np.split(array[bounds[0]:bounds[-1]], bounds[1:-1] - bounds[0])
            yield (b"," if start else b"") + orjson.dumps(chunk, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]

    def pieces() -> Iterator[bytes]:
        yield b'{"dim":%d,"indices":[' % features.shape[1]
        yield from rows_of(features.indices)
        yield b'],"values":['
        yield from rows_of(features.data)
        yield b"]}"

    return StreamingResponse(pieces(), media_type=JSON)


def _stacked(X, Y):
    """x and y as one batch for pricing (only its shape and nonzeros are read)."""
    if not hasattr(X, "shape"):  # a hashing map's text: priced by its characters already
        return X
    if sp.issparse(X) or sp.issparse(Y):
        return sp.vstack([sp.csr_matrix(X), sp.csr_matrix(Y)], format="csr")
    return np.broadcast_to(np.float32(0), (X.shape[0] + Y.shape[0], X.shape[1]))


def _check_kernel_size(feature_map: FeatureMap, x_rows: int, y_rows: int | None, settings) -> None:
    """rows(x) x rows(y) answers within max_kernel_entries; their features (or codes) and dense copies
    of the inputs within the request work budget."""
    field = "x" if y_rows is None else "y"
    pairs = x_rows * (x_rows if y_rows is None else y_rows)
    if pairs > settings.max_kernel_entries:
        raise InputError(field, f"{pairs} kernel entries exceed this service's limit of {settings.max_kernel_entries} "
                         "(FEATUREHASH_MAX_KERNEL_ENTRIES); send fewer rows")
    width = feature_map.spec.n_components if feature_map.one_hot else feature_map.output_dim
    if getattr(feature_map, "text_input", False):
        width = 0   # sparse features, bounded by the request's characters
    # Text is hashed into sparse rows: no dense copy of its input_dim columns is made.
    inputs = 0 if takes_text(feature_map) else feature_map.input_dim
    needed = 8 * (x_rows + (y_rows or 0)) * max(width, inputs) + 16 * pairs
    if needed > settings.request_work_bytes:
        raise InputError(field, f"this kernel needs about {needed} bytes of work arrays, over this service's "
                         f"limit of {settings.request_work_bytes} (FEATUREHASH_REQUEST_WORK_BYTES); send fewer rows")
    reserve_work(needed)
