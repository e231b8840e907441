"""Random Fourier features (Rahimi & Recht, "Random Features for Large-Scale Kernel Machines", NIPS 2007;
the formula, the variances and the paper's claim: docs/methods/fourier.md, "RFF: Rahimi & Recht 2007").

Kernels (u = x / lengthscales coordinatewise with per-dimension `lengthscales`, u = x without):
- Gaussian k(x, y) = exp(-gamma ||u - v||_2^2), frequencies w ~ N(0, 2 gamma I);
- Laplacian k(x, y) = exp(-gamma ||u - v||_1), the L1 one (a product of one-dimensional kernels),
  frequencies w_i ~ Cauchy(0, gamma) independently;
- Matérn (`kernel` "matern", smoothness `nu` > 0, default 3/2): k = 2^(1 - nu) / Gamma(nu) z^nu K_nu(z),
  z = sqrt(2 nu) ||u - v||_2 / l with l = 1 / sqrt(2 gamma) (scikit-learn's Matern(length_scale=l, nu);
  Rasmussen & Williams 2006, eq. 4.14), frequencies multivariate t with 2 nu degrees of freedom and scale
  1 / l (R & W eq. 4.15; `_kernel_scale`). nu = 1/2 is the L2 exponential kernel exp(-||u - v||_2 / l),
  which is not the L1 "laplacian" above except in one dimension.
Frequencies with lengthscales have column i divided by l_i. `gamma` may be "scale" or "median" with
`fit_sample` rows: the number is computed when the spec is made and stored (`kernels.data_bandwidth`).

Features (D = n_components):
- "phase":   z(x) = sqrt(2/D) cos(W^T x + b), D frequencies, b ~ U[0, 2 pi);
- "cos_sin": z(x) = sqrt(2/D) [cos(W^T x), sin(W^T x)], D/2 frequencies; lower variance
  at equal D (Sutherland & Schneider, UAI 2015). E<z(x), z(y)> = k(x, y) for both.

Features are computed in float32 unless float64 is asked for, in row chunks so the
only temporaries are one chunk wide, each chunk in one blocked pass (`_fourier_pass`); sparse CSR
input costs O(nnz * D).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from .. import kernels
from .. import randomness
from ._fourier_kernels import unit_rows_into
from ._fourier_pass import FourierPass, block_rows, project_into
from ._kernel_scale import Bandwidth, FiniteRows, Lengthscales, matern_radius_factors, resolve_kernel_scale
from ._orthogonal_frequencies import orthogonal_gaussian, padded_width, structured_gaussian
from ._short_path import ShortFourierPath
from ._structured_projection import StructuredProjection
from ..base import DenseFeatureMap, largest_magnitude, require
from ..inputs import unit_rows, zero_rows
from ..spec import MapSpec


def without_default_frequencies(params: dict) -> dict:
    """Stored params leave `frequencies` out at "iid": specs made before the parameter existed (and
    the same specs made today) keep their canonical JSON, hence their ids."""
    if params.get("frequencies") == "iid":
        del params["frequencies"]
    return params


class GaussianFrequencyParams(BaseModel):
    """How the Gaussian frequencies are drawn: i.i.d., orthogonal blocks or structured
    (`_orthogonal_frequencies`)."""

    model_config = ConfigDict(extra="forbid")

    frequencies: Literal["iid", "orthogonal", "structured"] = "iid"

    @model_serializer(mode="wrap")
    def _omit_default_frequencies(self, handler):
        return without_default_frequencies(handler(self))


# Params left out of the stored spec while unset, so specs without them keep their ids.
OPTIONAL_FIELDS = ("nu", "lengthscales", "fit_sample")


class RFFParams(GaussianFrequencyParams):
    kernel: Literal["gaussian", "laplacian", "matern"] = "gaussian"
    gamma: Bandwidth = 1.0
    variant: Literal["cos_sin", "phase"] = "cos_sin"
    nu: float | None = Field(default=None, gt=0, le=100, allow_inf_nan=False)
    lengthscales: Lengthscales | None = None
    fit_sample: FiniteRows | None = None

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler):
        params = without_default_frequencies(handler(self))
        for name in OPTIONAL_FIELDS:
            if params.get(name, 0) is None:
                del params[name]
        return params


class RFFMap(ShortFourierPath, DenseFeatureMap):
    method = "rff"
    Params = RFFParams
    # The parameter that scales the frequencies (named when they overflow).
    scale_field = "params.gamma"
    normalizes_rows = False
    shares_rows = True
    short_path = True

    def __init__(self, spec: MapSpec):
        super().__init__(spec)
        self._n_frequencies = self._frequency_count(spec, self.params.variant)
        self._frequencies: dict[np.dtype, np.ndarray] = {}
        self._offsets: dict[np.dtype, np.ndarray | None] = {}
        self._largest_frequency: dict[np.dtype, float] = {}
        self._structured: dict[np.dtype, StructuredProjection | None] = {}
        self._structured_row_norm = np.inf
        self._passes: dict[np.dtype, FourierPass] = {}
        self._projectors: dict[np.dtype, object] = {}
        self._short_paths: dict[np.dtype, tuple] = {}

    @staticmethod
    def _frequency_count(spec: MapSpec, variant: str) -> int:
        return spec.n_components // 2 if variant == "cos_sin" else spec.n_components

    @classmethod
    def complete_params(cls, params, *, input_dim: int, n_components: int, seed: int):
        """Matérn's nu and a data-driven gamma resolved into the spec (`_kernel_scale`); the maps built on
        this one with their own params (nrff, srf) have neither."""
        if not isinstance(params, RFFParams):
            return params
        return resolve_kernel_scale(params, input_dim=input_dim, seed=seed, tag=cls.method)

    @classmethod
    def check_spec(cls, spec: MapSpec) -> None:
        frequencies = spec.params.get("frequencies", "iid")
        if spec.params.get("kernel") == "laplacian":
            require(frequencies == "iid", "params.frequencies",
                    "orthogonal and structured frequencies are for the Gaussian kernel: the Laplacian's "
                    "are Cauchy (use 'iid')")
        if spec.params.get("kernel") == "matern":
            require(frequencies != "structured", "params.frequencies",
                    "structured frequencies have fixed lengths and not quite uniform directions: Matérn "
                    "features from them would be biased (use 'iid' or 'orthogonal')")
        if spec.params.get("lengthscales") is not None:
            require(frequencies != "structured", "params.frequencies",
                    "the structured projection acts on the raw input and cannot apply lengthscales "
                    "(use 'iid' or 'orthogonal')")
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
        """out (count, d) = the frequencies times `scale`, in out's dtype; i.i.d. ones are made in row
        blocks (the float64 temporaries are one block, not the matrix), orthogonal and structured ones
        block by block of their own construction."""
        tag, d = f"{self.method}.frequencies", self.input_dim
        factors = self._row_factors(out.shape[0])
        if self.params.frequencies == "orthogonal":
            out[...] = self._scaled_rows(orthogonal_gaussian(self.spec.seed, tag, out.shape[0], d), factors, scale)
            return
        if self.params.frequencies == "structured":
            out[...] = structured_gaussian(self.spec.seed, tag, out.shape[0], d) * scale
            return
        law = self._unit_law()
        for rows, words in randomness.row_blocks(self.spec.seed, tag, out.shape[0], d):
            out[rows] = self._scaled_rows(law(words).reshape(-1, d), None if factors is None else factors[rows], scale)

    def _row_factors(self, count: int) -> np.ndarray | None:
        """Matérn's t factors sqrt(2 nu / chi^2_(2 nu)), one per frequency (`_kernel_scale`); None otherwise."""
        if getattr(self.params, "kernel", None) != "matern":
            return None
        return matern_radius_factors(self.spec.seed, f"{self.method}.frequencies.chi2", count, self.params.nu)

    def _scaled_rows(self, rows: np.ndarray, factors: np.ndarray | None, scale: float) -> np.ndarray:
        """Unit-law rows times `scale`, the t factors (one per row) and 1 / lengthscales (per column):
        Gaussian and Laplacian rows without lengthscales are rows * scale, as they always were."""
        rows = rows * scale
        if factors is not None:
            rows *= factors[:, None]
        if getattr(self.params, "lengthscales", None) is not None:
            rows /= np.asarray(self.params.lengthscales)
        return rows

    def _unit_law(self):
        return randomness.cauchy if self.params.kernel == "laplacian" else randomness.normal

    def _frequency_scale(self) -> float:
        gamma = self.params.gamma
        return gamma if self.params.kernel == "laplacian" else float(np.sqrt(2.0 * gamma))

    def _parameters_for(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray | None]:
        """(W, offsets b or None) in `dtype`: the dense frequencies, one row per frequency."""
        if dtype not in self._frequencies:
            # One row per frequency, stored d x m (C order) like the numpy form's W: a single row's product
            # reads it 10-20% faster than the transpose (measured, n = 1, from memory).
            frequencies = np.empty((self.input_dim, self._n_frequencies), dtype=dtype).T
            self._fill_frequencies(frequencies, self._frequency_scale())
            self._largest_frequency[dtype] = largest_magnitude(frequencies, self.scale_field)
            self._frequencies[dtype] = frequencies
        return self._frequencies[dtype], self._offsets_for(dtype)

    # -- structured frequencies without the dense W (`_structured_projection`) -----------

    def _structured_for(self, dtype: np.dtype) -> StructuredProjection | None:
        """The O(D log d) projection of "structured" frequencies in `dtype`; None for other frequencies,
        where the frequencies could overflow `dtype` (then the dense W decides, as it always did) and
        for small d, where the dense W is small and BLAS faster."""
        if self.params.frequencies != "structured":
            return None
        if dtype not in self._structured:
            factors, largest_row_norm = self._structured_factors()
            fits = (largest_row_norm < float(np.finfo(dtype).max)
                    and padded_width(self.input_dim) >= StructuredProjection.SMALLEST_WIDTH)
            self._structured[dtype] = StructuredProjection(
                self.spec.seed, self._structured_tag, self._n_frequencies, self.input_dim, factors,
                dtype) if fits else None
            self._structured_row_norm = largest_row_norm
        return self._structured[dtype]

    @property
    def _structured_tag(self) -> str:
        """The random stream of the sign diagonals (as `_fill_frequencies` names it)."""
        return f"{self.method}.frequencies"

    def _structured_factors(self) -> tuple[np.ndarray, float]:
        """(factors c with W_i = c_i M_i[:d] / d', the largest ||W_i||): rows of M / d' have norm
        at most sqrt(d')."""
        scale = self._frequency_scale()
        return np.full(self._n_frequencies, scale), float(np.sqrt(padded_width(self.input_dim))) * scale

    def _offsets_for(self, dtype: np.dtype) -> np.ndarray | None:
        """The phase variant's offsets b in `dtype` (None for cos_sin), whether W is dense or structured."""
        if dtype not in self._offsets:
            offsets = None
            if self.params.variant == "phase":
                words = randomness.raw_words(self.spec.seed, f"{self.method}.offsets", self._n_frequencies)
                offsets = randomness.phase(words).astype(dtype)
            self._offsets[dtype] = offsets
        return self._offsets[dtype]

    def materialize(self) -> "RFFMap":
        dtype = np.dtype(np.float32)
        if self._structured_for(dtype) is not None:
            self._offsets_for(dtype)
        else:
            self._parameters_for(dtype)
        return self

    @property
    def planned_nbytes(self) -> int:
        offsets = self._n_frequencies if self.params.variant == "phase" else 0
        if (self.params.frequencies == "structured"
                and padded_width(self.input_dim) >= StructuredProjection.SMALLEST_WIDTH):
            return StructuredProjection.planned_nbytes(self._n_frequencies, self.input_dim) + 4 * offsets
        return 4 * (self._n_frequencies * self.input_dim + offsets)

    @property
    def nbytes(self) -> int:
        held = sum(a.nbytes for a in self._frequencies.values())
        held += sum(a.nbytes for a in self._offsets.values() if a is not None)
        return held + sum(p.nbytes for p in self._structured.values() if p is not None)

    # -- features ------------------------------------------------------------------

    def _magnitude_bound(self, l1: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """|w . x + b| <= ||x||_1 max|w| + 2 pi; cos and sin of a finite number are finite. Structured
        frequencies bound max|w| by the largest row norm (which also bounds the transform's intermediates)."""
        return l1 * self._largest_weight(dtype) + 2.0 * np.pi

    def _largest_weight(self, dtype: np.dtype) -> float:
        """max |w| over the frequencies in `dtype` (structured ones: their largest row norm)."""
        if self._structured_for(dtype) is not None:
            return self._structured_row_norm
        self._parameters_for(dtype)
        return self._largest_frequency[dtype]

    def _features_into(self, X, out: np.ndarray) -> bool:
        return self._pass_for(out.dtype).run(self._projector(out.dtype), X, out)

    def _feature_weight(self) -> float:
        """The weight of every feature before any row normalisation."""
        return float(np.sqrt(2.0 / self.output_dim))

    def _pass_for(self, dtype: np.dtype) -> FourierPass:
        """weight cos(W^T x + b), or weight [cos(W^T x), sin(W^T x)], then unit rows if `normalizes_rows`."""
        if dtype not in self._passes:
            offsets = self._offsets_for(dtype)
            weights = np.full(self._n_frequencies, self._feature_weight())
            self._passes[dtype] = FourierPass(dtype, weights, offsets, normalize=self.normalizes_rows)
        return self._passes[dtype]

    def _projector(self, dtype: np.dtype):
        """project(rows, into): into = rows W^T, the projection the Fourier pass takes block by block
        (structured frequencies: the O(D log d) transform, without W); made once per dtype."""
        projector = self._projectors.get(dtype)
        if projector is None:
            structured = self._structured_for(dtype)
            if structured is not None:
                projector = structured.project
            else:
                frequencies, _ = self._parameters_for(dtype)
                projector = _dense_projector(frequencies.T)
            self._projectors[dtype] = projector
        return projector

    @property
    def shared_chunk_rows(self) -> int:
        return block_rows(self.input_dim, self._n_frequencies)

    def _prepare_shared(self, dtype: np.dtype) -> None:
        self._pass_for(dtype)
        self._projector(dtype)   # builds W (or the structured transform) before threads share the batch

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        p = self.params
        if p.kernel == "laplacian":
            return kernels.laplacian(X, Y, p.gamma, p.lengthscales)
        if p.kernel == "matern":
            return kernels.matern(X, Y, p.gamma, p.nu, p.lengthscales)
        return kernels.gaussian(X, Y, p.gamma, p.lengthscales)


class UnitSphereInputs:
    """Mixin for RFF-shaped maps whose kernel sees only directions (NRFF, SRF): rows are
    scaled to unit norm in float64 (no over/underflow) before the cast to the working
    precision, and an all-zero row, which has no direction, is refused."""

    @property
    def zero_rows_refused(self) -> str:
        return (f"{self.method.upper()} needs a direction (its kernel is defined on the unit sphere); "
                "params.empty_rows = 'zero' gives such a row the zero feature vector")

    def _working_copy(self, X, dtype: np.dtype):
        if isinstance(X, np.ndarray):   # one compiled pass, no float64 temporaries; an all-zero row stays zero
            out = np.empty(X.shape, dtype=dtype)
            unit_rows_into(X, out)
            return out
        with np.errstate(divide="ignore"):   # an all-zero CSR row (empty_rows "zero") stores nothing to scale
            return unit_rows(X).astype(dtype, copy=False)

    def _features_into(self, X, out: np.ndarray) -> bool:
        """The features, then zeros for the all-zero rows `check` let through (params.empty_rows "zero")."""
        finite = super()._features_into(X, out)
        if self.empty_rows == "zero":
            out[zero_rows(X)] = 0
        return finite

    def _on_directions(self, kernel, X, Y, *args) -> np.ndarray:
        """kernel(X, Y, *args) of checked rows; 0 for a pair with an all-zero row (empty_rows "zero", whose
        features are 0), whose direction the kernel does not have."""
        if self.empty_rows == "error":
            return kernel(X, Y, *args)
        x_rows, y_rows = np.flatnonzero(~zero_rows(X)), np.flatnonzero(~zero_rows(Y))
        out = np.zeros((X.shape[0], Y.shape[0]))
        if x_rows.size and y_rows.size:
            out[np.ix_(x_rows, y_rows)] = kernel(X[x_rows], Y[y_rows], *args)
        return out

    def _row_l1(self, X) -> np.ndarray:
        """Rows are scaled to unit l2 norm first, so ||x||_1 <= sqrt(d)."""
        return np.full(X.shape[0], np.sqrt(self.input_dim))

    def _short_l1(self, largest_l1: float, zero_rows: int) -> float:
        """sqrt(d) (`_row_l1`), or nan where a row is not finite or is all zero (refused, or zero features:
        the full path)."""
        return float(np.sqrt(self.input_dim)) if largest_l1 < np.inf and zero_rows == 0 else np.nan


def _dense_projector(frequencies_t: np.ndarray):
    """project(rows, into) = `project_into(rows, W, into)` with W^T (d x m) held. np.dot where every array is
    C-ordered: the same BLAS call as np.matmul's (the same bits, checked in tests/maps/fourier/
    test_short_path.py) without the ufunc machinery, ~0.5 us of a single row's 2 us product (measured)."""
    def project(rows, into):
        if type(rows) is np.ndarray and rows.flags.c_contiguous and into.flags.c_contiguous:
            np.dot(rows, frequencies_t, out=into)
        else:
            project_into(rows, frequencies_t.T, into)
    return project
