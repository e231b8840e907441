"""Normalized random Fourier features (Li, "Linearized GMM kernels and normalized random
Fourier features", KDD 2017; papers/004_*, section 2).

Kernel: RBF(u, v; gamma) = exp(-gamma (1 - rho)), rho = <u, v> / (||u|| ||v||).
Inputs are scaled to unit l2 norm u; z_j(u) = sqrt(2) cos(sqrt(gamma) r_j^T u + w_j),
r_j ~ N(0, I), w_j ~ U[0, 2 pi) (the "phase" form of the paper; "cos_sin" is offered
too), and the map returns z / ||z||. The inner product of two outputs estimates the
kernel with asymptotic variance V_n / k (Theorem 3), below plain RFF's V / k
(Theorem 2). A vector with no nonzero entry has no direction and is rejected.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from .. import kernels
from . import randomness
from .rff import GaussianFrequencyParams, RFFMap, UnitSphereInputs


class NRFFParams(GaussianFrequencyParams):
    gamma: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    variant: Literal["phase", "cos_sin"] = "phase"


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
        return kernels.normalized_rbf(X, Y, self.params.gamma)
