"""Liveness, readiness and metrics: open even when an API key is set."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from fastapi.responses import PlainTextResponse
from redis.exceptions import RedisError

from .codecs import json_response
from .deps import ServiceState, get_state
from .metrics import render

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz():
    return json_response({"status": "ok"})


@router.get("/readyz", responses={503: {"description": "Redis does not answer (Retry-After says when to ask again)"}})
async def readyz(state: ServiceState = Depends(get_state)):
    try:
        await state.store.ping()
    except (RedisError, OSError) as exc:
        return json_response({"status": "unavailable", "detail": f"Redis: {type(exc).__name__}"}, status_code=503,
                             headers={"Retry-After": str(state.settings.retry_after_seconds)})
    return json_response({"status": "ready", "maps_cached": len(state.cache), "cache_bytes": state.cache.nbytes})


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics():
    content, media_type = render()
    return Response(content, media_type=media_type)
