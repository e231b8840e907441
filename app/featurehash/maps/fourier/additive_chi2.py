"""The additive chi-squared map of Vedaldi & Zisserman ("Efficient additive kernels via explicit feature
maps", PAMI 2012), as scikit-learn's AdditiveChi2Sampler.

Kernel: k(x, y) = sum_i 2 x_i y_i / (x_i + y_i) for nonnegative x, y (histograms); 0/0 terms count 0.
Per coordinate k(x, y) = sqrt(x y) K(log y - log x) with K(lambda) = sech(lambda / 2), whose spectrum
kappa(w) = sech(pi w) is sampled deterministically at w = j L, j = 0 .. n - 1 (L = `sample_interval`,
n = `sample_steps`):
    phi_0(x) = sqrt(x L),
    phi_j(x) = sqrt(2 x L sech(pi j L)) [cos(j L log x), sin(j L log x)],  j = 1 .. n - 1,
and a zero entry gives zero features. The estimate is L sum_{|j|<n} kappa(jL) cos(jL lambda) sqrt(xy):
by Poisson summation the periodisation sum_k K(lambda + 2 pi k / L) truncated in frequency, so the error
per coordinate is sqrt(x y) times (aliasing + truncation), small where |log(y / x)| << pi / L.

No randomness: the seed is unused. Output dim = input_dim (2 n - 1), laid out as scikit-learn's: the
block of phi_0 for every coordinate, then the cos block and the sin block of j = 1, then of j = 2, ...
so n_components, which may be left out of the spec (it is then that number), must equal it. Default intervals as scikit-learn (from the
paper's figure 2c): 0.8, 0.5, 0.4 for 1, 2, 3 steps; other step counts need `sample_interval`.
Negative entries are refused (as scikit-learn). Features are float32 unless float64 is asked for; float64
features are one compiled pass (`_fourier_kernels.additive_chi2_rows`, its own cos and sin);
sparse CSR input costs O(nnz) (dense features of n x D are still written; `transform_sparse` keeps the
output CSR, as scikit-learn does for sparse input).
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field

from .. import kernels
from ..base import DenseFeatureMap, require
from ..errors import SpecError
from ..inputs import output_dtype, reject_negative
from ..spec import MapSpec
from . import _fourier_kernels as compiled

DEFAULT_INTERVALS = {1: 0.8, 2: 0.5, 3: 0.4}
MAX_SAMPLE_STEPS = 64


class AdditiveChi2Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sample_steps: int = Field(default=2, ge=1, le=MAX_SAMPLE_STEPS, strict=True)
    sample_interval: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class AdditiveChi2Map(DenseFeatureMap):
    method = "additive_chi2"
    Params = AdditiveChi2Params

    @classmethod
    def complete_params(cls, params: AdditiveChi2Params, *, input_dim: int, n_components: int,
                        seed: int) -> AdditiveChi2Params:
        if params.sample_interval is not None:
            return params
        if params.sample_steps not in DEFAULT_INTERVALS:
            raise SpecError("params.sample_interval", "if sample_steps is not in [1, 2, 3], you need to provide "
                            "sample_interval")
        return params.model_copy(update={"sample_interval": DEFAULT_INTERVALS[params.sample_steps]})

    @classmethod
    def derived_n_components(cls, input_dim, params: AdditiveChi2Params) -> int | None:
        if isinstance(input_dim, int) and not isinstance(input_dim, bool) and input_dim >= 1:
            return input_dim * (2 * params.sample_steps - 1)
        return None   # MapSpec then names input_dim

    @classmethod
    def check_spec(cls, spec: MapSpec) -> None:
        width = spec.input_dim * (2 * spec.params["sample_steps"] - 1)
        require(spec.n_components == width, "n_components",
                f"additive chi2 features are input_dim * (2 sample_steps - 1) = {width} wide: n_components must "
                f"be {width}")

    @property
    def planned_nbytes(self) -> int:
        return 0

    @property
    def nbytes(self) -> int:
        return 0

    def check(self, X, field: str = "vectors", *, first_row: int = 0):
        X = super().check(X, field, first_row=first_row)
        reject_negative(X, field, self.method)
        return X

    def _blocks(self, values: np.ndarray, outs: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """The features of `values` (nonnegative; a zero gives zeros), one array per output block,
        written into `outs` if given."""
        interval, dtype = self.params.sample_interval, values.dtype.type
        outs = outs or [np.empty_like(values) for _ in range(2 * self.params.sample_steps - 1)]
        if values.dtype == np.float64 and values.size:
            blocks = np.empty((len(outs), values.size))
            if compiled.additive_chi2_values(values, blocks, interval, self._coshes) == 0:
                for block, features in zip(blocks, outs):
                    features[...] = block
                return outs
        np.sqrt(values * dtype(interval), out=outs[0])
        if self.params.sample_steps > 1:
            log_step = np.log(np.where(values > 0, values, dtype(1.0))) * dtype(interval)
            step = values * dtype(2.0 * interval)
            for j in range(1, self.params.sample_steps):
                factor = np.sqrt(step / dtype(np.cosh(np.pi * j * interval)))
                angle = log_step * dtype(j)
                np.multiply(factor, np.cos(angle), out=outs[2 * j - 1])
                np.multiply(factor, np.sin(angle), out=outs[2 * j])
        return outs

    @functools.cached_property
    def _coshes(self) -> np.ndarray:
        """cosh(pi j L) for j = 0 .. sample_steps - 1, as `_blocks` computes them."""
        return np.array([np.cosh(np.pi * j * self.params.sample_interval) for j in range(self.params.sample_steps)])

    def _features_into(self, X, out: np.ndarray) -> None:
        d = self.input_dim
        if isinstance(X, np.ndarray) and X.dtype == np.float64 and X.flags.c_contiguous:
            if compiled.additive_chi2_rows(X, out, self.params.sample_interval, self._coshes) == 0:
                return   # one compiled pass; else (an angle beyond its reduction) numpy's below
        if sp.issparse(X):
            out[...] = 0
            rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
            for block, features in enumerate(self._blocks(X.data)):
                out[rows, block * d + X.indices] = features
        else:  # the nonzeros only (histograms are mostly zeros), scattered by a boolean mask
            out[...] = 0
            nonzero = X != 0
            for block, features in enumerate(self._blocks(X[nonzero])):
                out[:, block * d:(block + 1) * d][nonzero] = features

    def transform_sparse(self, X, *, dtype=None) -> sp.csr_matrix:
        """The features as CSR with the nonzero pattern of X repeated per block (O(nnz))."""
        X = self.check(X)
        dtype = output_dtype(dtype)
        X = self._working_copy(sp.csr_matrix(X), dtype)
        pattern = (X.indices, X.indptr)
        return sp.hstack([sp.csr_matrix((block, *pattern), shape=X.shape) for block in self._blocks(X.data)],
                         format="csr")

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        return kernels.additive_chi2(X, Y)
