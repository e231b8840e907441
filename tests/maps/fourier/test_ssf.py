"""Spherical structured features: the point set, the FFT projection, the index-set search, the
exact kernels, the error against i.i.d. features, the spec, numerics and golden vectors.

Facts checked (docs/methods/fourier.md, "SSF: Lyu 2017"; app/featurehash/maps/fourier/ssf.py):
- every column of V = [[Re F_L, -Im F_L], [Im F_L, Re F_L]] / sqrt(m) has unit norm, and one
  inverse FFT gives V^T diag(s) x exactly (to 1e-10 in float64);
- the Riesz log-energy formulas in h_p equal the brute-force sum over point pairs; coordinate
  ascent lowers the energy below that of random index sets and stops;
- at equal D, SSF's Gram-matrix error is below i.i.d. random features' (RFF for the Gaussian,
  Cho & Saul's features for the arc-cosine kernels), by more than the seed spread allows by chance.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

import featurehash.maps.base as base_module
import featurehash.maps.fourier.ssf as ssf_module
from featurehash.maps.fourier import ssf_search
from featurehash.maps import kernels
from featurehash.maps import InputError, SpecError, create_map, resolve_spec
from featurehash.maps.fourier.ssf import SSFMap, SSFParams
from feature_promises import assert_dense_features_match


pytestmark = pytest.mark.usefixtures("single_threaded_blas")


def make_map(d, D, seed=0, **params):
    return create_map({"method": "ssf", "input_dim": d, "n_components": D, "seed": seed, "params": params})


def brute_force_energy(points: np.ndarray) -> float:
    """sum_{i<j} -log ||u_i - u_j|| over the rows of `points`; inf if two coincide (up to rounding)."""
    distances = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=2)[np.triu_indices(len(points), k=1)]
    return np.inf if distances.min() < 1e-9 else float(-np.log(distances).sum())


# ---------------------------------------------------------------------------------------
# (a) the point set and the FFT projection
# ---------------------------------------------------------------------------------------

SHAPES = [(1, 4), (1, 12), (2, 8), (5, 12), (6, 12), (7, 40), (16, 64), (33, 200)]


@pytest.mark.parametrize("randomization", ["rotation", "signs"])
@pytest.mark.parametrize("d, D", SHAPES)
def test_columns_of_V_are_unit_vectors_and_fft_projection_is_exact(d, D, randomization):
    m = make_map(d, D, seed=d, randomization=randomization)
    V = m.directions()
    assert V.shape == (2 * m.m, 2 * m.n) == (2 * ((d + 1) // 2), D // 2)
    np.testing.assert_allclose(np.linalg.norm(V, axis=0), 1.0, rtol=0, atol=1e-12)
    # A tight frame as well: V V^T = (n/m) I for any index set (the rows of a DFT are orthogonal).
    np.testing.assert_allclose(V @ V.T, (m.n / m.m) * np.eye(2 * m.m), rtol=0, atol=1e-10)
    X = np.random.default_rng(d).standard_normal((9, d))
    padded = np.zeros((9, 2 * m.m))
    padded[:, :d] = X * m.signs()[:d]
    if randomization == "rotation":  # then the random rotation R of R^{2m}, an orthogonal matrix
        R = m.rotation_matrix()
        np.testing.assert_allclose(R @ R.T, np.eye(2 * m.m), rtol=0, atol=1e-12)
        padded = padded @ R.T
    explicit = padded @ V
    np.testing.assert_allclose(m.projections(X), explicit, rtol=0, atol=1e-10)
    # The sign flips are random +-1 from the seed.
    assert set(np.unique(m.signs())) <= {-1.0, 1.0}


def test_features_have_the_documented_form():
    """Gaussian: [cos(t P), sin(t P)] / sqrt(N); arc-cosine b: sqrt(E r^2b / N) [step(P) P^b, step(-P) (-P)^b]."""
    d, D = 7, 48
    X = np.random.default_rng(3).standard_normal((5, d))
    gaussian = make_map(d, D, seed=4, gamma=0.7)
    N = gaussian.n * 2
    P = gaussian.projections(X)
    t = gaussian.unit_radii() * np.sqrt(2 * 0.7)
    np.testing.assert_allclose(gaussian.transform(X, dtype=np.float64),
                               np.hstack([np.cos(P * t), np.sin(P * t)]) / np.sqrt(N), rtol=1e-12, atol=1e-15)
    # The radii are N stratified quantiles of chi with d' = 2m degrees of freedom: one in each stratum
    # (q/N, (q+1)/N) of its CDF, at a uniform jitter ("rotation") or at the midpoint ("signs").
    strata = stats.chi.cdf(np.sort(gaussian.unit_radii()), df=2 * gaussian.m) * N - np.arange(N)
    assert np.all((strata > 0) & (strata < 1)) and np.ptp(strata) > 0.5
    midpoints = make_map(d, D, seed=4, gamma=0.7, randomization="signs")
    quantiles = stats.chi.ppf((np.arange(N) + 0.5) / N, df=2 * gaussian.m)
    np.testing.assert_allclose(np.sort(midpoints.unit_radii()), quantiles, rtol=1e-12)
    for order, moment in ((0, 1.0), (1, 8.0), (2, 8.0 * 10.0)):
        arccos = make_map(d, D, seed=4, kernel=f"arccos{order}")
        P = arccos.projections(X)
        both = np.hstack([P, -P])
        step = (both > 0) + 0.5 * (both == 0)
        expected = np.sqrt(moment / N) * step * np.where(both > 0, both, 0.0) ** order
        np.testing.assert_allclose(arccos.transform(X, dtype=np.float64), expected, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------------------------
# (b) the index set: energy formula, search, cache
# ---------------------------------------------------------------------------------------

# (2, 6) with this seed has coincident columns (energy inf); the others are finite.
@pytest.mark.parametrize("m, n", [(2, 6), (3, 7), (4, 8), (5, 11), (3, 3)])
def test_energy_formulas_match_the_pairwise_sum(m, n):
    index_set = ssf_search.random_index_set(m, n, seed=m * n)
    V = make_map(2 * m, 4 * n, index_set=[int(k) for k in index_set]).directions()
    columns = brute_force_energy(V.T)
    antipodal = brute_force_energy(np.vstack([V.T, -V.T]))
    assert ssf_search.riesz_log_energy(index_set, n, "columns") == pytest.approx(columns, rel=1e-12, abs=1e-9)
    assert ssf_search.riesz_log_energy(index_set, n, "antipodal") == pytest.approx(antipodal, rel=1e-12, abs=1e-9)


# 20 seeds per size. Random index sets' energies are heavy-tailed (near-coincident points push them
# up), so beyond the mean the test asks for more: every optimised set must be below the best of 20
# random sets. Measured margins: 0.01-0.05% of |E|, i.e. 1.5-12 units where random sets spread by
# ~0.4-50.
@pytest.mark.parametrize("m, n", [(8, 16), (15, 60), (32, 128)])
@pytest.mark.parametrize("points", ["antipodal", "columns"])
def test_optimised_index_sets_have_lower_energy_than_random_ones(m, n, points):
    seeds = range(20)
    optimised = [ssf_search.optimised_index_set(m, n, seed, points) for seed in seeds]
    random_energies = np.array([ssf_search.riesz_log_energy(ssf_search.random_index_set(m, n, 1000 + seed), n, points)
                                for seed in seeds])
    final = np.array([result.final_energy for result in optimised])
    initial = np.array([result.initial_energy for result in optimised])
    print(f"{points} m={m} n={n}: random {random_energies.mean():.3f} (sd {random_energies.std(ddof=1):.3f}), "
          f"optimised {final.mean():.3f}, sweeps {[r.sweeps for r in optimised]}")
    assert final.mean() < random_energies.mean()
    assert final.max() < random_energies.min()
    assert np.all(final <= initial)  # every swap lowers the energy
    for result in optimised:
        assert result.converged and result.exact
        assert 1 <= result.sweeps <= 10  # the paper: fewer than 10
        assert sorted(result.index_set) == sorted(set(result.index_set))
        assert ssf_search.riesz_log_energy(result.index_set, n, points) == result.final_energy


def test_column_energy_prefers_antipodal_columns_which_the_features_cannot_use():
    """Why the spec minimises the energy of +-V: for n = 2m the columns' optimum is the cross-polytope."""
    m, n = 8, 16
    by_columns = make_map(2 * m, 4 * n, index_set=list(ssf_search.optimised_index_set(m, n, 0, "columns").index_set))
    by_pairs = make_map(2 * m, 4 * n, index_set=list(ssf_search.optimised_index_set(m, n, 0, "antipodal").index_set))
    for feature_map, has_antipodes in ((by_columns, True), (by_pairs, False)):
        gram = feature_map.directions().T @ feature_map.directions()
        assert np.isclose(gram.min(), -1.0) == has_antipodes


def test_screened_search_finds_the_same_sets_as_the_exact_search(monkeypatch):
    """Large searches rank candidates by a second-order expansion (two FFTs) and evaluate a shortlist."""
    exact = [ssf_search.optimised_index_set(32, 128, seed, "antipodal") for seed in range(3)]
    monkeypatch.setattr(ssf_search, "EXACT_SEARCH_TERMS", 0)
    ssf_search.optimised_index_set.cache_clear()
    screened = [ssf_search.optimised_index_set(32, 128, seed, "antipodal") for seed in range(3)]
    ssf_search.optimised_index_set.cache_clear()
    assert all(r.exact for r in exact) and not any(r.exact for r in screened)
    assert [r.index_set for r in screened] == [r.index_set for r in exact]


def test_search_budget_stops_a_huge_search_deterministically(monkeypatch):
    monkeypatch.setattr(ssf_search, "SEARCH_TERM_BUDGET", 50_000)
    ssf_search.optimised_index_set.cache_clear()
    first = ssf_search.optimised_index_set(64, 256, 5, "antipodal")
    ssf_search.optimised_index_set.cache_clear()
    again = ssf_search.optimised_index_set(64, 256, 5, "antipodal")
    ssf_search.optimised_index_set.cache_clear()
    assert not first.converged and first.sweeps == 1
    assert first == again
    assert first.final_energy < first.initial_energy


def test_index_set_is_in_the_spec_and_cached():
    ssf_search.optimised_index_set.cache_clear()
    m = make_map(10, 48, seed=7)  # m = 5, n = 12
    info = ssf_search.optimised_index_set.cache_info()
    assert info.misses == 1
    assert m.spec.params["search"] == "until_small_gain"  # what every new request without a set gets
    assert m.spec.params["index_set"] == list(
        ssf_search.optimised_index_set(5, 12, 7, "antipodal", "until_small_gain").index_set)
    make_map(10, 48, seed=7, kernel="arccos1")  # same (m, n, seed, search): no new search
    assert ssf_search.optimised_index_set.cache_info().misses == 1
    assert m.spec.params["gamma"] == 1.0 and len(m.spec.params["index_set"]) == 5


def test_a_request_stating_the_old_search_keeps_its_set_and_id():
    old = make_map(10, 48, seed=7, search="until_unchanged")
    assert "search" not in old.spec.params  # as in specs stored before the parameter
    assert old.spec.params["index_set"] == list(ssf_search.optimised_index_set(5, 12, 7, "antipodal").index_set)
    stored = old.spec.to_dict()
    assert create_map(stored).spec.id == old.spec.id  # a stored spec resolves to itself, no search key added
    new = make_map(10, 48, seed=7)
    assert new.spec.params["search"] == "until_small_gain" and new.spec.id != old.spec.id
    assert create_map(new.spec.to_dict()).spec.id == new.spec.id


def test_stored_spec_round_trips_without_searching_again(monkeypatch):
    m = make_map(9, 40, seed=11, kernel="arccos1")
    X = np.random.default_rng(0).standard_normal((6, 9))
    described = m.describe()

    def no_search(*args, **kwargs):
        raise AssertionError("a stored spec must not search for its index set again")

    monkeypatch.setattr(ssf_module, "optimised_index_set", no_search)
    rebuilt = create_map(described)
    assert rebuilt.spec.id == m.spec.id == described["id"]
    assert rebuilt.transform(X).tobytes() == m.transform(X).tobytes()
    # complete_params hands params back untouched when nothing is missing.
    params = SSFParams(**described["params"])
    assert SSFMap.complete_params(params, input_dim=9, n_components=40, seed=11) is params
    # A different index set is a different map.
    other = dict(described, params={**described["params"], "index_set": described["params"]["index_set"][::-1]})
    other.pop("id")
    assert create_map(other).spec.id != m.spec.id


# ---------------------------------------------------------------------------------------
# (c) exact kernels
# ---------------------------------------------------------------------------------------

def test_arccos_kernel_closed_forms():
    x, y = np.array([[2.0, 0.0, 0.0]]), np.array([[0.0, 3.0, 0.0]])
    # Orthogonal: theta = pi/2 gives J_0 = pi/2, J_1 = 1, J_2 = pi/2.
    assert kernels.arccos(x, y, 0)[0, 0] == pytest.approx(0.5)
    assert kernels.arccos(x, y, 1)[0, 0] == pytest.approx(6.0 / np.pi)
    assert kernels.arccos(x, y, 2)[0, 0] == pytest.approx(36.0 * 0.5)
    # Parallel: theta = 0 gives J_b = pi, 1 * pi, 3 pi -> ||x||^b ||y||^b {1, 1, 3}.
    assert kernels.arccos(x, 5 * x, 0)[0, 0] == pytest.approx(1.0, abs=1e-15)
    assert kernels.arccos(x, 5 * x, 1)[0, 0] == pytest.approx(20.0, rel=1e-15)
    assert kernels.arccos(x, 5 * x, 2)[0, 0] == pytest.approx(3 * 400.0, rel=1e-15)
    # Opposite: theta = pi gives 0 for every order.
    np.testing.assert_allclose([kernels.arccos(x, -x, b)[0, 0] for b in (0, 1, 2)], 0.0, atol=1e-13)
    # A zero vector: angle pi/2 by convention (k_0 = 1/2), 0 for b >= 1.
    zero = np.zeros((1, 3))
    assert kernels.arccos(zero, x, 0)[0, 0] == 0.5 and kernels.arccos(zero, zero, 0)[0, 0] == 0.5
    assert kernels.arccos(zero, x, 1)[0, 0] == 0.0


@pytest.mark.parametrize("order", [0, 1, 2])
def test_arccos_kernel_equals_its_integral(order):
    """k_b(x, y) = 2 E_w[step(w.x) step(w.y) (w.x)^b (w.y)^b], w ~ N(0, I_2), by quadrature over angles.

    In 2-D w = r (cos phi, sin phi), r ~ chi_2 with E r^2b = 2^b b!, phi uniform: a 1-D integral. The
    midpoint rule on N = 200000 points is exact to ~1e-9 for b >= 1 (the integrand is continuous), and
    for b = 0 (a product of steps) within the 4 jumps' share of a cell each: 4 / N = 2e-5.
    """
    rng = np.random.default_rng(order)
    X = rng.standard_normal((4, 2))
    phi = (np.arange(200_000) + 0.5) * 2 * np.pi / 200_000
    u = np.stack([np.cos(phi), np.sin(phi)])
    P = X @ u
    G = np.where(P > 0, P, 0.0) ** order * (P > 0)
    expected = 2 * (2**order * [1, 1, 2][order]) * (G @ G.T) / phi.size
    np.testing.assert_allclose(kernels.arccos(X, X, order), expected, rtol=0, atol=2e-5 if order == 0 else 1e-8)


def test_zero_vector_gets_its_exact_arccos0_value():
    m = make_map(6, 24, seed=1, kernel="arccos0")
    X = np.vstack([np.zeros(6), np.random.default_rng(1).standard_normal(6)])
    estimate, exact = m.kernel(X), m.exact_kernel(X)
    # The zero row's kernel values are 1/2 with itself and with anything: estimated with no error.
    np.testing.assert_allclose(exact[0], 0.5, rtol=0, atol=1e-15)
    np.testing.assert_allclose(estimate[0], exact[0], rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------
# (d) error against i.i.d. random features at equal D
# ---------------------------------------------------------------------------------------

def breast_cancer_unit_rows() -> np.ndarray:
    """Columns standardised (their raw scales differ by 10^4), then rows scaled to unit norm."""
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def gram_errors(K, estimate):
    return (np.linalg.norm(estimate - K) / np.linalg.norm(K), np.abs(estimate - K).max() / np.abs(K).max())


# breast_cancer (569 x 30), D = 4d = 120, seeds 0..7, Gaussian gamma = 1 / median ||x - y||^2, SSF with
# randomization "rotation" (new specs). Measured, mean SSF vs i.i.d. (relative Frobenius, relative max):
#   gaussian fro 0.096 vs 0.154, max 0.248 vs 0.306
#   arccos0  fro 0.089 vs 0.137, max 0.220 vs 0.328
#   arccos1  fro 0.049 vs 0.219, max 0.109 vs 0.663
# The test asks the gap of the means to exceed 3 standard errors of that difference, estimated from
# the same seeds (the measured gaps are 4.7-8.7 standard errors for the Gaussian and arccos0, 15-18 for
# arccos1; with 5 seeds the Gaussian max gap was 2.9), and for arccos1 the paper's size of gain too:
# SSF error at most half of i.i.d.
@pytest.mark.parametrize("kernel", ["gaussian", "arccos0", "arccos1"])
def test_gram_error_is_below_iid_features_at_equal_D(kernel):
    from scipy.spatial.distance import pdist

    X = breast_cancer_unit_rows()
    d, D, seeds = X.shape[1], 4 * X.shape[1], range(8)
    gamma = 1.0 / np.median(pdist(X, "sqeuclidean"))
    ours, theirs = [], []
    for seed in seeds:
        if kernel == "gaussian":
            m = make_map(d, D, seed, gamma=gamma)
            Z = create_map({"method": "rff", "input_dim": d, "n_components": D, "seed": seed,
                            "params": {"gamma": gamma}}).transform(X, dtype=np.float64)
        else:
            m = make_map(d, D, seed, kernel=kernel)
            Z = ssf_module.arccos_random_features(X, D, ssf_module.arccos_order(kernel), seed)
        K = m.exact_kernel(X)
        ours.append(gram_errors(K, m.kernel(X)))
        theirs.append(gram_errors(K, Z @ Z.T))
    ours, theirs = np.array(ours), np.array(theirs)
    gap = theirs.mean(axis=0) - ours.mean(axis=0)
    standard_error = np.sqrt((ours.var(axis=0, ddof=1) + theirs.var(axis=0, ddof=1)) / len(seeds))
    print(f"{kernel}: SSF fro/max {ours.mean(axis=0).round(4)}, iid {theirs.mean(axis=0).round(4)}, "
          f"gap / standard error {(gap / standard_error).round(1)}")
    assert np.all(gap > 3 * standard_error)
    if kernel == "arccos1":
        assert np.all(ours.mean(axis=0) < 0.5 * theirs.mean(axis=0))


@pytest.mark.parametrize("kernel", ["gaussian", "arccos0", "arccos1", "arccos2"])
def test_estimate_beats_iid_features_for_every_kernel_and_odd_d(kernel):
    """All four kernels (arccos2 too), unnormalised rows, odd d = 15 so d' = 16 != d, D = 1024, 3 seeds.

    Measured SSF / i.i.d. relative Frobenius error: gaussian 0.51, arccos0 0.57, arccos1 0.21,
    arccos2 0.24 (the i.i.d. error's seed sd is ~12% of it, so a 3-seed mean moves by ~7%). Bounds:
    0.7 / 0.8 for gaussian / arccos0, which only ask SSF to win clearly; 0.4 for arccos1 and arccos2,
    where a chi moment taken with d instead of d' would bias every entry by 1/15 and 13%, giving
    errors of at least 0.067 and 0.13, ratios of 0.8 and more.
    """
    X = np.random.default_rng(5).standard_normal((60, 15))
    params = {"kernel": kernel, **({"gamma": 0.05} if kernel == "gaussian" else {})}
    ours, theirs = [], []
    for seed in range(3):
        m = make_map(15, 1024, seed, **params)
        if kernel == "gaussian":
            Z = create_map({"method": "rff", "input_dim": 15, "n_components": 1024, "seed": seed,
                            "params": {"gamma": 0.05}}).transform(X, dtype=np.float64)
        else:
            Z = ssf_module.arccos_random_features(X, 1024, ssf_module.arccos_order(kernel), seed)
        K = m.exact_kernel(X)
        ours.append(np.linalg.norm(m.kernel(X) - K) / np.linalg.norm(K))
        theirs.append(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))
    ratio = np.mean(ours) / np.mean(theirs)
    print(f"{kernel}: SSF {np.mean(ours):.4f}, iid {np.mean(theirs):.4f}, ratio {ratio:.2f}")
    assert ratio < {"gaussian": 0.7, "arccos0": 0.8, "arccos1": 0.4, "arccos2": 0.4}[kernel]


# ---------------------------------------------------------------------------------------
# (e) spec validation
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("d, D", [(6, 10), (6, 8), (7, 12), (1, 2), (64, 126)])
def test_incompatible_n_components_is_refused(d, D):
    with pytest.raises(SpecError) as info:
        make_map(d, D)
    assert info.value.field == "n_components"
    assert "multiple of 4" in info.value.message and str(4 * ((d + 1) // 2)) in info.value.message


@pytest.mark.parametrize("params, field", [
    ({"gamma": 0}, "params.gamma"),
    ({"gamma": -1.0}, "params.gamma"),
    ({"gamma": float("nan")}, "params.gamma"),
    ({"kernel": "arccos1", "gamma": 0.5}, "params.gamma"),
    ({"kernel": "arccos3"}, "params.kernel"),
    ({"kernel": "laplacian"}, "params.kernel"),
    ({"index_set": [0, 1]}, "params.index_set"),          # m = 3 rows needed
    ({"index_set": [0, 1, 1]}, "params.index_set"),       # not distinct
    ({"index_set": [0, 1, 6]}, "params.index_set"),       # n = 6: rows 0..5
    ({"index_set": [0, 1, -2]}, "params.index_set.2"),
    ({"index_set": [0, 1, 2.5]}, "params.index_set.2"),
    ({"index_set": [0, 1, "2"]}, "params.index_set.2"),
    ({"index_set": 3}, "params.index_set"),
    ({"variant": "phase"}, "params.variant"),
])
def test_bad_params_are_refused_naming_the_field(params, field):
    with pytest.raises(SpecError) as info:
        make_map(6, 24, **params)
    assert info.value.field == field, info.value


def test_defaults_resolve_and_arccos_has_no_gamma():
    spec = resolve_spec({"method": "ssf", "input_dim": 4, "n_components": 8})
    assert spec.params["kernel"] == "gaussian" and spec.params["gamma"] == 1.0
    assert sorted(spec.params["index_set"]) == [0, 1]  # n = m = 2: every row, in a seeded order
    arccos = resolve_spec({"method": "ssf", "input_dim": 4, "n_components": 8, "params": {"kernel": "arccos2"}})
    assert arccos.params["gamma"] is None
    # Explicit defaults give the same id as implicit ones.
    explicit = resolve_spec({"method": "ssf", "input_dim": 4, "n_components": 8, "seed": 0,
                             "params": {"kernel": "gaussian", "gamma": 1.0}})
    assert explicit.id == spec.id


def test_new_requests_rotate_and_stored_specs_keep_their_signs():
    request = {"method": "ssf", "input_dim": 6, "n_components": 24, "seed": 2, "params": {"kernel": "arccos1"}}
    new = create_map(request)
    assert new.spec.params["randomization"] == "rotation"
    legacy = resolve_spec({**request, "params": {"kernel": "arccos1", "randomization": "signs"}})
    assert "randomization" not in legacy.params and legacy.id != new.spec.id
    stored = create_map(legacy.to_dict())  # a replica rebuilding a spec stored before the parameter
    assert stored.spec.id == legacy.id and not stored.params.rotates
    assert create_map(new.describe()).spec.id == new.spec.id
    X = np.random.default_rng(0).standard_normal((3, 6))
    assert not np.allclose(stored.projections(X), new.projections(X))
    assert new.planned_nbytes == stored.planned_nbytes + 8 * ssf_module.ROTATION_BLOCKS * new.m


@pytest.mark.parametrize("kernel", ["gaussian", "arccos0", "arccos1", "arccos2"])
def test_rotated_estimate_is_unbiased_over_seeds(kernel):
    """Averaged over 100 seeds, each pair's error is within 4.5 of its standard errors of zero and the
    mean squared z-score stays below 2 (measured 1.08-1.39: t with 99 dof, pairs of 12 rows share rows).
    With randomization "signs" the same statistics are 17-36 and 43-112: the fixed point set with sign
    flips is not a random rotation; its bias is documented in featurehash.maps.fourier.ssf."""
    d, D, seeds = 6, 24, 100
    X = np.random.default_rng(1).standard_normal((12, d))
    params = {"kernel": kernel, **({"gamma": 0.3} if kernel == "gaussian" else {})}
    upper = np.triu_indices(len(X), k=1)
    errors = np.array([(m.kernel(X) - m.exact_kernel(X))[upper]
                       for m in (make_map(d, D, seed, **params) for seed in range(seeds))])
    z = errors.mean(axis=0) / (errors.std(axis=0, ddof=1) / np.sqrt(seeds))
    assert np.abs(z).max() < 4.5 and np.mean(z**2) < 2.0, (np.abs(z).max(), np.mean(z**2))


def test_float32_range_and_bad_dtype_are_refused():
    m = make_map(4, 8)
    with pytest.raises(InputError) as info:
        m.transform(np.full((1, 4), 1e300))
    assert info.value.field == "vectors"
    assert np.isfinite(m.transform(np.full((1, 4), 1e300), dtype=np.float64)).all()
    with pytest.raises(InputError):
        m.transform(np.ones((1, 4)), dtype=np.int32)


# ---------------------------------------------------------------------------------------
# (f) numerics: sparse vs dense, float32 vs float64, batch size
# ---------------------------------------------------------------------------------------

KERNEL_PARAMS = [{"gamma": 0.3}, {"kernel": "arccos0"}, {"kernel": "arccos1"}, {"kernel": "arccos2"}]
KERNEL_IDS = ["gaussian", "arccos0", "arccos1", "arccos2"]


def sparse_data(n=300, d=21, density=0.3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[rng.random(X.shape) > density] = 0.0
    return X


@pytest.mark.parametrize("params", KERNEL_PARAMS, ids=KERNEL_IDS)
def test_sparse_input_gives_the_dense_features(params):
    """Sparse rows are densified one chunk at a time, so the numbers are the same, bit for bit."""
    X = sparse_data()
    m = make_map(21, 88, 5, **params)
    for dtype in (np.float32, np.float64):
        dense = m.transform(X, dtype=dtype)
        for sparse in (sp.csr_matrix(X), sp.coo_matrix(X)):
            result = m.transform(sparse, dtype=dtype)
            assert isinstance(result, np.ndarray) and result.dtype == dense.dtype
            np.testing.assert_array_equal(result, dense)


@pytest.mark.parametrize("params", KERNEL_PARAMS, ids=KERNEL_IDS)
def test_float32_matches_float64(params):
    """float32 rounds inputs, signs and the FFT (~1e-7 relative to the projections' size) and, for
    the Gaussian, the angle t P (|t P| < ~15 here): errors ~1e-6 of the largest feature. 1e-5 of it.

    arccos0's features are steps: a projection within rounding of 0 may take another value (0, 1/2
    or 1 times the scale). Sparse rows make exact zeros common (one nonzero pair gives cos(2 pi k j/n),
    exactly 0 at some j in float64), so those entries are excluded: |P| < 1e-5 of the largest.
    """
    X = sparse_data(d=21)
    m = make_map(21, 88, 3, **params)
    Z32, Z64 = m.transform(X), m.transform(X, dtype=np.float64)
    assert Z32.dtype == np.float32 and Z64.dtype == np.float64 and Z32.shape == Z64.shape == (300, 88)
    compared = np.ones(Z64.shape, dtype=bool)
    if params.get("kernel") == "arccos0":
        P = m.projections(X)
        compared = np.abs(np.hstack([P, P])) > 1e-5 * np.abs(P).max()
        assert compared.mean() > 0.99
    np.testing.assert_allclose(Z32[compared], Z64[compared], rtol=0, atol=1e-5 * np.abs(Z64).max())


@pytest.mark.parametrize("params", KERNEL_PARAMS, ids=KERNEL_IDS)
def test_features_do_not_depend_on_batch_size(params, monkeypatch):
    X = sparse_data(n=257)
    m = make_map(21, 88, 9, **params)
    whole = m.transform(X, dtype=np.float64)
    whole32 = m.transform(X)
    for size in (1, 7, 100):
        pieces = np.vstack([m.transform(X[i:i + size], dtype=np.float64) for i in range(0, len(X), size)])
        np.testing.assert_allclose(pieces, whole, rtol=0, atol=1e-12)
    monkeypatch.setattr(base_module, "CHUNK_ELEMENTS", 5 * 88)
    np.testing.assert_allclose(m.transform(X, dtype=np.float64), whole, rtol=0, atol=1e-12)
    np.testing.assert_allclose(m.transform(X), whole32, rtol=0, atol=1e-6 * np.abs(whole32).max())
    np.testing.assert_allclose(m.transform(sp.csr_matrix(X), dtype=np.float64), whole, rtol=0, atol=1e-12)
    np.testing.assert_allclose(m.projections(X), m.projections(X[:100]).tolist() + m.projections(X[100:]).tolist(),
                               rtol=0, atol=1e-12)


def test_memory_is_reported():
    m = make_map(64, 512)
    planned = m.planned_nbytes
    assert m.nbytes < planned  # the index set only, until the signs and radii are made
    m.materialize()
    assert m.nbytes == planned  # float32 signs and radii, the index set and its inverse


# ---------------------------------------------------------------------------------------
# (g) golden vectors
# ---------------------------------------------------------------------------------------

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"
# ssf.json: randomization "signs" (specs stored before the parameter); ssf_rotation.json: "rotation"; both
# with the search "until_unchanged" (stated in the request); ssf_search.json: plain new requests.
GOLDEN_CASES = {f"{file_name.removesuffix('.json')}/{name}": case
                for file_name in ("ssf.json", "ssf_rotation.json", "ssf_search.json")
                for name, case in json.loads((GOLDEN_DIR / file_name).read_text())["cases"].items()}
# Stored by 0.1 with an index set the 0.2 search no longer picks for the same request (a tie).
GOLDEN_STORED_V0_1 = json.loads((Path(__file__).resolve().parents[2] / "golden" / "ssf_stored_v0_1.json").read_text())
FLOAT = {"rtol": 1e-5, "atol": 1e-6}  # as tests/test_golden.py: libm and FFT order may differ by ulps
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")


@pytest.mark.parametrize("name", list(GOLDEN_CASES))
def test_golden_vectors(name):
    case = GOLDEN_CASES[name]
    stored, expected = case["spec"], case["expected"]
    # The request resolves to the same spec (index set included) and id.
    fresh = create_map(case["request"])
    assert fresh.spec.id == stored["id"]
    assert {key: fresh.spec.to_dict()[key] for key in SPEC_FIELDS} == {key: stored[key] for key in SPEC_FIELDS}
    assert fresh.describe() == stored
    # A replica rebuilds it from the stored spec.
    m = create_map({key: stored[key] for key in (*SPEC_FIELDS, "id")})
    X = np.array(case["input"], dtype=np.float64)
    assert_dense_features_match(m.transform(X), m.transform(X, dtype=np.float64), expected["transform_float32"],
                                expected["transform_float64"])
    np.testing.assert_allclose(m.projections(X), expected["projections"], **FLOAT)
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], **FLOAT)
    assert m.signs().tolist() == expected["signs"]
    if expected["unit_radii"] is not None:
        np.testing.assert_allclose(m.unit_radii(), expected["unit_radii"], rtol=1e-12)
    assert m.params.rotates == ("phases" in expected)
    if "phases" in expected:
        np.testing.assert_allclose(m.phases(), np.array(expected["phases"][0]) + 1j * np.array(expected["phases"][1]),
                                   rtol=0, atol=1e-15)
    if "search" in expected:
        search = ssf_search.optimised_index_set(m.m, m.n, m.spec.seed, ssf_search.SPEC_POINT_SET,
                                                stored["params"].get("search", "until_unchanged"))
        assert list(search.index_set) == expected["search"]["index_set"] == stored["params"]["index_set"]
        assert (search.sweeps, search.swaps, search.converged) == (
            expected["search"]["sweeps"], expected["search"]["swaps"], expected["search"]["converged"])
        for key in ("initial_energy", "final_energy"):
            value = expected["search"][key]
            assert getattr(search, key) == (float(value) if value == "inf" else pytest.approx(value, rel=1e-9))


@pytest.mark.parametrize("name", list(GOLDEN_STORED_V0_1["cases"]))
def test_specs_stored_before_the_tie_rule_transform_as_recorded(name):
    case = GOLDEN_STORED_V0_1["cases"][name]
    stored, expected = case["spec"], case["expected"]
    m = create_map({key: stored[key] for key in (*SPEC_FIELDS, "id")})
    assert m.spec.id == stored["id"] != create_map(case["request"]).spec.id
    X = np.array(case["input"], dtype=np.float64)
    assert_dense_features_match(m.transform(X), m.transform(X, dtype=np.float64), expected["transform_float32"],
                                expected["transform_float64"])


def test_equal_energy_candidates_go_to_the_lowest_index():
    """Symmetric candidates tie exactly; the search takes the lowest index rather than whichever
    rounding noise favours (0.1 picked 6 over 2 here)."""
    search = ssf_search.optimised_index_set(3, 8, 22, ssf_search.SPEC_POINT_SET)
    assert search.index_set == (2, 7, 1)
    energies = [ssf_search.riesz_log_energy([k, 7, 1], 8) for k in (2, 6)]
    assert energies[0] == pytest.approx(energies[1], rel=1e-12)


def test_chi_quantiles_are_scipy_stats_own_bits():
    # SSF's radii and SRF's radial grid use chi's quantile formula without importing scipy.stats (~0.6 s).
    from scipy import stats
    from featurehash.maps.fourier._ssf_parameters import chi_ppf

    q = (np.arange(4096) + np.random.default_rng(0).uniform(size=4096)) / 4096
    for df in (2, 3, 8, 64, 1000, 8192):
        assert np.array_equal(chi_ppf(q, df), stats.chi.ppf(q, df=df)), df
