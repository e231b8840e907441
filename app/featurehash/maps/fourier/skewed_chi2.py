"""Random features for the skewed chi-squared kernel (Li, Ionescu, Sminchisescu, "Random Fourier
approximations for skewed multiplicative histogram kernels", DAGM 2010), as scikit-learn's SkewedChi2Sampler.

Kernel: k(x, y) = prod_i 2 sqrt(x_i + c) sqrt(y_i + c) / (x_i + y_i + 2 c), c = `skewedness` > 0, for
entries x_i > -c. With u = log(x + c) it is prod_i sech((u_i - v_i) / 2), a shift-invariant kernel in u
whose spectrum is prod_i sech(pi w_i): Bochner's theorem gives random Fourier features in u,
    z(x) = sqrt(2 / D) cos(W^T log(x + c) + b),
W_ij from the hyperbolic secant law, by inversion w = log(tan(pi U / 2)) / pi (its CDF is
(2 / pi) atan(exp(pi w))), b ~ U[0, 2 pi). E<z(x), z(y)> = k(x, y); each of the D terms
2 cos(w.u + b) cos(w.v + b) has variance at most 3/2 - k^2, so Var <z(x), z(y)> <= (3/2 - k^2) / D.
Randomness: `randomness.raw_words` blocks "skewed_chi2.frequencies" (D x d) and "skewed_chi2.offsets".
Entries <= -c are refused (log(x + c) does not exist). cos(P + b), weighted, is the compiled phase pass
of the Fourier maps (`_fourier_pass`). Features are float32 unless float64 is asked for; input is dense (log(x + c) of a zero is not zero, so sparse input is densified chunk by chunk, as
scikit-learn refuses it).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field

from .. import kernels
from .. import randomness
from ..base import DenseFeatureMap
from ..errors import InputError
from ._fourier_pass import FourierPass


class SkewedChi2Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    skewedness: float = Field(default=1.0, gt=0, allow_inf_nan=False)


def hyperbolic_secant(words: np.ndarray) -> np.ndarray:
    """Variates of density sech(pi w) by inversion: log(tan(pi U / 2)) / pi."""
    return np.log(np.tan(0.5 * np.pi * randomness.uniform_open(words))) / np.pi


class SkewedChi2Map(DenseFeatureMap):
    method = "skewed_chi2"
    Params = SkewedChi2Params

    def __init__(self, spec):
        super().__init__(spec)
        self._parameters: dict[np.dtype, tuple[np.ndarray, np.ndarray]] = {}
        self._passes: dict[np.dtype, FourierPass] = {}
        self._projectors: dict = {}

    def _parameters_for(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        if dtype not in self._parameters:
            D, d = self.output_dim, self.input_dim
            frequencies = hyperbolic_secant(randomness.raw_words(self.spec.seed, f"{self.method}.frequencies", D * d))
            offsets = randomness.phase(randomness.raw_words(self.spec.seed, f"{self.method}.offsets", D))
            self._parameters[dtype] = (np.ascontiguousarray(frequencies.reshape(D, d).T, dtype=dtype),
                                       offsets.astype(dtype))
        return self._parameters[dtype]

    def materialize(self) -> "SkewedChi2Map":
        self._parameters_for(np.dtype(np.float32))
        return self

    @property
    def planned_nbytes(self) -> int:
        return 4 * self.output_dim * (self.input_dim + 1)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for pair in self._parameters.values() for a in pair)

    def check(self, X, field: str = "vectors", *, first_row: int = 0):
        X = super().check(X, field, first_row=first_row)
        values = X.data if sp.issparse(X) else X
        lowest = float(values.min()) if values.size else 0.0
        if sp.issparse(X) and X.nnz < X.shape[0] * X.shape[1]:
            lowest = min(lowest, 0.0)
        if lowest <= -self.params.skewedness:
            raise InputError(field, f"X may not contain entries smaller than -skewedness "
                             f"({-self.params.skewedness}): got {lowest}")
        return X

    def _working_copy(self, X, dtype: np.dtype):
        X = X.toarray() if sp.issparse(X) else X
        return np.log(X.astype(np.float64) + self.params.skewedness).astype(dtype, copy=False)

    def _features_into(self, X, out: np.ndarray) -> bool:
        return self._pass_for(out.dtype).run(self._projectors[out.dtype], X, out)

    def _pass_for(self, dtype: np.dtype) -> FourierPass:
        """sqrt(2 / D) cos(P + b) by the compiled phase pass of the Fourier maps (float64: one range reduction
        and a polynomial that vectorise, where numpy's float64 cos is a libm call per element)."""
        if dtype not in self._passes:
            frequencies, offsets = self._parameters_for(dtype)
            self._projectors[dtype] = lambda rows, into: np.matmul(rows, frequencies, out=into)
            self._passes[dtype] = FourierPass(dtype, np.full(self.output_dim, np.sqrt(2.0 / self.output_dim)),
                                              offsets)
        return self._passes[dtype]

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        return kernels.skewed_chi2(X, Y, self.params.skewedness)
