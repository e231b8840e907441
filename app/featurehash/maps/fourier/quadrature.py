"""Gaussian-quadrature features (Dao, De Sa, Re, "Gaussian Quadrature for Kernel Features",
NIPS 2017; the rules and the paper's claims: docs/methods/fourier.md, "Gaussian quadrature: Dao, De Sa & Ré 2017").

Kernel: Gaussian k(x, y) = exp(-gamma ||x - y||^2), whose spectrum is N(0, 2 gamma I); with `anova`,
the sparse ANOVA kernel k(x, y) = sum_{S in family} prod_{i in S} exp(-gamma (x_i - y_i)^2)
(`featurehash.maps.kernels.gaussian_anova`; section 4), the family being the sliding windows of `window`
consecutive coordinates (d - r + 1 of them) or an explicit list of `subsets`. With per-dimension
`lengthscales` l, x_i is read as x_i / l_i in both: the spectrum is a product over coordinates, so every grid
keeps its rule with coordinate i of each node divided by l_i (the reweighted fit runs on fit_sample / l).
Matérn kernels are not offered: their spectrum (multivariate t) is no product over coordinates, so no tensor
grid of a 1-D rule integrates it.

Points w_i and weights a_i >= 0 with k(x - y) ~ sum_i a_i cos(w_i . (x - y)) give the features
    z(x) = [sqrt(a_i) cos(w_i . x)]_i ++ [sqrt(a_i) sin(w_i . x)]_i           (output dim 2 P)
(all cosines, then all sines, points in rule order; with `anova` each subset has its own rule on
its coordinates and the points are grouped by subset, so <z(x), z(y)> = sum_S k~_S). The 1-D rule
is Gauss-Hermite (`numpy.polynomial.hermite_e.hermegauss`), nodes scaled by sqrt(2 gamma); see
`featurehash.maps.fourier._quadrature_rules`. A rule's point and its antipode give the same cosine, so every
symmetric rule is folded (w and -w merged, weights added): half the features for the same estimate.

Grids and n_components (D = n_components = 2 P, P the number of points):
- "dense": the tensor product of L-point rules (L = `points_per_dim`, default 10), exact for
  polynomials of degree <= 2L - 1 in each coordinate (section 3.3). Its size is fixed:
  P = ceil(L^r / 2) per subset of r coordinates (r = d without anova), so n_components must
  equal 2 P (the error message says the value). Grids beyond MAX_GRID_POINTS are refused. An odd
  L puts a point at the origin, whose sin feature is always 0 (it is kept, so that D = 2 P).
- "sparse": the Smolyak combination of level A (`level`, default 2) of the 1, 3, 5, ... point
  rules (section 3.4; d = 25, A = 2 gives the paper's 1351 points, 676 folded). Fixed size as
  for "dense". Its weights are mostly of both signs: then it is a kernel ESTIMATE only
  (`kernel`, POST /kernel), and `transform` is refused (SpecError on params.grid, HTTP 422),
  since sqrt(a_i) does not exist; where all weights are >= 0 (e.g. r <= 2, level 1) it is a
  feature map like the others.
- "subsampled": P = D / 2 points of the dense L-grid drawn with probability = weight (each
  coordinate from the 1-D rule, seeded), weights 1 / P: any even D (with anova, the P points are
  shared out evenly over the subsets, each subset at least one: D >= 2 m). It is unbiased for the
  L-grid's kernel, so its bias against k is the rule's error: per coordinate |rule(s) - e^{-s^2/2}|,
  s = sqrt(2 gamma) |x_i - y_i|, below 1e-3 for s < s_L and growing to ~1 beyond (the rule does not
  decay); over coordinates at most the sum (every factor is <= 1). s_L (1e-3; 1e-6 in brackets):
  L = 10: 3.10 (2.06), 30: 7.51 (6.22), 64: 12.47 (11.09), 100: 16.43 (15.02); i.e. the region is
  gamma (x_i - y_i)^2 <= s_L^2 / 2 = 4.8, 28, 78, 135. Its cost does not depend on L, so new requests
  get L = 64 (DEFAULT_SUBSAMPLED_POINTS_PER_DIM); specs stored before hold L = 10, and a request without
  points_per_dim gets another id than it got before.
- "reweighted": a data-dependent rule (section 3.5), fitted when the spec is resolved, from
  `fit_sample` (rows of the user's data): `candidates` points of the subsampled L-grid (folded,
  deduplicated), `fit_pairs` random pairs of sample rows, and P = D / 2 of the candidates with weights
  a >= 0 minimising the mean squared kernel error on those pairs. How the P are chosen (`selection`):
  - "forward" (new requests; candidates default 8 P): greedy forward selection, each step the candidate
    that lowers the least-squares error on the chosen set most (`_forward_selection`), then the weights
    by NNLS on the chosen ones (`_active_set_nnls`; `_quadrature_rules.fit_weights_forward`).
  - "l1_path" (every spec stored before the parameter, whose key is absent; and any request naming a
    `penalty`; candidates default 4 P): NNLS over all candidates, an l1 path with bisection on lambda
    to keep exactly P points, then a debiasing NNLS on those (`_quadrature_rules.fit_weights`;
    `penalty` "adaptive_l1" (default) or the paper's plain "l1").
  Why forward selection: in d >= 30 the NNLS over all candidates keeps nearly all of them, so the
  choice of the P decides the error, and forward selection chooses better than the l1 path.
  Beyond the paper, the fit also asks k~(x, x) = k(0)
  (`diagonal_weight`, the weight of that one equation against all sample pairs together; default
  1), which keeps the estimate's diagonal from coming out low. The spec
  then stores the fitted numbers instead of the sample:
  `points` (node indices into the L-point rule, one per coordinate of the point's subset),
  `weights` (rounded to 8 significant digits), and with anova `point_subsets`; fit_sample
  becomes null. So the id covers the fit, and a stored spec is rebuilt without data and without
  refitting. If fewer than P candidates get a positive weight, the remaining points keep weight 0
  (silent features).
  Same request, same fit, on every machine (issue 10): the fit uses no operation whose result
  depends on the CPU, the BLAS kernel, the SIMD path or the thread count, so its unrounded numbers,
  not only the rounded ones, are bit-identical everywhere (tests/maps/fourier/test_quadrature.py runs it under
  other OpenBLAS coretypes, numpy SIMD targets, numba code generation and thread counts):
  candidates drawn and evaluated with `_quadrature_rules.hermite_rule` (Sturm bisection,
  not LAPACK); the design cos(w . delta) and target in numba with `_portable_numba` cos/exp;
  the Gram matrix exact whatever BLAS does (error-free splitting, `_quadrature_design`); the NNLS,
  l1 path and debiasing by a compiled active set in a fixed order (`_active_set_nnls`), forward
  selection by compiled loops in a fixed order, ties to the lowest index (`_forward_selection`). The
  final weights are the unique optimum of a strictly convex problem (NNLS with a ridge) on the chosen
  points. A refit of a request made before the fit was portable may differ in its last bits (a weight at
  a rounding edge, a support decided by noise): it is the new, portable answer under a new id, while the
  stored spec keeps its id and transforms as before (its points and weights are in it).
  Cost: about 1.5 pairs * candidates^2 flops for the Gram matrix (two exact BLAS products) and
  pairs * candidates * d for the design, plus the selection: forward ~candidates * P^2 flops and one
  NNLS of size P; the l1 path active-set NNLS solves of ~candidates * support^2 flops each.
  Measurements (RMSE against RFF, the diagonal, fit times): docs/methods/fourier.md, "Reweighted
  quadrature: bench/bench_quadrature.py --sections reweighted" (bench/results/quadrature_reweighted.txt).
Randomness (subsampled points, candidates, fit pairs) comes from `randomness.raw_words` blocks
"quadrature.points", "quadrature.candidates", "quadrature.fit_pairs"; dense and sparse grids are
deterministic (the seed does not matter).

Features are computed in float32 unless float64 is asked for, in row chunks; sparse CSR input
costs O(nnz * P) for the projection (then O(n P) for cos and sin).
"""

from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from .. import kernels
from . import _quadrature_fit as fit
from ._quadrature_grid import QuadratureGrid
from ._fourier_pass import FourierPass, block_rows, project_into
from ._short_path import ShortFourierPath
from ..base import DenseFeatureMap, largest_magnitude
from ..errors import SpecError
from ..spec import MapSpec

from ._quadrature_params import QuadratureParams, anova_subsets, family_sizes


class QuadratureMap(ShortFourierPath, QuadratureGrid, DenseFeatureMap):
    method = "quadrature"
    Params = QuadratureParams
    shares_rows = True
    short_path = True

    @classmethod
    def complete_params(cls, params: QuadratureParams, *, input_dim: int, n_components: int,
                        seed: int) -> QuadratureParams:
        return fit.resolve_params(params, input_dim=input_dim, n_components=n_components, seed=seed)

    @classmethod
    def complete_new_request(cls, params: QuadratureParams) -> QuadratureParams:
        """A new reweighted request that fits (fit_sample, no penalty, no selection) gets forward selection."""
        if (params.grid != "reweighted" or params.fit_sample is None or params.selection is not None
                or params.penalty is not None):
            return params
        return params.model_copy(update={"selection": "forward"})

    # -- the rule ------------------------------------------------------------------

    def __init__(self, spec: MapSpec):
        super().__init__(spec)
        self.subsets = anova_subsets(self.params.anova, spec.input_dim)
        self.n_points = spec.n_components // 2
        self._parameters: dict[np.dtype, tuple[np.ndarray | sp.csr_matrix, np.ndarray]] = {}
        self._weights: np.ndarray | None = None
        self._largest_frequency: dict[np.dtype, float] = {}
        self._passes: dict[np.dtype, FourierPass] = {}
        self._short_paths: dict[np.dtype, tuple | None] = {}

    def _parameters_for(self, dtype: np.dtype) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
        """(W, sqrt(max(a, 0))) in the working precision; the float64 weights are kept for `kernel`."""
        if dtype not in self._parameters:
            sizes = {len(subset) for subset in self.subsets}
            if self.params.grid == "subsampled" and len(sizes) == 1:
                W, weights = self._subsampled_frequencies(dtype, sizes.pop())
            else:
                W, weights = self.rule()
                W = W.astype(dtype, copy=False) if sp.issparse(W) else np.asfortranarray(W, dtype=dtype)
            if self._weights is None:
                self._weights = weights
            self._largest_frequency[dtype] = largest_magnitude(W, "params.gamma")
            self._parameters[dtype] = (W, np.sqrt(np.maximum(weights, 0.0)).astype(dtype))
        return self._parameters[dtype]

    @property
    def weights(self) -> np.ndarray:
        """The rule's weights a_i (float64, possibly negative for a sparse grid)."""
        if self._weights is None:
            self._parameters_for(np.dtype(np.float32))
        return self._weights

    @property
    def is_feature_map(self) -> bool:
        """All weights >= 0, so that sqrt(a_i) exists: always, except for most sparse grids."""
        return bool(np.all(self.weights >= 0))

    def materialize(self) -> "QuadratureMap":
        self._parameters_for(np.dtype(np.float32))
        return self

    @staticmethod
    def _parameter_bytes(entries: int, n_points: int, anova: bool) -> int:
        # float32 W (CSR: values + int32 column indices + int32 row pointers), float32 sqrt weights,
        # float64 weights.
        matrix = 8 * entries + 4 * (n_points + 1) if anova else 4 * entries
        return matrix + 4 * n_points + 8 * n_points

    @property
    def planned_nbytes(self) -> int:
        return self._parameter_bytes(self._coordinates_held(), self.n_points, self.params.anova is not None)

    @classmethod
    def planned_nbytes_bound(cls, spec: MapSpec, **options) -> int:
        """At most P points of the largest subset each, from the subset sizes alone."""
        params = cls.Params(**spec.params)
        n_points = spec.n_components // 2
        largest = max(family_sizes(params.anova, spec.input_dim))
        return cls._parameter_bytes(n_points * largest, n_points, params.anova is not None)

    @property
    def nbytes(self) -> int:
        held = 0 if self._weights is None else self._weights.nbytes
        for W, sqrt_weights in self._parameters.values():
            held += sqrt_weights.nbytes
            held += W.data.nbytes + W.indices.nbytes + W.indptr.nbytes if sp.issparse(W) else W.nbytes
        return held

    # -- features ------------------------------------------------------------------

    @staticmethod
    def _project(X, W) -> np.ndarray:
        """X W^T (n x P) for dense or CSR X and dense or CSR W."""
        if sp.issparse(W):
            product = X @ W.T
            return product.toarray() if sp.issparse(product) else np.asarray(product)
        return np.asarray(X @ W.T)

    def require_features(self) -> None:
        if not self.is_feature_map:
            negative = int(np.count_nonzero(self.weights < 0))
            raise SpecError("params.grid", (
                f"this sparse grid has {negative} negative weights (smallest {self.weights.min():.4g}), so it has "
                "no real features sqrt(a_i) [cos, sin]: it only estimates the kernel (kernel / POST .../kernel). "
                "For features use grid 'dense', 'subsampled' or 'reweighted'"))

    def _magnitude_bound(self, l1: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """|w . x| <= ||x||_1 max|w|; then cos, sin and the weights keep the features finite."""
        return l1 * self._largest_weight(dtype)

    def _features_into(self, X, out: np.ndarray) -> bool:
        return self._pass_for(out.dtype).run(self._projector(out.dtype), X, out)

    def _largest_weight(self, dtype: np.dtype) -> float:
        """max |w| over the grid's points in `dtype` (the bound of `_magnitude_bound` and the short path)."""
        self._parameters_for(dtype)
        return self._largest_frequency[dtype]

    def _short_path_available(self, dtype: np.dtype) -> bool:
        """A dense W (CSR with anova) and real features (no negative weights: the full path refuses those)."""
        return not sp.issparse(self._parameters_for(dtype)[0]) and self.is_feature_map

    def _pass_for(self, dtype: np.dtype) -> FourierPass:
        """sqrt(a_i) [cos(w_i . x), sin(w_i . x)]."""
        if dtype not in self._passes:
            _, sqrt_weights = self._parameters_for(dtype)
            self._passes[dtype] = FourierPass(dtype, sqrt_weights)
        return self._passes[dtype]

    def _projector(self, dtype: np.dtype):
        """project(rows, into): into = rows W^T (W dense, or CSR with anova)."""
        W, _ = self._parameters_for(dtype)
        if sp.issparse(W):
            return lambda rows, into: into.__setitem__(Ellipsis, self._project(rows, W))
        return lambda rows, into: project_into(rows, W, into)

    @property
    def shared_chunk_rows(self) -> int:
        return block_rows(self.input_dim, self.n_points)

    def _prepare_shared(self, dtype: np.dtype) -> None:
        self._pass_for(dtype)

    def kernel(self, X, Y=None) -> np.ndarray:
        """sum_i a_i cos(w_i . (x - y)) = sum_i a_i [cos cos + sin sin], in float64, for any signs of a_i
        (so also for sparse grids that are no feature map)."""
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        W, _ = self._parameters_for(np.dtype(np.float64))
        projection_x = self._project(X.astype(np.float64), W)
        projection_y = projection_x if Y is X else self._project(Y.astype(np.float64), W)
        weights = self.weights
        return ((np.cos(projection_x) * weights) @ np.cos(projection_y).T
                + (np.sin(projection_x) * weights) @ np.sin(projection_y).T)

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        scales = self.params.lengthscales
        if self.params.anova is None:
            return kernels.gaussian(X, Y, self.params.gamma, scales)
        return kernels.gaussian_anova(kernels.scaled(X, scales), kernels.scaled(Y, scales), self.params.gamma,
                                      self.subsets)
