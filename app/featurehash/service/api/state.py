"""ServiceState: what one worker process of the service holds, and the work on maps every route shares.

One is made per worker at start-up (`service.app.create_app`'s lifespan) and put at `app.state.service`; routes
reach it through `deps.get_state` or `deps.checked_state`. It owns:

- the spec store (`store`, Redis) and the per-process map cache (`cache`), kept honest by the spec watch
  (`watch`): `load_map` answers a map id with its materialised map, or MapNotFound (404);
- the LSH indexes (`indexes`, and `indexes_of(tenant)` for a tenant's own key prefix);
- the API keys (`keys`) and the per-key request limits (`quotas`), read by the dependencies in `deps`;
- pricing: `build_map` sizes a new map before it grows, `check_work` / `check_text_work` refuse a batch whose
  CPU cost (`maps.cost`) is over the request budget, naming the field (dense-row prices are kept per map);
- decoding of rows: `input_rows` turns a request body's rows (vectors, sparse vectors, text) into what the
  map takes, within the batch limit.

It is not a FastAPI dependency itself (nothing here reads a request), so it lives apart from `deps`.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field

import scipy.sparse
from starlette.concurrency import run_in_threadpool

from ..auth import DEFAULT_TENANT, KeySource
from ..config import Settings
from ..first_calls import Warmups, install_listener
from ..map_cache import MapCache
from ...maps import FeatureMap, InputError, create_map
from ...maps.cost import check_rows, row_seconds, transform_cost
from ...maps.registry import METHODS
from ...protocol.text_inputs import TextLimits, check_input_kind, rows_from
from ...store import SpecStore
from ...store.lsh_indexes import AsyncLSHIndexes
from ...store.spec_watch import SpecWatch
from .errors import MapNotFound
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
    # Each map's kernels, compiled in the background once this process builds the map (first_calls).
    warmups: Warmups = field(default_factory=Warmups)
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
        if method in METHODS and METHODS[method].randomness_table:
            return {"table_budget_bytes": self.settings.table_budget_bytes}
        return {}

    def build_map(self, spec: dict, *, work_seconds: float | None = None) -> FeatureMap:
        """The materialised map of `spec`. Sized before anything grows with it (a fit, a subset family, the
        parameters): at once; with `work_seconds` (a new map), also refused if its creation or one row would
        cost more CPU (stored specs are not: they are served as they were admitted)."""
        options = self.map_options(spec.get("method"))
        install_listener()   # a fit at creation compiles too: its seconds go on the request's clock
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
        kind = "documents" if field.endswith("documents") else "tokens"   # documents may take the compiled pass
        check_rows(spec, rows, chars, self.settings.request_work_seconds, field=field, multiplier=multiplier,
                   text_input=kind)
        return multiplier * transform_cost(spec, rows, chars, text_input=kind)

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
                await self.warmups.wait(map_id)
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
        """The (cached) map of a resolved spec, e.g. the copy an index keeps of its map's spec; once its
        kernels are compiled (`first_calls`: started when this process builds it)."""
        feature_map = self.cache.get(spec["id"])
        if feature_map is None:
            feature_map = await run_in_threadpool(self.build_map, spec)
            self.cache.put(feature_map)
            if self.settings.warm_maps:
                self.warmups.start(feature_map)
        await self.warmups.wait(feature_map.spec.id)
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
