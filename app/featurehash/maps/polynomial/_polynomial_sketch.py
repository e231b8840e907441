"""What the polynomial-kernel baselines (Random Maclaurin, TensorSketch) share.

Both target K(x, y) = (q + <x, y>)^p on the raw inputs (`coef0` q >= 0, `degree` p >= 1), not
restricted to the sphere, through the homogeneous kernel of the augmented vectors
x' = [sqrt(q), x]: (q + <x, y>)^p = <x', y'>^p. Coordinate 0 of x' is the constant sqrt(q);
it is never materialised, its random parameters are kept apart and added to every row.

Features are computed in float32 unless float64 is asked for, in row chunks. A product of p
factors overflows sooner than the kernel does not: features that leave the floating range
are refused with a clear error rather than returned as inf.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .. import kernels
from ..base import DenseFeatureMap
from ..spec import MapSpec

# The estimates' variance grows geometrically with p (the point of SRF); past this they are useless.
MAX_DEGREE = 100


class PolynomialParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    degree: int = Field(default=3, ge=1, le=MAX_DEGREE, strict=True)
    coef0: float = Field(default=1.0, ge=0, allow_inf_nan=False)


def random_signs(words: np.ndarray) -> np.ndarray:
    """+1 or -1 from the top bit of each raw word (`featurehash.maps.randomness`; docs/exactness.md)."""
    return 1.0 - 2.0 * (words >> np.uint64(63)).astype(np.float64)


class PolynomialSketchMap(DenseFeatureMap):
    """A dense map for (q + <x, y>)^p; subclasses fill `_features_into` and the parameters."""

    Params = PolynomialParams
    overflow_hint = "(coef0 + <x, x>)^degree is too large for it"

    def __init__(self, spec: MapSpec):
        super().__init__(spec)
        self._parameters: dict[np.dtype, object] = {}

    def _parameters_for(self, dtype: np.dtype):
        if dtype not in self._parameters:
            self._parameters[dtype] = self._make_parameters(dtype)
        return self._parameters[dtype]

    def _make_parameters(self, dtype: np.dtype):
        raise NotImplementedError

    def materialize(self) -> "PolynomialSketchMap":
        self._parameters_for(np.dtype(np.float32))
        return self

    def _features_into(self, X, out: np.ndarray) -> None:
        self._sketch_into(X, out)  # a row whose features overflow is refused by the caller

    def _magnitude_bound(self, l1: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Each of the p factors (a signed sum, a count sketch or its spectrum) is at most
        ||x'||_1 = sqrt(q) + ||x||_1 in magnitude, D times that for an unnormalised transform."""
        return (self.output_dim * (np.sqrt(self.params.coef0) + l1)) ** self.params.degree

    def _sketch_into(self, X, out: np.ndarray) -> None:
        raise NotImplementedError

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        """(coef0 + <x, y>)^degree on the raw rows."""
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        return kernels.polynomial(X, Y, self.params.degree, self.params.coef0)
