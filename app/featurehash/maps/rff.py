"""Random Fourier features (Rahimi & Recht, NIPS 2007; papers/001_*).

Kernels: Gaussian k(x, y) = exp(-gamma ||x - y||_2^2), frequencies w ~ N(0, 2 gamma I);
Laplacian k(x, y) = exp(-gamma ||x - y||_1), frequencies w_i ~ Cauchy(0, gamma).

Features (D = n_components):
- "phase":   z(x) = sqrt(2/D) cos(W^T x + b), D frequencies, b ~ U[0, 2 pi);
- "cos_sin": z(x) = sqrt(2/D) [cos(W^T x), sin(W^T x)], D/2 frequencies; lower variance
  at equal D (Sutherland & Schneider, UAI 2015). E<z(x), z(y)> = k(x, y) for both.

Features are computed in float32 unless float64 is asked for, in row chunks so the
only temporaries are one chunk wide; sparse CSR input costs O(nnz * D).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field

from .. import kernels
from . import randomness
from .base import DenseFeatureMap, largest_magnitude, require
from .inputs import reject_zero_rows, unit_rows
from .spec import MapSpec



class RFFParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kernel: Literal["gaussian", "laplacian"] = "gaussian"
    gamma: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    variant: Literal["cos_sin", "phase"] = "cos_sin"


class RFFMap(DenseFeatureMap):
    method = "rff"
    Params = RFFParams
    # The parameter that scales the frequencies (named when they overflow).
    scale_field = "params.gamma"

    def __init__(self, spec: MapSpec):
        super().__init__(spec)
        self._n_frequencies = self._frequency_count(spec, self.params.variant)
        self._parameters: dict[np.dtype, tuple[np.ndarray, np.ndarray | None]] = {}
        self._largest_frequency: dict[np.dtype, float] = {}

    @staticmethod
    def _frequency_count(spec: MapSpec, variant: str) -> int:
        return spec.n_components // 2 if variant == "cos_sin" else spec.n_components

    @classmethod
    def check_spec(cls, spec: MapSpec) -> None:
        if spec.params["variant"] == "cos_sin":
            require(spec.n_components % 2 == 0 and spec.n_components >= 2, "n_components",
                    "variant 'cos_sin' pairs cos and sin features: n_components must be even")

    # -- random parameters ---------------------------------------------------------

    def _unit_frequencies(self, count: int) -> np.ndarray:
        """Frequencies before scaling by gamma, shape (count, d): one row per frequency."""
        out = np.empty((count, self.input_dim))
        self._fill_frequencies(out, 1.0)
        return out

    def _fill_frequencies(self, out: np.ndarray, scale: float) -> None:
        """out (count, d) = the frequencies times `scale`, in out's dtype, made in row blocks (the
        float64 temporaries are one block, not the matrix)."""
        d, law = self.input_dim, self._unit_law()
        for rows, words in randomness.row_blocks(self.spec.seed, f"{self.method}.frequencies", out.shape[0], d):
            out[rows] = law(words).reshape(-1, d) * scale

    def _unit_law(self):
        return randomness.cauchy if self.params.kernel == "laplacian" else randomness.normal

    def _frequency_scale(self) -> float:
        gamma = self.params.gamma
        return gamma if self.params.kernel == "laplacian" else float(np.sqrt(2.0 * gamma))

    def _parameters_for(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray | None]:
        if dtype not in self._parameters:
            m = self._n_frequencies
            frequencies = np.empty((m, self.input_dim), dtype=dtype)
            self._fill_frequencies(frequencies, self._frequency_scale())
            self._largest_frequency[dtype] = largest_magnitude(frequencies, self.scale_field)
            offsets = None
            if self.params.variant == "phase":
                words = randomness.raw_words(self.spec.seed, f"{self.method}.offsets", m)
                offsets = randomness.phase(words).astype(dtype)
            self._parameters[dtype] = (frequencies, offsets)
        return self._parameters[dtype]

    def materialize(self) -> "RFFMap":
        self._parameters_for(np.dtype(np.float32))
        return self

    @property
    def planned_nbytes(self) -> int:
        offsets = self._n_frequencies if self.params.variant == "phase" else 0
        return 4 * (self._n_frequencies * self.input_dim + offsets)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for pair in self._parameters.values() for a in pair if a is not None)

    # -- features ------------------------------------------------------------------

    def _magnitude_bound(self, l1: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """|w . x + b| <= ||x||_1 max|w| + 2 pi; cos and sin of a finite number are finite."""
        self._parameters_for(dtype)
        return l1 * self._largest_frequency[dtype] + 2.0 * np.pi

    def _features_into(self, X, out: np.ndarray) -> None:
        self._fourier_into(X, out)
        out *= out.dtype.type(np.sqrt(2.0 / self.output_dim))

    def _fourier_into(self, X, out: np.ndarray) -> None:
        """cos(W^T x + b) or [cos(W^T x), sin(W^T x)] into `out`, unscaled."""
        frequencies, offsets = self._parameters_for(out.dtype)
        if offsets is not None:
            if sp.issparse(X):
                out[...] = X @ frequencies.T
            else:
                np.matmul(X, frequencies.T, out=out)
            out += offsets
            np.cos(out, out=out)
        else:
            projection = X @ frequencies.T
            m = self._n_frequencies
            np.cos(projection, out=out[:, :m])
            np.sin(projection, out=out[:, m:])

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        if self.params.kernel == "laplacian":
            return kernels.laplacian(X, Y, self.params.gamma)
        return kernels.gaussian(X, Y, self.params.gamma)


class UnitSphereInputs:
    """Mixin for RFF-shaped maps whose kernel sees only directions (NRFF, SRF): rows are
    scaled to unit norm in float64 (no over/underflow) before the cast to the working
    precision, and an all-zero row, which has no direction, is refused."""

    def check(self, X, field: str = "vectors"):
        X = super().check(X, field)
        reject_zero_rows(X, field, f"{self.method.upper()} needs a direction (its kernel is defined on the "
                         "unit sphere)")
        return X

    def _working_copy(self, X, dtype: np.dtype):
        return unit_rows(X).astype(dtype, copy=False)

    def _row_l1(self, X) -> np.ndarray:
        """Rows are scaled to unit l2 norm first, so ||x||_1 <= sqrt(d)."""
        return np.full(X.shape[0], np.sqrt(self.input_dim))
