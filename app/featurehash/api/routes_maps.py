"""/v1/maps: create (idempotent), get, list, delete."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ..maps import SpecError

from .codecs import json_response, parse_model
from .deps import ServiceState, get_state, require_api_key
from .errors import MapNotFound
from .schemas import ERROR_RESPONSES, CreateMapRequest, MapListResponse, MapSpecResponse, body_doc

router = APIRouter(prefix="/v1/maps", tags=["maps"], dependencies=[Depends(require_api_key)],
                   responses=ERROR_RESPONSES)


@router.post("", status_code=201, response_model=MapSpecResponse, openapi_extra=body_doc(CreateMapRequest, npy=False),
             responses={200: {"model": MapSpecResponse, "description": "the map already existed"}})
async def create_map(request: Request, state: ServiceState = Depends(get_state)):
    fields = parse_model(await request.body(), request.headers.get("content-type"), CreateMapRequest, SpecError)
    spec = fields.model_dump(exclude_none=True)
    feature_map = await run_in_threadpool(state.build_map, spec)
    document = feature_map.describe()
    created = await state.store.create(document)
    state.cache.put(feature_map)
    return json_response(document, status_code=201 if created else 200)


@router.get("", response_model=MapListResponse)
async def list_maps(after: str | None = Query(default=None, description="cursor from the previous page"),
                    limit: int = Query(default=100, ge=1, le=1000),
                    state: ServiceState = Depends(get_state)):
    specs, cursor = await state.store.list(after=after, limit=limit)
    return json_response({"maps": specs, "next": cursor})


@router.get("/{map_id}", response_model=MapSpecResponse)
async def get_map(map_id: str, state: ServiceState = Depends(get_state)):
    spec = await state.store.get(map_id)
    if spec is None:
        raise MapNotFound(map_id)
    return json_response(spec)


@router.delete("/{map_id}", status_code=204)
async def delete_map(map_id: str, state: ServiceState = Depends(get_state)):
    if not await state.store.delete(map_id):
        raise MapNotFound(map_id)
    state.cache.discard(map_id)
    return Response(status_code=204)
