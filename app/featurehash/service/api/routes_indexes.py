"""/v1/indexes: LSH near-neighbour indexes over GCWS and binning codes, kept in Redis.

Create (idempotent by name), get, list, delete; add or replace items, remove one or a batch, query.
Indexes belong to a tenant (the key's): names are the tenant's own, another tenant's index is a 404, and an
admin key names another tenant with ?tenant= (GET /v1/tenants lists them).
The index itself is featurehash.store.index.handles, the same code batch jobs run through the library;
the routes decode and validate, then hand over. Body decoding runs in the thread pool,
and so do the index's CPU steps (hashing, building write batches, re-ranking), except work
smaller than the hop to a worker thread (single vectors, small bodies).
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ...maps import InputError
from ...store.index.handles import AsyncLSHIndex, IndexNotFound, ItemNotFound, QueryResult
from ...store.lsh_layout import check_item_ids
from ...store.index.queries import TooManyCandidates, candidates_within
from .admission import read_body
from ...protocol.codecs import parse_body, parse_model
from ...protocol.options import check_path_item_id, check_top_k, query_item_ids
from .responses import json_response
from ...store.lsh_indexes import AsyncLSHIndexes
from .deps import (ADMIN, READ, WRITE, get_state, index_tenant, percent_decoded_utf8, refuse_unknown_query,
                   require_api_key)
from .errors import MapNotFound
from .state import ServiceState
from .quotas import tenant_stored_bytes
from .duplicates import NDJSON, bounded_duplicates, duplicates_answer
from .metrics import BATCH_ROWS
from ...protocol.examples import INDEX_ID_EXAMPLES, ITEM_ID_EXAMPLES, TEXT_INDEX, query_examples
from ...protocol.schemas import (COMPILED, ITEM_ID_SCHEMA, LOCATION, MAX_TOP_K, AddItemsRequest, AddItemsResponse, CreateIndexRequest,
                      DeleteItemsRequest, DeleteItemsResponse, DuplicatesRequest, DuplicatesResponse,
                      IndexListResponse, IndexQueryRequest, IndexQueryResponse, IndexResponse, TenantListResponse,
                      body_doc, errors, operation_id)

router = APIRouter(prefix="/v1/indexes", tags=["indexes"], generate_unique_id_function=operation_id,
                   dependencies=[Depends(require_api_key), Depends(refuse_unknown_query)],
                   responses=errors(401, 403, 422, 429, 503, 507))
BODY_ERRORS = errors(404, 409, 413, 415, 422)
# Answers of routes that hash or compare vectors with the index's map (whose kernels may compile in the request).
COMPUTED = {200: {"description": "Successful Response", "headers": COMPILED}}
# Query parameters the routes read themselves (documented, so that .npy bodies can carry them).
ITEM_IDS_QUERY = {"name": "ids", "description": "with an .npy body: one id per row (or the X-Item-Ids header)",
                  "schema": {"type": "array", "items": ITEM_ID_SCHEMA}, "style": "form", "explode": True}
QUERY_OPTIONS = ({"name": "top_k", "description": "with an .npy body: neighbours per query vector",
                  "schema": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 10},
                  "examples": query_examples(2, "2 neighbours (a JSON body's own top_k wins)")},
                 {"name": "min_similarity", "description": "with an .npy body: drop estimates below it",
                  "schema": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.0},
                  "examples": query_examples(0.1, "leave out neighbours below 0.1")},
                 {"name": "target_recall", "description": "with an .npy body: widen the search over the "
                  "index's forest until the S-curve promises this recall for the k-th result",
                  "schema": {"type": "number", "minimum": 0, "maximum": 1},
                  "examples": query_examples(0.9, "probe until recall 0.9 is promised (as far as the forest goes)")})

IndexId = Annotated[str, Path(openapi_examples=INDEX_ID_EXAMPLES)]
ITEM_IDS_HEADER = "x-item-ids"
# Bodies and answers this small are decoded and encoded on the event loop: in ~0.1 ms, less than
# a thread-pool hop (0.35 ms measured here); see also the index's own INLINE_ROWS.
SMALL_BODY_BYTES = 16 * 1024
SMALL_ANSWER_ROWS = 8


async def _cpu(small: bool, function, *args):
    return function(*args) if small else await run_in_threadpool(function, *args)


async def tenant_indexes(tenant: str = Depends(index_tenant), state: ServiceState = Depends(get_state)) -> AsyncLSHIndexes:
    """The indexes of the request's tenant (the key's own; another's with ?tenant= and the admin scope): an
    index name is looked up there only, so another tenant's index is a 404 like one that does not exist."""
    return state.indexes_of(tenant)


Indexes = Annotated[AsyncLSHIndexes, Depends(tenant_indexes)]


async def _open(state: ServiceState, indexes: AsyncLSHIndexes, index_id: str,
                stored_bytes_limit: int | None = None) -> AsyncLSHIndex:
    """The stored index with its map (from the map cache, built from the spec copy the index keeps,
    so an index outlives the deletion of its map); its writes refused past the tenant's `stored_bytes_limit`
    (featurehash.store.lsh_accounting: every write is counted, limited or not)."""
    config, meta, items = await indexes.load(index_id)
    feature_map = await state.map_for_spec(config.map_spec)
    return indexes.bind(config, meta, feature_map, items, stored_bytes_limit)




def _item_ids(body, request: Request) -> Any:
    """ids from the JSON body, or for an .npy body from the X-Item-Ids header (a JSON array)
    or repeated ?ids= query parameters."""
    header, params = request.headers.get(ITEM_IDS_HEADER), request.query_params.getlist("ids")
    if isinstance(body, dict):
        if header is not None or params:
            raise InputError("ids", "a JSON body carries its ids in its \"ids\" field, not in the X-Item-Ids "
                             "header or ?ids= parameters")
        if "ids" not in body:
            raise InputError("ids", "missing: send one id per vector")
        return body["ids"]
    if header is not None and params:
        raise InputError("ids", "send ids in the X-Item-Ids header or as ?ids= parameters, not both")
    if header is None:
        if not params:
            raise InputError("ids", "an .npy body needs its ids in the X-Item-Ids header (a JSON array of "
                             "strings) or as repeated ?ids= parameters")
        return params
    try:
        # Starlette reads header bytes as Latin-1; the header's bytes are UTF-8 (or ASCII with \u escapes).
        header = header.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(ITEM_IDS_HEADER, "not UTF-8: send the JSON array as UTF-8, or as ASCII with \\u "
                         "escapes") from None
    try:
        return orjson.loads(header)
    except orjson.JSONDecodeError:
        raise InputError("ids", "the X-Item-Ids header must be a JSON array of strings") from None


def _query_option(body, request: Request, name: str, default):
    """A query option from the JSON body, else from the query string (the only place with .npy)."""
    if isinstance(body, dict) and name in body:
        return body[name]
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InputError(name, "must be a number") from None


def _results_document(result: QueryResult) -> Response:
    return json_response({"results": [[{"id": item_id, "similarity": similarity} for item_id, similarity in found]
                                      for found in result.results],
                          "candidates": result.candidates, "estimated_recall": result.estimated_recall,
                          "rows_probed": result.rows_probed})


# -- the index resource ----------------------------------------------------------------------------

@router.post("", status_code=201, response_model=IndexResponse, openapi_extra=body_doc(CreateIndexRequest, npy=False),
             responses={201: {"description": "created", "headers": LOCATION},
                        200: {"model": IndexResponse, "description": "an index of that name, map and banding existed",
                              "headers": LOCATION}, **errors(404, 409, 413, 415, 422)}, dependencies=[Depends(WRITE)])
async def create_index(request: Request, indexes: Indexes, state: ServiceState = Depends(get_state)):
    fields = parse_model(await request.body(), request.headers.get("content-type"), CreateIndexRequest)
    feature_map = await state.load_map(fields.map_id)
    index = await indexes.create(feature_map, name=fields.name, bands=fields.bands, rows=fields.rows,
                                       threshold=fields.threshold, recall_at_threshold=fields.recall_at_threshold,
                                       vectors=fields.vectors, forest_rows=fields.forest_rows,
                                       expected_items=fields.expected_items, shards=fields.shards)
    if index.created and await state.store.get(fields.map_id) is None:
        # A DELETE of the map ran meanwhile (the map may also have come from the cache, which trusts the
        # store for settings.map_staleness_seconds): it came first, so this create answers as it would
        # have after it, and the index made over the deleted map goes. That DELETE checks for indexes
        # again after deleting (routes_maps.delete_map): one of the two always sees the other.
        try:
            await indexes.delete(index.config.name)
        except IndexNotFound:
            pass  # deleted by its own DELETE meanwhile
        state.forget(fields.map_id)
        raise MapNotFound(fields.map_id)
    described = await index.describe()
    return json_response(described, status_code=201 if index.created else 200,
                         headers={"Location": f"/v1/indexes/{described['id']}"})


@router.get("", response_model=IndexListResponse, responses=errors(422), dependencies=[Depends(READ)])
async def list_indexes(indexes: Indexes, after: str | None = Query(default=None, description="cursor from the previous page (an index "
                                                "name: the page starts after it)", openapi_examples=query_examples(
                                                    "docs", "the indexes after the example 'docs'")),
                       limit: int = Query(default=100, ge=1, le=1000,
                                          openapi_examples=query_examples(10, "at most 10 indexes a page")),
                       state: ServiceState = Depends(get_state)):
    described, cursor = await indexes.list(after=after, limit=limit)
    return json_response({"indexes": described, "next": cursor})


@router.get("/{index_id}", response_model=IndexResponse, responses=errors(404), dependencies=[Depends(READ)])
async def get_index(index_id: IndexId, indexes: Indexes):
    return json_response(await indexes.describe(index_id))


@router.delete("/{index_id}", status_code=204, responses={204: {"description": "deleted"}, **errors(404, 409)},
               dependencies=[Depends(WRITE)])
async def delete_index(index_id: IndexId, indexes: Indexes):
    """Forgets the index at once, then removes its keys (SCAN + UNLINK) before answering."""
    await indexes.delete(index_id)
    return Response(status_code=204)


# -- items and queries -----------------------------------------------------------------------------

@router.post("/{index_id}/items", response_model=AddItemsResponse, responses={**COMPUTED, **BODY_ERRORS},
             openapi_extra=body_doc(AddItemsRequest, query=(ITEM_IDS_QUERY,), text_with=TEXT_INDEX),
             dependencies=[Depends(WRITE)])
async def add_items(index_id: IndexId, request: Request, indexes: Indexes, state: ServiceState = Depends(get_state)):
    """Adds or replaces items, written in pipelined transactions of a few hundred items."""
    raw = await read_body(request)
    limit = tenant_stored_bytes(state.keys.current(), indexes.tenant, request.state.principal)
    index = await _open(state, indexes, index_id, limit)
    content_type = request.headers.get("content-type")

    def decode():
        body = parse_body(raw, content_type)
        X, field, spent = state.input_rows(body, "vectors", index.feature_map)
        state.check_work(index.feature_map, X, field, spent=spent)   # the codes of the rows: their hash
        ids = check_item_ids(_item_ids(body, request), X.shape[0])
        BATCH_ROWS.labels("index_add").observe(X.shape[0])
        return ids, X

    ids, X = await _cpu(len(raw) <= SMALL_BODY_BYTES, decode)
    return json_response(await index.add(ids, X))


@router.delete("/{index_id}/items/{item_id}", status_code=204,
               responses={204: {"description": "deleted"}, **errors(404, 409, 422)}, dependencies=[Depends(WRITE)])
async def delete_item(request: Request, indexes: Indexes,
                      index_id: IndexId,
                      item_id: str = Path(description="the id, percent-encoded (ids are stored as UTF-8)",
                                          json_schema_extra=ITEM_ID_SCHEMA, openapi_examples=ITEM_ID_EXAMPLES),
                      state: ServiceState = Depends(get_state)):
    """One item; an id that is not one path segment is refused (send it to .../items/delete)."""
    raw_item_id = request.scope.get("raw_path", b"").rsplit(b"/", 1)[-1]
    if b"%" in raw_item_id and percent_decoded_utf8(raw_item_id) is None:
        raise InputError("item_id", "not UTF-8 once percent-decoded (it would be read as U+FFFD: another id)")
    check_path_item_id(item_id)
    index = await _open(state, indexes, index_id)
    if not await index.remove([item_id]):
        raise ItemNotFound(item_id)
    return Response(status_code=204)


@router.post("/{index_id}/items/delete", response_model=DeleteItemsResponse, responses=BODY_ERRORS,
             openapi_extra=body_doc(DeleteItemsRequest, npy=False), dependencies=[Depends(WRITE)])
async def delete_items(index_id: IndexId, request: Request, indexes: Indexes,
                       state: ServiceState = Depends(get_state)):
    """Removes the items with these ids (any stored id, whatever its characters); the ids that were
    not in the index come back as "missing"."""
    fields = parse_model(await request.body(), request.headers.get("content-type"), DeleteItemsRequest)
    if len(fields.ids) > state.settings.max_batch_rows:
        raise InputError("ids", f"{len(fields.ids)} ids exceed the batch limit of {state.settings.max_batch_rows}")
    index = await _open(state, indexes, index_id)
    removed = set(await index.remove(list(dict.fromkeys(fields.ids))))
    return json_response({"removed": len(removed), "missing": [i for i in dict.fromkeys(fields.ids)
                                                               if i not in removed]})


@router.post("/{index_id}/query", response_model=IndexQueryResponse, responses={**COMPUTED, **BODY_ERRORS},
             openapi_extra=body_doc(IndexQueryRequest, query=QUERY_OPTIONS, text_with=TEXT_INDEX),
             dependencies=[Depends(READ)])
async def query_index(index_id: IndexId, request: Request, indexes: Indexes, state: ServiceState = Depends(get_state)):
    """Candidates from the query's band buckets (one pipelined round trip for the batch), re-ranked
    by the exact kernel on stored vectors (or the match fraction of all k codes); with target_recall,
    widened over the forest levels until the S-curve promises it. With `ids`, the queries are stored
    items (their stored codes and vectors), each left out of its own results."""
    raw = await read_body(request)
    index = await _open(state, indexes, index_id)
    content_type = request.headers.get("content-type")

    def decode():
        body = parse_body(raw, content_type)
        top_k = check_top_k(_query_option(body, request, "top_k", 10))
        min_similarity = _query_option(body, request, "min_similarity", 0.0)
        target_recall = _query_option(body, request, "target_recall", None)
        ids = query_item_ids(body) if isinstance(body, dict) else None
        if ids is not None:
            if len(ids) > state.settings.max_batch_rows:
                raise InputError("ids", f"{len(ids)} ids exceed the batch limit of {state.settings.max_batch_rows}")
            BATCH_ROWS.labels("index_query").observe(len(ids))
            return ids, top_k, min_similarity, target_recall, "ids", 0.0
        X, field, spent = state.input_rows(body, "vectors", index.feature_map)
        state.check_work(index.feature_map, X, field, spent=spent)   # the query rows' codes (not the re-ranking)
        BATCH_ROWS.labels("index_query").observe(X.shape[0])
        return X, top_k, min_similarity, target_recall, field, spent

    rows, top_k, min_similarity, target_recall, field, spent = await _cpu(len(raw) <= SMALL_BODY_BYTES, decode)
    search = index.query_items if isinstance(rows, list) else index.query
    total = candidates_within(index.config.vectors, index.feature_map.input_dim,
                              state.settings.request_work_seconds - spent)
    try:
        result = await search(rows, top_k=top_k, min_similarity=min_similarity, target_recall=target_recall,
                              max_candidates=state.settings.max_query_candidates, max_total_candidates=total)
    except TooManyCandidates as refused:
        raise InputError(field, f"{refused.reason}, more than this service re-ranks in one request "
                         "(FEATUREHASH_REQUEST_WORK_SECONDS); query fewer rows at a time") from None
    return await _cpu(len(result.results) <= SMALL_ANSWER_ROWS, _results_document, result)


@router.post("/{index_id}/duplicates", response_model=DuplicatesResponse,
             responses={200: {"description": "the clusters (JSON, or NDJSON with Accept: application/x-ndjson)",
                              "content": {NDJSON: {"schema": {"type": "string"}}}, "headers": COMPILED},
                        **BODY_ERRORS},
             openapi_extra=body_doc(DuplicatesRequest, npy=False), dependencies=[Depends(READ)])
async def find_duplicates(index_id: IndexId, request: Request, indexes: Indexes,
                          state: ServiceState = Depends(get_state)):
    """The clusters of near-duplicates among the stored items: pairs sharing a band bucket, verified
    (exact kernel on stored vectors, else the codes), grouped (featurehash.store.index.duplicates).
    Synchronous, so bounded: an index over FEATUREHASH_MAX_DUPLICATES_ITEMS items, or whose bucket
    scan and candidate pairs the cost model puts over FEATUREHASH_REQUEST_WORK_SECONDS, is refused."""
    fields = parse_model(await request.body(), request.headers.get("content-type"), DuplicatesRequest)
    index = await _open(state, indexes, index_id)
    found = await bounded_duplicates(index, state.settings, fields.threshold, fields.mode, fields.min_cluster_size)
    return duplicates_answer(found, NDJSON in (request.headers.get("accept") or ""))


tenants_router = APIRouter(prefix="/v1/tenants", tags=["tenants"], generate_unique_id_function=operation_id,
                           dependencies=[Depends(ADMIN), Depends(refuse_unknown_query)],
                           responses=errors(401, 403, 422, 429, 503))


@tenants_router.get("", response_model=TenantListResponse)
async def list_tenants(state: ServiceState = Depends(get_state)):
    """Every tenant: those the keys name and those that created an index (admin scope). A tenant's
    indexes are listed with GET /v1/indexes?tenant=<name>."""
    tenants = set(await state.indexes.tenants()) | state.keys.current().tenants
    return json_response({"tenants": sorted(tenants)})
