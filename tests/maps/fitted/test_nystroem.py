"""Nystroem features (featurehash.maps.fitted.nystroem): the Nystroem estimate's exact properties for every kernel,
randomly pivoted Cholesky's trace bound, scikit-learn parity of accuracy, the stored fit, limits, and the
golden vectors of tests/golden/kernel_approximation.json (all three kernel_approximation methods)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from feature_promises import assert_dense_features_match
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import Nystroem

from featurehash import InputError, SpecError, create_map
from featurehash.maps import kernels
from featurehash.maps import resolve_spec
from featurehash.maps.fitted._fitted_kernels import exp_in_place
from featurehash.maps.fitted import _nystroem_fit as fit
from featurehash.maps.fitted._nystroem_fit import angle_of, kernel_column, paired_kernel
from featurehash.maps.numerics import _portable_math as pm
from featurehash.maps.fitted.nystroem import KERNEL_PARAMETERS, MAX_STORED_NUMBERS

GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "golden" / "kernel_approximation.json").read_text())
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")
KERNEL_PARAMS = {"gaussian": {"gamma": 0.2}, "laplacian": {"gamma": 0.1}, "chi2": {"gamma": 0.3},
                 "matern": {"gamma": 0.2, "nu": 2.5},
                 "polynomial": {"gamma": 0.2, "degree": 3, "coef0": 0.5}, "gmm": {"power": 0.6}, "arccos0": {},
                 "arccos1": {}, "arccos2": {}}


def sample(n=120, d=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.gamma(1.0, 1.0, size=(n, d))
    X[rng.random((n, d)) < 0.2] = 0.0
    return X


def nystroem(X, m, kernel="gaussian", seed=0, **params):
    return create_map({"method": "nystroem", "input_dim": X.shape[1], "n_components": m, "seed": seed,
                       "params": {"kernel": kernel, **params, "fit_sample": X.tolist()}})


def test_every_kernel_featurehash_computes_exactly_is_offered():
    assert set(KERNEL_PARAMETERS) == set(KERNEL_PARAMS)


@pytest.mark.parametrize("kernel", sorted(KERNEL_PARAMS))
def test_portable_kernel_equals_the_exact_kernel(kernel):
    X, Y = sample(30, 6, 1), sample(30, 6, 2)
    X[3] = 0.0  # a zero row: arc-cosine's convention, GMM's 0/0
    Y[5] = 0.0
    m = nystroem(X, 4, kernel, **KERNEL_PARAMS[kernel])
    exact = m.exact_kernel(X, Y)
    portable = np.stack([paired_kernel(kernel, m.params, X, y) for y in Y], axis=1)
    np.testing.assert_allclose(portable, exact, rtol=1e-12, atol=1e-13 * np.abs(exact).max())


@pytest.mark.parametrize("kernel", sorted(KERNEL_PARAMS))
def test_the_fits_kernel_column_has_the_bits_of_the_portable_kernel(kernel):
    """The fit's columns (compiled, rows side by side) are `paired_kernel`'s numbers bit for bit: each row's sum
    in index order, the same exp and power (odd d: the loop's remainder too)."""
    X = sample(37, 9, 3)
    m = nystroem(X, 4, kernel, **KERNEL_PARAMS[kernel])
    for pivot in (0, 7, 36):
        column = kernel_column(kernel, m.params, X, np.ascontiguousarray(X.T), pivot)
        assert column.tobytes() == paired_kernel(kernel, m.params, X, X[pivot]).tobytes()


@pytest.mark.parametrize("rule", ["rpcholesky", "uniform"])
@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "polynomial", "chi2"])
def test_the_compiled_fit_loop_has_the_bits_of_the_reference_loop(kernel, rule, monkeypatch):
    """The one-call compiled fit (`_fitted_kernels.pivoted_cholesky`) against the Python loop over `paired_kernel`
    columns that the other kernels take: the same landmarks and the same L^-1 bit for bit, rejected candidates
    (duplicate rows, a rank-deficient polynomial sample) included."""
    X = sample(150, 7, 8)
    X[10:20] = X[0]
    if kernel == "polynomial":
        X = np.repeat(X[:, :2], 3, axis=1)[:, :7]
    params = nystroem(X, 2, kernel, **KERNEL_PARAMS[kernel]).params
    fitted = fit.fit_landmarks(X, kernel, params, 60, rule, 3)
    monkeypatch.setattr(fit, "_COMPILED_COLUMNS", {})
    reference = fit.fit_landmarks(X, kernel, params, 60, rule, 3)
    assert np.array_equal(fitted[0], reference[0]) and fitted[1].tobytes() == reference[1].tobytes()


def test_the_fits_exp_has_the_bits_of_the_portable_exp():
    """Powers of two by a table instead of ldexp: the same bits, subnormal results and overflow included."""
    x = np.concatenate([np.random.default_rng(5).uniform(-760.0, 720.0, 20000),
                        [0.0, -0.0, -745.2, -744.4, -708.4, 709.78, 709.79, 710.0, 711.0, -746.0, -1e300, 1e300]])
    y = x.copy()
    exp_in_place(y)
    assert y.tobytes() == pm.exp(x).tobytes()


def test_portable_arctangent_is_within_a_few_ulp():
    rng = np.random.default_rng(3)
    a, b = np.abs(rng.standard_normal(10000)), np.abs(rng.standard_normal(10000))
    a[:3], b[:3] = (0.0, 1.0, 0.0), (1.0, 0.0, 0.0)
    np.testing.assert_allclose(angle_of(a, b), np.arctan2(a, b), rtol=1e-15, atol=1e-300)  # 4.5 ulp


@pytest.mark.parametrize("kernel", sorted(KERNEL_PARAMS))
def test_nystroem_is_exact_on_the_landmarks_and_never_above_the_kernel(kernel):
    """K^ = K_nS K_SS^-1 K_Sn interpolates K on the landmarks and K - K^ is positive semidefinite (it is the
    Gram matrix of the residuals of projecting k(x, .) onto the landmarks' span)."""
    X = sample(120, 7, 4)
    m = nystroem(X, 30, kernel, seed=5, **KERNEL_PARAMS[kernel])
    S = np.array(m.params.landmarks)
    assert S.shape == (30, 7)
    assert all(any(np.array_equal(s, x) for x in X) for s in S)  # copied rows of the sample
    scale = np.abs(m.exact_kernel(X)).max()
    np.testing.assert_allclose(m.kernel(S), m.exact_kernel(S), rtol=0, atol=1e-9 * scale)
    residual = m.exact_kernel(X) - m.kernel(X)
    assert np.linalg.eigvalsh(residual).min() >= -1e-9 * scale
    Z32 = m.transform(X)
    assert Z32.dtype == np.float32 and Z32.shape == (120, 30)
    np.testing.assert_allclose(Z32, m.transform(X, dtype=np.float64), rtol=0, atol=2e-6 * np.abs(Z32).max())


def test_randomly_pivoted_cholesky_meets_its_trace_bound():
    """Chen, Epperly, Tropp, Webber (thm 5.1): E tr(K - K^) <= (1 + eps) tr(K - [K]_r) once
    m >= r / eps + r log(1 / (eps eta)), eta = tr(K - [K]_r) / tr K. With eps = 1, every r meeting that
    bound; one draw per seed, so the expectation's bound is asked of the mean of 3 seeds."""
    X = load_digits().data[:500] / 16.0
    K = kernels.gaussian(X, X, 0.05)
    eigenvalues = np.sort(np.linalg.eigvalsh(K))[::-1]
    for m in (20, 60):
        errors = [np.trace(K - nystroem(X, m, gamma=0.05, seed=seed).kernel(X)) for seed in range(3)]
        tails = [eigenvalues[r:].sum() for r in range(1, m)
                 if r + r * np.log(eigenvalues.sum() / eigenvalues[r:].sum()) <= m]
        assert tails and np.mean(errors) <= 2 * min(tails)


def test_held_out_error_is_no_worse_than_scikit_learns():
    """On digits (500 fitting rows, 1000 held out, the issue's setting) at D = 64 and 128: mean over 3
    seeds of the held-out kernel RMSE, against scikit-learn's Nystroem (uniform landmarks)."""
    X = load_digits().data / 16.0
    fit, held = X[:500], X[500:1500]
    exact = kernels.gaussian(held, held, 0.05)
    for D in (64, 128):
        ours = [np.sqrt(np.mean((nystroem(fit, D, gamma=0.05, seed=s).kernel(held) - exact) ** 2)) for s in range(3)]
        theirs = []
        for s in range(3):
            Z = Nystroem(gamma=0.05, n_components=D, random_state=s).fit(fit).transform(held)
            theirs.append(np.sqrt(np.mean((Z @ Z.T - exact) ** 2)))
        assert np.mean(ours) <= np.mean(theirs)


def test_uniform_sampling_matches_scikit_learns_error():
    """The same rule as scikit-learn's (uniform landmarks): the same error, seed for seed on average."""
    X = load_digits().data / 16.0
    fit, held = X[:500], X[500:1000]
    exact = kernels.gaussian(held, held, 0.05)

    def rmse(estimate):
        return np.sqrt(np.mean((estimate - exact) ** 2))

    ours = np.mean([rmse(nystroem(fit, 64, gamma=0.05, seed=s, sampling="uniform").kernel(held)) for s in range(4)])
    transforms = [Nystroem(gamma=0.05, n_components=64, random_state=s).fit(fit).transform(held) for s in range(4)]
    theirs = np.mean([rmse(Z @ Z.T) for Z in transforms])
    assert 0.8 < ours / theirs < 1.25


def test_the_spec_stores_the_fit_and_rebuilds_without_data():
    X = sample(80, 5, 6)
    m = nystroem(X, 12, "laplacian", seed=3, gamma=0.4)
    stored = m.spec.to_dict()
    assert stored["params"]["fit_sample"] is None
    assert [len(row) for row in stored["params"]["normalization"]] == list(range(1, 13))
    assert nystroem(X, 12, "laplacian", seed=3, gamma=0.4).spec.id == m.spec.id
    assert nystroem(X, 12, "laplacian", seed=4, gamma=0.4).spec.id != m.spec.id
    rebuilt = create_map(stored)
    assert rebuilt.spec.id == m.spec.id
    np.testing.assert_array_equal(rebuilt.transform(X), m.transform(X))
    tampered = json.loads(json.dumps(stored))
    tampered["params"]["normalization"][2][1] += 1e-9
    with pytest.raises(SpecError) as stale:
        resolve_spec(tampered)
    assert stale.value.field == "id"


def test_fewer_landmarks_than_asked_when_the_sample_has_lower_rank():
    X = np.array([[1.0, 0.0, 2.0], [1.0, 0.0, 2.0], [0.0, 3.0, 1.0], [1.0, 0.0, 2.0]])
    m = nystroem(X, 6, gamma=0.5)
    assert len(m.params.landmarks) == 2
    Z = m.transform(X, dtype=np.float64)
    assert Z.shape == (4, 6) and not Z[:, 2:].any()
    np.testing.assert_allclose(m.kernel(X), m.exact_kernel(X), atol=1e-12)


def test_bad_requests_name_their_field():
    X = sample(20, 4, 7)
    cases = [
        ({"kernel": "arccos1", "gamma": 0.5, "fit_sample": X.tolist()}, 8, "params.gamma"),
        ({"kernel": "gaussian", "power": 2.0, "fit_sample": X.tolist()}, 8, "params.power"),
        ({"kernel": "gaussian"}, 8, "params.fit_sample"),
        ({"fit_sample": [[1.0, 2.0]]}, 8, "params.fit_sample"),
        ({"kernel": "chi2", "fit_sample": (-X).tolist()}, 8, "params.fit_sample"),
        ({"fit_sample": X.tolist()}, 1500, "n_components"),
        ({"fit_sample": X.tolist(), "landmarks": X[:2].tolist(), "normalization": [[1.0], [0.5, 1.0]]}, 8,
         "params.fit_sample"),
        ({"landmarks": X[:2].tolist(), "normalization": [[1.0], [0.5]]}, 8, "params.normalization"),
        ({"landmarks": X[:2].tolist()}, 8, "params.landmarks"),
    ]
    for params, m, field in cases:
        with pytest.raises(SpecError) as refused:
            create_map({"method": "nystroem", "input_dim": 4, "n_components": m, "params": params})
        assert refused.value.field == field, (params, refused.value)
    assert 1500 * 4 + 1500 * 1501 // 2 > MAX_STORED_NUMBERS
    chi2_map = nystroem(X, 4, "chi2")
    with pytest.raises(InputError) as negative:
        chi2_map.transform(-X)
    assert negative.value.field == "vectors"


def test_features_outside_the_range_are_refused_though_the_gaussian_skips_the_check(monkeypatch):
    """The dense Gaussian skips the finiteness check of its features when they are bounded (kernel values in
    [0, 1] and the largest absolute row sum of L^-1 inside the range): what it may skip it must not miss."""
    X = sample(30, 4, 8)
    m = nystroem(X, 6, gamma=0.3)
    assert m._features_into(m._working_copy(X, np.float64), np.empty((30, 6))) is True
    rows = m.spec.params["normalization"]
    huge = {key: m.spec.params[key] for key in ("gamma", "landmarks")}
    huge["normalization"] = [row[:-1] + [row[-1] * 1e39] for row in rows]   # float32's range is ~3.4e38
    scaled_up = create_map({"method": "nystroem", "input_dim": 4, "n_components": 6, "params": huge})
    assert np.isfinite(scaled_up.transform(X, dtype=np.float64)).all()
    with pytest.raises(InputError, match="overflow float32"):
        scaled_up.transform(X)
    extreme = X.copy()
    extreme[3] = 1e308   # 2 gamma <x, s> and gamma |x|^2 overflow: the exponent is NaN, the check names the row
    with pytest.raises(InputError, match="row 3:"):
        m.transform(extreme, dtype=np.float64)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
def test_threads_sharing_a_batch_give_the_features_of_one_thread(kernel, monkeypatch):
    import featurehash.maps.base as base_module
    import featurehash.maps.fitted.nystroem as nystroem_module

    X = sample(400, 6, 9)
    m = nystroem(X[:200], 40, kernel, gamma=0.2)
    alone64, alone32 = np.empty((400, 40)), np.empty((400, 40), np.float32)
    m.features_into(X, alone64, threads=1)
    m.features_into(X.astype(np.float32), alone32, threads=1)
    monkeypatch.setattr(nystroem_module, "BLOCK_ELEMENTS", 23 * 40)   # several blocks per chunk
    monkeypatch.setattr(base_module, "SHARED_MIN_ELEMENTS", 60 * 40)  # many chunks
    for threads in (2, 3):
        shared64, shared32 = np.empty_like(alone64), np.empty_like(alone32)
        m.features_into(X, shared64, threads=threads)
        m.features_into(X.astype(np.float32), shared32, threads=threads)
        assert_dense_features_match(shared32, shared64, alone32, alone64)


# -- golden vectors (nystroem, additive_chi2, skewed_chi2) ------------------------------------

@pytest.mark.parametrize("name", list(GOLDEN["cases"]))
def test_golden_requests_resolve_to_the_stored_spec_and_features(name):
    case = GOLDEN["cases"][name]
    stored = case["spec"]
    m = create_map(case["request"])  # Nystroem refits from fit_sample: the same bits, the same id
    assert m.spec.id == stored["id"]
    assert {key: m.spec.to_dict()[key] for key in SPEC_FIELDS} == {key: stored[key] for key in SPEC_FIELDS}
    replica = create_map({key: stored[key] for key in (*SPEC_FIELDS, "id")})
    X = np.array(case["input"])
    expected = case["expected"]
    assert_dense_features_match(replica.transform(X), replica.transform(X, dtype=np.float64),
                                expected["transform_float32"], expected["transform_float64"])
    np.testing.assert_allclose(replica.exact_kernel(X), expected["exact_kernel"], rtol=1e-12)


def test_the_fit_work_limit_is_higher_for_the_compiled_columns():
    """rows * m * (d + m): at most 2^32 for the kernels whose fit columns are compiled, 2^30 for the others;
    refused before any fitting (names the field and the kernel)."""
    X = np.ones((2000, 64))
    with pytest.raises(SpecError, match="1073741824 for the arccos1 kernel") as error:
        nystroem(X, 1024, "arccos1")   # 2.2e9 units
    assert error.value.field == "params.fit_sample"
    with pytest.raises(SpecError, match="4294967296 for the gaussian kernel"):
        nystroem(np.ones((4200, 64)), 1024, gamma=0.1)   # 4.7e9 units
