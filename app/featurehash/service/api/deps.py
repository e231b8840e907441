"""What routes depend on: the service state (store, map cache, indexes, settings) and the API key.

Most routes declare these as FastAPI dependencies. The compute routes online scoring calls once per
event are plain (`checked_state`): solving a route's dependencies took longer than transforming a
vector, so they make the same checks themselves, in the same order, with the same answers."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

import scipy.sparse
from fastapi import Depends, Query, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from pydantic import TypeAdapter
from starlette.concurrency import run_in_threadpool

from ..auth import DEFAULT_TENANT, KeySource, Principal, Scope, is_tenant_name
from ..config import Settings
from ..map_cache import MapCache
from ...maps import FeatureMap, InputError, create_map
from ...maps.cost import check_rows, row_seconds, transform_cost
from ...protocol.examples import query_examples
from ...protocol.options import query_parameter
from ...protocol.text_inputs import TextLimits, check_input_kind, rows_from
from ...store import SpecStore
from ...store.lsh_indexes import AsyncLSHIndexes
from ...store.spec_watch import SpecWatch
from .errors import Forbidden, MapNotFound, Unauthorized
from .quotas import RequestQuotas


MAX_KEPT_PRICES = 4096  # maps whose dense-row prices check_work keeps (then it starts again)


def _done() -> threading.Event:
    done = threading.Event()
    done.set()
    return done


@dataclass
class ServiceState:
    settings: Settings
    store: SpecStore
    cache: MapCache
    indexes: AsyncLSHIndexes
    watch: SpecWatch
    keys: KeySource = field(default_factory=lambda: KeySource(None))
    # Per-key request limits (quotas.RequestQuotas); None: none are checked.
    quotas: "RequestQuotas | None" = None
    # Set once the compiled kernels are loaded (at once unless settings.preload_kernels).
    kernels_loaded: threading.Event = field(default_factory=_done)
    _tenant_indexes: dict[str, AsyncLSHIndexes] = field(default_factory=dict, repr=False)
    _dense_prices: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)

    def indexes_of(self, tenant: str) -> AsyncLSHIndexes:
        """The tenant's indexes: "default" keeps the service's key prefix (the keys indexes had before
        tenants), another tenant's live under `{key_prefix}tenant:{tenant}:` (store.lsh_layout.tenant_key_prefix)."""
        if tenant == DEFAULT_TENANT:
            return self.indexes
        found = self._tenant_indexes.get(tenant)
        if found is None:
            found = self._tenant_indexes[tenant] = self.indexes.for_tenant(tenant)
        return found

    def map_options(self, method: str | None) -> dict:
        # Maps with per-(sample, coordinate) randomness cache it in a table up to this budget.
        return {"table_budget_bytes": self.settings.table_budget_bytes} if method in ("gcws", "binning") else {}

    def build_map(self, spec: dict, *, work_seconds: float | None = None) -> FeatureMap:
        """The materialised map of `spec`. Sized before anything grows with it (a fit, a subset family, the
        parameters): at once; with `work_seconds` (a new map), also refused if its creation or one row would
        cost more CPU (stored specs are not: they are served as they were admitted)."""
        options = self.map_options(spec.get("method"))
        return create_map(spec, max_nbytes=self.settings.max_map_bytes, max_work_seconds=work_seconds,
                          **options).materialize()

    def _dense_row_seconds(self, feature_map: FeatureMap) -> tuple[float, float]:
        """maps.cost.row_seconds of the map's dense rows, priced once per map (a map id names its spec)."""
        spec = feature_map.spec
        found = self._dense_prices.get(spec.id)
        if found is None:
            found = row_seconds(spec, spec.input_dim, **self.map_options(feature_map.method))
            if len(self._dense_prices) >= MAX_KEPT_PRICES:
                self._dense_prices.clear()
            self._dense_prices[spec.id] = found
        return found

    @functools.cached_property
    def text_limits(self) -> TextLimits:
        settings = self.settings
        return TextLimits(settings.max_document_chars, settings.max_request_chars, settings.max_request_tokens)

    def check_work(self, feature_map: FeatureMap, X, field: str = "vectors", multiplier: float = 1.0,
                   spent: float = 0.0) -> None:
        """InputError naming `field` if transforming (or hashing) the rows of X `multiplier` times would cost more
        CPU than settings.request_work_seconds less `spent` (`maps.cost`); it says how many rows fit. Text rows of
        a hashing map (no shape) were priced by their characters (`check_text_work`)."""
        if not hasattr(X, "shape"):
            return
        sparse = scipy.sparse.issparse(X)
        budget = self.settings.request_work_seconds - spent
        if not sparse and X.shape[0]:  # dense rows: the map's two prices, kept (the same sum as check_rows's)
            fixed, per_row = self._dense_row_seconds(feature_map)
            if multiplier * (fixed + X.shape[0] * per_row) <= budget:
                return
        check_rows(feature_map.spec, X.shape[0], X.nnz if sparse else X.size, budget,
                   sparse=sparse, field=field, multiplier=multiplier, **self.map_options(feature_map.method))

    def check_text_work(self, feature_map: FeatureMap, rows: int, chars: int, field: str,
                        multiplier: float = 1.0) -> float:
        """InputError naming `field` if hashing `chars` characters of text in `rows` rows (the `hashing` formula:
        z = characters, the map's own method or its front stage) would cost more than the request budget; the
        seconds it costs otherwise (the map's own work gets the rest of the budget)."""
        spec = feature_map.spec if feature_map.text_stage is None else feature_map.text_stage.spec
        check_rows(spec, rows, chars, self.settings.request_work_seconds, field=field, multiplier=multiplier)
        return multiplier * transform_cost(spec, rows, chars)

    def input_rows(self, body, key: str, feature_map: FeatureMap, *, required: bool = True,
                   multiplier: float = 1.0) -> tuple | None:
        """(rows as the map takes them, the field they came from, the CPU seconds their text costs) for the rows
        under `key` or its text fields (featurehash.protocol.text_inputs), checked against the map (text only where
        it reads text), the batch limit and, for text, the CPU budget of their characters before any of them is
        analysed."""
        found = rows_from(body, key, feature_map.input_dim, self.text_limits, required=required)
        if found is None:
            return None
        check_input_kind(found, feature_map)
        seconds = 0.0
        if found.is_text:
            if len(found.X) > self.settings.max_batch_rows:
                raise InputError(found.field, f"{len(found.X)} rows exceed the batch limit of "
                                              f"{self.settings.max_batch_rows}; split the batch")
            seconds = self.check_text_work(feature_map, len(found.X), found.chars, found.field, multiplier)
        return checked_rows(found.X, feature_map, found.field, self.settings.max_batch_rows), found.field, seconds

    async def load_map(self, map_id: str) -> FeatureMap:
        """The map if the store still has it: asked of the store unless the watch vouches for it
        (then a delete anywhere reaches this replica within settings.map_staleness_seconds)."""
        if self.watch.confirmed(map_id):
            feature_map = self.cache.get(map_id)
            if feature_map is not None:
                return feature_map
        epoch = self.watch.epoch
        spec = await self.store.get(map_id)
        if spec is None:
            self.forget(map_id)
            raise MapNotFound(map_id)
        feature_map = await self.map_for_spec(spec)
        self.watch.confirm(map_id, epoch)
        return feature_map

    def forget(self, map_id: str) -> None:
        self.watch.forget(map_id)
        self.cache.discard(map_id)

    async def map_for_spec(self, spec: dict) -> FeatureMap:
        """The (cached) map of a resolved spec, e.g. the copy an index keeps of its map's spec."""
        feature_map = self.cache.get(spec["id"])
        if feature_map is None:
            feature_map = await run_in_threadpool(self.build_map, spec)
            self.cache.put(feature_map)
        return feature_map


def checked_rows(X, feature_map: FeatureMap, field: str, max_rows: int):
    """X as the map takes it (its own checks), within the service's batch limit: else an InputError naming `field`."""
    X = feature_map.check(X, field)
    if n_rows(X) > max_rows:
        raise InputError(field, f"{n_rows(X)} rows exceed the batch limit of {max_rows}; split the batch")
    return X


def n_rows(X) -> int:
    """Rows of an array, a CSR matrix or a hashing map's checked text (TokenRows)."""
    return X.shape[0] if hasattr(X, "shape") else X.n_rows


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
