"""Liveness, readiness and metrics: open even when an API key is set."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from fastapi.responses import PlainTextResponse
from redis.exceptions import RedisError

from .responses import json_response
from .deps import get_state
from .state import ServiceState
from .errors import error_response
from .metrics import render
from ...protocol.schemas import HealthResponse, ReadyResponse, errors, operation_id

router = APIRouter(tags=["health"], generate_unique_id_function=operation_id)


@router.get("/healthz", response_model=HealthResponse)
async def healthz():
    return json_response({"status": "ok"})


@router.get("/readyz", response_model=ReadyResponse, responses=errors(503))
async def readyz(state: ServiceState = Depends(get_state)):
    if not state.kernels_loaded.is_set():
        return error_response(503, "kernels", "loading the compiled kernels (settings.preload_kernels); retry shortly",
                              headers={"Retry-After": str(state.settings.retry_after_seconds)})
    try:
        refusal = await state.store.write_refusal()
    except (RedisError, OSError) as exc:
        return error_response(503, "store", f"Redis does not answer ({type(exc).__name__}); retry shortly",
                              headers={"Retry-After": str(state.settings.retry_after_seconds)})
    if refusal is not None:  # serving reads only would hide it: the probe makes it seen
        return error_response(503, "store", refusal.cause,
                              headers={"Retry-After": str(state.settings.retry_after_seconds)})
    return json_response({"status": "ready", "maps_cached": len(state.cache), "cache_bytes": state.cache.nbytes})


@router.get("/metrics", response_class=PlainTextResponse,
            responses={200: {"description": "Prometheus text exposition format",
                             "content": {"text/plain": {"schema": {"type": "string"}}}}})
async def metrics():
    content, media_type = render()
    return Response(content, media_type=media_type)
