"""A per-process LRU of materialised feature maps, bounded by their parameter bytes.

Specs are immutable and content-addressed, so a cached map never goes stale; whether a
map still exists is asked of the store on every request, which is how a delete on one
replica stops the map on all of them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..maps import FeatureMap


class MapCache:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._maps: OrderedDict[str, FeatureMap] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, map_id: str) -> FeatureMap | None:
        with self._lock:
            feature_map = self._maps.get(map_id)
            if feature_map is not None:
                self._maps.move_to_end(map_id)
            return feature_map

    def put(self, feature_map: FeatureMap) -> None:
        """Insert (or refresh) a map, then evict the least recently used past the budget.

        The newest map stays even when it alone exceeds the budget: it is in use.
        """
        with self._lock:
            self._maps[feature_map.spec.id] = feature_map
            self._maps.move_to_end(feature_map.spec.id)
            while len(self._maps) > 1 and self._total() > self.max_bytes:
                self._maps.popitem(last=False)

    def discard(self, map_id: str) -> None:
        with self._lock:
            self._maps.pop(map_id, None)

    def _total(self) -> int:
        return sum(m.nbytes for m in self._maps.values())

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._total()

    def __len__(self) -> int:
        return len(self._maps)
