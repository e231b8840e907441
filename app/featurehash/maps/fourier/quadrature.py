"""Gaussian-quadrature features (Dao, De Sa, Re, "Gaussian Quadrature for Kernel Features",
NIPS 2017; papers/002_*; ALGORITHMS.md "Gaussian-quadrature features").

Kernel: Gaussian k(x, y) = exp(-gamma ||x - y||^2), whose spectrum is N(0, 2 gamma I); with `anova`,
the sparse ANOVA kernel k(x, y) = sum_{S in family} prod_{i in S} exp(-gamma (x_i - y_i)^2)
(`featurehash.maps.kernels.gaussian_anova`; section 4), the family being the sliding windows of `window`
consecutive coordinates (d - r + 1 of them) or an explicit list of `subsets`.

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
  Why forward selection: in d >= 30 the NNLS over all candidates keeps nearly all of them (the paper's
  "often sparse" holds in low dimension), so the choice of the P decides the error; the l1 path's
  choice got worse with more candidates (USPS-like, D = 64: RFF ratio 1.53 / 1.47 / 1.36 with 4 / 8 /
  16 P), forward selection's better. Measured (bench/results/quadrature_reweighted.txt, fit on 500
  rows, RMSE over held-out pairs, ratio RFF / reweighted at D = 64 / 128 / 256 / 512; forward, and the
  l1 path in brackets): diabetes (d = 10) 2.6 / 3.2 / 3.6 / 5.1 (2.2 / 3.0 / 3.5 / 4.9); breast_cancer
  (d = 30) 1.8 / 1.8 / 2.0 / 2.2 (1.7 / 1.7 / 2.0 / 2.3); digits (d = 64, standardised) 1.4 / 1.5 /
  1.6 / 1.7 (1.3 / 1.3 / 1.6 / 1.7), 1.8 at D = 1024; USPS-like (digits at 16 x 16 in [-1, 1]) 1.6 /
  1.8 / 2.1 / 2.4 (1.5 / 1.6 / 1.9 / 2.2), 2.6 at D = 1024. The paper's 2-3x (TIMIT) is for a sparse
  ANOVA kernel of 5-coordinate subsets, where each sub-rule lives in 5 dimensions: there this fit gives
  2.3-3.7x (50 random 5-subsets of digits / USPS-like, D = 400 and 1000). On a full Gaussian kernel the
  gain falls with the data's dimension (effective dimension 20 for standardised digits: 1.4-1.8x).
  Beyond the paper, the fit also asks k~(x, x) = k(0)
  (`diagonal_weight`, the weight of that one equation against all sample pairs together; default
  1): fitted on sample pairs alone the estimate's diagonal came out 2-17% low (measured on diabetes,
  breast_cancer, digits) for 0-20% more off-diagonal error; with weight 1 it is within 1%. The spec
  then stores the fitted numbers instead of the sample:
  `points` (node indices into the L-point rule, one per coordinate of the point's subset),
  `weights` (rounded to 8 significant digits), and with anova `point_subsets`; fit_sample
  becomes null. So the id covers the fit, and a stored spec is rebuilt without data and without
  refitting. If fewer than P candidates get a positive weight, the remaining points keep weight 0
  (silent features).
  Same request, same fit, on every machine (issue 10): the fit uses no operation whose result
  depends on the CPU, the BLAS kernel, the SIMD path or the thread count, so its unrounded numbers,
  not only the rounded ones, are bit-identical everywhere (tests/test_quadrature.py runs it under
  other OpenBLAS coretypes, numpy SIMD targets, numba code generation and thread counts):
  candidates drawn and evaluated with `_quadrature_rules.hermite_rule` (Sturm bisection,
  not LAPACK); the design cos(w . delta) and target in numba with `_portable_numba` cos/exp;
  the Gram matrix exact whatever BLAS does (error-free splitting, `_quadrature_design`); the NNLS,
  l1 path and debiasing by a compiled active set in a fixed order (`_active_set_nnls`), forward
  selection by compiled loops in a fixed order, ties to the lowest index (`_forward_selection`). The
  final weights are the unique optimum of a strictly convex problem (NNLS with a ridge) on the chosen
  points. The l1 path's formulation is unchanged, so a refit of a request made before this change
  gives the same spec in the cases checked (the golden requests; diabetes and digits at D = 64 and
  256): the rounding absorbed the old last-bit noise there. Where it did not (a weight at a rounding edge, or a
  support decided by noise), the refit is the new, portable answer under a new id, while the
  stored spec keeps its id and transforms as before (its points and weights are in it).
  Cost: about 1.5 pairs * candidates^2 flops for the Gram matrix (two exact BLAS products) and
  pairs * candidates * d for the design, plus the selection: forward ~candidates * P^2 flops and one
  NNLS of size P; the l1 path active-set NNLS solves of ~candidates * support^2 flops each. Measured
  (500 rows, 8000 pairs, 2 cores with load average ~4.4, median of 3): forward 0.5 / 0.8 / 1.1 /
  4.7 s on digits and 0.9 / 1.0 / 2.2 / 6.2 s on USPS-like (d = 256) at D = 64 / 128 / 256 / 512,
  16 s and 21 s at D = 1024 (4096 candidates); the l1 path with its 4 P candidates 0.2 / 0.5 / 0.8 /
  2.2, 2.5 s at 512 and 9 / 13 s at 1024: forward's twice as many candidates cost twice the Gram
  time. A new process first loads the compiled kernels (~0.5 s).
Randomness (subsampled points, candidates, fit pairs) comes from `randomness.raw_words` blocks
"quadrature.points", "quadrature.candidates", "quadrature.fit_pairs"; dense and sparse grids are
deterministic (the seed does not matter).

Features are computed in float32 unless float64 is asked for, in row chunks; sparse CSR input
costs O(nnz * P) for the projection (then O(n P) for cos and sin).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from .. import kernels
from . import _quadrature_design as design
from . import _quadrature_rules as rules
from .. import randomness
from ._fourier_pass import FourierPass, block_rows, project_into
from ..base import DenseFeatureMap, largest_magnitude
from ..errors import SpecError
from ..spec import MAX_COMPONENTS, MapSpec

# Dense and sparse grids beyond this many (folded) points are refused: 2 P features must fit
# MAX_COMPONENTS (a spec's limit on n_components).
MAX_GRID_POINTS = MAX_COMPONENTS // 2
MAX_RULE_POINTS = 100     # L; hermegauss is accurate far beyond what any grid here needs
MAX_LEVEL = 10
MAX_SUBSETS = 2**16
DEFAULT_POINTS_PER_DIM = 10  # degree 19 exact per coordinate; the paper's TIMIT rule had 11
# The subsampled grid's default (new requests; stored specs hold their L): its cost does not depend on L,
# and its bias is the L-point rule's error, below 1e-3 per coordinate while sqrt(2 gamma)|x_i - y_i|
# < 12.47 for L = 64 (3.10 for L = 10, where a 10-point grid was measured 0.31 off on an ANOVA kernel).
DEFAULT_SUBSAMPLED_POINTS_PER_DIM = 64
DEFAULT_LEVEL = 2
# Reweighted fit. The NNLS problems have `candidates` unknowns (cost ~ candidates^3 in the worst
# case), the Gram matrix costs pairs * candidates^2: these bounds keep a create call under a minute.
DEFAULT_CANDIDATES_PER_POINT = 4
# Forward selection (new requests) gains from more candidates where the l1 path lost (bench_quadrature).
DEFAULT_CANDIDATES_PER_POINT_FORWARD = 8
MAX_CANDIDATES = 4096
DEFAULT_FIT_PAIRS = 8000
DEFAULT_DIAGONAL_WEIGHT = 1.0
MAX_FIT_PAIRS = 50_000
MAX_FIT_ROWS = 20_000
# Pairs of sample rows per chunk when accumulating the Gram matrix (chunk x candidates floats).
FIT_CHUNK_PAIRS = 1024
# Significant digits of the fitted weights stored in the spec (see fit_reweighted).
WEIGHT_DIGITS = 8

FITTED_FIELDS = ("points", "weights", "point_subsets")

NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]
NodeIndex = Annotated[int, Field(strict=True, ge=0, lt=MAX_RULE_POINTS)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class AnovaFamily(BaseModel):
    """The subsets S of the sparse ANOVA kernel: sliding windows or an explicit list."""

    model_config = ConfigDict(extra="forbid")

    window: int | None = Field(default=None, ge=1, strict=True,
                               description="subsets {i, ..., i + window - 1}, i = 0..d - window")
    subsets: list[list[NonNegativeInt]] | None = Field(default=None, min_length=1, max_length=MAX_SUBSETS)

    @model_validator(mode="after")
    def _exactly_one(self) -> "AnovaFamily":
        if (self.window is None) == (self.subsets is None):
            raise ValueError("give either window (sliding windows) or subsets (an explicit list), not both or neither")
        return self


class QuadratureParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grid: Literal["dense", "sparse", "subsampled", "reweighted"] = "subsampled"
    gamma: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    # L, the size of the 1-D Gauss-Hermite rule (dense, subsampled, reweighted; default 10).
    points_per_dim: int | None = Field(default=None, ge=2, le=MAX_RULE_POINTS, strict=True)
    # A, the Smolyak level (sparse only; default 2).
    level: int | None = Field(default=None, ge=1, le=MAX_LEVEL, strict=True)
    anova: AnovaFamily | None = None
    # Reweighted grid: how to fit (recorded in the spec) ...
    fit_sample: list[list[FiniteFloat]] | None = Field(default=None, min_length=2, max_length=MAX_FIT_ROWS)
    fit_pairs: int | None = Field(default=None, ge=1, le=MAX_FIT_PAIRS, strict=True)
    candidates: int | None = Field(default=None, ge=1, le=MAX_CANDIDATES, strict=True)
    # How the D / 2 points are chosen among the candidates: None (an absent key: every spec stored before
    # the parameter) or "l1_path" is the l1 path with `penalty`; new requests get "forward" (greedy forward
    # selection, no penalty) written out by `complete_new_request` unless they give a penalty.
    selection: Literal["l1_path", "forward"] | None = None
    penalty: Literal["adaptive_l1", "l1"] | None = None
    # Weight of k~(x, x) = k(0) in the fit, relative to all the sample pairs together (0: the paper's fit on
    # sample pairs only, which leaves the diagonal 2-17% low; default 1).
    diagonal_weight: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    # ... and what was fitted (filled in by complete_params, given back by a stored spec).
    points: list[list[NodeIndex]] | None = Field(default=None, min_length=1)
    weights: list[NonNegativeFloat] | None = Field(default=None, min_length=1)
    point_subsets: list[NonNegativeInt] | None = Field(default=None, min_length=1)

    @model_serializer(mode="wrap")
    def _omit_legacy_selection(self, handler):
        """Stored params leave `selection` out at "l1_path" (or unset), so every spec made before the
        parameter, and the same request made today with selection "l1_path", keeps its id."""
        params = handler(self)
        if params.get("selection", "l1_path") in ("l1_path", None):
            params.pop("selection", None)
        return params

    @property
    def selects_forward(self) -> bool:
        return self.selection == "forward"


# -------------------------------------------------------------------------------------------
# spec resolution
# -------------------------------------------------------------------------------------------

def family_sizes(anova: AnovaFamily | None, input_dim: int) -> list[int]:
    """The sizes of the family's subsets, found without enumerating them (so a huge input_dim costs
    nothing before the map is sized); refuses a family over the limits."""
    if anova is None:
        return [input_dim]
    if anova.window is not None:
        if anova.window > input_dim:
            raise SpecError("params.anova.window", f"a window of {anova.window} does not fit in input_dim {input_dim}")
        count = input_dim - anova.window + 1
        if count > MAX_SUBSETS:
            raise SpecError("params.anova.window", f"{count} windows exceed the limit of {MAX_SUBSETS} subsets")
        return [anova.window] * count
    return [len(subset) for subset in anova.subsets]


def anova_subsets(anova: AnovaFamily | None, input_dim: int) -> list[range | list[int]]:
    """The family of coordinate subsets: one subset of all coordinates without anova. Contiguous
    subsets are ranges, which cost nothing whatever their length."""
    sizes = family_sizes(anova, input_dim)
    if anova is None:
        return [range(input_dim)]
    if anova.window is not None:
        return [range(start, start + anova.window) for start in range(len(sizes))]
    for position, subset in enumerate(anova.subsets):
        field = f"params.anova.subsets.{position}"
        if not subset:
            raise SpecError(field, "a subset needs at least one coordinate")
        if max(subset) >= input_dim:
            raise SpecError(field, f"coordinate {max(subset)} is outside 0..{input_dim - 1}")
        if len(set(subset)) != len(subset):
            raise SpecError(field, "coordinates must be distinct within a subset")
    return [list(subset) for subset in anova.subsets]


def shares(total: int, parts: int) -> list[int]:
    """`total` split into `parts` near-equal counts, the larger ones first."""
    base, extra = divmod(total, parts)
    return [base + (1 if position < extra else 0) for position in range(parts)]


def grid_points(grid: str, size_parameter: int, subset_sizes: list[int]) -> int:
    """Folded points of a dense (size_parameter = L) or sparse (= level) grid over the family."""
    size_of = rules.dense_grid_size if grid == "dense" else rules.sparse_grid_size
    per_size = {r: size_of(size_parameter, r) for r in set(subset_sizes)}
    return sum(per_size[r] for r in subset_sizes)


def _refuse_unused(params: QuadratureParams, names: tuple[str, ...], why: str) -> None:
    for name in names:
        if getattr(params, name) is not None:
            raise SpecError(f"params.{name}", why)


def _check_fixed_size(grid: str, params: QuadratureParams, subset_sizes: list[int], n_components: int) -> None:
    """Dense and sparse grids have the size their rule gives: refuse one over the limit, or an n_components
    that is not twice its number of points (saying which value it must be)."""
    if grid == "dense":
        field, described = "params.points_per_dim", f"{params.points_per_dim}^{max(subset_sizes)}"
        total = grid_points(grid, params.points_per_dim, subset_sizes)  # exact integers, however large
    else:
        field, described = "params.level", f"level {params.level} in {max(subset_sizes)} dimensions"
        total = grid_points(grid, params.level, subset_sizes)
    if total > MAX_GRID_POINTS:
        shown = f"{total:.3g}" if total > 10**12 else str(total)
        raise SpecError(field, f"a {grid} grid of {described} has {shown} points (after merging antipodes), over "
                        f"the limit of {MAX_GRID_POINTS} (its 2 * points features must fit n_components <= "
                        f"{MAX_COMPONENTS}); use a smaller rule, grid 'subsampled' or 'reweighted', or an anova "
                        "family")
    if n_components != 2 * total:
        raise SpecError("n_components", f"the {grid} grid ({described}, over {len(subset_sizes)} subset(s)) has "
                        f"{total} points after merging antipodes, i.e. {2 * total} features (cos and sin of "
                        f"each): n_components must be {2 * total}")


class QuadratureMap(DenseFeatureMap):
    method = "quadrature"
    Params = QuadratureParams
    shares_rows = True

    @classmethod
    def complete_params(cls, params: QuadratureParams, *, input_dim: int, n_components: int,
                        seed: int) -> QuadratureParams:
        subsets = anova_subsets(params.anova, input_dim)
        subset_sizes = family_sizes(params.anova, input_dim)
        grid, updates = params.grid, {}
        fit_names = ("fit_sample", "fit_pairs", "candidates", "selection", "penalty", "diagonal_weight",
                     *FITTED_FIELDS)
        if grid != "reweighted":
            _refuse_unused(params, fit_names, f"only the 'reweighted' grid is fitted to data, not {grid!r}")
        if grid == "sparse":
            _refuse_unused(params, ("points_per_dim",), "the sparse grid uses the 1, 3, 5, ... point rules up to "
                           "its level: set level, not points_per_dim")
            if params.level is None:
                updates["level"] = DEFAULT_LEVEL
        else:
            _refuse_unused(params, ("level",), "only the 'sparse' grid has a level")
            if params.points_per_dim is None:
                updates["points_per_dim"] = (DEFAULT_SUBSAMPLED_POINTS_PER_DIM if grid == "subsampled"
                                             else DEFAULT_POINTS_PER_DIM)
        resolved = params.model_copy(update=updates) if updates else params
        if grid in ("dense", "sparse"):
            _check_fixed_size(grid, resolved, subset_sizes, n_components)
        elif n_components % 2 or n_components // 2 < len(subsets):
            raise SpecError("n_components", f"the {grid} grid gives 2 features (cos and sin) per point and at least "
                            f"one point per subset ({len(subsets)}): n_components must be even and "
                            f">= {2 * len(subsets)}")
        if grid == "reweighted":
            resolved = _complete_reweighted(resolved, subsets, input_dim, n_components // 2, seed)
        # A stored spec has everything already and comes back as the same object.
        return resolved

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

    def unit_rule(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per subset: points for N(0, I_r) (P_S, r) and their weights (P_S,), in feature order."""
        params, L = self.params, self.params.points_per_dim
        sizes = [len(subset) for subset in self.subsets]
        if params.grid == "dense":
            cache = {r: rules.dense_grid(L, r) for r in set(sizes)}
            nodes = rules.hermite_rule(L)[0]
            return [nodes[cache[r][0]] for r in sizes], [cache[r][1] for r in sizes]
        if params.grid == "sparse":
            cache = {r: rules.sparse_grid(params.level, r) for r in set(sizes)}
            return [cache[r][0] for r in sizes], [cache[r][1] for r in sizes]
        nodes = rules.hermite_rule(L)[0]
        if params.grid == "subsampled":
            indices = _subsampled_indices(self.spec.seed, "quadrature.points", L, shares(self.n_points, len(sizes)),
                                          sizes)
            return [nodes[block] for block in indices], [np.full(len(block), 1.0 / len(block)) for block in indices]
        owners = np.zeros(self.n_points, dtype=np.int64) if params.point_subsets is None \
            else np.asarray(params.point_subsets)
        weights = np.asarray(params.weights, dtype=np.float64)
        points, point_weights = [], []
        for s in range(len(self.subsets)):
            mine = np.flatnonzero(owners == s)
            points.append(nodes[np.array([params.points[k] for k in mine], dtype=np.int64).reshape(-1, sizes[s])])
            point_weights.append(weights[mine])
        return points, point_weights

    def rule(self) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
        """(frequencies W, P x d: dense, or CSR with anova; weights a, P), float64, scaled by sqrt(2 gamma)."""
        points, weights = self.unit_rule()
        scale = math.sqrt(2.0 * self.params.gamma)
        if self.params.anova is None:
            return points[0] * scale, weights[0]
        counts = [len(block) for block in points]
        rows = np.repeat(np.arange(sum(counts)), np.repeat([len(subset) for subset in self.subsets], counts))
        columns = np.concatenate([np.tile(subset, c) for subset, c in zip(self.subsets, counts)])
        values = np.concatenate([block.ravel() for block in points]) * scale
        W = sp.csr_matrix((values, (rows, columns)), shape=(sum(counts), self.input_dim))
        W.sort_indices()
        return W, np.concatenate(weights)

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

    def _subsampled_frequencies(self, dtype: np.dtype, size: int) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
        """`rule()` of a subsampled grid whose subsets all have `size` coordinates (no anova, or windows),
        made straight in `dtype` in blocks of points (the same numbers: the draw is point by point), so
        creating a large map holds little besides W: dense without anova, CSR with it."""
        L, P = self.params.points_per_dim, self.n_points
        nodes, scale = rules.hermite_rule(L)[0], math.sqrt(2.0 * self.params.gamma)
        counts = shares(P, len(self.subsets))
        weights = np.concatenate([np.full(count, 1.0 / count) for count in counts])
        if self.params.anova is None:
            W = np.empty((size, P), dtype=dtype).T   # stored d x P, as rff stores its frequencies
        else:
            owners = np.repeat(np.arange(len(self.subsets)), counts)
            columns = np.empty((len(self.subsets), size), dtype=np.int32)
            for position, subset in enumerate(self.subsets):
                columns[position] = subset
            W = sp.csr_matrix((np.empty(P * size, dtype=dtype), np.empty(P * size, dtype=np.int32),
                               np.arange(0, P * size + 1, size, dtype=np.int32)), shape=(P, self.input_dim))
        for rows, words in randomness.row_blocks(self.spec.seed, "quadrature.points", P, size):
            indices = rules.subsample(L, rows.stop - rows.start, size, randomness.uniform_open(words))
            if self.params.anova is None:
                W[rows] = nodes[indices] * scale
            else:
                entries = slice(rows.start * size, rows.stop * size)
                W.data[entries] = (nodes[indices] * scale).ravel()
                W.indices[entries] = columns[owners[rows]].ravel()
        if sp.issparse(W):
            W.sort_indices()
        return W, weights

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

    def points_per_subset(self) -> list[int]:
        """How many of the P points each subset has (known from the spec, before any rule is built)."""
        grid = self.params.grid
        if grid == "subsampled":
            return shares(self.n_points, len(self.subsets))
        if grid == "reweighted":
            if self.params.point_subsets is None:
                return [self.n_points]
            return np.bincount(self.params.point_subsets, minlength=len(self.subsets)).tolist()
        size_parameter = self.params.points_per_dim if grid == "dense" else self.params.level
        return [grid_points(grid, size_parameter, [len(subset)]) for subset in self.subsets]

    def _coordinates_held(self) -> int:
        """Stored entries of W: P x d dense, or sum over points of |S| with anova."""
        if self.params.anova is None:
            return self.n_points * self.input_dim
        return sum(count * len(subset) for count, subset in zip(self.points_per_subset(), self.subsets))

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
        self._parameters_for(dtype)
        return l1 * self._largest_frequency[dtype]

    def _features_into(self, X, out: np.ndarray) -> bool:
        return self._pass_for(out.dtype).run(self._projector(out.dtype), X, out)

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
        if self.params.anova is None:
            return kernels.gaussian(X, Y, self.params.gamma)
        return kernels.gaussian_anova(X, Y, self.params.gamma, self.subsets)


# -------------------------------------------------------------------------------------------
# random points: subsampled grids and the reweighted grid's candidates
# -------------------------------------------------------------------------------------------

def _subsampled_indices(seed: int, tag: str, points_per_dim: int, counts: list[int],
                        sizes: list[int]) -> list[np.ndarray]:
    """Node indices of counts[s] grid points for each subset s, drawn with probability = weight from one
    raw-word stream, consumed subset by subset, point by point, coordinate by coordinate."""
    total = sum(c * r for c, r in zip(counts, sizes))
    uniforms = randomness.uniform_open(randomness.raw_words(seed, tag, total))
    blocks, offset = [], 0
    for count, size in zip(counts, sizes):
        blocks.append(rules.subsample(points_per_dim, count, size, uniforms[offset:offset + count * size]))
        offset += count * size
    return blocks


def fit_pair_indices(rows: int, pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (i, j), i != j, of sample rows: all of them if there are at most `pairs`, else `pairs` drawn
    from the seed (i uniform, j uniform among the others)."""
    if rows * (rows - 1) // 2 <= pairs:
        return np.triu_indices(rows, k=1)
    uniforms = randomness.uniform_open(randomness.raw_words(seed, "quadrature.fit_pairs", 2 * pairs))
    first = np.minimum((uniforms[:pairs] * rows).astype(np.int64), rows - 1)
    second = np.minimum((uniforms[pairs:] * (rows - 1)).astype(np.int64), rows - 2)
    second += second >= first
    return first, second


def _complete_reweighted(params: QuadratureParams, subsets: list[list[int]], input_dim: int, n_points: int,
                         seed: int) -> QuadratureParams:
    L = params.points_per_dim
    if params.selects_forward and params.penalty is not None:
        raise SpecError("params.penalty", "the penalty belongs to the l1 path; selection 'forward' has none: "
                        "leave it out, or ask for selection 'l1_path'")
    fitted = [name for name in FITTED_FIELDS if getattr(params, name) is not None]
    if fitted:
        if params.fit_sample is not None:
            raise SpecError("params.fit_sample", "give either fit_sample (to fit the weights) or the fitted points "
                            "and weights (as a resolved spec returns them), not both")
        _check_fitted(params, subsets, n_points)
        return params
    if params.fit_sample is None:
        raise SpecError("params.fit_sample", "the reweighted grid is fitted to data: give fit_sample, a list of "
                        "at least 2 rows of your data (a few hundred is typical); the spec then stores the "
                        "fitted points and weights instead")
    try:
        sample = np.asarray(params.fit_sample, dtype=np.float64)
    except ValueError:
        sample = None
    if sample is None or sample.ndim != 2 or sample.shape[1] != input_dim:
        raise SpecError("params.fit_sample", f"rows of the data to fit: each must have input_dim = {input_dim} entries")
    per_point = DEFAULT_CANDIDATES_PER_POINT_FORWARD if params.selects_forward else DEFAULT_CANDIDATES_PER_POINT
    resolved = params.model_copy(update={
        "fit_pairs": params.fit_pairs or DEFAULT_FIT_PAIRS,
        "candidates": params.candidates or min(MAX_CANDIDATES, per_point * n_points),
        "penalty": None if params.selects_forward else params.penalty or "adaptive_l1",
        "diagonal_weight": DEFAULT_DIAGONAL_WEIGHT if params.diagonal_weight is None else params.diagonal_weight,
    })
    if resolved.candidates < n_points:
        raise SpecError("params.candidates", f"{resolved.candidates} candidates cannot give {n_points} points "
                        f"(n_components / 2); at most {MAX_CANDIDATES} candidates, so at most "
                        f"{2 * MAX_CANDIDATES} features")
    if resolved.candidates < len(subsets):
        raise SpecError("params.candidates", f"need at least one candidate per subset ({len(subsets)})")
    fit = fit_reweighted(sample, subsets, n_points, seed, gamma=resolved.gamma, points_per_dim=L,
                         candidates=resolved.candidates, fit_pairs=resolved.fit_pairs,
                         penalty="forward" if resolved.selects_forward else resolved.penalty,
                         diagonal_weight=resolved.diagonal_weight,
                         with_anova=params.anova is not None)
    return resolved.model_copy(update={"fit_sample": None, **fit})


def fit_reweighted(sample: np.ndarray, subsets: list[list[int]], n_points: int, seed: int, *, gamma: float,
                   points_per_dim: int, candidates: int, fit_pairs: int, penalty: str, diagonal_weight: float,
                   with_anova: bool) -> dict:
    """The reweighted rule for `sample` (rows x d): {"points", "weights", "point_subsets"} as stored in the
    spec (point_subsets None without anova). `penalty`: "forward" (forward selection) or the l1 path's
    penalty. See the module docstring and `_quadrature_rules.fit_weights`."""
    L, sizes = points_per_dim, [len(subset) for subset in subsets]
    input_dim = sample.shape[1]
    # Candidates: folded (w ~ -w give the same cosine) and deduplicated, subset by subset.
    drawn = _subsampled_indices(seed, "quadrature.candidates", L, shares(candidates, len(subsets)), sizes)
    blocks = [np.unique(rules.fold_indices(block, L), axis=0) for block in drawn]
    owners = np.concatenate([np.full(len(block), s) for s, block in enumerate(blocks)])
    distinct = int(owners.size)
    if distinct < n_points:
        raise SpecError("n_components", f"only {distinct} distinct candidate points (of {candidates} drawn from the "
                        f"{L}-point grid) for {n_points} points: lower n_components, or raise points_per_dim or "
                        "candidates")
    nodes = rules.hermite_rule(L)[0] * math.sqrt(2.0 * gamma)
    # Frequencies of the candidates as a d x candidates matrix (sparse with anova).
    rows = np.repeat(np.arange(distinct), [sizes[s] for s in owners])
    columns = np.concatenate([np.tile(subsets[s], len(block)) for s, block in enumerate(blocks)])
    values = np.concatenate([nodes[block].ravel() for block in blocks])
    frequencies = sp.csr_matrix((values, (columns, rows)), shape=(input_dim, distinct))
    frequencies = frequencies if with_anova else frequencies.toarray()
    first, second = fit_pair_indices(sample.shape[0], fit_pairs, seed)
    gram, moment, target_square, _ = design.gram_moments(sample, first, second, frequencies, subsets, gamma,
                                                          FIT_CHUNK_PAIRS)
    # The pair (x, x): its design row is all ones (cos 0) and its target k(0) = number of subsets.
    origin = float(len(subsets))
    gram += diagonal_weight
    moment += diagonal_weight * origin
    target_square += diagonal_weight * origin**2
    try:
        fit = rules.fit_weights(gram, moment, target_square, n_points, penalty)
    except (RuntimeError, np.linalg.LinAlgError) as exc:  # NNLS iteration limit, or a singular Gram matrix
        raise SpecError("params.fit_sample", f"the weight fit failed ({exc}); try another seed, fewer candidates "
                        "or a larger sample") from None
    candidate_rows = [row for block in blocks for row in block.tolist()]
    # Rounded to keep specs short (8 digits change the estimate by < 1e-8); the unrounded weights are
    # already the same bits on every machine, so the rounding is no longer what makes ids agree.
    weights = [float(f"{a:.{WEIGHT_DIGITS}g}") for a in fit.weights]
    return {"points": [candidate_rows[k] for k in fit.selected], "weights": weights,
            "point_subsets": [int(owners[k]) for k in fit.selected] if with_anova else None}


def _check_fitted(params: QuadratureParams, subsets: list[list[int]], n_points: int) -> None:
    """A stored reweighted spec: points, weights (and point_subsets with anova) consistent with the spec."""
    missing = [name for name in ("points", "weights") if getattr(params, name) is None]
    if missing:
        raise SpecError(f"params.{missing[0]}", "points and weights come together (as a resolved spec returns "
                        "them) or not at all (then give fit_sample)")
    recorded = ("fit_pairs", "candidates", "diagonal_weight") + (() if params.selects_forward else ("penalty",))
    for name in recorded:
        if getattr(params, name) is None:
            raise SpecError(f"params.{name}", "a fitted spec records how it was fitted: give it back as returned")
    if len(params.points) != n_points or len(params.weights) != n_points:
        raise SpecError("params.points", f"n_components {2 * n_points} needs {n_points} points and weights, got "
                        f"{len(params.points)} and {len(params.weights)}")
    if (params.point_subsets is None) != (params.anova is None):
        raise SpecError("params.point_subsets", "needed with anova (the subset of each point), not without")
    owners = [0] * n_points if params.point_subsets is None else params.point_subsets
    if len(owners) != n_points:
        raise SpecError("params.point_subsets", f"needs {n_points} entries, got {len(owners)}")
    for position, (point, owner) in enumerate(zip(params.points, owners)):
        if owner >= len(subsets):
            raise SpecError(f"params.point_subsets.{position}", f"there are {len(subsets)} subsets")
        if len(point) != len(subsets[owner]):
            raise SpecError(f"params.points.{position}", f"needs {len(subsets[owner])} node indices (its subset's "
                            f"size), got {len(point)}")
        if max(point) >= params.points_per_dim:
            raise SpecError(f"params.points.{position}", f"node indices of the {params.points_per_dim}-point rule "
                            f"are 0..{params.points_per_dim - 1}")
