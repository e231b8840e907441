"""Normalized random Fourier features (Li, KDD 2017, section 2; docs/methods/fourier.md, "NRFF").

Theorem 2: one plain RFF sample X_j Y_j (X_j = sqrt(2) cos(sqrt(gamma) r_j.u + w_j)) estimates
exp(-gamma (1 - rho)) with variance V = 1/2 + 1/2 (1 - e^{-2 gamma (1 - rho)})^2, so k * MSE of
the k-sample mean is exactly V. Theorem 3: the normalized estimate
sum X_j Y_j / sqrt(sum X_j^2 sum Y_j^2) has k * MSE -> V_n = V - 1/4 e^{-2g(1-rho)} (3 - e^{-4g(1-rho)}).
The paper's Figure 2 shows the asymptotic formula is accurate from k > 10; here k = 1024.

Statistics of the check: with N estimates e_i ~ N(0, V/k), the MSE estimate mean(e^2) has
relative standard error sqrt(2 / N). The estimates are grouped by seed (pairs under one seed
share the random frequencies), so the standard error is computed from the per-seed means
(a cluster estimate that is valid whatever the within-seed correlation). 60 seeds x 50 pairs
= 3000 estimates give ~2.6-3.2% relative standard error, so the 15% band is about 5 sigma.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash.maps import InputError, create_map


pytestmark = pytest.mark.usefixtures("single_threaded_blas")

K = 1024
DIM = 64
SEEDS = range(60)
PAIRS_PER_SEED = 50


def theory(rho: float, gamma: float) -> tuple[float, float]:
    e = np.exp(-2.0 * gamma * (1.0 - rho))
    V = 0.5 + 0.5 * (1.0 - e) ** 2
    return V, V - 0.25 * e * (3.0 - e * e)


def pairs_with_cosine(rng, count: int, d: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """Unit u, and v = rho u + sqrt(1 - rho^2) w with w a unit vector orthogonal to u."""
    u = rng.standard_normal((count, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    w = rng.standard_normal((count, d))
    w -= np.sum(w * u, axis=1, keepdims=True) * u
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    return u, rho * u + np.sqrt(1.0 - rho**2) * w


def rowwise_dot(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", A, B)


def k_mse(errors: np.ndarray) -> tuple[float, float]:
    """k * MSE over all estimates, and its standard error from the per-seed means (rows)."""
    per_seed = K * np.mean(errors**2, axis=1)
    return float(per_seed.mean()), float(per_seed.std(ddof=1) / np.sqrt(per_seed.size))


@pytest.mark.parametrize("rho", [0.5, 0.9])
@pytest.mark.parametrize("gamma", [1.0, 4.0])
def test_theorem_3_variance_of_normalized_rff(rho, gamma):
    V, V_n = theory(rho, gamma)
    target = np.exp(-gamma * (1.0 - rho))
    rng = np.random.default_rng(1000 + int(10 * rho) + int(gamma))
    shape = (len(SEEDS), PAIRS_PER_SEED)
    nrff_errors, plain_errors, rff_map_errors = np.empty(shape), np.empty(shape), np.empty(shape)
    for row, seed in enumerate(SEEDS):
        U, W = pairs_with_cosine(rng, PAIRS_PER_SEED, DIM, rho)
        np.testing.assert_allclose(rowwise_dot(U, W), rho, atol=1e-12)
        nrff = create_map({"method": "nrff", "input_dim": DIM, "n_components": K, "seed": seed,
                           "params": {"gamma": gamma}})
        both = np.vstack([U, W])  # one transform per map: rows [0, P) are u, [P, 2P) are v
        Z = nrff.transform(both, dtype=np.float64)
        nrff_errors[row] = rowwise_dot(Z[:PAIRS_PER_SEED], Z[PAIRS_PER_SEED:]) - target
        # Plain RFF with the very same frequencies and phases: sqrt(2/k) cos(sqrt(gamma) R u + w),
        # no normalization. Paired with the NRFF estimate, so their difference is precise.
        frequencies, offsets = nrff._parameters_for(np.dtype(np.float64))
        Z = np.sqrt(2.0 / K) * np.cos(both @ frequencies.T + offsets)
        plain_errors[row] = rowwise_dot(Z[:PAIRS_PER_SEED], Z[PAIRS_PER_SEED:]) - target
        # And the public rff map: gaussian exp(-g'||u - v||^2) = exp(-2 g' (1 - rho)) on unit
        # vectors, so g' = gamma / 2 (frequencies N(0, 2 g' I) = sqrt(gamma) N(0, I)).
        rff = create_map({"method": "rff", "input_dim": DIM, "n_components": K, "seed": seed,
                          "params": {"kernel": "gaussian", "gamma": gamma / 2, "variant": "phase"}})
        Z = rff.transform(both, dtype=np.float64)
        rff_map_errors[row] = rowwise_dot(Z[:PAIRS_PER_SEED], Z[PAIRS_PER_SEED:]) - target

    nrff_value, nrff_se = k_mse(nrff_errors)
    plain_value, plain_se = k_mse(plain_errors)
    rff_value, rff_se = k_mse(rff_map_errors)
    gain = K * np.mean(plain_errors**2 - nrff_errors**2, axis=1)
    gain_value, gain_se = gain.mean(), gain.std(ddof=1) / np.sqrt(gain.size)
    print(f"\nrho={rho} gamma={gamma}: V={V:.4f} V_n={V_n:.4f} | NRFF k*MSE={nrff_value:.4f} "
          f"({nrff_value / V_n:.3f} V_n, se {nrff_se / V_n:.1%}) | plain RFF (same frequencies) "
          f"{plain_value:.4f} ({plain_value / V:.3f} V) | rff map {rff_value:.4f} ({rff_value / V:.3f} V, "
          f"se {rff_se / V:.1%}) | paired gain {gain_value:.4f} +- {gain_se:.4f} (theory V - V_n = {V - V_n:.4f})")

    # The design makes the 15% band at least ~4 standard errors wide.
    assert 0.15 * V_n > 3.5 * nrff_se and 0.15 * V > 3.5 * rff_se
    # Theorem 3 and Theorem 2.
    assert abs(nrff_value / V_n - 1.0) < 0.15
    assert abs(rff_value / V - 1.0) < 0.15
    assert abs(plain_value / V - 1.0) < 0.15
    # Normalization helps, by V - V_n. The paired gain is measured precisely even where the
    # theory gain is small (rho = 0.5, gamma = 4: V - V_n = 0.014, 1.4% of V).
    assert gain_value > 3 * gain_se
    assert abs(gain_value - (V - V_n)) < 4 * gain_se + 0.05 * (V - V_n)
    if V / V_n > 1.5:  # a clear gap in theory: the independent rff map shows it as well
        assert rff_value > 1.3 * nrff_value


def test_nrff_estimate_is_the_inner_product_of_normalized_rff():
    """transform = z / ||z|| with z = sqrt(2) cos(sqrt(gamma) R u + w) of the unit-normalized input."""
    d, D, gamma = 7, 32, 2.5
    X = np.random.default_rng(3).standard_normal((5, d)) * np.array([[0.1], [1], [10], [3], [0.5]])
    m = create_map({"method": "nrff", "input_dim": d, "n_components": D, "seed": 4, "params": {"gamma": gamma}})
    frequencies, offsets = m._parameters_for(np.dtype(np.float64))
    Xu = X / np.linalg.norm(X, axis=1, keepdims=True)
    z = np.sqrt(2.0) * np.cos(Xu @ frequencies.T + offsets)
    np.testing.assert_allclose(m.transform(X, dtype=np.float64), z / np.linalg.norm(z, axis=1, keepdims=True),
                               rtol=1e-10, atol=1e-12)
    # Frequencies are sqrt(gamma) times the standard normals of the same seed.
    assert frequencies.shape == (D, d)
    unit = create_map({"method": "nrff", "input_dim": d, "n_components": D, "seed": 4,
                       "params": {"gamma": 1.0}})._parameters_for(np.dtype(np.float64))[0]
    np.testing.assert_allclose(frequencies, np.sqrt(gamma) * unit, rtol=1e-12)
    assert np.all((offsets >= 0) & (offsets < 2 * np.pi))
    estimate = m.kernel(X)
    exact = m.exact_kernel(X)
    cos = Xu @ Xu.T
    np.testing.assert_allclose(exact, np.exp(-gamma * (1 - cos)), rtol=1e-12)
    np.testing.assert_allclose(np.diag(estimate), 1.0, rtol=1e-12)


@pytest.mark.parametrize("variant", ["phase", "cos_sin"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_have_unit_norm(variant, dtype):
    d, D = 12, 256
    rng = np.random.default_rng(5)
    X = rng.standard_normal((40, d)) * rng.uniform(0.01, 100, size=(40, 1))
    X[rng.random(X.shape) < 0.5] = 0.0
    X[:, 0] += 1.0  # no zero rows
    m = create_map({"method": "nrff", "input_dim": d, "n_components": D, "seed": 1,
                    "params": {"gamma": 1.5, "variant": variant}})
    Z = m.transform(X, dtype=dtype)
    assert Z.dtype == dtype and Z.shape == (40, D)
    # float32: a sum of D squares and a square root, each entry rounded: ~D u relative at worst.
    tolerance = D * 2.0**-24 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.linalg.norm(Z.astype(np.float64), axis=1), 1.0, rtol=0, atol=tolerance)
    np.testing.assert_allclose(m.transform(sp.csr_matrix(X), dtype=dtype), Z, rtol=0,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


def test_default_variant_is_phase():
    m = create_map({"method": "nrff", "input_dim": 3, "n_components": 9})
    assert m.spec.params == {"gamma": 1.0, "variant": "phase"}
    assert m.transform(np.ones((1, 3))).shape == (1, 9)


@pytest.mark.parametrize("X", [
    np.zeros((1, 4)),
    np.array([[1.0, 2, 3, 4], [0, 0, 0, 0]]),
    sp.csr_matrix(np.array([[1.0, 2, 3, 4], [0, 0, 0, 0]])),
    sp.csr_matrix((np.array([0.0, 0.0]), np.array([0, 3]), np.array([0, 2])), shape=(1, 4)),  # stored zeros
], ids=["dense", "second-row", "sparse", "sparse-explicit-zeros"])
def test_zero_vector_is_rejected(X):
    m = create_map({"method": "nrff", "input_dim": 4, "n_components": 16})
    with pytest.raises(InputError) as info:
        m.transform(X)
    assert info.value.field == "vectors"
    assert "zero" in info.value.message
    with pytest.raises(InputError) as info:
        m.exact_kernel(np.ones((1, 4)), X)
    assert info.value.field == "y"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scaling_an_input_does_not_change_its_features(dtype):
    d, D = 10, 128
    rng = np.random.default_rng(8)
    X = rng.standard_normal((6, d))
    m = create_map({"method": "nrff", "input_dim": d, "n_components": D, "seed": 2, "params": {"gamma": 3.0}})
    reference = m.transform(X, dtype=dtype)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for scale in (1e-6, 0.37, 1.0, 2.0, 1e3, 1e8):
        np.testing.assert_allclose(m.transform(scale * X, dtype=dtype), reference, rtol=0, atol=tolerance)
    # Different positive scales per row, sparse too.
    scales = np.array([[1e-3], [1], [7], [1e4], [0.5], [42]])
    np.testing.assert_allclose(m.transform(sp.csr_matrix(scales * X), dtype=dtype), reference, rtol=0, atol=tolerance)
    # The kernel only sees directions.
    np.testing.assert_allclose(m.exact_kernel(scales * X), m.exact_kernel(X), rtol=1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("scale, dtype", [(1e-170, np.float64), (1e160, np.float64), (1e-40, np.float32)])
def test_scaling_invariance_at_extreme_magnitudes(scale, dtype):
    m = create_map({"method": "nrff", "input_dim": 3, "n_components": 8})
    x = np.array([[1.0, 2.0, -0.5]])
    np.testing.assert_allclose(m.transform(scale * x, dtype=dtype), m.transform(x, dtype=dtype), rtol=0, atol=1e-5)


def leading_bias(kernel: np.ndarray, samples: int) -> np.ndarray:
    """E[NRFF] - k to first order in 1/D for the phase form (module docstring): -(k - k^5) / (8 D)."""
    return -(kernel - kernel**5) / (8.0 * samples)


@pytest.mark.parametrize("variant", ["phase", "cos_sin"])
def test_normalisation_bias_shrinks_like_one_over_d(variant):
    """NRFF is consistent, not unbiased: normalising by the estimated norms adds a bias of order 1/D,
    -(k - k^5) / (8 D) to first order for the phase form (delta method on A / sqrt(B C); at most 0.067 / D,
    at k = 5^(-1/4)). The cos_sin form's norms are 1 exactly, so it stays unbiased. Checked at D = 16 and
    64: per seed, the NRFF estimate minus plain RFF with the same frequencies and phases (unbiased; the
    difference is the normalisation's effect, with far less variance than either estimate) is projected
    on the predicted bias over pairs of 4 cosines; over seeds that ratio is 1 for the phase form within 4
    standard errors (from the per-seed values, so pairs sharing a seed are accounted for) plus the next
    order's share (0.3 at D = 16, 0.1 at 64), and 0 for cos_sin. At D = 16 the bias is many standard
    errors away from 0, and at D = 64 a bias shrinking only like 1 / sqrt(D) (ratio 2) is excluded."""
    gamma, pairs, seeds = 2.0, 100, 500
    rhos = np.repeat([0.6, 0.75, 0.85, 0.95], pairs)
    kernel = np.exp(-gamma * (1.0 - rhos))  # 0.45 .. 0.90
    rng = np.random.default_rng(77)
    blocks = [pairs_with_cosine(rng, pairs, 16, rho) for rho in (0.6, 0.75, 0.85, 0.95)]
    U, W = np.vstack([u for u, _ in blocks]), np.vstack([w for _, w in blocks])
    both = np.vstack([U, W])
    count = len(rhos)
    for D, slack in ((16, 0.3), (64, 0.1)):
        predicted = leading_bias(kernel, D)
        ratios = np.empty(seeds)
        for seed in range(seeds):
            m = create_map({"method": "nrff", "input_dim": 16, "n_components": D, "seed": seed,
                            "params": {"gamma": gamma, "variant": variant}})
            Z = m.transform(both, dtype=np.float64)
            normalised = rowwise_dot(Z[:count], Z[count:])
            frequencies, offsets = m._parameters_for(np.dtype(np.float64))
            projection = both @ frequencies.T
            if variant == "phase":
                plain_features = np.sqrt(2.0 / D) * np.cos(projection + offsets)
            else:
                plain_features = np.sqrt(2.0 / D) * np.hstack([np.cos(projection), np.sin(projection)])
            plain = rowwise_dot(plain_features[:count], plain_features[count:])
            ratios[seed] = (normalised - plain) @ predicted / (predicted @ predicted)
        ratio, standard_error = ratios.mean(), ratios.std(ddof=1) / np.sqrt(seeds)
        print(f"\n{variant} D={D}: measured bias / -(k - k^5)/(8D) = {ratio:.3f} +- {standard_error:.3f}")
        if variant == "cos_sin":  # the norms are 1 to rounding: normalising changes nothing
            assert abs(ratio) < 1e-6
            continue
        assert abs(ratio - 1.0) < 4 * standard_error + slack
        if D == 16:
            assert ratio > 8 * standard_error  # the bias is there, and seen
        else:  # a bias shrinking like 1 / sqrt(D) instead would give 2 here
            assert ratio + 4 * standard_error < 2.0
