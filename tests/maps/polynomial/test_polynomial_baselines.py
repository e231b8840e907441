"""Random Maclaurin and TensorSketch: the polynomial-kernel baselines of Pennington, Yu & Kumar
(NIPS 2015; docs/methods/polynomial.md).

- Both are unbiased for (q + <x, y>)^p: the mean estimate over seeds is within 4.5 standard
  errors (from the spread over the seeds) of the exact kernel.
- Their features are what the papers define, rebuilt here from the raw random streams: products
  of Rademacher projections of [sqrt(q), x] (Kar & Karnick), and the count sketch of the tensor
  power computed naively term by term (Pham & Pagh).
- Dense and CSR input agree, float32 follows float64, overflow is refused, bad params name the
  field, stored specs round-trip, golden vectors (tests/golden/random_maclaurin.json,
  tests/golden/tensorsketch.json).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash.maps import InputError, SpecError, create_map, randomness
from featurehash.maps.polynomial.tensorsketch import uniform_buckets

METHODS = ("random_maclaurin", "tensorsketch")


def make_map(method, d, D, seed=0, **params):
    return create_map({"method": method, "input_dim": d, "n_components": D, "seed": seed, "params": params})


def signs_from(words):
    return 1.0 - 2.0 * (words >> np.uint64(63)).astype(np.float64)


# ---------------------------------------------------------------------------------------
# (a) unbiased for (q + <x, y>)^p
# ---------------------------------------------------------------------------------------

# Over S seeds the mean of K^_xy has standard error sd / sqrt(S), sd measured across the seeds.
# One Random Maclaurin product is heavy-tailed (measured kurtosis up to 26 at p = 3): with D = 16
# the sample sd of 400 seeds ran low and gave |z| = 5.2 on an entry that 4000 seeds put at 1.6.
# Each estimate averages D products, dividing the excess kurtosis by D, so D = 128; TensorSketch
# at p = 3 still showed |z| = 3.8 with 400 seeds on an entry that 6000 seeds put at 1.3, so 1000
# seeds. 15 entries per case, 12 cases: at 4.5 standard errors a false alarm has probability
# ~1e-3 for normal means (heavier tails make it larger, hence the margins above).
UNBIASED_SEEDS = range(1000)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("degree, coef0", [(1, 0.0), (2, 1.0), (3, 0.5), (3, 0.0), (4, 2.0), (2, 0.0)])
def test_estimate_is_unbiased(method, degree, coef0):
    rng = np.random.default_rng(13)
    d, D = 5, 128
    X = 0.6 * rng.standard_normal((5, d))
    estimates = np.array([make_map(method, d, D, seed, degree=degree, coef0=coef0).kernel(X)
                          for seed in UNBIASED_SEEDS])
    exact = (coef0 + X @ X.T) ** degree
    np.testing.assert_allclose(make_map(method, d, D, degree=degree, coef0=coef0).exact_kernel(X), exact, rtol=1e-12)
    upper = np.triu_indices(len(X))
    mean = estimates.mean(axis=0)[upper]
    standard_error = estimates.std(axis=0, ddof=1)[upper] / np.sqrt(len(UNBIASED_SEEDS))
    z = (mean - exact[upper]) / standard_error
    print(f"{method} p={degree} q={coef0}: max |z| = {np.abs(z).max():.2f} over {z.size} entries, "
          f"relative sd of one estimate {np.median(estimates.std(axis=0)[upper] / np.abs(exact[upper])):.2f}")
    assert np.all(standard_error > 0)
    assert np.all(np.abs(z) < 4.5)
    if method == "random_maclaurin":
        # Kar & Karnick's variance: one product has Var = prod_k E[<w,a>^2 <w,b>^2] - <a,b>^(2p) with
        # E[<w,a>^2 <w,b>^2] = |a|^2 |b|^2 + 2 <a,b>^2 - 2 sum_i a_i^2 b_i^2 for Rademacher w. The
        # sample variance of 1000 seeds has a relative sd of ~sqrt((kurtosis - 1) / 1000) < 10%.
        A = augmented(X, coef0)
        gram, squares = A @ A.T, (A**2) @ (A**2).T
        moment = np.outer(np.diag(gram), np.diag(gram)) + 2 * gram**2 - 2 * squares
        theory = (moment**degree - gram ** (2 * degree)) / D
        ratio = estimates.var(axis=0, ddof=1)[upper] / theory[upper]
        print(f"  sample / theoretical variance: {ratio.min():.3f} .. {ratio.max():.3f}")
        assert np.all((ratio > 0.7) & (ratio < 1.4))


# ---------------------------------------------------------------------------------------
# (b) the features are the papers' constructions, from the raw streams
# ---------------------------------------------------------------------------------------

def augmented(X, coef0):
    return np.hstack([np.full((X.shape[0], 1), np.sqrt(coef0)), X])


@pytest.mark.parametrize("degree, coef0", [(1, 1.0), (3, 0.7), (4, 0.0)])
def test_random_maclaurin_features_are_products_of_rademacher_projections(degree, coef0):
    """z_j(x) = D^(-1/2) prod_k <w_jk, [sqrt(q), x]>, w_jk the signs of stream k (row i = coordinate)."""
    d, D, seed = 6, 10, 17
    X = np.random.default_rng(1).standard_normal((4, d))
    m = make_map("random_maclaurin", d, D, seed, degree=degree, coef0=coef0)
    expected = np.ones((4, D))
    for k in range(degree):
        W = signs_from(randomness.raw_words(seed, f"random_maclaurin.signs.{k}", (d + 1) * D)).reshape(d + 1, D)
        expected *= augmented(X, coef0) @ W
    expected /= np.sqrt(D)
    np.testing.assert_allclose(m.transform(X, dtype=np.float64), expected, rtol=1e-12, atol=1e-12)
    # A map of degree p + 1 shares its first p factors (one stream per factor).
    more = make_map("random_maclaurin", d, D, seed, degree=degree + 1, coef0=coef0)
    np.testing.assert_array_equal(more._parameters_for(np.dtype(np.float64))[0][:degree],
                                  m._parameters_for(np.dtype(np.float64))[0])


@pytest.mark.parametrize("degree, coef0, D", [(1, 1.0, 8), (2, 0.5, 7), (3, 2.0, 16), (3, 0.0, 5)])
def test_tensorsketch_is_the_count_sketch_of_the_tensor_power(degree, coef0, D):
    """TS(x) = sum over (i_1..i_p) of prod_k s_k(i_k) x'_{i_k} at bucket sum_k h_k(i_k) mod D."""
    d, seed = 4, 23
    X = np.random.default_rng(2).standard_normal((3, d))
    m = make_map("tensorsketch", d, D, seed, degree=degree, coef0=coef0)
    buckets = [uniform_buckets(randomness.raw_words(seed, f"tensorsketch.buckets.{k}", d + 1), D)
               for k in range(degree)]
    signs = [signs_from(randomness.raw_words(seed, f"tensorsketch.signs.{k}", d + 1)) for k in range(degree)]
    Xa = augmented(X, coef0)
    expected = np.zeros((3, D))
    for index in itertools.product(range(d + 1), repeat=degree):
        bucket = sum(buckets[k][i] for k, i in enumerate(index)) % D
        sign = np.prod([signs[k][i] for k, i in enumerate(index)])
        expected[:, bucket] += sign * np.prod(Xa[:, list(index)], axis=1)
    np.testing.assert_allclose(m.transform(X, dtype=np.float64), expected, rtol=1e-10, atol=1e-12)
    # The count sketches themselves.
    for k, counts in enumerate(m.count_sketches(X)):
        naive = np.zeros((3, D))
        for i in range(d + 1):
            naive[:, buckets[k][i]] += signs[k][i] * Xa[:, i]
        np.testing.assert_allclose(counts, naive, rtol=1e-12, atol=1e-15)


def test_buckets_are_uniform():
    """Multiply-shift buckets: chi-square test of 200 000 draws into 37 buckets (p ~ 1e-4 cut)."""
    counts = np.bincount(uniform_buckets(randomness.raw_words(5, "test.buckets", 200_000), 37), minlength=37)
    expected = 200_000 / 37
    statistic = ((counts - expected) ** 2 / expected).sum()
    assert counts.size == 37 and statistic < 80  # chi2(36): mean 36, sd 8.5; P[> 80] ~ 3e-5


# ---------------------------------------------------------------------------------------
# (c) numerics: sparse, precision, overflow, sizes
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_dense_and_sparse_agree(method):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((50, 40)) / 4
    X[rng.random(X.shape) < 0.8] = 0.0
    X[7] = 0.0  # an all-zero row is fine here: its features are those of [sqrt(q), 0]
    m = make_map(method, 40, 64, seed=3, degree=3, coef0=1.0)
    Z64 = m.transform(X, dtype=np.float64)
    np.testing.assert_allclose(m.transform(sp.csr_matrix(X), dtype=np.float64), Z64, rtol=1e-12, atol=1e-12)
    Z32 = m.transform(sp.csr_matrix(X))
    assert Z32.dtype == np.float32
    scale = np.abs(Z64).max()
    np.testing.assert_allclose(Z32, Z64, rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(m.kernel(sp.csr_matrix(X)), m.kernel(X), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.exact_kernel(sp.csr_matrix(X)), (1.0 + X @ X.T) ** 3, rtol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_overflow_is_refused(method):
    m = make_map(method, 3, 8, degree=10, coef0=1.0)
    X = np.full((2, 3), 1e5)
    with pytest.raises(InputError) as info:
        m.transform(X)  # float32 features of size ~(3e10)^10
    assert info.value.field == "vectors" and "float64" in info.value.message
    assert np.all(np.isfinite(m.transform(X, dtype=np.float64)))
    with pytest.raises(InputError):
        m.transform(np.full((1, 3), 1e39))  # beyond float32 before any product


@pytest.mark.parametrize("method", METHODS)
def test_parameter_bytes_are_as_planned(method):
    m = make_map(method, 33, 100, degree=4)
    planned = m.planned_nbytes
    assert m.nbytes == 0
    assert m.materialize().nbytes == planned
    expected = 4 * 4 * 34 * 100 if method == "random_maclaurin" else 4 * (12 * 33 + 4)
    assert planned == expected


# ---------------------------------------------------------------------------------------
# (d) spec
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_defaults_and_round_trip(method):
    m = make_map(method, 6, 20, seed=5)
    assert m.spec.params == {"degree": 3, "coef0": 1.0}
    X = np.random.default_rng(0).standard_normal((3, 6))
    again = create_map(json.loads(json.dumps(m.describe())))
    assert again.spec.id == m.spec.id
    np.testing.assert_array_equal(again.transform(X), m.transform(X))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("params, field", [
    ({"degree": 0}, "params.degree"),
    ({"degree": 1.5}, "params.degree"),
    ({"degree": True}, "params.degree"),
    ({"degree": 101}, "params.degree"),
    ({"coef0": -1.0}, "params.coef0"),
    ({"coef0": float("nan")}, "params.coef0"),
    ({"coef0": float("inf")}, "params.coef0"),
    ({"bias": 4.0}, "params.bias"),
])
def test_bad_params_name_the_field(method, params, field):
    with pytest.raises(SpecError) as info:
        make_map(method, 4, 8, **params)
    assert info.value.field == field, info.value


# ---------------------------------------------------------------------------------------
# (e) golden vectors
# ---------------------------------------------------------------------------------------

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"
GOLDEN = {method: json.loads((GOLDEN_DIR / f"{method}.json").read_text())["cases"] for method in METHODS}
CASES = [(method, name) for method in METHODS for name in GOLDEN[method]]
FLOAT = {"rtol": 1e-5, "atol": 1e-6}
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")


@pytest.mark.parametrize("method, name", CASES)
def test_golden(method, name):
    case = GOLDEN[method][name]
    stored = case["spec"]
    assert create_map(case["request"]).spec.id == stored["id"]
    m = create_map({key: stored[key] for key in (*SPEC_FIELDS, "id")})
    X = np.array(case["input"], dtype=np.float64)
    expected = case["expected"]
    np.testing.assert_allclose(m.transform(X, dtype=np.float64), expected["transform_float64"], **FLOAT)
    np.testing.assert_allclose(m.transform(X), expected["transform_float32"], **FLOAT)
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], rtol=1e-12, atol=1e-15)
    if method == "random_maclaurin":
        projections, constants = m._parameters_for(np.dtype(np.float64))
        assert projections[:, :2].tolist() == expected["signs_head"]
        np.testing.assert_allclose(constants[:, :5], expected["constants_head"], rtol=1e-15, atol=0)
    else:
        sketches = m._parameters_for(np.dtype(np.float64))
        assert [matrix.indices.tolist() for matrix, _, _ in sketches] == expected["buckets"]
        assert [matrix.data.tolist() for matrix, _, _ in sketches] == expected["signs"]
        assert [bucket for _, bucket, _ in sketches] == expected["constant_buckets"]
        np.testing.assert_allclose([value for _, _, value in sketches], expected["constant_values"], rtol=1e-15)
