"""Spec resolution of a quadrature map (`featurehash.maps.fourier.quadrature`): the random points of the
subsampled grids, and the reweighted grid's fit (candidates, pairs of sample rows, the weights by
`_quadrature_rules`), run once when a new spec is resolved; a stored spec carries its points and weights.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .. import kernels
from .. import randomness
from . import _quadrature_design as design
from . import _quadrature_rules as rules
from ..errors import SpecError
from ._quadrature_params import (DEFAULT_CANDIDATES_PER_POINT, DEFAULT_CANDIDATES_PER_POINT_FORWARD,
                                 DEFAULT_DIAGONAL_WEIGHT, DEFAULT_FIT_PAIRS, DEFAULT_LEVEL, DEFAULT_POINTS_PER_DIM,
                                 DEFAULT_SUBSAMPLED_POINTS_PER_DIM, FITTED_FIELDS, FIT_CHUNK_PAIRS, MAX_CANDIDATES,
                                 QuadratureParams, WEIGHT_DIGITS, _check_fixed_size, _refuse_unused, anova_subsets,
                                 family_sizes, shares)


def resolve_params(params: QuadratureParams, *, input_dim: int, n_components: int, seed: int) -> QuadratureParams:
    """The resolved params of a spec (QuadratureMap.complete_params): defaults, the checks of each grid, and
    for a new reweighted request the fit."""
    subsets = anova_subsets(params.anova, input_dim)
    subset_sizes = family_sizes(params.anova, input_dim)
    kernels.check_lengthscales(params.lengthscales, input_dim)
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
    # The rule is fitted to the kernel of u = x / lengthscales; the map divides W's columns likewise.
    sample = kernels.scaled(sample, params.lengthscales)
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
