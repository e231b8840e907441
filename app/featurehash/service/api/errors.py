"""Error responses: every client mistake is a 4xx naming the field, Redis trouble a 503 (507 when Redis
refuses or cannot persist a write for want of memory or disk), all with Retry-After.

Body (schemas.ErrorResponse): {"detail": "<field>: <message>", "field": "<field>"}. An operation a map
does not offer (hash on a dense map) is a 422 naming "method", like every other unusable input.

The answers are one table, ERROR_ANSWERS: per exception type an ErrorAnswer giving the status, the field and
the message (a constant, or a small function of the exception), the headers (Retry-After where a retry will
do), and whether the answer is logged or counted; install_error_handlers installs one handler per row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request, Response
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
from ...store.index.handles import IndexConflict, IndexNotFound, ItemNotFound
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


@dataclass(frozen=True)
class ErrorContext:
    """What an answer's functions may read besides the exception: the request and the service's settings."""

    request: Request
    retry_after_seconds: int
    redis_timeout_seconds: float


# A part of an answer: a constant, or a function of (the exception, its ErrorContext).
Part = Callable[[Any, ErrorContext], Any]


@dataclass(frozen=True)
class ErrorAnswer:
    """How one exception type is answered: the error body's status, field and message, its headers, and what
    else happens (logged, counted). Each of status, field, message and headers is a constant or a Part."""

    status: int | Part
    field: str | Part
    message: str | Part
    headers: dict[str, str] | Part | None = None
    # Retry-After: True for the service's retry_after_seconds (the trouble is the service's, and passes), or a
    # function of the exception for the seconds it knows (a quota's next token).
    retry_after: bool | Callable[[Any], int] = False
    # Logged at ERROR with the traceback: an answer nobody expects (a bug), which the client cannot fix.
    log: str | None = None
    # A refusal QUOTA_REFUSALS counts, under this limit and the caller's tenant.
    counted: str | None = None
    # Another answer (and the exception it takes) where this exception's text says it is another trouble.
    instead: Callable[[Any], tuple[ErrorAnswer, BaseException] | None] | None = None

    def response(self, exc: BaseException, context: ErrorContext) -> Response:
        other = self.instead(exc) if self.instead is not None else None
        if other is not None:
            answer, exc = other
            return answer.response(exc, context)
        if self.counted is not None:
            principal = context.request.scope.get("state", {}).get("principal")
            if principal is not None:
                QUOTA_REFUSALS.labels(principal.tenant, self.counted).inc()
        if self.log is not None:
            logger.error(self.log, exc_info=exc)
        headers = _part(self.headers, exc, context)
        if self.retry_after:
            seconds = context.retry_after_seconds if self.retry_after is True else self.retry_after(exc)
            headers = {**(headers or {}), "Retry-After": str(seconds)}
        return error_response(_part(self.status, exc, context), _part(self.field, exc, context),
                              _part(self.message, exc, context), headers=headers)


def _part(part, exc: BaseException, context: ErrorContext):
    return part(exc, context) if callable(part) else part


def _own_field(exc, _) -> str:
    return exc.field


def _own_message(exc, _) -> str:
    return exc.message


def _validation_field(exc: RequestValidationError, _) -> str:
    first = exc.errors()[0]
    if first.get("type") == "json_invalid":
        return "body"
    return ".".join(str(part) for part in first.get("loc", ()) if part not in ("body", "query", "path")) or "body"


def _validation_message(exc: RequestValidationError, _) -> str:
    first = exc.errors()[0]
    return "invalid JSON" if first.get("type") == "json_invalid" else first.get("msg", "invalid")


def _map_in_use(exc: MapInUse, _) -> str:
    if exc.other_tenants:
        own = f" (and your indexes {_names(exc.index_ids)})" if exc.index_ids else ""
        return (f"indexes of {exc.other_tenants} other tenant{'s' if exc.other_tenants > 1 else ''} use map "
                f"{exc.map_id!r}{own}; maps are shared, so it stays while they do (an admin key can delete it)")
    return (f"indexes {_names(exc.index_ids)} use map {exc.map_id!r}; delete them first, or pass ?force=true "
            "(they keep answering from their own copy of the spec)")


def _forbidden(exc: Forbidden, _) -> str:
    granted = ", ".join(sorted(scope.value for scope in exc.principal.scopes)) or "none"
    why = f" ({exc.why})" if exc.why else ""
    return (f"this operation requires the {exc.scope.value!r} scope{why}; the key {exc.principal.key_id!r} "
            f"grants {granted}")


def _too_many_requests(exc: TooManyRequests, _) -> str:
    what = (f"{exc.value:g} requests per second" if exc.limit == "requests_per_second"
            else f"{exc.value} concurrent requests")
    return f"key {exc.principal.key_id!r} is over its limit of {what}; retry after {exc.retry_after} s"


def _stored_bytes_exceeded(exc: StoredBytesExceeded, _) -> str:
    done = f"; the request's first {exc.stored} items were stored (and are counted)" if exc.stored else ""
    return (f"the tenant's maps and indexes hold {exc.used} bytes of its limit of {exc.limit}; these items need "
            f"{exc.needed} more. Nothing of them was written{done}: remove items or delete indexes or maps, or ask "
            "for a larger limit")


def _map_bytes_exceeded(exc: MapBytesExceeded, _) -> str:
    need = "no new map fits" if exc.needed is None else f"map {exc.map_id!r} needs {exc.needed} more (its stored spec)"
    return (f"the tenant's maps and indexes hold {exc.used} bytes of its limit of {exc.limit}; {need}. Nothing was "
            "stored: delete maps or indexes the tenant no longer uses, or ask for a larger limit")


def _spec_too_large(exc: SpecTooLarge, _) -> str:
    return (f"the map's stored spec would take {exc.size} bytes, over the limit of {exc.limit} bytes a map "
            "(FEATUREHASH_MAX_SPEC_BYTES), and this field is its largest part: make it smaller (fewer components or "
            "sample rows). Nothing was stored")


# The router's own answers (no route, wrong method) in the one error body; any other HTTPException as it says.
def _http_field(exc: HTTPException, _) -> str:
    return {404: "path", 405: "method"}.get(exc.status_code, "request")


def _http_message(exc: HTTPException, context: ErrorContext) -> str:
    request = context.request
    if exc.status_code == 404:
        return f"no route {request.url.path!r}"
    if exc.status_code == 405:
        return f"{request.method} is not allowed on this path; it takes {', '.join(_allowed(exc, request))}"
    return str(exc.detail)


def _http_headers(exc: HTTPException, context: ErrorContext) -> dict[str, str] | None:
    if exc.status_code == 404:
        return None
    if exc.status_code == 405:
        return {"Allow": ", ".join(_allowed(exc, context.request))}
    return exc.headers


def _allowed(exc: HTTPException, request: Request) -> list[str]:
    named = (exc.headers or {}).get("Allow", "")  # a mounted app's (the docs assets) own list
    return sorted(set(allowed_methods(request)) | {method.strip() for method in named.split(",") if method.strip()})


def _store_trouble(exc: Exception, context: ErrorContext) -> str:
    return store_trouble(exc, _route_name(context.request), context.redis_timeout_seconds)


STORE_UNAVAILABLE = ErrorAnswer(503, "store", _store_trouble, retry_after=True)
WRITE_REFUSED = ErrorAnswer(lambda exc, _: 507 if exc.insufficient_storage else 503, "store",
                            lambda exc, _: f"{exc.cause}; not done, retry later", retry_after=True)


def _redis_error_instead(exc: ResponseError) -> tuple[ErrorAnswer, BaseException] | None:
    """A Redis error reply that is a refused write (out of memory, read-only, ...: WRITE_REFUSED) or a transient
    state (another client's script, a restart: STORE_UNAVAILABLE); else it is answered as a 500, logged."""
    refusal = refusal_of(exc)
    if refusal is not None:
        return WRITE_REFUSED, refusal
    if str(exc).startswith(("BUSY", "LOADING")):
        return STORE_UNAVAILABLE, exc
    return None


# Exception type -> its answer. Starlette picks the row of the nearest class in the exception's MRO
# (MapBytesExceeded before StoredBytesExceeded, BusyLoadingError as a RedisConnectionError).
ERROR_ANSWERS: dict[type[BaseException], ErrorAnswer] = {
    FeatureHashError: ErrorAnswer(422, _own_field, _own_message),
    RequestValidationError: ErrorAnswer(422, _validation_field, _validation_message),
    MapNotFound: ErrorAnswer(404, "map_id", lambda exc, _: f"no map with id {exc.map_id!r}"),
    MapInUse: ErrorAnswer(409, "map_id", _map_in_use),
    IndexNotFound: ErrorAnswer(404, "index_id", lambda exc, _: f"no index named {exc.name!r}"),
    ItemNotFound: ErrorAnswer(404, "item_id", lambda exc, _: f"no item {exc.item_id!r} in this index"),
    IndexConflict: ErrorAnswer(409, _own_field, _own_message),
    TransactionConflict: ErrorAnswer(409, "ids", lambda exc, _: f"{exc}; retry", retry_after=True),
    Unauthorized: ErrorAnswer(401, "authorization", "a valid 'Bearer <api key>' header is required",
                              headers={"WWW-Authenticate": "Bearer"}),
    Forbidden: ErrorAnswer(403, "scope", _forbidden),
    TooManyRequests: ErrorAnswer(429, lambda exc, _: exc.limit, _too_many_requests,
                                 retry_after=lambda exc: exc.retry_after),
    StoredBytesExceeded: ErrorAnswer(507, "stored_bytes", _stored_bytes_exceeded, counted="stored_bytes"),
    MapBytesExceeded: ErrorAnswer(507, "stored_bytes", _map_bytes_exceeded, counted="stored_bytes"),
    SpecTooLarge: ErrorAnswer(413, _own_field, _spec_too_large),
    BodyTooLarge: ErrorAnswer(413, "body", lambda exc, _: f"larger than the limit of {exc.limit} bytes; "
                              "send smaller batches"),
    NotAcceptable: ErrorAnswer(406, _own_field, _own_message),
    UnsupportedMediaType: ErrorAnswer(415, "content-type", lambda exc, _: f"{exc.media_type!r} is not accepted; "
                                      "use application/json or application/x-npy"),
    HTTPException: ErrorAnswer(lambda exc, _: exc.status_code, _http_field, _http_message, headers=_http_headers),
    # Admission control: a 503 "load" (with Retry-After) or a 413 "body", as it decided.
    Refused: ErrorAnswer(lambda exc, _: exc.status, _own_field, _own_message, headers=lambda exc, _: exc.headers),
    # The body stopped: the client left, or it stalled and connection_guard answered 408 and closed. Either way
    # nobody reads this answer; it is what the access log and metrics record (not a 500 and a traceback).
    ClientDisconnect: ErrorAnswer(408, "body", "the connection closed before the whole body arrived"),
    RedisConnectionError: STORE_UNAVAILABLE,
    RedisTimeoutError: STORE_UNAVAILABLE,
    WriteRefused: WRITE_REFUSED,
    # Neither refused nor transient: a bug or a foreign key under the prefix.
    ResponseError: ErrorAnswer(500, "store", lambda exc, _: f"Redis answered an error ({type(exc).__name__})",
                               log="Redis answered an error", instead=_redis_error_instead),
}


def install_error_handlers(app: FastAPI, retry_after_seconds: int, redis_timeout_seconds: float = 2.0) -> None:
    """One handler per row of ERROR_ANSWERS."""
    for exception, answer in ERROR_ANSWERS.items():
        app.add_exception_handler(exception, _handler(answer, retry_after_seconds, redis_timeout_seconds))


def _handler(answer: ErrorAnswer, retry_after_seconds: int, redis_timeout_seconds: float):
    async def handle(request: Request, exc: BaseException) -> Response:  # async: no thread-pool hop
        return answer.response(exc, ErrorContext(request, retry_after_seconds, redis_timeout_seconds))
    return handle


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
