"""What routes depend on: the service state (store, map cache, indexes, settings) and the API key."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from ..config import Settings
from ..map_cache import MapCache
from ..maps import FeatureMap, create_map
from ..store import SpecStore
from ..store.lsh_indexes import AsyncLSHIndexes
from .errors import MapNotFound, Unauthorized


@dataclass
class ServiceState:
    settings: Settings
    store: SpecStore
    cache: MapCache
    indexes: AsyncLSHIndexes

    def build_map(self, spec: dict) -> FeatureMap:
        # Maps with per-(sample, coordinate) randomness cache it in a table up to this budget.
        options = ({"table_budget_bytes": self.settings.table_budget_bytes}
                   if spec.get("method") in ("gcws", "binning") else {})
        # Sized before anything grows with it (a fit, a subset family, the parameters): at once.
        return create_map(spec, max_nbytes=self.settings.max_map_bytes, **options).materialize()

    async def load_map(self, map_id: str) -> FeatureMap:
        """The map if the store still has it (asked every time, so deletes reach all replicas)."""
        spec = await self.store.get(map_id)
        if spec is None:
            self.cache.discard(map_id)
            raise MapNotFound(map_id)
        return await self.map_for_spec(spec)

    async def map_for_spec(self, spec: dict) -> FeatureMap:
        """The (cached) map of a resolved spec, e.g. the copy an index keeps of its map's spec."""
        feature_map = self.cache.get(spec["id"])
        if feature_map is None:
            feature_map = await run_in_threadpool(self.build_map, spec)
            self.cache.put(feature_map)
        return feature_map


def get_state(request: Request) -> ServiceState:
    return request.app.state.service


_bearer = HTTPBearer(auto_error=False)


def require_api_key(request: Request,
                    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> None:
    expected = get_state(request).settings.api_key
    if expected is None:
        return
    supplied = credentials.credentials if credentials is not None else ""
    if not hmac.compare_digest(supplied.encode(), expected.get_secret_value().encode()):
        raise Unauthorized()
