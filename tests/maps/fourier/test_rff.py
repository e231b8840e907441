"""Random Fourier features: the estimate against the exact kernel, with tolerances from theory.

Variance facts used below (docs/methods/fourier.md, "RFF"; Sutherland & Schneider 2015). For a pair
x, y with delta = x - y and k = k(delta), one frequency w gives
- cos_sin: cos(w.delta), with Var = 1/2 (1 + k(2 delta)) - k^2; the map averages D/2 of them,
  so Var[K^_xy] = (1 + k(2 delta) - 2 k^2) / D;
- phase: 2 cos(w.x + b) cos(w.y + b) = cos(w.delta) + cos(w.(x + y) + 2b), with
  Var = 1 + k(2 delta)/2 - k^2; the map averages D of them, so Var[K^_xy] = (1 + k(2 delta)/2 - k^2) / D.
Gaussian: k(2 delta) = k^4; Laplacian: k(2 delta) = k^2. Both estimates are exact averages of
i.i.d. terms, so E||K^ - K||_F^2 = sum_xy Var[K^_xy] holds exactly for every D, not only
asymptotically: the squared relative Frobenius error is exactly proportional to 1/D in mean.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import featurehash.maps.base as base_module
from featurehash.maps import kernels
from featurehash.maps import SpecError, create_map


pytestmark = pytest.mark.usefixtures("single_threaded_blas")


def make_map(d, D, seed, **params):
    return create_map({"method": "rff", "input_dim": d, "n_components": D, "seed": seed, "params": params})


def k_double(kernel: str, K: np.ndarray) -> np.ndarray:
    """k(2 delta) in terms of k(delta)."""
    return K**4 if kernel == "gaussian" else K**2


def per_entry_variance_times_D(kernel: str, variant: str, K: np.ndarray) -> np.ndarray:
    """D * Var[K^_xy] for every entry (see the module docstring)."""
    K2 = k_double(kernel, K)
    if variant == "cos_sin":
        return 1.0 + K2 - 2.0 * K**2
    return 1.0 + 0.5 * K2 - K**2


def squared_relative_error(m, X) -> float:
    K = m.exact_kernel(X)
    return float(np.linalg.norm(m.kernel(X) - K) ** 2 / np.linalg.norm(K) ** 2)


# ---------------------------------------------------------------------------------------
# (a) the relative Frobenius error falls like 1/sqrt(D)
# ---------------------------------------------------------------------------------------

# n = 100 points in d = 16, scaled so the median kernel value is about 0.25 for both kernels.
# Six seeds. Measured spread of the per-seed squared error (relative sd) is ~0.10 (gaussian)
# and ~0.2 (laplacian) at both D, so the sd of log(ratio) = 1/2 sqrt(s1^2 + s2^2) / sqrt(6) is
# <= 0.05, while the band [2.8, 5.5] around 4 is [-0.36, +0.32] in log: more than 6 sigma each
# side. E[err^2] scales exactly as 1/D, so the ratio of root-mean-square errors at D and 16 D
# estimates exactly sqrt(16) = 4 (up to the O(1/seeds) bias of a ratio of means, < 1%).
ERROR_RATIO_SEEDS = range(6)


@pytest.mark.parametrize("kernel, gamma", [("gaussian", 0.7), ("laplacian", 0.3)])
def test_relative_frobenius_error_falls_like_inverse_sqrt_D(kernel, gamma):
    rng = np.random.default_rng(20240601)
    d = 16
    X = 0.25 * rng.standard_normal((100, d))
    mean_sq = {}
    for D in (512, 8192):
        errors = [squared_relative_error(make_map(d, D, seed, kernel=kernel, gamma=gamma), X)
                  for seed in ERROR_RATIO_SEEDS]
        mean_sq[D] = float(np.mean(errors))
    ratio = np.sqrt(mean_sq[512] / mean_sq[8192])
    print(f"{kernel}: rms relative error D=512 {np.sqrt(mean_sq[512]):.4f}, "
          f"D=8192 {np.sqrt(mean_sq[8192]):.5f}, ratio {ratio:.3f} (theory 4)")
    assert 2.8 < ratio < 5.5


# ---------------------------------------------------------------------------------------
# (b) cos_sin beats phase at equal D, and both match their exact expected error
# ---------------------------------------------------------------------------------------

# Per entry the phase variance exceeds the cos_sin one by (k^2 - k(2 delta)/2) / D >= 0, and
# the diagonal is exact for cos_sin (cos^2 + sin^2 = 1) but not for phase: the gain is
# largest where kernel values are high, so the data below have median kernel ~0.8. At such
# values the squared error of one seed is dominated by few random directions (relative sd
# 0.3-0.9 across seeds, heavier for the Cauchy frequencies of the Laplacian), so 150 seeds
# are used: the measured gap is then > 5 standard errors for both kernels (about 14 sigma
# for the gaussian). The mean over seeds of the squared error must also agree with the exact
# expectation sum_xy Var[K^_xy] / ||K||_F^2 within 5 standard errors of that mean.
VARIANT_SEEDS = range(150)


@pytest.mark.parametrize("kernel, d, gamma", [("gaussian", 16, 0.7), ("laplacian", 8, 0.25)])
def test_cos_sin_has_lower_error_than_phase(kernel, d, gamma):
    rng = np.random.default_rng(7)
    X = 0.1 * rng.standard_normal((64, d))
    D = 512
    K = (kernels.gaussian if kernel == "gaussian" else kernels.laplacian)(X, X, gamma)
    mean_error, standard_error = {}, {}
    for variant in ("cos_sin", "phase"):
        errors = np.array([squared_relative_error(make_map(d, D, seed, kernel=kernel, gamma=gamma, variant=variant), X)
                           for seed in VARIANT_SEEDS])
        expected = per_entry_variance_times_D(kernel, variant, K).sum() / D / np.linalg.norm(K) ** 2
        mean_error[variant] = errors.mean()
        standard_error[variant] = errors.std(ddof=1) / np.sqrt(errors.size)
        print(f"{kernel} {variant}: mean squared relative error {errors.mean():.3e} "
              f"(exact expectation {expected:.3e}, standard error {standard_error[variant]:.1e})")
        assert abs(errors.mean() - expected) < 5 * standard_error[variant]
    assert mean_error["cos_sin"] < mean_error["phase"]
    gap_sigma = (mean_error["phase"] - mean_error["cos_sin"]) / np.hypot(*standard_error.values())
    print(f"{kernel}: phase / cos_sin = {mean_error['phase'] / mean_error['cos_sin']:.2f}, gap {gap_sigma:.1f} sigma")
    assert gap_sigma > 3


# ---------------------------------------------------------------------------------------
# (c) unbiasedness: the mean estimate over seeds is the exact kernel
# ---------------------------------------------------------------------------------------

# Over S independent seeds the mean of K^_xy has standard error sqrt(Var[K^_xy] / S), Var
# known exactly (module docstring). 15 entries per case, 4 cases: at 4.5 standard errors a
# false alarm has probability ~ 60 * 7e-6 < 1e-3.
UNBIASED_SEEDS = range(300)


@pytest.mark.parametrize("kernel, gamma", [("gaussian", 0.4), ("laplacian", 0.5)])
@pytest.mark.parametrize("variant", ["cos_sin", "phase"])
def test_estimate_is_unbiased(kernel, gamma, variant):
    rng = np.random.default_rng(11)
    d, D = 5, 32
    X = 0.6 * rng.standard_normal((5, d))
    estimates = np.array([make_map(d, D, seed, kernel=kernel, gamma=gamma, variant=variant).kernel(X)
                          for seed in UNBIASED_SEEDS])
    K = make_map(d, D, 0, kernel=kernel, gamma=gamma, variant=variant).exact_kernel(X)
    upper = np.triu_indices(len(X))
    mean = estimates.mean(axis=0)[upper]
    standard_error = np.sqrt(per_entry_variance_times_D(kernel, variant, K)[upper] / D / len(UNBIASED_SEEDS))
    exact = K[upper]
    random_entries = standard_error > 1e-9
    z = (mean - exact)[random_entries] / standard_error[random_entries]
    print(f"{kernel} {variant}: max |z| over {z.size} entries = {np.abs(z).max():.2f}")
    assert np.all(np.abs(z) < 4.5)
    # Entries with zero variance (the cos_sin diagonal, cos^2 + sin^2 = 1) are exact.
    np.testing.assert_allclose(mean[~random_entries], exact[~random_entries], rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------
# (d) numerics: float32 vs float64, sparse vs dense, batch-size independence
# ---------------------------------------------------------------------------------------

SPECS = [
    {"kernel": "gaussian", "gamma": 0.5, "variant": "cos_sin"},
    {"kernel": "gaussian", "gamma": 0.5, "variant": "phase"},
    {"kernel": "laplacian", "gamma": 0.3, "variant": "cos_sin"},
    {"kernel": "laplacian", "gamma": 0.3, "variant": "phase"},
]
SPEC_IDS = ["gaussian-cos_sin", "gaussian-phase", "laplacian-cos_sin", "laplacian-phase"]


def sparse_data(n=300, d=20, density=0.3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[rng.random(X.shape) > density] = 0.0
    return X


def float32_error_bound(m, X) -> np.ndarray:
    """Per-entry bound on |float32 features - exact features|, from a rounding analysis.

    sqrt(2/D) cos(w.x + b) in float32 (unit roundoff u = 2^-24): x, w and b are rounded (u
    each), a dot product of d terms in any summation order adds at most d u sum|w_i x_i|,
    adding b and cos add an ulp or two. So the error is at most
    sqrt(2/D) ((d + 3) u (|W||x| + |b|) + 4 u). The Cauchy frequencies of the Laplacian give
    projections in the thousands, so there the bound is far above 1e-5.
    """
    d, D = m.spec.input_dim, m.spec.n_components
    W, b = m._parameters_for(np.dtype(np.float64))
    argument_size = np.abs(X) @ np.abs(W).T + (0.0 if b is None else np.abs(b))
    if b is None:
        argument_size = np.hstack([argument_size, argument_size])
    u = 2.0**-24
    return np.sqrt(2.0 / D) * ((d + 3) * u * argument_size + 4 * u)


@pytest.mark.parametrize("params", SPECS, ids=SPEC_IDS)
def test_float32_matches_float64(params):
    d, D = 20, 512
    X = sparse_data(d=d)
    m = make_map(d, D, 3, **params)
    Z32 = m.transform(X)
    Z64 = m.transform(X, dtype=np.float64)
    assert Z32.dtype == np.float32 and Z64.dtype == np.float64
    assert Z32.shape == Z64.shape == (len(X), D)
    assert np.all(np.abs(Z32.astype(np.float64) - Z64) <= float32_error_bound(m, X))
    if params["kernel"] == "gaussian":
        # Moderate projections (|w.x| ~ 10): the two agree to ~1e-5 outright.
        np.testing.assert_allclose(Z32, Z64, rtol=0, atol=1e-5)


@pytest.mark.parametrize("params", SPECS, ids=SPEC_IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sparse_input_gives_dense_features(params, dtype):
    d, D = 20, 256
    X = sparse_data(d=d)
    m = make_map(d, D, 5, **params)
    dense = m.transform(X, dtype=dtype)
    csr = m.transform(sp.csr_matrix(X), dtype=dtype)
    assert isinstance(csr, np.ndarray) and csr.dtype == dense.dtype
    # Only the summation order differs: within 2x the float32 rounding bound (both are within
    # one bound of the exact features), and within 1e-10 in float64.
    tolerance = 2 * float32_error_bound(m, X) if dtype == np.float32 else 1e-10
    assert np.all(np.abs(csr.astype(np.float64) - dense) <= tolerance)
    # Other sparse formats are accepted as well.
    coo = m.transform(sp.coo_matrix(X), dtype=dtype)
    assert np.all(np.abs(coo.astype(np.float64) - dense) <= tolerance)


@pytest.mark.parametrize("params", SPECS, ids=SPEC_IDS)
def test_features_do_not_depend_on_batch_size(params, monkeypatch):
    d, D = 20, 256
    X = sparse_data(d=d, n=257)
    m = make_map(d, D, 9, **params)
    whole = m.transform(X, dtype=np.float64)
    whole32 = m.transform(X)
    # The caller's own chunks, including single rows.
    for size in (1, 7, 100):
        pieces = np.vstack([m.transform(X[i:i + size], dtype=np.float64) for i in range(0, len(X), size)])
        np.testing.assert_allclose(pieces, whole, rtol=0, atol=1e-6)
    # The map's internal row chunks (CHUNK_ELEMENTS), forced small.
    monkeypatch.setattr(base_module, "CHUNK_ELEMENTS", 5 * D)
    np.testing.assert_allclose(m.transform(X, dtype=np.float64), whole, rtol=0, atol=1e-6)
    # float32: BLAS may sum a different number of rows in a different order; same 2x bound.
    chunked32 = m.transform(X)
    assert np.all(np.abs(chunked32.astype(np.float64) - whole32) <= 2 * float32_error_bound(m, X))
    # Sparse input in chunks too.
    np.testing.assert_allclose(m.transform(sp.csr_matrix(X), dtype=np.float64), whole, rtol=0, atol=1e-6)


def test_phase_and_cos_sin_features_have_the_documented_form():
    """z = sqrt(2/D) cos(W x + b) or sqrt(2/D) [cos(W x), sin(W x)], from the map's own parameters."""
    d, D = 6, 16
    X = np.random.default_rng(1).standard_normal((4, d))
    phase = make_map(d, D, 2, variant="phase", gamma=0.8)
    W, b = phase._parameters_for(np.dtype(np.float64))
    assert W.shape == (D, d) and b.shape == (D,)
    assert np.all((b >= 0) & (b < 2 * np.pi))
    np.testing.assert_allclose(phase.transform(X, dtype=np.float64), np.sqrt(2 / D) * np.cos(X @ W.T + b), rtol=1e-12)
    cos_sin = make_map(d, D, 2, variant="cos_sin", gamma=0.8)
    W, b = cos_sin._parameters_for(np.dtype(np.float64))
    assert W.shape == (D // 2, d) and b is None
    P = X @ W.T
    np.testing.assert_allclose(cos_sin.transform(X, dtype=np.float64),
                               np.sqrt(2 / D) * np.hstack([np.cos(P), np.sin(P)]), rtol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
def test_frequency_law_and_scale(kernel):
    """Gaussian: w ~ N(0, 2 gamma I); Laplacian: w_i ~ Cauchy(0, gamma) (docs/methods/fourier.md, "RFF")."""
    from scipy import stats

    d, D, gamma = 16, 4096, 0.7
    W, _ = make_map(d, D, 21, kernel=kernel, gamma=gamma)._parameters_for(np.dtype(np.float64))
    W1, _ = make_map(d, D, 21, kernel=kernel, gamma=1.0)._parameters_for(np.dtype(np.float64))
    scale = np.sqrt(2 * gamma) if kernel == "gaussian" else gamma
    # gamma only scales the same unit draws.
    np.testing.assert_allclose(W, W1 * scale / (np.sqrt(2.0) if kernel == "gaussian" else 1.0), rtol=1e-12)
    law = stats.norm(scale=scale) if kernel == "gaussian" else stats.cauchy(scale=scale)
    sample = W.ravel()
    # Kolmogorov-Smirnov: under the law, P(sqrt(n) D_n > 1.95) ~ 0.001.
    statistic = stats.kstest(sample, law.cdf).statistic
    assert statistic * np.sqrt(sample.size) < 1.95


def test_exact_kernels():
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    g = make_map(4, 8, 0, kernel="gaussian", gamma=0.3)
    lap = make_map(4, 8, 0, kernel="laplacian", gamma=0.3)
    expected_g = np.exp(-0.3 * ((X[:, None, :] - Y[None]) ** 2).sum(-1))
    expected_l = np.exp(-0.3 * np.abs(X[:, None, :] - Y[None]).sum(-1))
    np.testing.assert_allclose(g.exact_kernel(X, Y), expected_g, rtol=1e-12)
    np.testing.assert_allclose(lap.exact_kernel(X, Y), expected_l, rtol=1e-12)
    assert g.kernel(X, Y).shape == (3, 2) and g.kernel(X, Y).dtype == np.float64


# ---------------------------------------------------------------------------------------
# (e) spec checks specific to RFF
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("D", [1, 7, 1023])
def test_odd_n_components_with_cos_sin_is_refused(D):
    with pytest.raises(SpecError) as info:
        create_map({"method": "rff", "input_dim": 3, "n_components": D, "params": {"variant": "cos_sin"}})
    assert info.value.field == "n_components"
    assert "even" in info.value.message
    # The default variant is cos_sin, so the default refuses it as well; phase accepts it.
    with pytest.raises(SpecError):
        create_map({"method": "rff", "input_dim": 3, "n_components": D})
    assert create_map({"method": "rff", "input_dim": 3, "n_components": D,
                       "params": {"variant": "phase"}}).transform(np.ones((1, 3))).shape == (1, D)
