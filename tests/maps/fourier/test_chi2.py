"""Additive and skewed chi-squared maps (featurehash.maps.fourier.additive_chi2, .skewed_chi2): scikit-learn's
features to float rounding, estimates against the exact kernels within the stated error, input domains."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import kstest
from sklearn.kernel_approximation import AdditiveChi2Sampler, SkewedChi2Sampler
from sklearn.metrics.pairwise import additive_chi2_kernel, chi2_kernel

from featurehash import InputError, SpecError, create_map
from featurehash.maps import kernels
from featurehash.maps import randomness
from featurehash.maps.fourier.skewed_chi2 import hyperbolic_secant
from featurehash.sklearn import AdditiveChi2Features, SkewedChi2Features


def histograms(n=60, d=12, seed=0, zeros=0.3):
    rng = np.random.default_rng(seed)
    X = rng.gamma(0.7, 1.0, size=(n, d))
    X[rng.random((n, d)) < zeros] = 0.0
    X[:, 0] += 0.1  # no all-zero row
    return X


def additive_map(d, steps=2, interval=None):
    params = {"sample_steps": steps, **({} if interval is None else {"sample_interval": interval})}
    return create_map({"method": "additive_chi2", "input_dim": d, "n_components": d * (2 * steps - 1),
                       "params": params})


# -- exact kernels -------------------------------------------------------------------------

def test_exact_kernels_agree_with_scikit_learn_and_the_definitions():
    X, Y = histograms(8, 5, 1), histograms(6, 5, 2)
    np.testing.assert_allclose(kernels.chi2(X, Y, 0.7), chi2_kernel(X, Y, gamma=0.7), rtol=1e-12)
    # scikit-learn's additive_chi2_kernel is -sum (x-y)^2/(x+y) = 2 sum 2xy/(x+y) - sum x - sum y.
    reference = (additive_chi2_kernel(X, Y) + X.sum(1)[:, None] + Y.sum(1)[None, :]) / 2
    np.testing.assert_allclose(kernels.additive_chi2(X, Y), reference, rtol=1e-12, atol=1e-13)
    c = 0.4
    direct = np.prod(2 * np.sqrt(X[:, None, :] + c) * np.sqrt(Y[None, :, :] + c)
                     / (X[:, None, :] + Y[None, :, :] + 2 * c), axis=2)
    np.testing.assert_allclose(kernels.skewed_chi2(X, Y, c), direct, rtol=1e-12)


# -- additive chi2 -------------------------------------------------------------------------

@pytest.mark.parametrize("steps, interval", [(1, None), (2, None), (3, None), (4, 0.3), (2, 0.7)])
def test_additive_features_equal_scikit_learns(steps, interval):
    X = histograms(40, 9, steps)
    m = additive_map(9, steps, interval)
    reference = AdditiveChi2Sampler(sample_steps=steps, sample_interval=interval).fit(X)
    expected = reference.transform(X)
    np.testing.assert_allclose(m.transform(X, dtype=np.float64), expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(m.transform(X), expected, rtol=2e-6, atol=1e-7)  # float32 rounding
    sparse = m.transform_sparse(sp.csr_matrix(X), dtype=np.float64)
    assert sp.isspmatrix_csr(sparse) and sparse.nnz == np.count_nonzero(X) * (2 * steps - 1)
    np.testing.assert_allclose(sparse.toarray(), reference.transform(sp.csr_matrix(X)).toarray(), rtol=1e-14,
                               atol=1e-15)
    np.testing.assert_array_equal(m.transform(sp.csr_matrix(X), dtype=np.float64), m.transform(X, dtype=np.float64))
    estimator = AdditiveChi2Features(sample_steps=steps, sample_interval=interval).fit(X)
    assert sp.issparse(estimator.transform(sp.csr_matrix(X)))
    np.testing.assert_allclose(estimator.transform(X), expected, rtol=1e-14, atol=1e-15)


def _additive_error_bound(x, y, steps, interval):
    """|estimate - k| <= sum_i sqrt(x_i y_i) (aliasing + truncation): by Poisson summation the sampled
    spectrum L sum_j sech(pi j L) cos(j L lambda) equals sum_k sech((lambda + 2 pi k / L) / 2)."""
    both = (x > 0) & (y > 0)
    root = np.sqrt(x[both] * y[both])
    lam = np.log(y[both]) - np.log(x[both])
    shifts = 2 * np.pi * np.arange(1, 40) / interval  # terms beyond are below 1e-30
    aliasing = (1 / np.cosh((lam[:, None] + shifts) / 2) + 1 / np.cosh((lam[:, None] - shifts) / 2)).sum(1)
    truncation = 2 * interval * (1 / np.cosh(np.pi * interval * np.arange(steps, steps + 200))).sum()
    return float((root * (aliasing + truncation)).sum())


@pytest.mark.parametrize("steps, interval", [(2, None), (3, None), (6, 0.25)])
def test_additive_estimate_is_within_the_sampling_error_of_the_exact_kernel(steps, interval):
    X = histograms(30, 10, 7)
    m = additive_map(10, steps, interval)
    L = m.params.sample_interval
    estimate, exact = m.kernel(X), m.exact_kernel(X)
    bounds = np.array([[_additive_error_bound(x, y, steps, L) for y in X] for x in X])
    error = np.abs(estimate - exact)
    assert np.all(error <= bounds + 1e-12)
    assert error.max() > 0.05 * bounds.max()  # the bound is the error's size, not a vacuous one
    # More steps at a finer interval: the error shrinks as the bound says.
    if steps == 6:
        assert error.max() < 0.02 * exact.max()


def test_additive_refuses_negative_values_and_unsized_requests():
    m = additive_map(4)
    with pytest.raises(InputError) as bad:
        m.transform([[0.5, -0.1, 0.0, 1.0]])
    assert bad.value.field == "vectors" and "Negative values in data" in bad.value.message
    with pytest.raises(InputError):
        m.transform_sparse(sp.csr_matrix([[0.5, -0.1, 0.0, 1.0]]))
    with pytest.raises(ValueError, match="Negative values in data passed to"):
        AdditiveChi2Features().fit(-histograms(5, 3))
    with pytest.raises(SpecError) as unsized:
        create_map({"method": "additive_chi2", "input_dim": 4, "n_components": 10})
    assert unsized.value.field == "n_components" and "must be 12" in unsized.value.message
    with pytest.raises(SpecError) as no_interval:
        create_map({"method": "additive_chi2", "input_dim": 4, "n_components": 36, "params": {"sample_steps": 5}})
    assert no_interval.value.field == "params.sample_interval"


def test_additive_width_may_be_left_out_and_keeps_the_id():
    """n_components has one legal value; a request may omit it and gets the spec, and id, of one that gave it
    (ids are pinned by tests/golden). Every other method still requires it."""
    for steps, width in ((1, 4), (2, 12), (3, 20)):
        given = create_map({"method": "additive_chi2", "input_dim": 4, "n_components": width,
                            "params": {"sample_steps": steps}})
        derived = create_map({"method": "additive_chi2", "input_dim": 4, "params": {"sample_steps": steps}})
        assert derived.spec == given.spec and derived.spec.id == given.spec.id
        assert derived.transform(histograms(3, 4)).shape == (3, width)
    with pytest.raises(SpecError) as missing:
        create_map({"method": "skewed_chi2", "input_dim": 4})
    assert missing.value.field == "n_components"
    with pytest.raises(SpecError) as no_dim:
        create_map({"method": "additive_chi2"})
    assert no_dim.value.field == "input_dim"


# -- skewed chi2 ---------------------------------------------------------------------------

def test_skewed_frequencies_follow_the_hyperbolic_secant_law():
    w = hyperbolic_secant(randomness.raw_words(3, "test", 20000))
    # CDF of the density sech(pi w): (2 / pi) atan(exp(pi w)).
    assert kstest(w, lambda t: 2 / np.pi * np.arctan(np.exp(np.pi * t))).pvalue > 1e-3


@pytest.mark.parametrize("skewedness", [0.3, 1.0, 5.0])
def test_skewed_estimate_is_unbiased_within_its_variance(skewedness):
    X = histograms(40, 6, 11)
    D = 4096
    maps = [create_map({"method": "skewed_chi2", "input_dim": 6, "n_components": D, "seed": seed,
                        "params": {"skewedness": skewedness}}) for seed in range(4)]
    exact = maps[0].exact_kernel(X)
    errors = np.stack([m.kernel(X) - exact for m in maps])
    variance_bound = (1.5 - exact**2) / D  # each term 2 cos(w.u + b) cos(w.v + b) has E[.^2] <= 3/2
    # Mean squared error over pairs and seeds against the mean variance bound (chi-square-ish, 4 x 1600
    # dependent terms: 1.3 leaves room for the dependence), and no pair beyond 6 sigma.
    assert np.mean(errors**2) <= 1.3 * np.mean(variance_bound)
    assert np.all(np.abs(errors) <= 6 * np.sqrt(variance_bound))
    # Unbiased: the average over 4 seeds is closer than one seed by about 1/2.
    assert np.sqrt(np.mean(errors.mean(0) ** 2)) < 0.7 * np.sqrt(np.mean(errors**2))


def test_skewed_error_is_scikit_learns_size():
    X = histograms(60, 8, 5)
    exact = kernels.skewed_chi2(X, X, 1.0)
    ours = [create_map({"method": "skewed_chi2", "input_dim": 8, "n_components": 512, "seed": s}).kernel(X)
            for s in range(5)]
    theirs = []
    for s in range(5):
        Z = SkewedChi2Sampler(skewedness=1.0, n_components=512, random_state=s).fit_transform(X)
        theirs.append(Z @ Z.T)
    rmse = lambda estimates: np.sqrt(np.mean([(e - exact) ** 2 for e in estimates]))  # noqa: E731
    assert 0.7 < rmse(ours) / rmse(theirs) < 1.4


def test_skewed_refuses_entries_at_or_below_minus_skewedness():
    m = create_map({"method": "skewed_chi2", "input_dim": 3, "n_components": 8, "params": {"skewedness": 0.5}})
    m.transform([[-0.49, 0.0, 2.0]])
    with pytest.raises(InputError) as bad:
        m.transform([[-0.5, 0.0, 2.0]])
    assert bad.value.field == "vectors" and "smaller than -skewedness" in bad.value.message
    with pytest.raises(ValueError):
        SkewedChi2Features(skewedness=0.5, random_state=0).fit(histograms(5, 3)).transform(-histograms(5, 3) - 1)


def test_skewed_sparse_input_gives_the_dense_features():
    X = histograms(20, 7, 2)
    m = create_map({"method": "skewed_chi2", "input_dim": 7, "n_components": 32, "seed": 4})
    np.testing.assert_allclose(m.transform(sp.csr_matrix(X)), m.transform(X), rtol=1e-6, atol=1e-7)
