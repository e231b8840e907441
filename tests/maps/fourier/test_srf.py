"""Spherical random features (Pennington, Yu & Kumar, NIPS 2015; docs/methods/fourier.md, "SRF"): the fitted
mixture, the map, and the paper's claims.

What is checked, and where the tolerances come from:
- the fit: L (eq. 5) of the fitted K^ is below L of the single-Gaussian bound of section 4
  (eq. 6 setup), both computed independently of the fit's grid; L falls as p grows; the
  radial machinery reproduces closed forms (a mixture with positive weights has
  K^(z) = sum_i c_i exp(-sigma_i^2 z^2) exactly) to quadrature accuracy;
- the map: its estimate is unbiased for K^ (z-scores from the spread over seeds), it is the
  RFF-shaped product sqrt(2 mass / D) cos(W^T x + b) of unit-normalised inputs, dense and
  sparse agree, bad params are refused naming the field, stored specs round-trip;
- Figure 2: on unit-normalised digits SRF has lower kernel MSE than Random Maclaurin and
  TensorSketch for p >= 7, with a gap that grows with p (margins from the seed spread);
- golden vectors (tests/golden/srf.json).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.integrate import quad, trapezoid
from scipy.special import hyp0f1
from scipy.stats import chi

from featurehash.maps import kernels
from featurehash.maps import InputError, SpecError, create_map, resolve_spec
from featurehash.maps.fourier import _spherical_mixture as mixture
from featurehash.maps.fourier import _spherical_shells as shells
from feature_promises import assert_dense_features_match


pytestmark = pytest.mark.usefixtures("single_threaded_blas")


def srf(d, D, seed=0, **params):
    return create_map({"method": "srf", "input_dim": d, "n_components": D, "seed": seed, "params": params})


def unit(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def gauss_legendre(count=200):
    nodes, weights = np.polynomial.legendre.leggauss(count)
    return nodes + 1.0, weights  # on [0, 2]


def independent_loss(fit, bias, degree, dim) -> float:
    """L of a fitted mixture on a 200-node Gauss-Legendre rule, not the fit's grid."""
    z, w = gauss_legendre()
    residual = mixture.mixture_kernel(z, fit.weights, fit.scales, dim) - mixture.target_kernel(z, bias, degree)
    return float(0.5 * w @ residual**2)


def single_gaussian_loss(bias, degree, upper=2.0) -> float:
    """L of exp(-p z^2 / a^2) (section 4, N = 1) by adaptive quadrature on [0, upper]."""
    value, _ = quad(lambda z: (np.exp(-degree * z * z / bias**2) - (1 - z * z / bias**2) ** degree) ** 2,
                    0.0, upper, epsabs=1e-16, epsrel=1e-12, limit=200)
    return 0.5 * value


def paper_eq6(bias, degree) -> float:
    """The paper's large-p bound, eq. (6): L <= 105 / 4096 sqrt(pi / 2) a / p^(5/2)."""
    return 105.0 / 4096.0 * np.sqrt(np.pi / 2.0) * bias / degree**2.5


# ---------------------------------------------------------------------------------------
# (a) the radial machinery against closed forms
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [1, 2, 3, 10, 48, 49, 200, 201, 784, 4096])
def test_positive_mixture_has_the_closed_form_kernel(dim):
    """With every c_i >= 0 the max of eq. (4) does nothing and K^(z) = sum c_i exp(-sigma_i^2 z^2);
    the mass K^(0) = sum c_i. Covers hyp0f1 (d <= 48), the quadrature above it, and the radial
    grid with (d <= 200) and without the nodes for the oscillation of Omega_d."""
    weights, scales = (0.3, 0.5, 0.2), (0.2, 1.0, 3.5)
    z = np.linspace(0.0, 2.0, 41)
    expected = sum(c * np.exp(-(s * z) ** 2) for c, s in zip(weights, scales))
    np.testing.assert_allclose(mixture.mixture_kernel(z, weights, scales, dim), expected, rtol=0, atol=1e-12)
    assert mixture.mixture_mass(weights, scales, dim) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("dim", [49, 64, 100, 175])
def test_sphere_cosine_mean_quadrature_matches_hyp0f1(dim):
    """Above d = 48 Omega_d is a quadrature over the law of v_1; scipy's hyp0f1 is still finite
    up to d = 175 (NaN at some s from d = 176 on), so the two must agree there."""
    s = np.concatenate([np.linspace(0.0, 60.0, 601), [100.0, 200.0, 400.0, 1500.0]])
    direct = hyp0f1(dim / 2.0, -0.25 * s * s)
    assert np.all(np.isfinite(direct))
    np.testing.assert_allclose(mixture.sphere_cosine_mean(s, dim), direct, rtol=0, atol=1e-13)


def test_sphere_cosine_mean_is_finite_where_hyp0f1_is_not():
    s = np.array([0.0, 0.019, 1.0, 30.0, 300.0])
    for dim in (176, 340, 784, 4096, 2**20):
        values = mixture.sphere_cosine_mean(s, dim)
        assert np.all(np.isfinite(values)) and values[0] == pytest.approx(1.0, abs=1e-15)
        # For large d, Omega_d(s) ~ exp(-s^2 / (2 d)) (v_1 ~ N(0, 1/d)).
        np.testing.assert_allclose(values, np.exp(-s**2 / (2 * dim)), rtol=0, atol=3.0 / dim)


@pytest.mark.parametrize("dim", [1, 2, 64, 4096])
def test_sampled_radii_follow_the_mixture(dim):
    """For one Gaussian the radius is sigma sqrt(2) chi_d: compare quantiles."""
    u = (np.arange(999) + 0.5) / 999
    radii = mixture.mixture_radii(u, (1.0,), (0.8,), dim)
    expected = 0.8 * np.sqrt(2.0) * chi.ppf(u, dim)
    # The inverse CDF is interpolated within cells of width ~1/(64 sqrt(2d)) in log r.
    np.testing.assert_allclose(radii, expected, rtol=5e-4)


@pytest.mark.parametrize("dim", [1, 2, 3, 10, 64, 300])
def test_clipped_masses_integrate_the_positive_part(dim):
    """The sign-change rule of `clipped_masses` against a fine reference, on a strongly cancelling
    mixture: within 5e-5 on the fit's grid and 1.5e-5 on the evaluation grid (measured 4.4e-5
    and 1e-5 at worst; plain clipping at the nodes erred up to 3e-4)."""
    weights, scales = np.array([-0.5, 1.7, -0.3]), np.array([0.6, 0.9, 1.2])
    r = np.linspace(0.0, 30.0, 2_000_001)
    density = sum(c * chi.pdf(r / (s * np.sqrt(2)), dim) / (s * np.sqrt(2)) for c, s in zip(weights, scales))
    reference = trapezoid(np.maximum(density, 0.0), r)   # scipy's: numpy < 2 has no np.trapezoid
    grid = mixture.RadialGrid.for_mixture(weights, scales, dim)
    F, _ = grid.component_masses(scales)
    plain = np.maximum(F @ weights, 0.0).sum()
    fit_grid = grid.density_masses(weights, scales).sum()
    stored = mixture.mixture_mass(weights, scales, dim)
    print(f"d={dim} reference {reference:.8f}: plain clipping error {plain - reference:.1e}, "
          f"interval rule {fit_grid - reference:.1e} (fit grid), {stored - reference:.1e} (stored mass)")
    assert abs(fit_grid - reference) < 5e-5
    assert abs(stored - reference) < 1.5e-5


# ---------------------------------------------------------------------------------------
# (b) the fit: below the single-Gaussian bound, better with p, cached and fast
# ---------------------------------------------------------------------------------------

FIT_CASES = [(bias, degree, dim) for bias in (2.0, 4.0) for degree in (1, 3, 10, 20) for dim in (2, 64, 4096)]


@pytest.mark.parametrize("bias, degree, dim", FIT_CASES)
def test_fit_is_below_the_single_gaussian_bound(bias, degree, dim):
    fit = mixture.fit_mixture(bias, degree, dim)
    fitted = independent_loss(fit, bias, degree, dim)
    single = single_gaussian_loss(bias, degree)
    print(f"a={bias} p={degree} d={dim}: L fit {fitted:.3e} (grid {fit.loss:.3e}), N=1 bound {single:.3e} "
          f"(grid {fit.single_loss:.3e}), ratio {fitted / single:.2e}, eq.(6) {paper_eq6(bias, degree):.2e}")
    # The fit's grid reproduces the single-Gaussian L (no clipping there: exact Gaussian transform).
    assert fit.single_loss == pytest.approx(single, rel=1e-6)
    # The fitted K^ is better than the N = 1 bound, measured off the fit's grid.
    assert fitted < single
    # Section 4: the N = 1 error on [0, 2] is below the same integral on [0, a] that eq. (6) expands.
    assert single <= single_gaussian_loss(bias, degree, upper=bias)
    # The numbers are sane: finite, bounded weights, scales in range, mass ~ K(0) = 1.
    weights, scales = np.array(fit.weights), np.array(fit.scales)
    assert np.all(np.isfinite(weights)) and np.all(np.abs(weights) <= mixture.WEIGHT_BOUND)
    single_scale = np.sqrt(degree) / bias
    assert np.all(scales >= single_scale / mixture.SCALE_FACTOR * (1 - 1e-9))
    assert np.all(scales <= single_scale * mixture.SCALE_FACTOR * (1 + 1e-9))
    assert abs(fit.mass - 1.0) < 0.05


@pytest.mark.parametrize("bias, dim, degrees", [
    (2.0, 256, (1, 3, 7, 10, 20)),  # the paper's Figure 1 setting (a = 2, d = 256)
    (4.0, 64, (7, 10, 20)),         # the paper's experiments use a = 4 ...
    (4.0, 784, (7, 10, 20)),
])
def test_fit_error_falls_as_degree_grows(bias, dim, degrees):
    """L decays with p (eq. 6 is O(p^-2.5)). At a = 4 that holds from p ~ 5 on: for p = 1 .. 5 the
    single-Gaussian L itself rises with p (9.5e-5, 3.7e-4, 4.5e-4 at p = 1, 3, 5), and so does the
    fit in high d (where K^ can only be a positive Gaussian mixture in z)."""
    losses = [mixture.fit_mixture(bias, p, dim).loss for p in degrees]
    print(f"a={bias} d={dim}: " + ", ".join(f"p={p}: L={L:.2e}" for p, L in zip(degrees, losses)))
    assert all(later < earlier for earlier, later in zip(losses, losses[1:]))


def independent_shells_loss(fit, bias, degree, dim) -> float:
    z, w = gauss_legendre()
    residual = shells.shells_kernel(z, fit.radii, fit.masses, dim) - mixture.target_kernel(z, bias, degree)
    return float(0.5 * w @ residual**2)


@pytest.mark.parametrize("bias", [2.0, 4.0])
@pytest.mark.parametrize("degree", [3, 10, 20])
@pytest.mark.parametrize("dim", [64, 784])
def test_shell_fit_is_at_least_as_good_as_the_papers_mixture_fit(bias, degree, dim):
    """On eq. (5), computed on an independent 200-node rule: the convex shell fit is at or below the
    paper's N = 10 clipped-mixture fit (measured ratios 0.65-0.99; 1e-9 relative slack for rounding)."""
    new = independent_shells_loss(shells.fit_shells(bias, degree, dim), bias, degree, dim)
    old = independent_loss(mixture.fit_mixture(bias, degree, dim), bias, degree, dim)
    print(f"a={bias} p={degree} d={dim}: L shells {new:.3e}, mixture {old:.3e}, ratio {new / old:.3f}")
    assert new <= old * (1 + 1e-9)


@pytest.mark.parametrize("bias, degree, dim", [(4.0, 3, 16), (2.0, 20, 5), (3.0, 7, 300)])
def test_shell_fit_is_the_optimum_of_its_convex_problem(bias, degree, dim):
    """KKT conditions of the nonnegative least-squares problem, checked in plain numpy: at the
    stored masses no shell could lower L by gaining mass, and the masses in use are stationary
    (to the stored rounding). Strict convexity (the ridge) makes this optimum the only one."""
    fit = shells.fit_shells(bias, degree, dim)
    radii = np.arange(1, shells.RADIAL_NODES + 1) * shells.radial_step(bias, degree, dim)
    z, w = shells._simpson(shells.Z_INTERVALS, 2.0)
    omega = shells.sphere_cosine_mean(np.multiply.outer(z, radii), dim)
    masses = np.zeros(radii.size)
    masses[np.searchsorted(radii, np.array(fit.radii) * (1 - 1e-12))] = fit.masses
    gram = omega.T @ (w[:, None] * omega)
    gradient = gram @ masses - omega.T @ (w * mixture.target_kernel(z, bias, degree))
    scale = np.abs(omega.T @ (w * mixture.target_kernel(z, bias, degree))).max()
    assert gradient.min() > -1e-8 * scale
    np.testing.assert_allclose(gradient[masses > 0], 0.0, atol=1e-8 * scale)


def test_fit_for_d784_p10_is_fast_and_cached():
    shells.fit_shells.cache_clear()
    request = {"method": "srf", "input_dim": 784, "n_components": 256, "params": {"degree": 10, "bias": 4.0}}
    start = time.perf_counter()
    first = create_map(request)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    second = create_map(request)
    cached = time.perf_counter() - start
    print(f"create srf d=784 p=10: first {cold:.3f} s (fit), second {cached * 1e3:.2f} ms (cached)")
    assert second.spec.id == first.spec.id
    assert cold < 10.0  # ~0.2-0.7 s alone; generous for a shared machine
    assert cached < 0.1


# ---------------------------------------------------------------------------------------
# (c) the map
# ---------------------------------------------------------------------------------------

# Over S seeds the mean of K^_xy has standard error sd / sqrt(S) (sd measured across the seeds);
# 15 entries per case: at 4.5 standard errors a false alarm has probability ~1e-4 per case.
UNBIASED_SEEDS = range(300)


@pytest.mark.parametrize("variant", ["phase", "cos_sin"])
@pytest.mark.parametrize("degree, bias", [(10, 4.0), (1, 2.0)])
def test_estimate_is_unbiased_for_the_fitted_kernel(degree, bias, variant):
    rng = np.random.default_rng(5)
    d, D = 8, 32
    X = unit(rng.standard_normal((5, d)))
    X[1] = unit(X[0:1] + 0.3 * X[1:2])[0]  # a close pair: kernel values spread over [0.3, 1]
    estimates = np.array([srf(d, D, seed, degree=degree, bias=bias, variant=variant).kernel(X)
                          for seed in UNBIASED_SEEDS])
    m = srf(d, D, 0, degree=degree, bias=bias, variant=variant)
    fitted, exact = m.fitted_kernel(X), m.exact_kernel(X)
    upper = np.triu_indices(len(X))
    mean = estimates.mean(axis=0)[upper]
    standard_error = estimates.std(axis=0, ddof=1)[upper] / np.sqrt(len(UNBIASED_SEEDS))
    random_entries = standard_error > 1e-9
    z = (mean - fitted[upper])[random_entries] / standard_error[random_entries]
    z_exact = (mean - exact[upper])[random_entries] / standard_error[random_entries]
    print(f"p={degree} a={bias} {variant}: max |z| vs K^ {np.abs(z).max():.2f}, vs K {np.abs(z_exact).max():.2f}; "
          f"max |K^ - K| {np.abs(fitted - exact).max():.1e}")
    assert np.all(np.abs(z) < 4.5)
    # cos^2 + sin^2 = 1: the cos_sin diagonal is exactly the mass.
    np.testing.assert_allclose(mean[~random_entries], fitted[upper][~random_entries], rtol=0, atol=1e-5)
    if degree == 1:
        # a = 2, p = 1 is the hardest kernel to fit (L = 3e-3): the estimate follows K^, not K.
        assert np.abs(z_exact).max() > 4.5


def test_features_are_scaled_cosines_of_unit_inputs():
    """transform = sqrt(2 mass / D) cos(W^T u + b), u = x / ||x||, W rows r_j v_j."""
    d, D = 7, 64
    X = np.random.default_rng(3).standard_normal((5, d)) * np.array([[0.1], [1], [10], [3], [0.5]])
    m = srf(d, D, seed=4, degree=7, bias=3.0)
    frequencies, offsets = m._parameters_for(np.dtype(np.float64))
    mass = m.spec.params["mass"]
    expected = np.sqrt(2 * mass / D) * np.cos(unit(X) @ frequencies.T + offsets)
    np.testing.assert_allclose(m.transform(X, dtype=np.float64), expected, rtol=1e-10, atol=1e-12)
    assert frequencies.shape == (D, d) and np.all((offsets >= 0) & (offsets < 2 * np.pi))
    q, alpha = 3.0**2 / 2 - 1, (2 / 3.0**2) ** 7  # a = 3, p = 7
    np.testing.assert_allclose(m.exact_kernel(X), alpha * (q + unit(X) @ unit(X).T) ** 7, rtol=1e-12)


def test_exact_kernel_is_the_baselines_kernel_scaled_on_the_sphere():
    """The Figure 2 comparison: alpha (q + <x, y>)^p on unit rows is SRF's exact kernel, and the
    baselines' exact kernel with coef0 = q, scaled by alpha."""
    X = np.random.default_rng(1).standard_normal((6, 9))
    for bias, degree in [(2.0, 3), (4.0, 10), (3.0, 20)]:
        q, alpha = bias**2 / 2 - 1, (2 / bias**2) ** degree
        ours = srf(9, 8, degree=degree, bias=bias).exact_kernel(X)
        for method in ("random_maclaurin", "tensorsketch"):
            theirs = create_map({"method": method, "input_dim": 9, "n_components": 8,
                                 "params": {"degree": degree, "coef0": q}}).exact_kernel(unit(X))
            np.testing.assert_allclose(alpha * theirs, ours, rtol=1e-12)
        assert np.all((ours >= (1 - 4 / bias**2) ** degree - 1e-15) & (ours <= 1 + 1e-15))


def test_transform_cost_does_not_depend_on_degree():
    """The parameters are one (D, d) frequency matrix and D offsets whatever p: the transform is the
    same dense product (its time against the numpy floor is in bench/bench_srf.py)."""
    sizes = set()
    for degree in (3, 10, 20):
        m = srf(64, 512, degree=degree).materialize()
        sizes.add((m.nbytes, m.planned_nbytes, m._parameters_for(np.dtype(np.float32))[0].shape))
    assert sizes == {(4 * (512 * 64 + 512), 4 * (512 * 64 + 512), (512, 64))}


@pytest.mark.parametrize("variant", ["phase", "cos_sin"])
def test_dense_sparse_and_precision_agree(variant):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((40, 30))
    X[rng.random(X.shape) < 0.7] = 0.0
    X[:, 3] += 0.5  # no zero rows
    m = srf(30, 128, seed=2, degree=7, variant=variant)
    Z64 = m.transform(X, dtype=np.float64)
    np.testing.assert_allclose(m.transform(sp.csr_matrix(X), dtype=np.float64), Z64, rtol=0, atol=1e-12)
    Z32 = m.transform(sp.csr_matrix(X))
    assert Z32.dtype == np.float32
    # float32: ~1e-6 relative on frequencies of size ~5 and d = 30 terms: errors ~1e-5 in the phase.
    np.testing.assert_allclose(Z32, Z64, rtol=0, atol=2e-5 * np.sqrt(2 * m.spec.params["mass"] / 128) * 30)
    # Scaling a row does not change its features.
    scales = rng.uniform(1e-3, 1e3, size=(40, 1))
    np.testing.assert_allclose(m.transform(scales * X, dtype=np.float64), Z64, rtol=0, atol=1e-12)


@pytest.mark.parametrize("X", [
    np.zeros((1, 4)),
    np.array([[1.0, 2, 3, 4], [0, 0, 0, 0]]),
    sp.csr_matrix(np.array([[1.0, 2, 3, 4], [0, 0, 0, 0]])),
], ids=["dense", "second-row", "sparse"])
def test_zero_vector_is_rejected(X):
    m = srf(4, 16)
    with pytest.raises(InputError) as info:
        m.transform(X)
    assert info.value.field == "vectors" and "zero" in info.value.message
    with pytest.raises(InputError) as info:
        m.exact_kernel(np.ones((1, 4)), X)
    assert info.value.field == "y"


# ---------------------------------------------------------------------------------------
# (d) spec: defaults, bad params, the fitted numbers in the spec, stored-spec round trip
# ---------------------------------------------------------------------------------------

def test_defaults_and_fitted_numbers_in_the_spec():
    m = srf(16, 64)
    params = m.spec.params
    assert (params["degree"], params["bias"], params["variant"]) == (3, 4.0, "phase")
    fit = shells.fit_shells(4.0, 3, 16)
    assert params["radii"] == list(fit.radii) and params["masses"] == list(fit.masses)
    assert params["mass"] == fit.mass == shells.shells_mass(fit.masses)
    assert "weights" not in params and "scales" not in params  # left out, not null: old ids stay
    assert m.describe()["params"] == params


def test_stored_spec_round_trips_without_refitting(monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((5, 12))
    m = srf(12, 64, seed=9, degree=7, bias=2.5)
    stored = json.loads(json.dumps(m.describe()))  # as the service stores and returns it

    def refuse(*args, **kwargs):
        raise AssertionError("a stored spec must not be refitted")

    monkeypatch.setattr("featurehash.maps.fourier.srf.fit_shells", refuse)
    again = create_map(stored)
    assert again.spec.id == m.spec.id and again.spec.params == m.spec.params
    np.testing.assert_array_equal(again.transform(X), m.transform(X))


@pytest.mark.parametrize("params, field", [
    ({"degree": 0}, "params.degree"),
    ({"degree": 2.5}, "params.degree"),
    ({"degree": True}, "params.degree"),
    ({"degree": "3"}, "params.degree"),
    ({"degree": 101}, "params.degree"),
    ({"bias": 1.99}, "params.bias"),
    ({"bias": float("nan")}, "params.bias"),
    ({"bias": float("inf")}, "params.bias"),
    ({"variant": "sin"}, "params.variant"),
    ({"gamma": 1.0}, "params.gamma"),
    ({"weights": [1.0]}, "params.scales"),
    ({"weights": [1.0], "scales": [0.5]}, "params.mass"),
    ({"weights": [1.0, -0.1], "scales": [0.5], "mass": 1.0}, "params.scales"),
    ({"weights": [1.0], "scales": [-0.5], "mass": 1.0}, "params.scales.0"),
    ({"weights": [-1.0], "scales": [0.5], "mass": 1.0}, "params.weights"),
    ({"weights": [1.0], "scales": [0.5], "mass": 1.1}, "params.mass"),
    ({"weights": [1.0], "scales": [0.5], "mass": 0.0}, "params.mass"),
    ({"weights": [float("nan")], "scales": [0.5], "mass": 1.0}, "params.weights.0"),
    ({"radii": [1.0]}, "params.masses"),
    ({"radii": [1.0], "masses": [1.0]}, "params.mass"),
    ({"radii": [1.0, 2.0], "masses": [1.0], "mass": 1.0}, "params.masses"),
    ({"radii": [0.0], "masses": [1.0], "mass": 1.0}, "params.radii.0"),
    ({"radii": [1.0], "masses": [-1.0], "mass": 1.0}, "params.masses.0"),
    ({"radii": [1.0], "masses": [1.0], "mass": 1.5}, "params.mass"),
    ({"radii": [1.0], "masses": [1.0], "mass": 1.0, "weights": [1.0]}, "params.weights"),
])
def test_bad_params_name_the_field(params, field):
    with pytest.raises(SpecError) as info:
        srf(8, 16, **params)
    assert info.value.field == field, info.value


def test_cos_sin_needs_an_even_width():
    with pytest.raises(SpecError) as info:
        srf(8, 15, variant="cos_sin")
    assert info.value.field == "n_components"


def test_own_mixture_is_accepted_and_tampering_is_refused():
    """A client may bring a mixture (weights, scales and its mass); a stored spec whose numbers
    were changed no longer matches its mass or its id."""
    own = srf(8, 16, weights=[1.0], scales=[0.5], mass=1.0)
    np.testing.assert_allclose(own.fitted_kernel(np.eye(8)[:2] + 0.1),
                               np.exp(-0.25 * (2 - 2 * kernels.cosine_similarity(np.eye(8)[:2] + 0.1,
                                                                                  np.eye(8)[:2] + 0.1))),
                               rtol=0, atol=1e-10)
    own_shells = srf(8, 16, radii=[2.0, 3.0], masses=[0.25, 0.75], mass=1.0)
    X = np.eye(8)[:3] + 0.1
    z = np.sqrt(np.maximum(2 - 2 * kernels.cosine_similarity(X, X), 0))
    np.testing.assert_allclose(own_shells.fitted_kernel(X), 0.25 * hyp0f1(4, -(2 * z) ** 2 / 4)
                               + 0.75 * hyp0f1(4, -(3 * z) ** 2 / 4), rtol=0, atol=1e-12)
    stored = srf(8, 16, degree=5).describe()
    changed = {**stored, "params": {**stored["params"], "masses": [w * 1.01 for w in stored["params"]["masses"]]}}
    with pytest.raises(SpecError) as info:
        resolve_spec(changed)
    assert info.value.field == "params.mass"
    changed = {**stored, "seed": stored["seed"] + 1}
    with pytest.raises(SpecError) as info:
        resolve_spec(changed)
    assert info.value.field == "id"


# ---------------------------------------------------------------------------------------
# (e) Figure 2: kernel MSE on unit-normalised digits against the baselines
# ---------------------------------------------------------------------------------------

FIGURE2_SEEDS = range(5)


def digits_mse(degree: int, D: int, bias: float = 4.0) -> dict[str, np.ndarray]:
    """Per-seed MSE over all pairs of 300 unit-normalised digits, all methods measured against
    K = alpha (q + <x, y>)^p: the baselines (coef0 = q) estimate (q + <x, y>)^p and are scaled by
    alpha = (2/a^2)^p (so their MSE is alpha^2 times theirs on their own scale)."""
    from sklearn.datasets import load_digits  # ships with scikit-learn: no download

    data = load_digits().data
    X = unit(data[np.random.default_rng(0).choice(len(data), 300, replace=False)])
    q, alpha = bias**2 / 2 - 1, (2 / bias**2) ** degree
    K = kernels.spherical_polynomial(X, X, degree, bias)
    out = {}
    for method, params, factor in [("srf", {"degree": degree, "bias": bias}, 1.0),
                                   ("random_maclaurin", {"degree": degree, "coef0": q}, alpha),
                                   ("tensorsketch", {"degree": degree, "coef0": q}, alpha)]:
        out[method] = np.array([
            np.mean((factor * create_map({"method": method, "input_dim": 64, "n_components": D, "seed": seed,
                                          "params": params}).kernel(X) - K) ** 2)
            for seed in FIGURE2_SEEDS])
    return out


def log_gap(mse: dict[str, np.ndarray], baseline: str) -> tuple[float, float]:
    """Mean log(MSE baseline / MSE SRF) over seeds, and its standard error. The baselines' MSE
    over seeds is heavy-tailed (sd of its log ~0.3-1.2, measured), so means are taken in logs."""
    a, b = np.log(mse[baseline]), np.log(mse["srf"])
    n = len(a)
    return float(a.mean() - b.mean()), float(np.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n))


def test_srf_beats_the_baselines_for_higher_degrees_and_the_gap_grows():
    D = 1024
    results = {p: digits_mse(p, D) for p in (3, 10, 20)}
    gaps = {}
    for p, mse in results.items():
        line = ", ".join(f"{method} {values.mean():.2e} (sd {values.std(ddof=1):.1e})"
                         for method, values in mse.items())
        print(f"p={p} D={D}: {line}")
        for baseline in ("random_maclaurin", "tensorsketch"):
            gaps[p, baseline] = log_gap(mse, baseline)
            print(f"  log(MSE {baseline} / MSE srf) = {gaps[p, baseline][0]:.2f} +- {gaps[p, baseline][1]:.2f}")
    for baseline in ("random_maclaurin", "tensorsketch"):
        for p in (10, 20):  # SRF lower, by more than 3 standard errors of the log ratio
            gap, se = gaps[p, baseline]
            assert gap > 3 * se and gap > np.log(2)
        # ... and the gap grows with p (the paper: "especially for higher-order polynomials").
        (low, se_low), (high, se_high) = gaps[3, baseline], gaps[20, baseline]
        assert high - low > 3 * np.hypot(se_low, se_high)


# ---------------------------------------------------------------------------------------
# (f) golden vectors
# ---------------------------------------------------------------------------------------

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"
# Specs fitted before version 0.2 (Gaussian mixtures): frozen, they must transform as they did.
GOLDEN = json.loads((GOLDEN_DIR / "srf.json").read_text())
# The same requests fitted now (shells): ids and fitted numbers pinned bit for bit.
GOLDEN_SHELLS = json.loads((GOLDEN_DIR / "srf_shells.json").read_text())
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")
ALL_GOLDEN = {**{f"mixture/{k}": v for k, v in GOLDEN["cases"].items()},
              **{f"shells/{k}": v for k, v in GOLDEN_SHELLS["cases"].items()}}


@pytest.mark.parametrize("name", list(GOLDEN_SHELLS["cases"]))
def test_golden_spec_refits_to_the_stored_numbers(name):
    """The fitted numbers and the id are bit-identical to the committed ones (on any CPU: see
    tests/test_portability.py for the same check under other BLAS kernels and SIMD paths)."""
    case = GOLDEN_SHELLS["cases"][name]
    m = create_map(case["request"])
    assert m.spec.params == case["spec"]["params"]
    assert m.spec.id == case["spec"]["id"]
    assert m.output_dim == case["spec"]["output_dim"]


@pytest.mark.parametrize("name", list(GOLDEN["cases"]))
def test_an_old_request_now_gets_the_shells_and_its_stored_spec_still_works(name):
    """What docs/methods/polynomial.md promises: the request behind a stored mixture spec now fits shells
    (another id), while the stored spec itself is still accepted as it is, under its own id."""
    old = GOLDEN["cases"][name]
    assert old["request"] == GOLDEN_SHELLS["cases"][name]["request"]
    assert create_map(old["request"]).spec.id == GOLDEN_SHELLS["cases"][name]["spec"]["id"] != old["spec"]["id"]
    assert resolve_spec({key: old["spec"][key] for key in (*SPEC_FIELDS, "id")}).id == old["spec"]["id"]


@pytest.mark.parametrize("name", list(ALL_GOLDEN))
def test_golden_features(name):
    case = ALL_GOLDEN[name]
    m = create_map({key: case["spec"][key] for key in (*SPEC_FIELDS, "id")})  # as a replica rebuilds it
    assert m.spec.id == case["spec"]["id"]
    X = np.array(case["input"], dtype=np.float64)
    expected = case["expected"]
    assert_dense_features_match(m.transform(X), m.transform(X, dtype=np.float64), expected["transform_float32"],
                                expected["transform_float64"])
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(m.fitted_kernel(X), expected["fitted_kernel"], rtol=1e-9, atol=1e-12)
    frequencies, offsets = m._parameters_for(np.dtype(np.float64))
    np.testing.assert_allclose(frequencies[:3], expected["frequencies_head"], rtol=1e-10, atol=0)
    if expected["offsets_head"] is None:
        assert offsets is None
    else:
        np.testing.assert_allclose(offsets[:5], expected["offsets_head"], rtol=1e-12, atol=0)
