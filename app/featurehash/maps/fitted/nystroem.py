"""Nystroem features (Williams & Seeger, "Using the Nystroem method to speed up kernel machines", NIPS
2001), fitted to rows of the user's data, for any kernel featurehash computes exactly.

Kernels (`kernel`): "gaussian" exp(-gamma ||u - v||^2), "laplacian" (the L1 one) exp(-gamma ||u - v||_1),
"matern" (nu in {1/2, 3/2, 5/2}, default 3/2; length l = 1 / sqrt(2 gamma), scikit-learn's
Matern(length_scale=l, nu); nu = 1/2 is the L2 exponential exp(-||u - v||_2 / l)), "chi2"
exp(-gamma sum (x_i - y_i)^2 / (x_i + y_i)) (nonnegative entries), "polynomial"
(gamma <x, y> + coef0)^degree, "arccos0" / "arccos1" / "arccos2" (Cho & Saul), "gmm" (Li's generalized
min-max, pGMM with `power`); see `featurehash.maps.kernels`. Parameters a kernel does not use are refused;
those it uses default to gamma 1, nu 3/2, degree 3, coef0 1, power 1. For the Gaussian, Laplacian and Matérn
kernels u = x / lengthscales coordinatewise with per-dimension `lengthscales` (else u = x), and gamma may be
"scale" or "median" (`kernels.data_bandwidth`, on fit_sample / lengthscales): resolved into the number
before the fit. Matérn's nu is one of the closed forms because the fit's columns must be the same bits on
every machine (`_nystroem_fit.paired_kernel`: the portable exp; a Bessel function has no portable form here).

Features: with landmarks s_1 .. s_k (rows of `fit_sample`) and K_SS = L L^T their Gram matrix,
    z(x) = L^-1 [k(s_1, x), ..., k(s_k, x)],      <z(x), z(y)> = k_S(x)^T K_SS^-1 k_S(y),
the projection of k(x, .) onto the span of the landmarks' k(s_j, .): exact on the landmarks, never
above the kernel (K - K^ is positive semidefinite). Output dim = n_components = m; k < m only when the
sample's numerical rank is below m (then the last m - k features are 0).

Fit (at spec resolution, `featurehash.maps.fitted._nystroem_fit`): landmarks by randomly pivoted Cholesky
(`sampling` "rpcholesky", default; Chen, Epperly, Tropp, Webber 2024: rows drawn in proportion to the
residual diagonal, kernel-space D^2 seeding) or in a seeded uniform order ("uniform", scikit-learn's
rule); random words from `randomness.raw_words` ("nystroem.pivots", "nystroem.order"). Every number
is computed from IEEE basic operations in a fixed order, so the fit is the same bits on every machine
and is stored unrounded: `landmarks` (k rows of input_dim, copied from fit_sample) and `normalization`
(the rows of L^-1, row i holding its i + 1 entries up to the diagonal); fit_sample becomes null. A
stored spec is rebuilt without data and without refitting.
Limits: the stored numbers, m input_dim + m (m + 1) / 2, at most MAX_STORED_NUMBERS = 2^20 (about 20 MB
of JSON at worst, under the service's 64 MiB body limit; m = 512 at d = 64 stores 164k numbers, ~3 MB);
fit_sample at most MAX_FIT_ROWS rows and rows * m * (input_dim + m) <= MAX_FIT_WORK_COMPILED = 2^32 for the
Gaussian, Laplacian, polynomial and chi2 kernels (their columns are compiled; the O(rows m^2) Cholesky updates
dominate), MAX_FIT_WORK = 2^30 for arc-cosine and GMM, whose portable columns cost ~10x more (both limits bound a
fit to seconds: docs/methods/fitted.md, "Measurements behind the design").
`fit_sample` is a list of rows or a numpy array (`inputs.SampleRows`: checked whole, no round trip through
lists; the same id either way).
Transform: by blocks of rows, the kernel block K(X, S) in float64 (Gaussian and polynomial through one BLAS
product), times L^-T by BLAS's triangular product in place (trmm: half the flops of a general product), cast
to float32 unless float64 is asked for;
sparse CSR input is densified per chunk except for the Gaussian and polynomial kernels (O(nnz k) for the
product). The triangular product is numpy's OpenBLAS's, called without the GIL (`numerics._triangular_product`:
scipy's wrapper holds it). Threads share a large batch by blocks, BLAS single-threaded in each (`shares_rows`). The dense
Gaussian's features skip the finiteness pass when provably bounded (`_features_into`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from .. import kernels
from .. import randomness
from . import _nystroem_fit as fit
from ..base import DenseFeatureMap
from ..errors import SpecError
from ..inputs import FiniteFloat, SampleRows, reject_negative, rows_of_width, sample_array, to_dense
from ..numerics._triangular_product import upper_product_in_place

MAX_STORED_NUMBERS = 2**20
# Kernel values per block of the transform (4 MiB of float64): smaller blocks kept the kernel's passes in
# cache but slowed the triangular product more (docs/methods/fitted.md, "Measurements behind the design").
BLOCK_ELEMENTS = 2**19
MAX_FIT_ROWS = 20_000
MAX_FIT_WORK = 2**30
# The kernels whose fit columns are compiled (`_fitted_kernels`) take 4x the work in less time than the others
# take MAX_FIT_WORK (the timings at both limits: docs/methods/fitted.md, "Measurements behind the design").
MAX_FIT_WORK_COMPILED = 2**32
COMPILED_FIT_KERNELS = ("gaussian", "laplacian", "polynomial", "chi2")
KERNEL_PARAMETERS = {"gaussian": {"gamma": 1.0}, "laplacian": {"gamma": 1.0}, "chi2": {"gamma": 1.0},
                     "matern": {"gamma": 1.0, "nu": 1.5},
                     "polynomial": {"gamma": 1.0, "degree": 3, "coef0": 1.0}, "gmm": {"power": 1.0},
                     "arccos0": {}, "arccos1": {}, "arccos2": {}}
FITTED_FIELDS = ("landmarks", "normalization")
# Kernels of a distance: per-dimension lengthscales and the data-driven gammas apply to them.
DISTANCE_KERNELS = ("gaussian", "laplacian", "matern")
MEDIAN_PAIRS = 10_001


def _unset(value) -> bool:
    """Params left out of the stored spec while unset (they came later: specs without them keep their ids)."""
    return value is None


_POSITIVE = TypeAdapter(Annotated[float, Field(gt=0, allow_inf_nan=False)])


class NystroemParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kernel: Literal["gaussian", "laplacian", "matern", "chi2", "polynomial", "gmm", "arccos0", "arccos1",
                    "arccos2"] = "gaussian"
    gamma: float | Literal["scale", "median"] | None = None
    # Left out of the stored spec while unset, so that specs without them keep their ids (a field's exclude_if,
    # not a wrapping serializer: that made every dump of a 2,000-row fit_sample 4x slower, measured).
    nu: Literal[0.5, 1.5, 2.5] | None = Field(default=None, exclude_if=_unset)
    lengthscales: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = Field(default=None,
                                                                                          exclude_if=_unset)
    degree: int | None = Field(default=None, ge=1, le=20, strict=True)
    coef0: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    power: float | None = Field(default=None, gt=0, le=64, allow_inf_nan=False)
    sampling: Literal["rpcholesky", "uniform"] = "rpcholesky"
    fit_sample: SampleRows() | None = None
    landmarks: list[list[FiniteFloat]] | None = None
    normalization: list[list[FiniteFloat]] | None = None

    @field_validator("gamma", mode="before")
    @classmethod
    def _gamma(cls, value):
        """A positive finite number, or a rule resolved from fit_sample (errors named params.gamma)."""
        if value is None or (isinstance(value, str) and value in kernels.BANDWIDTH_RULES):
            return value
        try:
            return _POSITIVE.validate_python(value)
        except ValidationError as exc:
            raise ValueError(f"{exc.errors()[0]['msg']} (gamma is a positive number, 'scale' or 'median')") from None



def stored_numbers(n_components: int, input_dim: int) -> int:
    return n_components * input_dim + n_components * (n_components + 1) // 2


class NystroemMap(DenseFeatureMap):
    method = "nystroem"
    Params = NystroemParams
    # Threads share a large batch's row blocks, each block's BLAS single-threaded (`_row_threads`): with BLAS's
    # own threads, the kernel product's (numpy's OpenBLAS) and the triangular one's (then scipy's, a second
    # pool) spun against each other on 2 cores (CPU time 0.92x / 0.78x scikit-learn's in float64 / float32).
    shares_rows = True

    @classmethod
    def complete_params(cls, params: NystroemParams, *, input_dim: int, n_components: int,
                        seed: int) -> NystroemParams:
        uses = KERNEL_PARAMETERS[params.kernel]
        for name in ("gamma", "nu", "degree", "coef0", "power"):
            if name not in uses and getattr(params, name) is not None:
                raise SpecError(f"params.{name}", f"the {params.kernel} kernel has no {name}")
        if params.kernel not in DISTANCE_KERNELS:
            if params.lengthscales is not None:
                raise SpecError("params.lengthscales", f"lengthscales scale the distance of the "
                                f"{', '.join(DISTANCE_KERNELS)} kernels; the {params.kernel} kernel has none")
            if isinstance(params.gamma, str):
                raise SpecError("params.gamma", f"gamma {params.gamma!r} is for the {', '.join(DISTANCE_KERNELS)} "
                                "kernels: give a number")
        kernels.check_lengthscales(params.lengthscales, input_dim)
        defaults = {name: value for name, value in uses.items() if getattr(params, name) is None}
        resolved = params.model_copy(update=defaults) if defaults else params
        if stored_numbers(n_components, input_dim) > MAX_STORED_NUMBERS:
            raise SpecError("n_components", f"{n_components} landmarks of {input_dim} entries and their "
                            f"normalisation are {stored_numbers(n_components, input_dim)} numbers, over the "
                            f"limit of {MAX_STORED_NUMBERS} a spec stores")
        if params.landmarks is not None or params.normalization is not None:
            _check_fitted(resolved, input_dim, n_components)
            return resolved
        if isinstance(resolved.gamma, str) and resolved.fit_sample is None:
            raise SpecError("params.gamma", f"gamma {resolved.gamma!r} is computed from fit_sample, which a "
                            "stored spec no longer has: give the number")
        sample = _fit_sample(resolved, input_dim, n_components)
        scaled = kernels.scaled(sample, resolved.lengthscales)
        if isinstance(resolved.gamma, str):
            pairs = randomness.distinct_pairs(seed, "nystroem.bandwidth", scaled.shape[0], MEDIAN_PAIRS)
            resolved = resolved.model_copy(update={
                "gamma": kernels.data_bandwidth(resolved.gamma, resolved.kernel, scaled, pairs)})
        chosen, inverse = fit.fit_landmarks(scaled, resolved.kernel, resolved, n_components, resolved.sampling, seed)
        return resolved.model_copy(update={
            "fit_sample": None, "landmarks": sample[chosen].tolist(),
            "normalization": [inverse[i, :i + 1].tolist() for i in range(len(chosen))]})

    def __init__(self, spec):
        super().__init__(spec)
        # Landmarks are stored as the user's rows; the kernel sees them (and every input) over the lengthscales.
        self._landmarks = kernels.scaled(np.asarray(self.params.landmarks, dtype=np.float64).reshape(-1, spec.input_dim),
                                         self.params.lengthscales)
        k = self._landmarks.shape[0]
        inverse = np.zeros((k, k))
        for i, row in enumerate(self.params.normalization):
            inverse[i, :i + 1] = row
        self._normalization_t = np.ascontiguousarray(inverse.T)
        self._landmark_squares = np.einsum("ij,ij->i", self._landmarks, self._landmarks)
        # |z_i| <= sum_j |L^-1_ij| for kernel values in [0, 1]: the largest such sum bounds every feature.
        self._feature_bound = float(np.abs(inverse).sum(axis=1).max()) if k else 0.0
        self._largest_landmark_square = float(self._landmark_squares.max()) if k else 0.0
        # [s, 1, gamma |s|^2] per landmark: with [2 gamma x, -gamma |x|^2, -1] the Gaussian's exponent is one product.
        self._augmented = (np.column_stack([self._landmarks, np.ones(k), self.params.gamma * self._landmark_squares])
                           if self.params.kernel == "gaussian" else None)

    @classmethod
    def planned_nbytes_bound(cls, spec, **options) -> int:
        """m landmarks of input_dim and the m x m normalisation, in float64 (before the fit), and the Gaussian's
        augmented landmarks (m x (input_dim + 2))."""
        augmented = spec.input_dim + 2 if spec.params.get("kernel", "gaussian") == "gaussian" else 0
        return 8 * spec.n_components * (spec.input_dim + spec.n_components + 1 + augmented)

    @property
    def planned_nbytes(self) -> int:
        extra = 0 if self._augmented is None else self._augmented.nbytes
        return self._landmarks.nbytes + self._normalization_t.nbytes + self._landmark_squares.nbytes + extra

    @property
    def nbytes(self) -> int:
        return self.planned_nbytes

    @property
    def shared_chunk_rows(self) -> int:
        """A thread's chunk is at least one block of the triangular product (smaller ones ran it slower)."""
        return max(1, BLOCK_ELEMENTS // max(1, self._landmarks.shape[0]))

    def check(self, X, field: str = "vectors", *, first_row: int = 0):
        X = super().check(X, field, first_row=first_row)
        if self.params.kernel == "chi2":
            reject_negative(X, field, "the chi2 kernel")
        return X

    def _working_copy(self, X, dtype: np.dtype):
        return kernels.scaled(X.astype(np.float64, copy=False), self.params.lengthscales)

    def landmark_kernel(self, X) -> np.ndarray:
        """K(X, S) in float64: X (a working copy: over the lengthscales) against the stored landmarks."""
        block = np.empty((X.shape[0], self._landmarks.shape[0]))
        self._landmark_kernel_into(X, block)
        return block

    def _landmark_kernel_into(self, X, block: np.ndarray) -> bool:
        """block = K(X, S); True when every value is known to lie in [0, 1] (the dense Gaussian's exponent
        cannot have overflowed), so the features need no finiteness check (`_features_into`)."""
        p, S = self.params, self._landmarks
        if p.kernel not in ("gaussian", "polynomial"):
            block[...] = _kernel(p, to_dense(X), S, scaled=True)
            return False
        if p.kernel == "polynomial":
            _product_into(X, S, block)
            block *= p.gamma
            block += p.coef0
            block **= p.degree
            return False
        if not sp.issparse(X):
            # exp(<[2 gamma x, -gamma |x|^2, -1], [s, 1, gamma |s|^2]>) (at most 1): the exponent by one product.
            augmented = np.empty((X.shape[0], X.shape[1] + 2))
            np.multiply(X, 2.0 * p.gamma, out=augmented[:, :-2])
            augmented[:, -2] = np.einsum("ij,ij->i", X, X)
            augmented[:, -2] *= -p.gamma
            augmented[:, -1] = -1.0
            np.matmul(augmented, self._augmented.T, out=block)
            np.minimum(block, 0.0, out=block)
            np.exp(block, out=block)
            # Each term 2 gamma x_i s_i is at most gamma (x_i^2 + s_i^2) in size, so with gamma, gamma |x|^2 and
            # gamma |s|^2 under 2^1000 no partial sum nor 2 gamma x_i (<= 2 sqrt(gamma gamma |x|^2)) overflows.
            largest = -float(augmented[:, -2].min()) + p.gamma * self._largest_landmark_square
            return p.gamma <= 2.0**1000 and largest <= 2.0**1000
        x_squares = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        # exp(2 gamma <x, s> - gamma |x|^2 - gamma |s|^2) (at most 1), in place in the block: the scaling is
        # done on X (d columns), not on the block (k), and the block is passed over four times.
        _product_into(X * (2.0 * p.gamma), S, block)
        block -= p.gamma * x_squares[:, None]
        block -= p.gamma * self._landmark_squares
        np.minimum(block, 0.0, out=block)
        np.exp(block, out=block)
        return False

    def _features_into(self, X, out: np.ndarray) -> bool:
        """By blocks of BLOCK_ELEMENTS kernel values (they stay in cache between the kernel's passes), each
        block times L^-T by BLAS's triangular product (trmm: half the flops of a general product) in place.
        True (no finiteness check of `out` needed) when every kernel value was in [0, 1] and the largest
        absolute row sum of L^-1, which then bounds every feature, is far inside out's range."""
        n, k = X.shape[0], self._landmarks.shape[0]
        in_place = k == out.shape[1] and out.dtype == np.float64
        rows = max(1, BLOCK_ELEMENTS // k)
        scratch = None if in_place else np.empty((min(rows, n), k))
        bounded = self._feature_bound <= float(np.finfo(out.dtype).max) / 2
        for start in range(0, n, rows):
            part = slice(start, min(n, start + rows))
            block = out[part] if in_place else scratch[:part.stop - part.start]
            bounded &= self._landmark_kernel_into(X[part], block)
            upper_product_in_place(block, self._normalization_t)   # block := block L^-T
            if not in_place:
                out[part, :k] = block
        if k < out.shape[1]:
            out[:, k:] = 0
        return bounded

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        X = self.check(X, "x")
        return _kernel(self.params, X, X if Y is None else self.check(Y, "y"), scaled=False)


def _product_into(X, S: np.ndarray, block: np.ndarray) -> None:
    """block = X S^T (X dense or CSR)."""
    if sp.issparse(X):
        block[...] = X @ S.T
    else:
        np.matmul(X, S.T, out=block)


def _kernel(p: NystroemParams, X, Y, *, scaled: bool) -> np.ndarray:
    """The exact kernel the params name, X against Y (featurehash.maps.kernels); `scaled`: the rows are
    divided by the lengthscales already."""
    lengthscales = None if scaled else p.lengthscales
    if p.kernel == "gaussian":
        return kernels.gaussian(X, Y, p.gamma, lengthscales)
    if p.kernel == "laplacian":
        return kernels.laplacian(X, Y, p.gamma, lengthscales)
    if p.kernel == "matern":
        return kernels.matern(X, Y, p.gamma, p.nu, lengthscales)
    if p.kernel == "chi2":
        return kernels.chi2(X, Y, p.gamma)
    if p.kernel == "polynomial":
        return kernels.polynomial(p.gamma * to_dense(X), Y, p.degree, p.coef0)
    if p.kernel == "gmm":
        return kernels.gmm(X, Y, p.power)
    return kernels.arccos(X, Y, int(p.kernel[-1]))


def _fit_sample(params: NystroemParams, input_dim: int, n_components: int) -> np.ndarray:
    if params.fit_sample is None:
        raise SpecError("params.fit_sample", "Nystroem landmarks are chosen from data: give fit_sample, a list of "
                        "rows of your data (at least n_components; a few thousand is typical); the spec then "
                        "stores the landmarks and their normalization instead")
    rows = len(params.fit_sample)
    if not rows_of_width(params.fit_sample, input_dim):
        raise SpecError("params.fit_sample", f"rows of the data to fit: each must have input_dim = {input_dim} "
                        "entries")
    work = MAX_FIT_WORK_COMPILED if params.kernel in COMPILED_FIT_KERNELS else MAX_FIT_WORK
    if rows > MAX_FIT_ROWS or rows * n_components * (input_dim + n_components) > work:
        raise SpecError("params.fit_sample", f"{rows} rows for {n_components} landmarks of {input_dim} entries "
                        f"is over the fit's limits ({MAX_FIT_ROWS} rows, rows * n_components * (input_dim + "
                        f"n_components) <= {work} for the {params.kernel} kernel): send fewer rows")
    sample = sample_array(params.fit_sample)
    if params.kernel == "chi2" and sample.min() < 0:
        raise SpecError("params.fit_sample", "the chi2 kernel is defined on nonnegative entries")
    return sample


def _check_fitted(params: NystroemParams, input_dim: int, n_components: int) -> None:
    """A stored spec: landmarks and the lower triangular rows of L^-1, consistent with each other."""
    if params.fit_sample is not None:
        raise SpecError("params.fit_sample", "give either fit_sample (to fit) or the fitted landmarks and "
                        "normalization (as a resolved spec returns them), not both")
    if params.landmarks is None or params.normalization is None:
        raise SpecError("params.landmarks", "landmarks and normalization come together (as a resolved spec "
                        "returns them) or not at all (then give fit_sample)")
    k = len(params.landmarks)
    if not 1 <= k <= n_components or any(len(row) != input_dim for row in params.landmarks):
        raise SpecError("params.landmarks", f"1 to n_components = {n_components} rows of input_dim = {input_dim} "
                        "entries")
    if len(params.normalization) != k or any(len(row) != i + 1 for i, row in enumerate(params.normalization)):
        raise SpecError("params.normalization", f"the {k} rows of a lower triangular matrix (row i has i + 1 "
                        "entries), one per landmark")
    if any(row[-1] <= 0 for row in params.normalization):
        raise SpecError("params.normalization", "diagonal entries must be positive")
