"""/v1/maps: create (idempotent), get, list, delete.

A new map's stored spec counts in its creator's tenant's stored bytes, refused (507) past its limit
(featurehash.store.map_accounting); a spec stored already costs nothing, whoever posts it.

Deleting a map that LSH indexes use is a 409 naming them, unless ?force=true: the indexes then keep
answering from the copy of the spec each keeps (posting the same spec again re-creates the same id).
Maps are shared by all tenants; one that another tenant's index uses is refused even with ?force=true
(the answer counts the tenants, naming none), except to an admin key.
"""

from __future__ import annotations

import functools
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ...maps import SpecError, requested_spec
from ...maps.spec import DERIVED_KEYS
from ...store.map_accounting import MapPayer

from ...protocol.codecs import parse_model
from .responses import json_response
from ..auth import Principal
from .deps import READ, WRITE, get_state, refuse_unknown_query, require_api_key
from .state import ServiceState
from .errors import MapInUse, MapNotFound
from ...protocol.examples import EXAMPLE_GCWS_ID, MAP_ID_EXAMPLES, query_examples
from ...protocol.schemas import COMPILED, LOCATION, CreateMapRequest, MapListResponse, MapSpecResponse, body_doc, errors, operation_id

router = APIRouter(prefix="/v1/maps", tags=["maps"], generate_unique_id_function=operation_id,
                   dependencies=[Depends(require_api_key), Depends(refuse_unknown_query)],
                   responses=errors(401, 403, 422, 429, 503, 507))
INDEX_PAGE = 1000
MapId = Annotated[str, Path(openapi_examples=MAP_ID_EXAMPLES)]


@router.post("", status_code=201, response_model=MapSpecResponse, openapi_extra=body_doc(CreateMapRequest, npy=False),
             responses={201: {"description": "created", "headers": {**LOCATION, **COMPILED}},
                        200: {"model": MapSpecResponse, "description": "the map already existed",
                              "headers": LOCATION}, **errors(413, 415, 422)})
async def create_map(request: Request, principal: Principal = Depends(WRITE), state: ServiceState = Depends(get_state)):
    """A spec posted before is answered from the store (its alias: the id of the request as posted, defaults
    resolved, nothing fitted), never fitted again; a new one is refused over the size and CPU budgets before
    it is built, and so is any new map of a tenant already at its stored-bytes limit; once built, a spec over
    max_spec_bytes (413) or past the tenant's limit (507) is refused and nothing is stored."""
    fields = parse_model(await request.body(), request.headers.get("content-type"), CreateMapRequest, SpecError)
    spec = fields.model_dump(exclude_none=True)
    requested = await run_in_threadpool(requested_spec, spec)   # validation only: cheap whatever the sizes
    stored = await state.store.get_by_alias(requested.id)
    if stored is not None and _echo_agrees(spec, stored):
        return json_response(stored, status_code=200, headers={"Location": f"/v1/maps/{stored['id']}"})
    payer = MapPayer(principal.tenant, principal.limits.stored_bytes)
    await state.store.check_room(payer, requested.id)
    # A resolved spec posted back is its own request: its map may be in this process's cache.
    feature_map = state.cache.get(requested.id)
    await state.warmups.wait(requested.id)   # a fit compiles too: background warm-ups wait for it
    if feature_map is None or not _echo_agrees(spec, feature_map.describe()):
        feature_map = await run_in_threadpool(
            functools.partial(state.build_map, spec, work_seconds=state.settings.request_work_seconds))
    document = feature_map.describe()
    created = await state.store.create(document, alias=requested.id, payer=payer)
    state.cache.put(feature_map)
    if state.settings.warm_maps:
        state.warmups.start(feature_map)   # the answer does not wait: the first transform might
    return json_response(document, status_code=201 if created else 200,
                         headers={"Location": f"/v1/maps/{document['id']}"})


def _echo_agrees(posted: dict, stored: dict) -> bool:
    """Whether the derived keys a client echoed (id, output_dim...) are the stored spec's: else the request is
    resolved in full, which refuses the stale ones by name."""
    return all(stored.get(key) == value for key, value in posted.items() if key in DERIVED_KEYS)


@router.get("", response_model=MapListResponse, responses=errors(422), dependencies=[Depends(READ)])
async def list_maps(after: str | None = Query(default=None, description="cursor from the previous page (a map id: "
                                             "the page starts after it)", openapi_examples=query_examples(
                                                 EXAMPLE_GCWS_ID, "the maps after the example 'gcws' map")),
                    limit: int = Query(default=100, ge=1, le=1000,
                                       openapi_examples=query_examples(10, "at most 10 maps a page")),
                    state: ServiceState = Depends(get_state)):
    specs, cursor = await state.store.list(after=after, limit=limit)
    return json_response({"maps": specs, "next": cursor})


@router.get("/{map_id}", response_model=MapSpecResponse, responses=errors(404), dependencies=[Depends(READ)])
async def get_map(map_id: MapId, state: ServiceState = Depends(get_state)):
    spec = await state.store.get(map_id)
    if spec is None:
        raise MapNotFound(map_id)
    return json_response(spec)


@router.delete("/{map_id}", status_code=204, responses={204: {"description": "deleted"}, **errors(404, 409, 422)})
async def delete_map(map_id: MapId,
                     force: bool = Query(default=False, description="delete it even if the caller's own indexes use it "
                                         "(they keep answering from their copy of its spec); another tenant's index "
                                         "using it refuses the delete unless the key is an admin's",
                                         openapi_examples=query_examples(
                                             False, "refused (409) while an index uses the map")),
                     principal: Principal = Depends(WRITE), state: ServiceState = Depends(get_state)):
    """Maps are shared by every tenant (content-addressed: the same spec is the same map, and a spec is not a
    secret), so a map another tenant's index uses is not deleted, force or not, except by an admin. Its bytes go
    back to the tenant that paid for them, whoever deletes it."""
    spec = await state.store.get(map_id)
    if spec is None:
        raise MapNotFound(map_id)
    users = await _indexes_using(state, map_id)
    _refuse_if_used(map_id, users, principal, force)
    charge = await state.store.delete(map_id)
    if charge is None:
        raise MapNotFound(map_id)
    state.forget(map_id)
    # An index created over the map between the check and the delete: its create checks the map
    # again after writing the index (routes_indexes.create_index), this delete checks for indexes
    # after deleting, so one of the two sees the other. Here the index came first: the map is put
    # back (same spec, same id), counted to the tenant that paid for it (no limit: it held these bytes before),
    # and the delete refused as it would have been.
    after = await _indexes_using(state, map_id)
    if set(after) - set(users):
        try:
            _refuse_if_used(map_id, after, principal, force)
        except MapInUse:
            await state.store.create(spec, payer=None if charge.tenant is None else MapPayer(charge.tenant))
            raise
    return Response(status_code=204)


def _refuse_if_used(map_id: str, users: list[tuple[str, str]], principal: Principal, force: bool) -> None:
    """MapInUse unless no index uses the map, or force and the indexes are the caller's own (any, for an admin).
    Others' index names are shown to an admin only (as tenant/name); a tenant learns how many tenants."""
    own = [name for tenant, name in users if tenant == principal.tenant]
    others = [(tenant, name) for tenant, name in users if tenant != principal.tenant]
    if principal.is_admin:
        if users and not force:
            raise MapInUse(map_id, own + [f"{tenant}/{name}" for tenant, name in others])
    elif others:
        raise MapInUse(map_id, own, other_tenants=len({tenant for tenant, _ in others}))
    elif own and not force:
        raise MapInUse(map_id, own)


async def _indexes_using(state: ServiceState, map_id: str) -> list[tuple[str, str]]:
    """(tenant, index name) of every index over the map: every tenant's registry is looked at."""
    users = []
    for tenant in sorted(set(await state.indexes.tenants()) | state.keys.current().tenants):
        indexes, after = state.indexes_of(tenant), None
        while True:
            page, after = await indexes.list(after=after, limit=INDEX_PAGE)
            users += [(tenant, index["id"]) for index in page if index["map_id"] == map_id]
            if after is None:
                break
    return users
