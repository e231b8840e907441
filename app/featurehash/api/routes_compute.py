"""/v1/maps/{id}/transform, /hash and /kernel.

Each request flows one way: raw body -> decode -> validate -> map (cached) -> numpy ->
encode. Everything after reading the body runs in the thread pool, so the event loop
(and /healthz) stays responsive while large batches are computed.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool

from ..maps import FeatureMap, InputError, OneHotFeatures
from ..maps.lsh import band_keys
from .codecs import json_response, npy_response, parse_body, vectors_from, wants_npy
from .deps import ServiceState, get_state, require_api_key
from .metrics import BATCH_ROWS
from .schemas import (DenseFeatures, HashRequest, HashResponse, KernelRequest, KernelResponse,
                      OneHotFeaturesResponse, VectorsRequest, body_doc)

router = APIRouter(prefix="/v1/maps/{map_id}", tags=["features"], dependencies=[Depends(require_api_key)])


def _checked_rows(X, feature_map: FeatureMap, field: str, max_rows: int):
    X = feature_map.check(X, field)
    if X.shape[0] > max_rows:
        raise InputError(field, f"{X.shape[0]} rows exceed the batch limit of {max_rows}; split the batch")
    return X


async def _prepare(request: Request, map_id: str, state: ServiceState):
    raw = await request.body()
    feature_map = await state.load_map(map_id)
    return raw, feature_map


@router.post("/transform", openapi_extra=body_doc(VectorsRequest),
             responses={200: {"model": DenseFeatures | OneHotFeaturesResponse,
                              "content": {"application/x-npy": {}}}})
async def transform(map_id: str, request: Request,
                    dtype: Literal["float32", "float64"] = Query(default="float32"),
                    state: ServiceState = Depends(get_state)):
    raw, feature_map = await _prepare(request, map_id, state)
    content_type, accept = request.headers.get("content-type"), request.headers.get("accept")
    max_rows = state.settings.max_batch_rows

    def work():
        body = parse_body(raw, content_type)
        X = _checked_rows(vectors_from(body, "vectors", feature_map.input_dim), feature_map, "vectors", max_rows)
        BATCH_ROWS.labels("transform").observe(X.shape[0])
        features = feature_map.transform(X, dtype=np.dtype(dtype))
        if isinstance(features, OneHotFeatures):
            if wants_npy(accept):
                return npy_response(features.indices, headers={
                    "X-Feature-Dim": str(features.dim), "X-Feature-Scale": repr(features.scale)})
            return json_response({"dim": features.dim, "scale": features.scale, "indices": features.indices})
        return npy_response(features) if wants_npy(accept) else json_response({"features": features})

    return await run_in_threadpool(work)


@router.post("/hash", openapi_extra=body_doc(HashRequest),
             responses={200: {"model": HashResponse, "content": {"application/x-npy": {}}}})
async def hash_vectors(map_id: str, request: Request, state: ServiceState = Depends(get_state)):
    raw, feature_map = await _prepare(request, map_id, state)
    content_type, accept = request.headers.get("content-type"), request.headers.get("accept")
    max_rows = state.settings.max_batch_rows

    def work():
        body = parse_body(raw, content_type)
        bands = None if isinstance(body, np.ndarray) else body.get("bands")
        if bands is not None and (not isinstance(bands, int) or isinstance(bands, bool)):
            raise InputError("bands", "expected an integer")
        X = _checked_rows(vectors_from(body, "vectors", feature_map.input_dim), feature_map, "vectors", max_rows)
        BATCH_ROWS.labels("hash").observe(X.shape[0])
        codes = feature_map.hash(X)
        if wants_npy(accept) and bands is None:
            return npy_response(codes)
        document = {"codes": codes}
        if bands is not None:
            document["band_keys"] = band_keys(codes, bands)
        return json_response(document)

    return await run_in_threadpool(work)


@router.post("/kernel", openapi_extra=body_doc(KernelRequest),
             responses={200: {"model": KernelResponse}})
async def kernel(map_id: str, request: Request, state: ServiceState = Depends(get_state)):
    raw, feature_map = await _prepare(request, map_id, state)
    content_type = request.headers.get("content-type")
    max_rows = state.settings.max_batch_rows

    def work():
        body = parse_body(raw, content_type)
        X = _checked_rows(vectors_from(body, "x", feature_map.input_dim), feature_map, "x", max_rows)
        Y = X
        if not isinstance(body, np.ndarray):
            given = vectors_from(body, "y", feature_map.input_dim, required=False)
            Y = X if given is None else _checked_rows(given, feature_map, "y", max_rows)
        BATCH_ROWS.labels("kernel").observe(X.shape[0])
        return json_response({"estimate": feature_map.kernel(X, Y), "exact": feature_map.exact_kernel(X, Y)})

    return await run_in_threadpool(work)
