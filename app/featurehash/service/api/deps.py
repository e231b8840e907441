"""The FastAPI dependencies of the routes: the service state, the API key and its scope, the tenant, the query.

- `get_state`: the worker's ServiceState (`state.py`: store, map cache, indexes, pricing, rows);
- `require_api_key` and `Requires` (`READ`, `WRITE`, `ADMIN`): 401 without a known key, 403 naming the scope a
  key lacks, then the key's request limits (quotas.RequestQuotas);
- `index_tenant`: whose indexes a request acts on (`?tenant=`, admin only);
- `refuse_unknown_query`: a 422 naming a query parameter the route does not read.

Most routes declare these as FastAPI dependencies. The compute routes online scoring calls once per
event are plain (`checked_state`, `query_value`): solving a route's dependencies took longer than transforming
a vector, so they make the same checks themselves, in the same order, with the same answers."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from fastapi import Depends, Query, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from pydantic import TypeAdapter

from ..auth import Principal, Scope, is_tenant_name
from ...maps import InputError
from ...protocol.examples import query_examples
from ...protocol.options import query_parameter
from .errors import Forbidden, Unauthorized
from .state import ServiceState


# The dependencies are `async def` though they never await: FastAPI runs a plain `def` dependency in the
# thread pool, a hop that costs more than the dependency itself on every request.
async def get_state(request: Request) -> ServiceState:
    return request.app.state.service


async def refuse_unknown_query(request: Request) -> None:
    """A query parameter the route does not read is a 422 naming it, never silently ignored."""
    _refuse_unknown_query(request)


def _refuse_unknown_query(request: Request) -> None:
    if not request.scope["query_string"]:
        return
    if b"%" in request.scope["query_string"]:  # else plain ASCII (h11 refuses other bytes in a target)
        refuse_invalid_utf8(request.scope["query_string"])
    unknown = sorted(set(request.query_params) - _query_names(request.scope["route"]))
    if unknown:
        raise InputError(unknown[0], f"this route takes no query parameter {unknown[0]!r}")


def refuse_invalid_utf8(query_string: bytes) -> None:
    """A 422 naming the parameter whose percent-decoded bytes are not UTF-8 (Starlette would read them
    as U+FFFD replacement characters: another value than the one sent)."""
    for pair in query_string.split(b"&"):
        name, _, value = pair.partition(b"=")
        decoded_name = percent_decoded_utf8(name, plus_is_space=True)
        if decoded_name is None:
            raise InputError("query", "a parameter name is not UTF-8 once percent-decoded")
        if percent_decoded_utf8(value, plus_is_space=True) is None:
            raise InputError(decoded_name, "not UTF-8 once percent-decoded")


def percent_decoded_utf8(part: bytes, *, plus_is_space: bool = False) -> str | None:
    """A percent-encoded URL part as text, or None where its bytes are not UTF-8 ('+' is a space in a query)."""
    try:
        return unquote_to_bytes(part.replace(b"+", b" ") if plus_is_space else part).decode()
    except UnicodeDecodeError:
        return None


def _query_names(route: APIRoute) -> frozenset[str]:
    """What the route declares: FastAPI's query parameters and those its openapi_extra documents."""
    names = _QUERY_NAMES.get(id(route))  # routes live as long as the app
    if names is None:
        documented = (route.openapi_extra or {}).get("parameters", [])
        names = frozenset(_declared_query(route.dependant) + [p["name"] for p in documented if p.get("in") == "query"])
        _QUERY_NAMES[id(route)] = names
    return names


def _declared_query(dependant) -> list[str]:
    names = [field.alias for field in dependant.query_params]
    for sub in dependant.dependencies:
        names += _declared_query(sub)
    return names


_QUERY_NAMES: dict[int, frozenset[str]] = {}
_bearer = HTTPBearer(auto_error=False)


async def require_api_key(request: Request,
                          credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Principal:
    """The caller's principal (401 without a known key), put at request.state.principal."""
    return _authenticate(request, request.app.state.service,
                         credentials.credentials if credentials is not None else "")


def _authenticate(request: Request, state: ServiceState, supplied: str) -> Principal:
    principal = state.keys.current().resolve(supplied)
    if principal is None:
        raise Unauthorized()
    request.scope.setdefault("state", {})["principal"] = principal  # what request.state.principal reads
    return principal


# The operation's required scope in the OpenAPI document (openapi.build_document).
SCOPE_EXTENSION = "x-required-scope"


class Requires:
    """A route's dependency on a scope (after require_api_key): 403 naming it when the key lacks it.
    openapi.build_document finds it on each route to document the scope."""

    def __init__(self, scope: Scope):
        self.scope = scope

    async def __call__(self, request: Request, principal: Principal = Depends(require_api_key)) -> Principal:
        await _authorize(request, request.app.state.service, principal, self.scope)
        return principal


async def _authorize(request: Request, state: ServiceState, principal: Principal, scope: Scope) -> None:
    """403 naming `scope` when the key lacks it; then the key's request limits (quotas.RequestQuotas), once its
    scope is known to be enough."""
    if not principal.allows(scope):
        raise Forbidden(scope, principal)
    if state.quotas is not None:
        await state.quotas.admit(request, principal)


READ, WRITE, ADMIN = (Requires(scope) for scope in (Scope.READ, Scope.WRITE, Scope.ADMIN))


async def checked_state(request: Request, scope: Scope = Scope.READ) -> ServiceState:
    """A plain route's service state, after require_api_key's, Requires(scope)'s and refuse_unknown_query's checks,
    then the key's request limits (quotas.RequestQuotas: no Redis for a key without any)."""
    state = request.app.state.service
    ring = state.keys.current()
    if ring.open:
        request.scope.setdefault("state", {})["principal"] = ring.resolve("")
    else:
        principal = _authenticate(request, state, _bearer_token(_authorization(request.scope["headers"])))
        await _authorize(request, state, principal, scope)
    _refuse_unknown_query(request)
    return state


async def index_tenant(tenant: str | None = Query(
        default=None, description="admin only: act on this tenant's indexes (default: the key's own tenant)",
        openapi_examples=query_examples("team-a", "the indexes of tenant 'team-a'")),
        principal: Principal = Depends(require_api_key)) -> str:
    """The tenant whose indexes a request names: the key's own, or with ?tenant= (admin scope) another's."""
    if tenant is None or tenant == principal.tenant:
        return principal.tenant
    if not principal.is_admin:
        raise Forbidden(Scope.ADMIN, principal, "?tenant= names another tenant")
    if not is_tenant_name(tenant):
        raise InputError("tenant", "1-63 characters from a-z 0-9 _ -, starting with a letter or digit")
    return tenant


def _authorization(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The Authorization header as request.headers.get reads it (the first one, Latin-1), without building the
    Headers object (which cost ~1 us, as much as hashing and looking up the key: bench/bench_auth.py)."""
    for name, value in headers:
        if name == b"authorization":
            return value.decode("latin-1")
    return None


def _bearer_token(authorization: str | None) -> str:
    """The credentials HTTPBearer(auto_error=False) would pass on ("" where it passes None)."""
    scheme, credentials = get_authorization_scheme_param(authorization)
    return credentials if authorization and scheme and credentials and scheme.lower() == "bearer" else ""


def query_value(request: Request, name: str, adapter: TypeAdapter, default):
    """A plain route's query parameter, validated as FastAPI would (a 422 naming it)."""
    if not request.scope["query_string"]:
        return default
    raw = request.query_params.get(name)
    return default if raw is None else query_parameter(raw, name, adapter)
