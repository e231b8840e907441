"""featurehash: seeded kernel feature maps as a library and an HTTP service.

    from featurehash import create_map
    m = create_map({"method": "rff", "input_dim": 64, "n_components": 1024, "params": {"gamma": 0.5}})
    Z = m.transform(X)

The maps (numerics) load on first use, so `featurehash --version` and the service's launcher
start without importing numpy, scipy or numba.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.6.1"

# Names re-exported from featurehash.maps, loaded when first asked for.
_MAP_EXPORTS = ("FORMAT_VERSION", "METHODS", "FeatureHashError", "FeatureMap", "InputError", "MapSpec",
                "OneHotFeatures", "SpecError", "UnsupportedOperation", "create_map", "output_dim", "resolve_spec")

__all__ = ["__version__", *_MAP_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover
    from .maps import (FORMAT_VERSION, METHODS, FeatureHashError, FeatureMap, InputError, MapSpec,  # noqa: F401
                       OneHotFeatures, SpecError, UnsupportedOperation, create_map, output_dim, resolve_spec)


def __getattr__(name: str) -> Any:
    if name in _MAP_EXPORTS:
        from . import maps

        return getattr(maps, name)
    raise AttributeError(f"module 'featurehash' has no attribute {name!r}")
