"""The params of a quadrature spec (`featurehash.maps.fourier.quadrature`): the grids' limits and defaults,
the params model, and the sizes a grid and its ANOVA family imply. No fitting and no map here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from . import _quadrature_rules as rules
from ..errors import SpecError
from ..inputs import SampleRows
from ..spec import MAX_COMPONENTS

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
    fit_sample: SampleRows(min_rows=2, max_rows=MAX_FIT_ROWS) | None = None
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
    # Per-dimension lengthscales l: the kernel of u = x / l (each grid's column i divided by l_i); left out
    # of the stored spec while unset.
    lengthscales: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = None

    @model_serializer(mode="wrap")
    def _omit_legacy_selection(self, handler):
        """Stored params leave `selection` out at "l1_path" (or unset), so every spec made before the
        parameter, and the same request made today with selection "l1_path", keeps its id; the same for
        unset lengthscales."""
        params = handler(self)
        if params.get("selection", "l1_path") in ("l1_path", None):
            params.pop("selection", None)
        if params.get("lengthscales", 0) is None:
            del params["lengthscales"]
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
