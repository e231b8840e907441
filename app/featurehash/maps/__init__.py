"""Kernel feature maps: numerics only (no web framework, no storage).

    from featurehash.maps import create_map
    m = create_map({"method": "rff", "input_dim": 64, "n_components": 1024, "params": {"gamma": 0.5}})
    Z = m.transform(X)          # dense (n, 1024) float32
    m.kernel(X, Y), m.exact_kernel(X, Y)

Importing this package is cheap (no numba, no scipy): a method's module, and what it computes with, is
imported when the method is first used (`registry.METHODS`), and the map classes when first asked for.
"""

from typing import TYPE_CHECKING, Any

from .errors import FeatureHashError, InputError, SpecError, UnsupportedOperation
from .registry import METHODS, create_map, output_dim, requested_spec, resolve_spec
from .spec import FORMAT_VERSION, MapSpec

if TYPE_CHECKING:  # pragma: no cover
    from .base import FeatureMap, OneHotFeatures

__all__ = [
    "FORMAT_VERSION",
    "METHODS",
    "FeatureHashError",
    "FeatureMap",
    "InputError",
    "MapSpec",
    "OneHotFeatures",
    "SpecError",
    "UnsupportedOperation",
    "create_map",
    "output_dim",
    "requested_spec",
    "resolve_spec",
]


def __getattr__(name: str) -> Any:
    if name in ("FeatureMap", "OneHotFeatures"):
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
