"""Kernel feature maps: numerics only (no web framework, no storage).

    from featurehash.maps import create_map
    m = create_map({"method": "rff", "input_dim": 64, "n_components": 1024, "params": {"gamma": 0.5}})
    Z = m.transform(X)          # dense (n, 1024) float32
    m.kernel(X, Y), m.exact_kernel(X, Y)
"""

from .base import FeatureMap, OneHotFeatures
from .errors import FeatureHashError, InputError, SpecError, UnsupportedOperation
from .registry import METHODS, create_map, output_dim, requested_spec, resolve_spec
from .spec import FORMAT_VERSION, MapSpec

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
