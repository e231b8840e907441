"""Error responses: every client mistake is a 4xx naming the field, Redis trouble a 503 (507 when Redis
refuses or cannot persist a write for want of memory or disk), all with Retry-After.

Body (schemas.ErrorResponse): {"detail": "<field>: <message>", "field": "<field>"}. An operation a map
does not offer (hash on a dense map) is a 422 naming "method", like every other unusable input.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from redis.exceptions import BusyLoadingError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.requests import ClientDisconnect

from ...maps import FeatureHashError
from ...store.durability import WriteRefused, refusal_of
from ...store.lsh_index import IndexConflict, IndexNotFound, ItemNotFound
from ...store.redis_steps import TransactionConflict
from .admission import Refused
from .metrics import QUOTA_REFUSALS
from .quotas import TooManyRequests
from ...store.lsh_accounting import StoredBytesExceeded
from ...store.map_accounting import MapBytesExceeded, SpecTooLarge
from ...protocol.codecs import UnsupportedMediaType
from .responses import json_response


logger = logging.getLogger("featurehash")


class MapNotFound(Exception):
    def __init__(self, map_id: str):
        super().__init__(map_id)
        self.map_id = map_id


class MapInUse(Exception):
    """The map's indexes: `index_ids` the caller may see, `other_tenants` how many tenants' indexes it may not."""

    def __init__(self, map_id: str, index_ids: list[str], other_tenants: int = 0):
        super().__init__(map_id)
        self.map_id, self.index_ids, self.other_tenants = map_id, index_ids, other_tenants


class Unauthorized(Exception):
    pass


class Forbidden(Exception):
    """403: the key is known but lacks `scope` (named in the answer, which clients raise as ScopeRequired)."""

    def __init__(self, scope, principal, why: str = ""):
        super().__init__(scope)
        self.scope, self.principal, self.why = scope, principal, why


class BodyTooLarge(Exception):
    def __init__(self, limit: int):
        super().__init__(limit)
        self.limit = limit


class NotAcceptable(Exception):
    """406: the answer cannot take the asked-for form (sparse features as .npy)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message


def error_response(status: int, field: str, message: str, headers: dict[str, str] | None = None):
    return json_response({"detail": f"{field}: {message}", "field": field}, status_code=status, headers=headers)


# The operations that write (by their endpoint's name): creating a map or an index is idempotent (the same spec,
# the same configuration), and so are adds and removals by item id and deletions.
WRITE_ROUTES = frozenset({"create_map", "delete_map", "create_index", "delete_index", "add_items", "delete_item",
                          "delete_items"})


def store_trouble(exc: Exception, route_name: str | None, timeout_seconds: float) -> str:
    """What a 503 can say when Redis did not answer as it should: what is known of a write, and that repeating the
    request is safe (creating maps and indexes, adding and removing items by id are idempotent)."""
    text = str(exc)
    if isinstance(exc, RedisTimeoutError):
        what = f"Redis did not answer within {timeout_seconds:g} s"
    elif isinstance(exc, BusyLoadingError) or text.startswith("LOADING"):
        what = "Redis is loading its data after a restart"
    elif text.startswith("BUSY"):
        what = "Redis is busy running another client's script"
    else:
        return f"Redis is unreachable ({type(exc).__name__}); retry shortly"
    if route_name not in WRITE_ROUTES:
        return f"{what}; retry shortly"
    return f"{what}; the write may have been applied; repeating the same request is safe"


def install_error_handlers(app: FastAPI, retry_after_seconds: int, redis_timeout_seconds: float = 2.0) -> None:
    @app.exception_handler(FeatureHashError)
    async def feature_hash_error(request: Request, exc: FeatureHashError):
        return error_response(422, exc.field, exc.message)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        first = exc.errors()[0]
        if first.get("type") == "json_invalid":
            return error_response(422, "body", "invalid JSON")
        location = [str(part) for part in first.get("loc", ()) if part not in ("body", "query", "path")]
        return error_response(422, ".".join(location) or "body", first.get("msg", "invalid"))

    @app.exception_handler(MapNotFound)
    async def map_not_found(request: Request, exc: MapNotFound):
        return error_response(404, "map_id", f"no map with id {exc.map_id!r}")

    @app.exception_handler(MapInUse)
    async def map_in_use(request: Request, exc: MapInUse):
        if exc.other_tenants:
            own = f" (and your indexes {_names(exc.index_ids)})" if exc.index_ids else ""
            return error_response(409, "map_id", f"indexes of {exc.other_tenants} other tenant"
                                  f"{'s' if exc.other_tenants > 1 else ''} use map {exc.map_id!r}{own}; maps are "
                                  "shared, so it stays while they do (an admin key can delete it)")
        return error_response(409, "map_id", f"indexes {_names(exc.index_ids)} use map {exc.map_id!r}; delete them "
                              "first, or pass ?force=true (they keep answering from their own copy of the spec)")

    @app.exception_handler(IndexNotFound)
    async def index_not_found(request: Request, exc: IndexNotFound):
        return error_response(404, "index_id", f"no index named {exc.name!r}")

    @app.exception_handler(ItemNotFound)
    async def item_not_found(request: Request, exc: ItemNotFound):
        return error_response(404, "item_id", f"no item {exc.item_id!r} in this index")

    @app.exception_handler(IndexConflict)
    async def index_conflict(request: Request, exc: IndexConflict):
        return error_response(409, exc.field, exc.message)

    @app.exception_handler(TransactionConflict)
    async def transaction_conflict(request: Request, exc: TransactionConflict):
        return error_response(409, "ids", f"{exc}; retry", headers={"Retry-After": str(retry_after_seconds)})

    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, exc: Unauthorized):
        return error_response(401, "authorization", "a valid 'Bearer <api key>' header is required",
                              headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden):
        granted = ", ".join(sorted(scope.value for scope in exc.principal.scopes)) or "none"
        why = f" ({exc.why})" if exc.why else ""
        return error_response(403, "scope", f"this operation requires the {exc.scope.value!r} scope{why}; the key "
                              f"{exc.principal.key_id!r} grants {granted}")

    @app.exception_handler(TooManyRequests)
    async def too_many_requests(request: Request, exc: TooManyRequests):
        what = f"{exc.value:g} requests per second" if exc.limit == "requests_per_second" else \
            f"{exc.value} concurrent requests"
        return error_response(429, exc.limit, f"key {exc.principal.key_id!r} is over its limit of {what}; retry "
                              f"after {exc.retry_after} s", headers={"Retry-After": str(exc.retry_after)})

    def count_refusal(request: Request) -> None:
        principal = request.scope.get("state", {}).get("principal")
        if principal is not None:
            QUOTA_REFUSALS.labels(principal.tenant, "stored_bytes").inc()

    @app.exception_handler(StoredBytesExceeded)
    async def stored_bytes_exceeded(request: Request, exc: StoredBytesExceeded):
        count_refusal(request)
        done = f"; the request's first {exc.stored} items were stored (and are counted)" if exc.stored else ""
        return error_response(507, "stored_bytes", f"the tenant's maps and indexes hold {exc.used} bytes of its limit "
                              f"of {exc.limit}; these items need {exc.needed} more. Nothing of them was written{done}: "
                              "remove items or delete indexes or maps, or ask for a larger limit")

    @app.exception_handler(MapBytesExceeded)
    async def map_bytes_exceeded(request: Request, exc: MapBytesExceeded):
        count_refusal(request)
        need = "no new map fits" if exc.needed is None else \
            f"map {exc.map_id!r} needs {exc.needed} more (its stored spec)"
        return error_response(507, "stored_bytes", f"the tenant's maps and indexes hold {exc.used} bytes of its limit "
                              f"of {exc.limit}; {need}. Nothing was stored: delete maps or indexes the tenant no "
                              "longer uses, or ask for a larger limit")

    @app.exception_handler(SpecTooLarge)
    async def spec_too_large(request: Request, exc: SpecTooLarge):
        return error_response(413, exc.field, f"the map's stored spec would take {exc.size} bytes, over the limit of "
                              f"{exc.limit} bytes a map (FEATUREHASH_MAX_SPEC_BYTES), and this field is its largest "
                              "part: make it smaller (fewer components or sample rows). Nothing was stored")

    @app.exception_handler(BodyTooLarge)
    async def body_too_large(request: Request, exc: BodyTooLarge):
        return error_response(413, "body", f"larger than the limit of {exc.limit} bytes; send smaller batches")

    @app.exception_handler(NotAcceptable)
    async def not_acceptable(request: Request, exc: NotAcceptable):
        return error_response(406, exc.field, exc.message)

    @app.exception_handler(UnsupportedMediaType)
    async def unsupported_media_type(request: Request, exc: UnsupportedMediaType):
        return error_response(415, "content-type", f"{exc.media_type!r} is not accepted; "
                              "use application/json or application/x-npy")

    @app.exception_handler(HTTPException)
    async def http_exception(request: Request, exc: HTTPException):
        """The router's own answers (no route, wrong method) in the one error body."""
        if exc.status_code == 404:
            return error_response(404, "path", f"no route {request.url.path!r}")
        if exc.status_code == 405:
            named = (exc.headers or {}).get("Allow", "")  # a mounted app's (the docs assets) own list
            allowed = sorted(set(allowed_methods(request)) | {m.strip() for m in named.split(",") if m.strip()})
            return error_response(405, "method", f"{request.method} is not allowed on this path; it takes "
                                  f"{', '.join(allowed)}", headers={"Allow": ", ".join(allowed)})
        return error_response(exc.status_code, "request", str(exc.detail), headers=exc.headers)

    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused):  # admission control: 503 "load" or 413 "body"
        return error_response(exc.status, exc.field, exc.message, headers=exc.headers)

    @app.exception_handler(ClientDisconnect)
    async def body_cut_off(request: Request, exc: ClientDisconnect):
        # The body stopped: the client left, or it stalled and connection_guard answered 408 and closed. Either
        # way nobody reads this answer; it is what the access log and metrics record (not a 500 and a traceback).
        return error_response(408, "body", "the connection closed before the whole body arrived")

    async def store_unavailable(request: Request, exc: Exception):
        return error_response(503, "store", store_trouble(exc, _route_name(request), redis_timeout_seconds),
                              headers={"Retry-After": str(retry_after_seconds)})

    app.add_exception_handler(RedisConnectionError, store_unavailable)
    app.add_exception_handler(RedisTimeoutError, store_unavailable)

    @app.exception_handler(WriteRefused)
    async def write_refused(request: Request, exc: WriteRefused):
        return error_response(507 if exc.insufficient_storage else 503, "store", f"{exc.cause}; not done, retry "
                              "later", headers={"Retry-After": str(retry_after_seconds)})

    @app.exception_handler(ResponseError)
    async def store_error(request: Request, exc: ResponseError):
        refusal = refusal_of(exc)
        if refusal is not None:
            return await write_refused(request, refusal)
        if str(exc).startswith(("BUSY", "LOADING")):  # a transient state: another client's script, a restart
            return await store_unavailable(request, exc)
        logger.error("Redis answered an error", exc_info=exc)  # a bug or a foreign key under the prefix
        return error_response(500, "store", f"Redis answered an error ({type(exc).__name__})")

def _route_name(request: Request) -> str | None:
    route = request.scope.get("route")
    return getattr(route, "name", None)


def _names(index_ids: list[str]) -> str:
    shown = ", ".join(repr(index_id) for index_id in index_ids[:5])
    return shown + (f" and {len(index_ids) - 5} more" if len(index_ids) > 5 else "")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app takes on this path (the router names only the first route's)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if getattr(route, "methods", None) and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods
    return sorted(methods)
