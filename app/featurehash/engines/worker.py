"""The spec travels, the map is rebuilt: one map per spec id per worker process, never one per batch.

A spec is resolved once on the driver (fitted numbers included, so workers never refit) and shipped
as its canonical JSON (hundreds of bytes to a few KB, never the map's parameter arrays). A worker
(a Spark Python worker, which Spark reuses across tasks, or a Ray actor or task process) builds the
map on the first batch that names its id and keeps it, with the last few others, for every later
batch; the first batch also pays numba's kernel compilation unless NUMBA_CACHE_DIR holds it.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from ..maps import FeatureMap, MapSpec, create_map

# Maps one worker process keeps built (each holds its parameters, e.g. d x D floats for RFF).
WORKER_MAP_CACHE = 8

_maps: OrderedDict[str, FeatureMap] = OrderedDict()
_lock = threading.Lock()
builds: Counter[str] = Counter()   # maps built by this process, by spec id (the tests check: once)


class ShippedSpec(NamedTuple):
    """What goes into a Spark closure or a Ray actor's arguments: the id and the canonical JSON."""

    id: str
    document: bytes


def resolve(spec: Mapping[str, Any] | MapSpec | ShippedSpec) -> tuple[FeatureMap, ShippedSpec]:
    """The map (on the driver, for its output width and checks) and the spec to ship."""
    if isinstance(spec, ShippedSpec):
        return worker_map(spec), spec
    feature_map = create_map(spec)
    shipped = ShippedSpec(feature_map.spec.id, orjson.dumps(feature_map.spec.to_dict(),
                                                            option=orjson.OPT_SORT_KEYS))
    with _lock:   # the driver's map serves a local worker in the same process too
        _maps.setdefault(shipped.id, feature_map)
    return feature_map, shipped


def worker_map(shipped: ShippedSpec) -> FeatureMap:
    """This process's map for the shipped spec, built on first use."""
    with _lock:
        feature_map = _maps.get(shipped.id)
        if feature_map is not None:
            _maps.move_to_end(shipped.id)
            return feature_map
    feature_map = create_map(orjson.loads(shipped.document))
    with _lock:
        builds[shipped.id] += 1
        _maps[shipped.id] = feature_map
        while len(_maps) > WORKER_MAP_CACHE:
            _maps.popitem(last=False)
    return feature_map
