"""Normalized random Fourier features (Li, "Linearized GMM kernels and normalized random
Fourier features", KDD 2017, section 2; its theorems: docs/methods/fourier.md, "NRFF: Li 2017").

Kernel: RBF(u, v; gamma) = exp(-gamma (1 - rho)), rho = <u, v> / (||u|| ||v||).
Inputs are scaled to unit l2 norm u; z_j(u) = sqrt(2) cos(sqrt(gamma) r_j^T u + w_j),
r_j ~ N(0, I), w_j ~ U[0, 2 pi) (the "phase" form of the paper; "cos_sin" is offered
too), and the map returns z / ||z||. The inner product of two outputs estimates the
kernel with asymptotic variance V_n / k (Theorem 3), below plain RFF's V / k
(Theorem 2). A vector with no nonzero entry has no direction and is rejected, unless
`empty_rows` is "zero" (its features are then the zero vector: featurehash.maps.base.EMPTY_ROWS).

Bias: consistent, not unbiased. The estimate is A / sqrt(B C) with A, B, C the means over the D
features of z(u) z(v), z(u)^2, z(v)^2; dividing by the estimated norms adds, to first order in 1/D
(delta method; for the phase form Cov(a, b) = k / 2, Var(b) = 1 / 2, Cov(b, c) = k^4 / 2),
    E[estimate] - k = -(k - k^5) / (8 D) + O(D^-2),       k = exp(-gamma (1 - rho)),
always an underestimate, largest at k = 5^(-1/4) = 0.67: 0.067 / D, i.e. 2.6e-4 at D = 256 and
6.5e-5 at D = 1024, against a standard deviation sqrt(V_n / D) of about 0.036 and 0.018 there: the
bias is 1% of the error's spread and 1e-4 of its mean square. tests/maps/fourier/test_nrff.py checks the formula
at D = 16 and 64 (the measurements: docs/methods/fourier.md, "NRFF's bias"). The "cos_sin" form's norms are
exactly 1 (cos^2 + sin^2 for every frequency), so its normalisation changes nothing and it is unbiased, with
plain RFF's variance.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_serializer

from .. import kernels
from .. import randomness
from ..base import EMPTY_ROWS, without_default_empty_rows
from .rff import GaussianFrequencyParams, RFFMap, UnitSphereInputs, without_default_frequencies


class NRFFParams(GaussianFrequencyParams):
    gamma: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    variant: Literal["phase", "cos_sin"] = "phase"
    empty_rows: Literal[EMPTY_ROWS["dense"]] = "error"   # featurehash.maps.base.EMPTY_ROWS

    @model_serializer(mode="wrap")
    def _omit_default_frequencies(self, handler):   # the parent's name: this serializer replaces it
        return without_default_empty_rows(without_default_frequencies(handler(self)))


class NRFFMap(UnitSphereInputs, RFFMap):
    method = "nrff"
    Params = NRFFParams

    def _unit_law(self):
        return randomness.normal

    def _frequency_scale(self) -> float:
        return float(np.sqrt(self.params.gamma))

    normalizes_rows = True

    def _feature_weight(self) -> float:
        return 1.0

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        return self._on_directions(kernels.normalized_rbf, X, Y, self.params.gamma)
