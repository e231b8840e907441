"""Gaussian-quadrature features (docs/methods/fourier.md, "Gaussian quadrature";
app/featurehash/maps/fourier/quadrature.py): the rules, the kernel estimate against the exact kernels and RFF,
the reweighted fit and its spec, the sparse ANOVA kernels, spec validation, numerics, the service and golden
vectors.

Facts checked:
- the L-point Gauss-Hermite rule, and so the dense grid, integrates every monomial of degree <= 2L - 1 in
  each coordinate exactly against N(0, 2 gamma I) (the paper's section 3.3), and not degree 2L;
- the Smolyak weights summed point by point equal the explicit combination of tensor rules;
- at small region diameter the max kernel error of the dense grid (d = 3) and the level-2 sparse grid
  (d = 25, the paper's Figure 1b) is below RFF's at equal D, and the sparse grid's exceeds it at large
  diameter (the paper's caveat); a subsampled grid errs like RFF (Figure 1c);
- the reweighted grid's held-out kernel RMSE on sklearn's diabetes data is at least 2x below RFF's at
  equal D (section 3.5 reports 2-3x), and its spec stores the fitted points and weights, not the sample;
- the ANOVA estimate converges to the exact ANOVA kernel as the per-subset rule grows.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import orjson
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import pdist

import featurehash.maps.base as base_module
import featurehash.maps.fourier._quadrature_fit as quadrature_fit
import featurehash.maps.fourier._quadrature_params as quadrature_params
from featurehash.maps import kernels
from featurehash.maps import InputError, SpecError, create_map, resolve_spec
from featurehash.maps.numerics import _active_set_nnls as active_set
from featurehash.maps.numerics import _forward_selection as forward_selection
from featurehash.maps.numerics import _portable_math as portable_math
from featurehash.maps.numerics import _portable_numba as portable_numba
from featurehash.maps.fourier import _quadrature_design as quadrature_design
from featurehash.maps.fourier import _quadrature_rules as rules
from featurehash.maps.fourier.quadrature import QuadratureMap, QuadratureParams


pytestmark = pytest.mark.usefixtures("single_threaded_blas")


def make_map(d, D, seed=0, **params):
    return create_map({"method": "quadrature", "input_dim": d, "n_components": D, "seed": seed, "params": params})


def gaussian_moment(orders, gamma: float) -> float:
    """E[prod_l w_l^{r_l}] for w ~ N(0, 2 gamma I): prod (2 gamma)^{r/2} (r - 1)!! for even r, else 0."""
    value = 1.0
    for r in orders:
        if r % 2:
            return 0.0
        value *= (2.0 * gamma) ** (r / 2) * math.prod(range(r - 1, 0, -2))
    return value


def rule_moment(W: np.ndarray, weights: np.ndarray, orders) -> float:
    """sum_i a_i prod_l w_il^{r_l} of the unfolded (symmetrized) rule."""
    points, point_weights = rules.symmetrized(W, weights)
    return float(point_weights @ np.prod(points ** np.asarray(orders), axis=1))


# ---------------------------------------------------------------------------------------
# (a) the rules: exactness, Smolyak combination, folding
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("L", [1, 2, 3, 6, 10])
def test_hermite_rule_is_exact_to_degree_2L_minus_1_and_not_beyond(L):
    nodes, weights = rules.hermite_rule(L)
    for degree in range(2 * L):
        expected = gaussian_moment([degree], 0.5)
        magnitude = weights @ np.abs(nodes) ** degree  # odd moments are 0 by cancellation of this size
        assert abs(weights @ nodes**degree - expected) <= 1e-13 * magnitude, degree
    assert abs(weights @ nodes ** (2 * L) - gaussian_moment([2 * L], 0.5)) > 0.1
    np.testing.assert_array_equal(nodes, -nodes[::-1])  # exactly symmetric: folding relies on it
    np.testing.assert_array_equal(weights, weights[::-1])


@pytest.mark.parametrize("d, L, gamma", [(2, 3, 0.5), (3, 2, 1.7), (2, 5, 0.2)])
def test_dense_grid_features_are_exact_for_polynomials_up_to_degree_2L_minus_1(d, L, gamma):
    """The map's own rule (frequencies scaled by sqrt(2 gamma), folded weights): every monomial with each
    exponent <= 2L - 1 has its exact N(0, 2 gamma I) moment; w_1^{2L} does not."""
    m = make_map(d, 2 * rules.dense_grid_size(L, d), grid="dense", points_per_dim=L, gamma=gamma)
    W, weights = m.rule()
    assert np.all(weights > 0) and m.is_feature_map
    for orders in itertools.product(range(2 * L), repeat=d):
        expected = gaussian_moment(orders, gamma)
        scale = max(1.0, gaussian_moment([2 * (r // 2 + 1) for r in orders], gamma))
        assert abs(rule_moment(W, weights, orders) - expected) <= 1e-11 * scale, orders
    top = [2 * L] + [0] * (d - 1)
    assert abs(rule_moment(W, weights, top) - gaussian_moment(top, gamma)) > 0.01 * gaussian_moment(top, gamma)


def test_folded_dense_grid_is_the_tensor_product():
    """Merging antipodes loses nothing: unfolded, the grid is the full L^d tensor product."""
    L, d = 3, 3
    indices, weights = rules.dense_grid(L, d)
    assert len(indices) == rules.dense_grid_size(L, d) == 14
    nodes, weights_1d = rules.hermite_rule(L)
    points, point_weights = rules.symmetrized(nodes[indices], weights)
    tensor = {tuple(p): np.prod(weights_1d[list(t)]) for t, p in
              zip(itertools.product(range(L), repeat=d), itertools.product(nodes, repeat=d))}
    assert len(points) == L**d
    for point, weight in zip(points, point_weights):
        assert weight == pytest.approx(tensor[tuple(point)], rel=1e-13)


def brute_force_smolyak(level: int, dim: int) -> dict[tuple, float]:
    """sum over excess vectors e (|e| <= A) of c(|e|) * the tensor rule of 2 e_i + 1 points, point by point."""
    points: dict[tuple, float] = {}
    for excess in itertools.product(range(level + 1), repeat=dim):
        coefficient = rules.smolyak_coefficient(level, dim, sum(excess))
        if sum(excess) > level or coefficient == 0:
            continue
        rules_1d = [rules.hermite_rule(2 * e + 1) for e in excess]
        for choice in itertools.product(*[range(2 * e + 1) for e in excess]):
            key = tuple(round(float(rules_1d[i][0][c]), 12) for i, c in enumerate(choice))
            weight = coefficient * math.prod(rules_1d[i][1][c] for i, c in enumerate(choice))
            points[key] = points.get(key, 0.0) + weight
    return {key: value for key, value in points.items() if abs(value) > 1e-13}


@pytest.mark.parametrize("level, dim", [(1, 1), (3, 1), (1, 2), (2, 2), (2, 3), (3, 3), (2, 5), (3, 4)])
def test_sparse_grid_weights_equal_the_explicit_smolyak_combination(level, dim):
    nodes, weights = rules.sparse_grid(level, dim)
    assert len(nodes) == rules.sparse_grid_size(level, dim)
    points, point_weights = rules.symmetrized(nodes, weights)
    mine: dict[tuple, float] = {}
    for point, weight in zip(points, point_weights):
        key = tuple(round(float(x), 12) for x in point)
        mine[key] = mine.get(key, 0.0) + weight
    mine = {key: value for key, value in mine.items() if abs(value) > 1e-13}
    expected = brute_force_smolyak(level, dim)
    assert mine.keys() == expected.keys()
    for key, value in expected.items():
        assert mine[key] == pytest.approx(value, rel=1e-11, abs=1e-13)


@pytest.mark.parametrize("level, dim", [(1, 3), (2, 3), (2, 6), (3, 4)])
def test_sparse_grid_is_exact_for_total_degree_2A_plus_1(level, dim):
    nodes, weights = rules.sparse_grid(level, dim)
    for orders in itertools.product(range(2 * level + 2), repeat=dim):
        if sum(orders) <= 2 * level + 1:
            expected = gaussian_moment(orders, 0.5)
            assert rule_moment(nodes, weights, orders) == pytest.approx(expected, rel=1e-10, abs=1e-10), orders


def test_sparse_grid_sizes_match_the_paper():
    """d = 25, level 2: the paper's 1351 points (section 3.4), 676 after merging antipodes."""
    assert 2 * rules.sparse_grid_size(2, 25) - 1 == 1351
    nodes, weights = rules.sparse_grid(2, 25)
    assert nodes.shape == (676, 25) and np.sum(weights) == pytest.approx(1.0, abs=1e-12)
    assert weights.min() < 0  # why it is a kernel estimate, not a feature map


# ---------------------------------------------------------------------------------------
# (b) max kernel error against RFF of equal D (the paper's Figure 1)
# ---------------------------------------------------------------------------------------

def ball(n: int, d: int, radius: float, rng) -> np.ndarray:
    """n points uniform in the d-ball of the given radius (the paper: region diameter M)."""
    directions = rng.standard_normal((n, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return directions * (radius * rng.random(n) ** (1.0 / d))[:, None]


def max_error(m, U: np.ndarray, gamma: float) -> float:
    """max_u |k~(u) - k(u)| over the rows u of U: k~(u) = k~(u, 0) for a shift-invariant estimate."""
    estimate = m.kernel(U, np.zeros((1, U.shape[1])))[:, 0]
    return float(np.abs(estimate - np.exp(-gamma * np.einsum("ij,ij->i", U, U))).max())


# gamma = 1/2 is the paper's N(0, I) spectrum. Measured (20000 points, bench/bench_quadrature.py has the
# full table): sparse d = 25 at radius 1: 0.015 vs RFF 0.069; dense d = 3, L = 10 at radius 2: 5.6e-7 vs
# 0.077. The test asks for less than half of the best of 3 RFF seeds.
@pytest.mark.parametrize("d, D, params, radius", [
    (25, 1352, {"grid": "sparse", "level": 2}, 1.0),
    (3, 1000, {"grid": "dense", "points_per_dim": 10}, 2.0),
], ids=["sparse_d25_level2", "dense_d3_L10"])
def test_max_error_at_small_diameter_is_below_rff_of_equal_D(d, D, params, radius):
    gamma = 0.5
    U = ball(5000, d, radius, np.random.default_rng(d))
    quadrature = max_error(make_map(d, D, gamma=gamma, **params), U, gamma)
    rff = [max_error(create_map({"method": "rff", "input_dim": d, "n_components": D, "seed": seed,
                                 "params": {"gamma": gamma}}), U, gamma) for seed in range(3)]
    print(f"d={d} {params} radius {radius}: quadrature {quadrature:.3g}, RFF {np.round(rff, 4)}")
    assert quadrature < 0.5 * min(rff)


def test_sparse_grid_error_exceeds_rff_at_large_diameter():
    """The paper's caveat (Figure 1b): with its signed weights the sparse grid's error grows past RFF's."""
    gamma, d, D = 0.5, 25, 1352
    U = ball(2000, d, 3.0, np.random.default_rng(1))
    rff = create_map({"method": "rff", "input_dim": d, "n_components": D, "params": {"gamma": gamma}})
    assert max_error(make_map(d, D, grid="sparse", gamma=gamma), U, gamma) > 2 * max_error(rff, U, gamma)


def test_subsampled_grid_errs_like_rff():
    """Figure 1c: subsampled dense grids and RFF are essentially the same. Relative Frobenius error, 8 seeds:
    measured 0.169 vs 0.173 at D = 256 (seed sd ~0.01 and 0.003), so a band of [0.8, 1.25] on the ratio of
    means is more than 4 standard errors wide each side."""
    X = np.random.default_rng(7).standard_normal((80, 16)) * 0.3
    K = kernels.gaussian(X, X, 0.5)

    def error(m):
        return np.linalg.norm(m.kernel(X) - K) / np.linalg.norm(K)

    ours = [error(make_map(16, 256, seed, gamma=0.5)) for seed in range(8)]
    theirs = [error(create_map({"method": "rff", "input_dim": 16, "n_components": 256, "seed": seed,
                                "params": {"gamma": 0.5}})) for seed in range(8)]
    assert 0.8 < np.mean(ours) / np.mean(theirs) < 1.25


# ---------------------------------------------------------------------------------------
# (c) the reweighted grid
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def diabetes():
    """sklearn's diabetes data (442 x 10, shipped with the package), standardised, rows shuffled once:
    200 rows to fit, 242 held out; gamma = 1 / median squared distance."""
    from sklearn.datasets import load_diabetes

    X = load_diabetes().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    X = X[np.random.default_rng(0).permutation(len(X))]
    return X[:200], X[200:], float(1.0 / np.median(pdist(X, "sqeuclidean")))


def held_out_rmse(m, held: np.ndarray) -> float:
    upper = np.triu_indices(len(held), k=1)
    return float(np.sqrt(np.mean((m.kernel(held) - m.exact_kernel(held))[upper] ** 2)))


@pytest.fixture(scope="module")
def reweighted_diabetes(diabetes):
    fit, _, gamma = diabetes
    return make_map(10, 256, 0, grid="reweighted", gamma=gamma, fit_sample=fit.tolist())


# Measured (forward selection): RMSE 0.0143 (fit seed 1: 0.0140) vs RFF 0.0491 (mean of 5 seeds) at D = 256, ratio
# 3.4 (the l1 path: 0.0139, 3.5); the paper's
# plain l1 path on sample pairs alone gives ~2.1 (bench/bench_quadrature.py). RFF's RMSE varies by ~10% between
# seeds, so the mean of 5 is steady; the bound 2 is the claim.
def test_reweighted_rmse_is_at_least_twice_below_rff_on_held_out_data(diabetes, reweighted_diabetes):
    fit, held, gamma = diabetes
    rff = np.mean([held_out_rmse(create_map({"method": "rff", "input_dim": 10, "n_components": 256, "seed": seed,
                                             "params": {"gamma": gamma}}), held) for seed in range(5)])
    subsampled = np.mean([held_out_rmse(make_map(10, 256, seed, gamma=gamma), held) for seed in range(3)])
    ours = held_out_rmse(reweighted_diabetes, held)
    other_seed = held_out_rmse(make_map(10, 256, 1, grid="reweighted", gamma=gamma, fit_sample=fit.tolist()), held)
    print(f"held-out RMSE: reweighted {ours:.4f} (seed 1: {other_seed:.4f}), subsampled {subsampled:.4f}, "
          f"RFF {rff:.4f}; ratio {rff / ours:.2f}")
    assert rff / ours >= 2.0 and rff / other_seed >= 2.0
    assert ours < subsampled  # the fit, not the grid, makes the gain


def test_reweighted_spec_stores_the_fitted_numbers_not_the_sample(diabetes, reweighted_diabetes, monkeypatch):
    fit, held, _ = diabetes
    m = reweighted_diabetes
    described = m.describe()
    params = described["params"]
    assert params["fit_sample"] is None
    assert len(params["points"]) == len(params["weights"]) == 128 and params["point_subsets"] is None
    assert all(len(point) == 10 and 0 <= min(point) and max(point) < 10 for point in params["points"])
    assert min(params["weights"]) >= 0 and (params["fit_pairs"], params["candidates"], params["selection"],
                                            params["penalty"], params["diagonal_weight"]) == (8000, 1024, "forward",
                                                                                              None, 1.0)
    # The fit weighs k~(x, x) = 1 too (diagonal_weight): the diagonal is within 1% (pairs alone: 2% low here).
    assert abs(sum(params["weights"]) - 1.0) < 0.01
    np.testing.assert_allclose(m.kernel(held[:5]).diagonal(), sum(params["weights"]), rtol=1e-12)
    assert len(orjson.dumps(described)) < 0.5 * len(orjson.dumps(fit.tolist()))  # no copy of the sample
    # The fitted points are what the map uses.
    W, weights = m.rule()
    nodes = rules.hermite_rule(10)[0] * math.sqrt(2 * m.params.gamma)
    np.testing.assert_array_equal(W, nodes[np.array(params["points"])])
    np.testing.assert_array_equal(weights, params["weights"])

    def no_fit(*args, **kwargs):
        raise AssertionError("a stored spec must not be fitted again")

    monkeypatch.setattr(quadrature_fit, "fit_reweighted", no_fit)
    rebuilt = create_map(described)
    assert rebuilt.spec.id == m.spec.id == described["id"]
    assert rebuilt.transform(held).tobytes() == m.transform(held).tobytes()
    stored = QuadratureParams(**params)
    assert QuadratureMap.complete_params(stored, input_dim=10, n_components=256, seed=0) is stored
    # The id covers the fitted numbers: another weight is another map.
    tampered = dict(described, params={**params, "weights": [params["weights"][0] * 2] + params["weights"][1:]})
    tampered.pop("id")
    assert create_map(tampered).spec.id != m.spec.id
    with pytest.raises(SpecError) as info:
        create_map(dict(tampered, id=m.spec.id))
    assert info.value.field == "id"


def test_reweighted_fit_is_deterministic_and_seeded(diabetes):
    fit, _, gamma = diabetes
    request = {"grid": "reweighted", "gamma": gamma, "fit_sample": fit[:80].tolist(), "fit_pairs": 1000}
    first, again = make_map(10, 64, 3, **request), make_map(10, 64, 3, **request)
    assert first.spec.id == again.spec.id
    assert make_map(10, 64, 4, **request).spec.id != first.spec.id


@pytest.mark.parametrize("change, field", [
    ({"fit_sample": None}, "params.fit_sample"),
    ({"points": "drop_one"}, "params.points"),
    ({"weights": None}, "params.weights"),
    ({"weights": [-0.1]}, "params.weights.0"),
    ({"points": "bad_node"}, "params.points.0"),
    ({"points": "short_row"}, "params.points.0"),
    ({"point_subsets": [0]}, "params.point_subsets"),
    ({"candidates": None}, "params.candidates"),
    ({"diagonal_weight": None}, "params.diagonal_weight"),
    ({"fit_sample": [[0.0] * 10, [1.0] * 10]}, "params.fit_sample"),
])
def test_inconsistent_fitted_specs_are_refused(reweighted_diabetes, change, field):
    params = dict(reweighted_diabetes.describe()["params"])
    for key, value in change.items():
        if value == "drop_one":
            params[key] = params[key][1:]
        elif value == "bad_node":
            params[key] = [[10] + params[key][0][1:]] + params[key][1:]
        elif value == "short_row":
            params[key] = [params[key][0][1:]] + params[key][1:]
        elif isinstance(value, list) and key == "weights":
            params[key] = value + params[key][1:]
        else:
            params[key] = value
    if change.get("fit_sample") is None and "fit_sample" in change:
        params["points"] = params["weights"] = None  # neither fitted numbers nor data
    with pytest.raises(SpecError) as info:
        make_map(10, 256, 0, **params)
    assert info.value.field == field, info.value


def test_reweighted_anova_fits_per_subset_points():
    rng = np.random.default_rng(5)
    sample, held = rng.standard_normal((120, 8)) * 0.6, rng.standard_normal((60, 8)) * 0.6
    m = make_map(8, 96, 2, grid="reweighted", gamma=0.5, anova={"window": 3}, fit_sample=sample.tolist())
    owners = m.spec.params["point_subsets"]
    assert len(owners) == 48 and set(owners) <= set(range(6)) and len(set(owners)) >= 4
    assert all(len(p) == 3 for p in m.spec.params["points"])
    subsampled = np.mean([held_out_rmse(make_map(8, 96, seed, gamma=0.5, anova={"window": 3}), held)
                          for seed in range(3)])
    assert held_out_rmse(m, held) < 0.5 * subsampled
    assert create_map(m.describe()).transform(held).tobytes() == m.transform(held).tobytes()


def test_a_request_with_a_penalty_or_l1_path_keeps_the_l1_path_and_its_id(diabetes):
    """New requests get forward selection; one that names a penalty, or selection "l1_path", is fitted as
    before the parameter existed, and its spec leaves `selection` out (the same id as then)."""
    fit, _, gamma = diabetes
    request = {"grid": "reweighted", "gamma": gamma, "fit_sample": fit[:60].tolist(), "fit_pairs": 600}
    forward = make_map(10, 32, 1, **request)
    by_penalty = make_map(10, 32, 1, **request, penalty="adaptive_l1")
    by_selection = make_map(10, 32, 1, **request, selection="l1_path")
    assert forward.spec.params["selection"] == "forward" and forward.spec.params["penalty"] is None
    assert forward.spec.params["candidates"] == 8 * 16
    for m in (by_penalty, by_selection):
        assert "selection" not in m.spec.params and m.spec.params["penalty"] == "adaptive_l1"
        assert m.spec.params["candidates"] == 4 * 16
    assert by_penalty.spec.id == by_selection.spec.id != forward.spec.id
    # A resolved spec is taken as stored, whatever today's default, also posted back without id and
    # format version (its fitted points stand; nothing is refitted).
    for m in (by_penalty, forward):
        stored = m.describe()
        assert resolve_spec(stored).id == m.spec.id
        bare = {key: stored[key] for key in ("method", "input_dim", "n_components", "seed", "params")}
        assert resolve_spec(bare).id == m.spec.id
    with pytest.raises(SpecError) as info:
        make_map(10, 32, 1, **request, selection="forward", penalty="l1")
    assert info.value.field == "params.penalty"
    with pytest.raises(SpecError) as info:
        make_map(10, 32, 1, grid="subsampled", selection="forward")
    assert info.value.field == "params.selection"


def test_forward_selection_beats_the_l1_path_on_digits():
    """Issue 19: on 64-dimensional data the plain NNLS keeps nearly every candidate, so the choice of the
    D/2 points decides; forward selection's held-out RMSE is below the adaptive l1 path's. The split of
    bench/bench_quadrature.py (500 rows to fit, the last 600 held out), D = 128, seeds 0-2: measured
    0.0519 against 0.0566 (8% lower; 3-15% over the bench's sets and sizes)."""
    from sklearn.datasets import load_digits

    X = load_digits().data
    X = (X - X.mean(axis=0)) / np.maximum(X.std(axis=0), 1e-12)
    X = X[np.random.default_rng(0).permutation(len(X))]
    fit, held = X[:500], X[-600:]
    gamma = float(1.0 / np.median(pdist(X, "sqeuclidean")))
    exact = kernels.gaussian(held, held, gamma)
    upper = np.triu_indices(len(held), k=1)

    def rmse(m) -> float:
        return float(np.sqrt(np.mean((m.kernel(held) - exact)[upper] ** 2)))

    forward, l1_path = [], []
    for seed in range(3):
        request = {"grid": "reweighted", "gamma": gamma, "fit_sample": fit.tolist()}
        forward.append(rmse(make_map(64, 128, seed, **request)))
        l1_path.append(rmse(make_map(64, 128, seed, **request, selection="l1_path")))
    print(f"digits D=128 held-out RMSE: forward {np.mean(forward):.4f}, l1 path {np.mean(l1_path):.4f}")
    assert np.mean(forward) < 0.96 * np.mean(l1_path)


def test_forward_selection_is_orthogonal_least_squares():
    """Each step takes the candidate that lowers the unconstrained least-squares error on the chosen set
    most (checked against a plain numpy computation of that error for every candidate), among those with
    positive residual correlation; forced columns enter first; ties go to the lowest index."""
    rng = np.random.default_rng(4)
    A = np.cos(rng.standard_normal((300, 40)) * 1.5)
    b = np.exp(-rng.random(300))
    gram, moment = A.T @ A / 300, A.T @ b / 300
    order = forward_selection.forward_selection(gram, moment, 12)
    chosen: list[int] = []
    for k in order:
        def error(columns):
            if not columns:
                return 0.0
            G = gram[np.ix_(columns, columns)]
            return -moment[columns] @ np.linalg.solve(G, moment[columns])  # min of a^T G a - 2 m^T a
        residual = moment - (gram[:, chosen] @ np.linalg.solve(gram[np.ix_(chosen, chosen)], moment[chosen])
                             if chosen else 0.0)
        eligible = [j for j in range(40) if j not in chosen and residual[j] > 0]
        gains = {j: error(chosen) - error(chosen + [j]) for j in eligible}
        assert gains[int(k)] >= max(gains.values()) * (1 - 1e-9)
        chosen.append(int(k))
    forced = forward_selection.forward_selection(gram, moment, 5, np.array([7, 3]))
    assert forced[:2].tolist() == [7, 3]
    twins = [0, 1, 1, 2]  # candidates 1 and 2 identical: 1 enters, its copy never does
    picked = forward_selection.forward_selection(gram[np.ix_(twins, twins)] + 1e-12 * np.eye(4), moment[twins], 4)
    assert not {1, 2} <= set(picked.tolist()) and (2 not in picked.tolist() or 1 in picked.tolist())


# ---------------------------------------------------------------------------------------
# (c') the reweighted fit is the same on every machine (issue 10)
# ---------------------------------------------------------------------------------------

FUSED_MULTIPLY_ADD = re.compile(r"\bv?f(n?m(add|sub)|mla|mls)\w*", re.IGNORECASE)  # x86 FMA3/FMA4, ARM


def test_compiled_cos_and_exp_are_the_portable_math_bits():
    """The numba scalars repeat `_portable_math`'s operations exactly: no fused multiply-add, no
    reassociation (else some of these 5 million values would differ in the last bit)."""
    rng = np.random.default_rng(10)
    angles = np.concatenate([rng.standard_normal(10**6) * scale for scale in (0.1, 1.0, 10.0, 100.0, 1e4)])
    exponents = -np.abs(np.concatenate([rng.standard_normal(10**6) * scale for scale in (0.01, 1, 10, 100, 400)]))

    @numba.njit
    def both(x, y):
        cosines, exps = np.empty_like(x), np.empty_like(y)
        for i in range(x.size):
            cosines[i] = portable_numba.cos(x[i])
            exps[i] = portable_numba.exp(y[i])
        return cosines, exps

    cosines, exps = both(angles, exponents)
    np.testing.assert_array_equal(cosines.view(np.int64), portable_math.cos(angles).view(np.int64))
    np.testing.assert_array_equal(exps.view(np.int64), portable_math.exp(exponents).view(np.int64))


def test_fit_kernels_compile_without_fused_multiply_add():
    """Compiled afresh for this CPU (not from the cache), the fit's kernels contain no FMA instruction."""
    kernels_to_check = [quadrature_design._design_rows, active_set._active_set, forward_selection._select]
    rng = np.random.default_rng(0)
    sample = rng.standard_normal((10, 3))
    for kernel in kernels_to_check:
        fresh = numba.njit(kernel.py_func)
        if kernel is quadrature_design._design_rows:
            empty = np.zeros(0, np.int64)
            fresh(sample, np.arange(4), np.arange(4) + 1, np.ones((3, 5)), empty, empty, np.zeros(0),
                  np.array([0, 3]), np.arange(3), 0.5, np.empty((4, 5)), np.empty(4), np.zeros(5), np.zeros(1))
        elif kernel is forward_selection._select:
            fresh(np.eye(4) + 0.1, np.ones(4), 3, np.zeros(0, np.int64))
        else:
            fresh(np.eye(4) + 0.1, np.ones(4), 1e-12, 100)
        assembly = "\n".join(fresh.inspect_asm().values())
        assert "ret" in assembly and not FUSED_MULTIPLY_ADD.search(assembly), kernel.__name__


def test_gram_is_exact_whatever_the_summation_order():
    """The split design H + L has integer products below 2^53 on its grids, so H^T H and H^T L come out of
    any summation order exactly: BLAS, numpy's einsum loops and a reversed row order give the same bits."""
    rng = np.random.default_rng(3)
    sample = np.round(rng.standard_normal((60, 5)), 3)
    frequencies = rng.standard_normal((5, 40))
    first, second = quadrature_fit.fit_pair_indices(60, 1700, 0)
    gram, moment, _, rows = quadrature_design.gram_moments(sample, first, second, frequencies, [list(range(5))],
                                                           0.4, quadrature_design.MAX_CHUNK_ROWS)
    design = np.cos((sample[first] - sample[second]) @ frequencies)  # within 1e-15 of the kernel's cosines
    np.testing.assert_allclose(gram, design.T @ design / rows, rtol=0, atol=1e-12)
    # Recompute G from the kernel's own design, summing in other orders.
    block = np.empty((rows, 40))
    quadrature_design._design_rows(sample, first, second, frequencies, np.zeros(0, np.int64), np.zeros(0, np.int64),
                                   np.zeros(0), np.array([0, 5]), np.arange(5), 0.4, block, np.empty(rows),
                                   np.zeros(40), np.zeros(1))
    scale = 2.0**quadrature_design.SPLIT_BITS
    high = np.rint(block * scale) / scale
    low = np.rint((block - high) * scale**2) / scale**2
    for square, cross in [(np.einsum("ri,rj->ij", high, high), np.einsum("ri,rj->ij", high, low)),
                          (high[::-1].T @ high[::-1], high[::-1].T @ low[::-1])]:
        np.testing.assert_array_equal((square + (cross + cross.T)) / rows, gram)
    with pytest.raises(ValueError):
        quadrature_design.gram_moments(sample, first, second, frequencies, [list(range(5))], 0.4,
                                       quadrature_design.MAX_CHUNK_ROWS + 1)


@pytest.mark.parametrize("size, rows", [(6, 30), (120, 400), (400, 900)])
def test_active_set_nnls_is_the_optimum(size, rows):
    """The compiled active set meets the optimality (KKT) conditions and agrees with scipy's NNLS."""
    from scipy.optimize import nnls

    rng = np.random.default_rng(size)
    A = np.cos(rng.standard_normal((rows, size)) * 2.0)
    b = np.exp(-rng.random(rows))
    gram = A.T @ A / rows + 1e-10 * np.eye(size)
    moment = A.T @ b / rows
    a = active_set.nonnegative_least_squares(gram, moment)
    gradient = moment - gram @ a
    assert a.min() >= 0 and np.abs(gradient[a > 0]).max() < 1e-12 and gradient[a == 0].max(initial=0.0) < 1e-11
    factor = np.linalg.cholesky(gram).T
    reference, _ = nnls(factor, np.linalg.solve(factor.T, moment), maxiter=50 * size)
    assert np.count_nonzero(a) == np.count_nonzero(reference)
    objective = lambda x: 0.5 * x @ gram @ x - moment @ x  # noqa: E731
    assert abs(objective(a) - objective(reference)) < 1e-14


def test_active_set_nnls_skips_dependent_columns():
    """Two identical candidates (a singular Gram matrix without ridge): the first enters, the copy is in
    its span and stays at 0; ties go to the lowest index."""
    rng = np.random.default_rng(1)
    A = np.abs(rng.standard_normal((50, 4)))
    copy = [0, 1, 2, 3, 1]
    gram, moment = (A.T @ A)[np.ix_(copy, copy)], (A.T @ (A[:, 1] + 0.5 * A[:, 3]))[copy]
    a = active_set.nonnegative_least_squares(gram, moment)
    np.testing.assert_allclose(a, [0, 1, 0, 0.5, 0], atol=1e-9)
    assert a[4] == 0.0


@pytest.mark.parametrize("points", [2, 3, 10, 11, 40, 100])
def test_hermite_rule_is_numpys_rule_to_rounding(points):
    nodes, weights = np.polynomial.hermite_e.hermegauss(points)
    weights = weights / np.sqrt(2.0 * np.pi)
    portable_nodes, portable_weights = rules.hermite_rule(points)
    np.testing.assert_allclose(portable_nodes, nodes, rtol=0, atol=4e-16 * np.abs(nodes).max())
    np.testing.assert_allclose(portable_weights, weights, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(portable_nodes, -portable_nodes[::-1])
    assert abs(portable_weights.sum() - 1.0) < 1e-15


FIT_PROBE = r'''
import hashlib, json, sys
import numpy as np
from threadpoolctl import threadpool_info
from featurehash.maps import create_map
from featurehash.maps.fourier import _quadrature_rules as rules

def fingerprints(requests):
    """Each request's resolved spec, and a hash of its unrounded fit (G, h, b^T b, weights, selection)."""
    seen, original = [], rules.fit_weights

    def recording(gram, moment, target_square, count, penalty):
        fit = original(gram, moment, target_square, count, penalty)
        parts = (gram, moment, np.float64(target_square), fit.weights, fit.selected)
        seen.append(hashlib.sha256(b"".join(np.ascontiguousarray(x).tobytes() for x in parts)).hexdigest())
        return fit

    rules.fit_weights = recording
    try:
        specs = [create_map(request).describe() for request in requests]
    finally:
        rules.fit_weights = original
    blas = [pool.get("architecture") for pool in threadpool_info() if pool.get("internal_api") == "openblas"]
    return {"specs": specs, "fits": seen, "blas": blas}

if __name__ == "__main__":
    print(json.dumps(fingerprints(json.loads(sys.stdin.read()))))
'''


def is_reweighted(case: dict) -> bool:
    return case["request"].get("params", {}).get("grid") == "reweighted"


def reweighted_requests() -> list[dict]:
    """The golden reweighted requests, and one with 3 chunks of pairs fitted by forward selection (today's
    default) and by a 21-step l1 path."""
    golden = [case["request"] for case in GOLDEN["cases"].values() if is_reweighted(case)]
    sample = np.round(np.random.default_rng(11).standard_normal((150, 10)) * 0.7, 3).tolist()
    request = {"method": "quadrature", "input_dim": 10, "n_components": 96, "seed": 12,
               "params": {"grid": "reweighted", "gamma": 0.08, "fit_pairs": 2500, "fit_sample": sample}}
    l1_path = dict(request, params={**request["params"], "selection": "l1_path"})
    return golden + [request, l1_path]


def test_reweighted_fit_is_bit_identical_under_other_blas_kernels_simd_paths_and_threads():
    """Issue 10: the same request gives the same fit, bit for bit, whatever BLAS kernel (OpenBLAS
    coretypes Prescott and Sandybridge), numpy SIMD path (every dispatch target off), numba code
    generation (generic x86-64: no AVX) and thread counts (BLAS and numba, 1 and 2). The variants run
    as subprocesses, two at a time; the reference is this process (default kernels, one BLAS thread)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    requests = reweighted_requests()
    namespace: dict = {}
    exec(FIT_PROBE, namespace)
    expected = namespace["fingerprints"](requests)
    simd_off = ",".join(feature for feature in __cpu_dispatch__ if __cpu_features__.get(feature))
    variants = [
        {"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"},
        {"OPENBLAS_CORETYPE": "Sandybridge", "OPENBLAS_NUM_THREADS": "2", "NUMBA_NUM_THREADS": "2"},
        {"NPY_DISABLE_CPU_FEATURES": simd_off, "NUMBA_CPU_NAME": "generic", "OPENBLAS_NUM_THREADS": "2"},
        {"OPENBLAS_NUM_THREADS": "2", "NUMBA_NUM_THREADS": "1"},
    ]
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    if not x86:  # the coretype names and the generic CPU name are x86 ones
        variants = [{k: v for k, v in variant.items() if k not in ("OPENBLAS_CORETYPE", "NUMBA_CPU_NAME")}
                    for variant in variants]
    for pair in (variants[:2], variants[2:]):
        processes = [subprocess.Popen([sys.executable, "-c", FIT_PROBE], env={**os.environ, **variant},
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for variant in pair]
        for variant, process in zip(pair, processes):
            out, err = process.communicate(json.dumps(requests), timeout=600)
            assert process.returncode == 0, err[-2000:]
            result = json.loads(out)
            # The variant took effect (Prescott reads Katmai), unless this process already runs that kernel.
            if ("OPENBLAS_CORETYPE" in variant and result["blas"]
                    and os.environ.get("OPENBLAS_CORETYPE") != variant["OPENBLAS_CORETYPE"]):
                assert result["blas"] != expected["blas"], (variant, result["blas"])
            assert result["fits"] == expected["fits"], variant
            assert result["specs"] == expected["specs"], variant
    # The golden requests still resolve to their stored specs (also checked in test_golden_vectors).
    golden = [case["spec"] for case in GOLDEN["cases"].values() if is_reweighted(case)]
    assert expected["specs"][:len(golden)] == golden


# ---------------------------------------------------------------------------------------
# (d) sparse ANOVA kernels
# ---------------------------------------------------------------------------------------

def test_exact_anova_kernel_is_the_sum_of_products():
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((5, 6)), rng.standard_normal((4, 6))
    subsets = [[0, 1, 2], [2, 3], [5], [4, 0, 3]]
    expected = np.array([[sum(math.prod(math.exp(-0.3 * (x[i] - y[i]) ** 2) for i in s) for s in subsets)
                          for y in Y] for x in X])
    np.testing.assert_allclose(kernels.gaussian_anova(X, Y, 0.3, subsets), expected, rtol=1e-13)
    np.testing.assert_allclose(kernels.gaussian_anova(X, X, 0.3, subsets).diagonal(), len(subsets))
    windows = make_map(6, 2 * 4 * rules.dense_grid_size(2, 3), grid="dense", points_per_dim=2, gamma=0.3,
                       anova={"window": 3})
    assert [list(subset) for subset in windows.subsets] == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]
    np.testing.assert_allclose(windows.exact_kernel(X, Y), kernels.gaussian_anova(X, Y, 0.3, windows.subsets))


# Windows of 3 over d = 10 (8 subsets), gamma = 1/2, rows N(0, 0.35^2 I). Measured max error: dense
# L = 2..8: 1.26, 0.42, 0.10, 0.020, 0.0032, 4.3e-4, 5.0e-5 (each step 3.0-8.6x, growing: the error of a
# Gaussian rule falls faster than geometrically in L); sparse level 1..4: 1.39, 0.11, 0.016, 6.8e-4.
def test_anova_estimate_converges_to_the_exact_kernel_as_the_rule_grows():
    X = np.random.default_rng(3).standard_normal((60, 10)) * 0.35
    K = kernels.gaussian_anova(X, X, 0.5, [list(range(s, s + 3)) for s in range(8)])

    def worst(**params):
        size = rules.dense_grid_size if params["grid"] == "dense" else rules.sparse_grid_size
        m = make_map(10, 2 * 8 * size(params.get("points_per_dim", params.get("level")), 3), gamma=0.5,
                     anova={"window": 3}, **params)
        np.testing.assert_allclose(m.exact_kernel(X), K, rtol=1e-13)
        return float(np.abs(m.kernel(X) - K).max())

    dense = [worst(grid="dense", points_per_dim=L) for L in range(2, 9)]
    sparse = [worst(grid="sparse", level=A) for A in range(1, 5)]
    print("dense", np.round(dense, 6), "sparse", np.round(sparse, 6))
    assert all(later < earlier / 2.5 for earlier, later in zip(dense, dense[1:]))
    assert all(later < earlier / 2.5 for earlier, later in zip(sparse, sparse[1:]))
    assert dense[-1] < 1e-4 * K.max() and sparse[-1] < 2e-4 * K.max()


def test_subsampled_anova_error_falls_like_inverse_sqrt_D():
    """16x the features, 4x less error (ratio of root-mean-square relative Frobenius errors over 5 seeds;
    measured 3.8, seed spread ~15%, so [2.8, 5.5] as in test_rff)."""
    X = np.random.default_rng(3).standard_normal((60, 10)) * 0.35
    errors = {}
    for D in (256, 4096):
        squares = []
        for seed in range(5):
            m = make_map(10, D, seed, gamma=0.5, anova={"window": 3})
            K = m.exact_kernel(X)
            squares.append((np.linalg.norm(m.kernel(X) - K) / np.linalg.norm(K)) ** 2)
        errors[D] = math.sqrt(np.mean(squares))
    assert 2.8 < errors[256] / errors[4096] < 5.5


def test_anova_features_are_per_subset_rules_on_their_coordinates():
    """With explicit subsets: each point's frequency is zero off its subset, points grouped by subset."""
    subsets = [[0, 4], [1, 2], [3, 0]]
    m = make_map(5, 30, grid="dense", points_per_dim=3, gamma=0.6, anova={"subsets": subsets})
    W, weights = m.rule()
    assert sp.issparse(W) and W.shape == (15, 5)
    dense = W.toarray()
    for s, subset in enumerate(subsets):
        block = dense[5 * s:5 * (s + 1)]
        assert not block[:, [c for c in range(5) if c not in subset]].any()
        np.testing.assert_allclose(weights[5 * s:5 * (s + 1)].sum(), 1.0, rtol=1e-13)
    X = np.random.default_rng(0).standard_normal((7, 5)) * 0.3
    Z = m.transform(X, dtype=np.float64)
    np.testing.assert_allclose(Z @ Z.T, m.kernel(X), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------
# (e) spec validation
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("d, D, params, field", [
    (4, 64, {"grid": "hexagonal"}, "params.grid"),
    (4, 64, {"gamma": 0}, "params.gamma"),
    (4, 64, {"gamma": float("nan")}, "params.gamma"),
    (4, 64, {"points_per_dim": 1}, "params.points_per_dim"),
    (4, 64, {"points_per_dim": 101}, "params.points_per_dim"),
    (4, 64, {"points_per_dim": 2.5}, "params.points_per_dim"),
    (4, 64, {"level": 2}, "params.level"),                                  # level is for sparse grids
    (4, 50, {"grid": "sparse", "points_per_dim": 3}, "params.points_per_dim"),
    (4, 50, {"grid": "sparse", "level": 0}, "params.level"),
    (4, 64, {"fit_sample": [[0, 0, 0, 0], [1, 1, 1, 1]]}, "params.fit_sample"),  # only for reweighted
    (4, 64, {"penalty": "l1"}, "params.penalty"),
    (4, 64, {"diagonal_weight": 1.0}, "params.diagonal_weight"),
    (4, 64, {"grid": "reweighted", "diagonal_weight": -1.0, "fit_sample": [[0, 1, 2, 3], [1, 1, 1, 1]]},
     "params.diagonal_weight"),
    (4, 64, {"anova": {"window": 5}}, "params.anova.window"),
    (4, 64, {"anova": {"window": 0}}, "params.anova.window"),
    (4, 64, {"anova": {}}, "params.anova"),
    (4, 64, {"anova": {"window": 2, "subsets": [[0]]}}, "params.anova"),
    (4, 64, {"anova": {"subsets": [[0, 4]]}}, "params.anova.subsets.0"),
    (4, 64, {"anova": {"subsets": [[1], [2, 2]]}}, "params.anova.subsets.1"),
    (4, 64, {"anova": {"subsets": [[]]}}, "params.anova.subsets.0"),
    (4, 64, {"anova": {"subsets": [[-1]]}}, "params.anova.subsets.0.0"),
    (4, 64, {"unknown": 1}, "params.unknown"),
    (4, 63, {}, "n_components"),                                            # odd: cos and sin per point
    (4, 6, {"anova": {"window": 1}}, "n_components"),                      # 4 subsets need 8 features
    (3, 998, {"grid": "dense"}, "n_components"),                            # 10^3 grid: 1000 features
    (4, 52, {"grid": "sparse"}, "n_components"),                            # level 2 in 4-d: 50 features
    (40, 64, {"grid": "dense"}, "params.points_per_dim"),                   # 10^40 points
    (25, 64, {"grid": "sparse", "level": 9}, "params.level"),               # far over the limit
    (4, 64, {"grid": "reweighted"}, "params.fit_sample"),
    (4, 64, {"grid": "reweighted", "fit_sample": [[0, 1, 2], [1, 2, 3]]}, "params.fit_sample"),
    (4, 64, {"grid": "reweighted", "fit_sample": [[0, 1, 2, 3]]}, "params.fit_sample"),
    (4, 64, {"grid": "reweighted", "fit_sample": [[0, 1, 2, 3], [0, 1, 2]]}, "params.fit_sample"),
    (4, 64, {"grid": "reweighted", "fit_sample": [[0, 1, 2, float("inf")], [0, 1, 2, 3]]}, "params.fit_sample.0.3"),
    (4, 64, {"grid": "reweighted", "candidates": 10, "fit_sample": [[0, 1, 2, 3], [1, 1, 1, 1]]},
     "params.candidates"),
    (4, 64, {"grid": "reweighted", "penalty": "l2", "fit_sample": [[0, 1, 2, 3], [1, 1, 1, 1]]}, "params.penalty"),
    (1, 64, {"grid": "reweighted", "points_per_dim": 3, "fit_sample": [[0], [1]]}, "n_components"),  # 2 candidates
])
def test_bad_params_are_refused_naming_the_field(d, D, params, field):
    with pytest.raises(SpecError) as info:
        make_map(d, D, **params)
    assert info.value.field == field, info.value


def test_fixed_size_grids_say_which_n_components_they_need():
    with pytest.raises(SpecError) as info:
        make_map(3, 998, grid="dense")
    assert "n_components must be 1000" in info.value.message
    with pytest.raises(SpecError) as info:
        make_map(25, 64, grid="sparse")
    assert "n_components must be 1352" in info.value.message
    with pytest.raises(SpecError) as info:
        make_map(40, 64, grid="dense")
    assert str(quadrature_params.MAX_GRID_POINTS) in info.value.message


def test_defaults_resolve_per_grid():
    spec = resolve_spec({"method": "quadrature", "input_dim": 4, "n_components": 8})
    assert spec.params["grid"] == "subsampled" and spec.params["gamma"] == 1.0
    assert spec.params["points_per_dim"] == 64 and spec.params["level"] is None  # 10 in specs stored before
    dense = resolve_spec({"method": "quadrature", "input_dim": 2, "n_components": 100, "params": {"grid": "dense"}})
    assert dense.params["points_per_dim"] == 10
    sparse = resolve_spec({"method": "quadrature", "input_dim": 4, "n_components": 50, "params": {"grid": "sparse"}})
    assert sparse.params["level"] == 2 and sparse.params["points_per_dim"] is None
    explicit = resolve_spec({"method": "quadrature", "input_dim": 4, "n_components": 8,
                             "params": {"grid": "subsampled", "points_per_dim": 64, "gamma": 1.0}})
    assert explicit.id == spec.id


@pytest.mark.parametrize("L, s_max", [(10, 3.10), (30, 7.51), (64, 12.47), (100, 16.43)])
def test_rule_error_region_is_as_documented(L, s_max):
    """The subsampled grid is unbiased for the L-point rule's kernel; its bias against exp(-s^2/2) per
    coordinate is below 1e-3 up to s_L (quadrature docstring) and reaches 0.05 or more past it."""
    nodes, weights = rules.hermite_rule(L)
    s = np.linspace(0, s_max - 0.01, 400)  # s_L: the first s (in steps of 0.01) past 1e-3
    error = np.abs(np.cos(np.multiply.outer(s, nodes)) @ weights - np.exp(-s**2 / 2))
    assert error.max() < 1e-3
    beyond = np.linspace(s_max + 0.5, s_max + 5, 200)
    assert np.abs(np.cos(np.multiply.outer(beyond, nodes)) @ weights - np.exp(-beyond**2 / 2)).max() > 0.05


def test_default_subsampled_grid_is_unbiased_at_large_coordinate_distances():
    """Pairs with sqrt(2 gamma)|x_i - y_i| up to 8 (beyond the 10-point rule's region, inside the 64-point
    rule's): over 100 seeds the default grid's mean error is within 4.5 standard errors of 0 for every
    pair; the 10-point grid's bias shows at 30 or more."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-4, 4, size=(10, 2))  # gamma 0.5: s = |x_i - y_i| up to 8
    upper = np.triu_indices(len(X), k=1)

    def largest_z(**params):
        errors = np.array([(m.kernel(X) - m.exact_kernel(X))[upper]
                           for m in (make_map(2, 64, seed, gamma=0.5, **params) for seed in range(100))])
        return np.abs(errors.mean(axis=0) / (errors.std(axis=0, ddof=1) / 10)).max()

    assert make_map(2, 64, 0, gamma=0.5).params.points_per_dim == 64
    assert largest_z() < 4.5
    assert largest_z(points_per_dim=10) > 30


def test_sparse_grid_with_negative_weights_estimates_but_refuses_features():
    m = make_map(4, 50, grid="sparse", gamma=0.5)
    assert not m.is_feature_map and m.weights.min() < 0
    X = np.random.default_rng(0).standard_normal((5, 4)) * 0.2
    assert np.abs(m.kernel(X) - m.exact_kernel(X)).max() < 1e-3
    m.materialize()  # creating the map works: the service stores it for /kernel
    with pytest.raises(SpecError) as info:
        m.transform(X)
    assert info.value.field == "params.grid" and "negative weights" in info.value.message
    # Where the Smolyak weights are all >= 0 (d = 2, level 1) it is a feature map.
    small = make_map(2, 6, grid="sparse", level=1, gamma=0.5)
    Z = small.transform(X[:, :2], dtype=np.float64)
    assert small.is_feature_map
    np.testing.assert_allclose(Z @ Z.T, small.kernel(X[:, :2]), rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------------------
# (f) numerics: layout, precision, batch size, memory
# ---------------------------------------------------------------------------------------

GRID_CASES = [
    ({"grid": "subsampled", "gamma": 0.4}, 64),
    ({"grid": "dense", "points_per_dim": 2, "gamma": 0.4, "anova": {"window": 3}}, 2 * 4 * 4),
    ({"grid": "subsampled", "gamma": 0.4, "anova": {"subsets": [[0, 5], [2], [1, 3, 4]]}}, 30),
]
GRID_IDS = ["subsampled", "dense_anova", "subsampled_anova"]


def sparse_rows(n=150, d=6, density=0.4, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[rng.random(X.shape) > density] = 0.0
    return X


@pytest.mark.parametrize("params, D", GRID_CASES, ids=GRID_IDS)
def test_sparse_input_gives_the_dense_features(params, D):
    X = sparse_rows()
    m = make_map(6, D, 5, **params)
    for dtype in (np.float32, np.float64):
        dense = m.transform(X, dtype=dtype)
        for layout in (sp.csr_matrix(X), sp.coo_matrix(X)):
            result = m.transform(layout, dtype=dtype)
            assert isinstance(result, np.ndarray) and result.dtype == dense.dtype
            np.testing.assert_allclose(result, dense, rtol=0, atol=1e-6 if dtype == np.float32 else 1e-13)
    np.testing.assert_allclose(m.kernel(sp.csr_matrix(X)), m.kernel(X), rtol=0, atol=1e-12)


@pytest.mark.parametrize("params, D", GRID_CASES, ids=GRID_IDS)
def test_float32_matches_float64(params, D):
    """float32 rounds the frequencies and the angle w . x (|w . x| < ~10 here, so ~1e-6) and the sqrt
    weights: errors ~1e-6 of the largest feature; 1e-5 of it is asked."""
    X = sparse_rows()
    m = make_map(6, D, 3, **params)
    Z32, Z64 = m.transform(X), m.transform(X, dtype=np.float64)
    assert Z32.dtype == np.float32 and Z64.dtype == np.float64 and Z32.shape == Z64.shape == (150, D)
    np.testing.assert_allclose(Z32, Z64, rtol=0, atol=1e-5 * np.abs(Z64).max())


@pytest.mark.parametrize("params, D", GRID_CASES, ids=GRID_IDS)
def test_features_do_not_depend_on_batch_size(params, D, monkeypatch):
    X = sparse_rows(n=157)
    m = make_map(6, D, 9, **params)
    whole, whole32 = m.transform(X, dtype=np.float64), m.transform(X)
    for size in (1, 7, 100):
        pieces = np.vstack([m.transform(X[i:i + size], dtype=np.float64) for i in range(0, len(X), size)])
        np.testing.assert_allclose(pieces, whole, rtol=0, atol=1e-12)
    monkeypatch.setattr(base_module, "CHUNK_ELEMENTS", 5 * D)
    np.testing.assert_allclose(m.transform(X, dtype=np.float64), whole, rtol=0, atol=1e-12)
    np.testing.assert_allclose(m.transform(X), whole32, rtol=0, atol=1e-6)


def test_float32_range_and_bad_dtype_are_refused():
    m = make_map(4, 8)
    with pytest.raises(InputError) as info:
        m.transform(np.full((1, 4), 1e300))
    assert info.value.field == "vectors"
    assert np.isfinite(m.transform(np.full((1, 4), 1e300), dtype=np.float64)).all()
    with pytest.raises(InputError):
        m.transform(np.ones((1, 4)), dtype=np.int32)
    with pytest.raises(InputError):
        m.transform(np.ones((1, 5)))


@pytest.mark.parametrize("params, D", GRID_CASES + [({"grid": "sparse", "gamma": 0.4}, 2 * 49)],
                         ids=GRID_IDS + ["sparse"])
def test_memory_is_reported(params, D):
    m = make_map(6, D, **params)
    planned = m.planned_nbytes
    assert m.nbytes == 0  # nothing is made before first use
    m.materialize()
    assert m.nbytes == planned  # float32 W (dense, or CSR with anova), float32 sqrt weights, float64 weights


def test_reweighted_memory_is_reported(reweighted_diabetes):
    m = create_map(reweighted_diabetes.describe())
    planned = m.planned_nbytes
    assert m.materialize().nbytes == planned == 4 * 128 * 10 + 12 * 128


# ---------------------------------------------------------------------------------------
# (g) the service: create with a fit sample, stored spec, transform, kernel-only sparse grids
# ---------------------------------------------------------------------------------------

def test_service_fits_stores_and_serves_the_same_map(embedded_server, diabetes):
    fit, held, gamma = diabetes
    request = {"method": "quadrature", "input_dim": 10, "n_components": 64, "seed": 8,
               "params": {"grid": "reweighted", "gamma": gamma, "fit_sample": fit[:100].tolist()}}
    local = create_map(request)
    with embedded_server.client() as client:
        created = client.post("/v1/maps", json=request)
        assert created.status_code in (200, 201), created.text
        spec = created.json()
        assert spec == local.describe() and spec["params"]["fit_sample"] is None
        stored = client.get(f"/v1/maps/{spec['id']}").json()
        assert stored == spec
        features = client.post(f"/v1/maps/{spec['id']}/transform", json={"vectors": held[:5].tolist()})
        np.testing.assert_array_equal(np.array(features.json()["features"], dtype=np.float32),
                                      local.transform(held[:5]))
        # Posting the stored spec back is the same map; a sparse grid serves /kernel but not /transform.
        assert client.post("/v1/maps", json=stored).json()["id"] == spec["id"]
        sparse_grid = client.post("/v1/maps", json={"method": "quadrature", "input_dim": 4, "n_components": 50,
                                                    "params": {"grid": "sparse", "gamma": 0.5}}).json()
        vectors = (held[:3, :4] * 0.2).tolist()
        refused = client.post(f"/v1/maps/{sparse_grid['id']}/transform", json={"vectors": vectors})
        assert refused.status_code == 422 and refused.json()["field"] == "params.grid"
        kernel = client.post(f"/v1/maps/{sparse_grid['id']}/kernel", json={"x": vectors}).json()
        np.testing.assert_allclose(kernel["estimate"], kernel["exact"], atol=1e-3)
        wrong = client.post("/v1/maps", json={**request, "n_components": 63})
        assert wrong.status_code == 422 and wrong.json()["field"] == "n_components"


# ---------------------------------------------------------------------------------------
# (h) golden vectors
# ---------------------------------------------------------------------------------------

# quadrature.json: reweighted specs fitted by the l1 path (as stored before `selection`);
# quadrature_forward.json: by forward selection (what new requests get).
GOLDEN = {"cases": {name: case for file_name in ("quadrature.json", "quadrature_forward.json") for name, case in
                    json.loads((Path(__file__).resolve().parents[2] / "golden" / file_name).read_text())["cases"].items()}}
FLOAT = {"rtol": 1e-5, "atol": 1e-6}  # as tests/test_golden.py: libm and BLAS order may differ by ulps
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")


@pytest.mark.parametrize("name", list(GOLDEN["cases"]))
def test_golden_vectors(name):
    case = GOLDEN["cases"][name]
    stored, expected = case["spec"], case["expected"]
    # A replica rebuilds the map from the stored spec (fitted numbers included) ...
    m = create_map({key: stored[key] for key in (*SPEC_FIELDS, "id")})
    assert m.describe() == stored
    X = np.array(case["input"], dtype=np.float64)
    W, weights = m.rule()
    np.testing.assert_allclose(W.toarray() if sp.issparse(W) else W, expected["frequencies"], rtol=1e-12, atol=0)
    np.testing.assert_allclose(weights, expected["weights"], rtol=1e-12, atol=1e-15)
    assert m.is_feature_map == expected["is_feature_map"]
    np.testing.assert_allclose(m.kernel(X), expected["kernel"], **FLOAT)
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], **FLOAT)
    if m.is_feature_map:
        np.testing.assert_allclose(m.transform(X, dtype=np.float64), expected["transform_float64"], **FLOAT)
        np.testing.assert_allclose(m.transform(X).astype(np.float64), expected["transform_float32"], **FLOAT)
    # ... and the request resolves to that spec (for the reweighted grid: refits to the same numbers, bit for
    # bit on any machine; test_reweighted_fit_is_bit_identical_... runs it under other BLAS and SIMD paths).
    assert create_map(case["request"]).spec.id == stored["id"]
