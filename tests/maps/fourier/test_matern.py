"""Matérn kernels, per-dimension (ARD) lengthscales and data-driven gammas (issue 34) for rff and nystroem
(lengthscales also for quadrature):
- the exact Matérn kernel equals scikit-learn's Matern(length_scale, nu) under the documented
  parameterisation (gamma = 1/2 with lengthscales = length_scale), closed forms and Bessel form alike;
- the chi-square / gamma variates behind the t frequencies follow their laws (Kolmogorov-Smirnov);
- each estimate against its exact kernel within 5 standard deviations of the Monte-Carlo estimate at
  D features, the standard deviation from theory (see `estimate_sd`);
- unbiased over seeds: the mean of the estimate over 240 seeds is within 4.5 of its standard errors;
- quadrature grids with lengthscales are the grids of the scaled inputs;
- the data-driven gammas: scikit-learn's "scale", the median heuristic, both computed in a fixed order
  (equal to a plain-Python sequential computation, bit for bit);
- specs: unset new params leave the canonical JSON (old ids kept), named field errors;
- golden vectors (tests/golden/matern.json), scikit-learn estimators, and the service.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from feature_promises import assert_dense_features_match
from scipy import stats
from sklearn.gaussian_process.kernels import Matern

from featurehash.maps import SpecError, create_map, kernels, randomness, resolve_spec

GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "golden" / "matern.json").read_text())["cases"]
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")


def rff(d, D, seed=0, **params):
    return create_map({"method": "rff", "input_dim": d, "n_components": D, "seed": seed, "params": params})


def points(n, d, seed):
    return np.random.default_rng(seed).normal(size=(n, d)) * 0.6


# -- the exact kernel -----------------------------------------------------------------------------------

@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, 0.8, 3.7])
def test_exact_matern_is_scikit_learns_matern(nu):
    X, Y = points(7, 3, 1), points(5, 3, 2)
    scales = np.array([0.7, 1.6, 1.1])
    # gamma = 1/2 with lengthscales s is Matern(length_scale=s); without lengthscales l = 1 / sqrt(2 gamma).
    np.testing.assert_allclose(kernels.matern(X, Y, 0.5, nu, scales), Matern(scales, nu=nu)(X, Y), rtol=1e-10)
    np.testing.assert_allclose(kernels.matern(X, Y, 0.18, nu), Matern(1 / math.sqrt(0.36), nu=nu)(X, Y), rtol=1e-10)


def test_closed_forms_equal_the_bessel_form_and_nu_one_half_is_the_l2_exponential():
    r = np.array([0.0, 1e-9, 0.3, 1.0, 4.0, 40.0])
    for nu in kernels.MATERN_CLOSED_FORMS:   # the general branch, just off the closed-form values
        np.testing.assert_allclose(kernels.matern_of_distance(r, 0.7, nu),
                                   kernels.matern_of_distance(r, 0.7, nu * (1 + 1e-12)), rtol=1e-9, atol=1e-300)
    X, Y = points(4, 3, 3), points(3, 3, 4)
    l2 = np.sqrt(((X[:, None] - Y[None]) ** 2).sum(-1))
    np.testing.assert_allclose(kernels.matern(X, Y, 0.5, 0.5), np.exp(-l2), rtol=1e-12)
    # featurehash's "laplacian" is the L1 one: they differ beyond one dimension
    assert not np.allclose(kernels.laplacian(X, Y, 1.0), np.exp(-l2), atol=1e-3)


# -- the variates ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dof", [1.0, 3.0, 5.0, 1.6, 7.4, 0.4])
def test_chi_square_variates_follow_their_law(dof):
    draws = randomness.chi_square(11, "test.chi2", 20000, dof)
    assert stats.kstest(draws, stats.chi2(dof).cdf).pvalue > 1e-3
    np.testing.assert_array_equal(draws, randomness.chi_square(11, "test.chi2", 20000, dof))


# -- estimate against the exact kernel ---------------------------------------------------------------------

def estimate_sd(feature_map, X, Y) -> np.ndarray:
    """The standard deviation of the i.i.d. estimate at m frequencies (Sutherland & Schneider, UAI 2015):
    cos_sin averages cos(w.delta): Var = ((1 + k(2 delta)) / 2 - k(delta)^2) / m; phase averages
    2 cos(w.x + b) cos(w.y + b) = cos(w.delta) + cos(w.(x + y) + 2b): Var = ((1 + k(2 delta)) / 2 + 1/2
    - k(delta)^2) / m. k(2 delta) is the exact kernel between x and y + (y - x) = 2 y - x."""
    k = feature_map.exact_kernel(X, Y)
    k2 = np.array([[feature_map.exact_kernel(x[None], (2 * y - x)[None])[0, 0] for y in Y] for x in X])
    phase = feature_map.params.variant == "phase"
    m = feature_map.output_dim if phase else feature_map.output_dim // 2
    return np.sqrt(np.maximum((1 + k2) / 2 + (0.5 if phase else 0.0) - k * k, 0.0) / m)


CASES = [
    {"kernel": "matern", "nu": 0.5, "gamma": 0.5},
    {"kernel": "matern", "nu": 1.5, "gamma": 0.3, "variant": "phase"},
    {"kernel": "matern", "nu": 2.5, "gamma": 0.5, "lengthscales": [0.8, 1.5, 1.0, 2.0]},
    {"kernel": "matern", "nu": 0.8, "gamma": 0.4, "frequencies": "orthogonal"},
    {"kernel": "gaussian", "gamma": 0.5, "lengthscales": [0.5, 1.0, 3.0, 1.5]},
    {"kernel": "laplacian", "gamma": 0.4, "lengthscales": [2.0, 1.0, 0.5, 1.0]},
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: "-".join(str(v) for v in p.values())[:40])
def test_estimate_is_within_five_standard_deviations_of_the_exact_kernel(params):
    X = points(12, 4, 5)
    m = rff(4, 4096, seed=7, **params)
    error = m.kernel(X) - m.exact_kernel(X)
    sd = estimate_sd(m, X, X)
    off = ~np.eye(len(X), dtype=bool)   # the diagonal is exact for cos_sin
    assert np.all(np.abs(error[off]) <= 5 * sd[off] + 1e-12)


@pytest.mark.parametrize("params", CASES[:4] + CASES[5:], ids=lambda p: "-".join(str(v) for v in p.values())[:40])
def test_estimate_is_unbiased_over_seeds(params):
    """Mean over S seeds within 4.5 standard errors (the empirical sd over seeds / sqrt(S)) of the kernel, for
    each of 6 pairs; and the i.i.d. spread agrees with theory (orthogonal: at most it)."""
    S, D = 240, 32
    X, Y = points(3, 4, 8), points(2, 4, 9)
    estimates = np.stack([rff(4, D, seed=1000 + s, **params).kernel(X, Y) for s in range(S)])
    m = rff(4, D, seed=0, **params)
    exact = m.exact_kernel(X, Y)
    spread = estimates.std(axis=0, ddof=1)
    assert np.all(np.abs(estimates.mean(axis=0) - exact) <= 4.5 * spread / np.sqrt(S))
    theory = estimate_sd(m, X, Y)
    # sample sd of 240 draws: within 25% of the true one (its relative sd is ~ 1/sqrt(2 S) = 4.6%)
    if params.get("frequencies") == "orthogonal":
        assert np.all(spread <= 1.25 * theory)
    else:
        np.testing.assert_allclose(spread, theory, rtol=0.25)


# -- data-driven gamma -------------------------------------------------------------------------------------

def _sequential(values) -> float:
    total = 0.0
    for v in values:
        total += v
    return total


def test_scale_rule_is_scikit_learns_and_computed_in_a_fixed_order():
    X = points(50, 6, 10) + 0.3
    m = rff(6, 8, gamma="scale", fit_sample=X.tolist())
    np.testing.assert_allclose(m.params.gamma, 1.0 / (6 * X.var()), rtol=1e-12)
    entries = X.ravel().tolist()
    mean = _sequential(entries) / len(entries)
    variance = _sequential([(v - mean) * (v - mean) for v in entries]) / len(entries)
    assert m.params.gamma == 1.0 / (6 * variance)
    assert "fit_sample" not in m.spec.params and create_map(m.spec).spec.id == m.spec.id


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "matern"])
def test_median_rule_is_the_median_heuristic_computed_in_a_fixed_order(kernel):
    X = points(31, 5, 11)           # 465 pairs: all of them, odd count, the median is one distance
    scales = [1.0, 2.0, 0.5, 1.0, 1.5]
    m = rff(5, 8, seed=3, kernel=kernel, gamma="median", lengthscales=scales, fit_sample=X.tolist())
    U = X / np.array(scales)
    distances = []
    for i in range(len(U)):
        for j in range(i + 1, len(U)):
            terms = [abs(a - b) if kernel == "laplacian" else (a - b) * (a - b) for a, b in zip(U[i], U[j])]
            distances.append(_sequential(terms) if kernel == "laplacian" else math.sqrt(_sequential(terms)))
    median = sorted(distances)[len(distances) // 2]
    assert median == np.median(distances)
    assert m.params.gamma == (1.0 / median if kernel == "laplacian" else 1.0 / (2.0 * median * median))


def test_median_rule_on_sampled_pairs_is_seeded_and_near_the_full_median():
    X = points(400, 3, 12)          # 79800 pairs: 10001 sampled
    a = rff(3, 8, seed=1, gamma="median", fit_sample=X.tolist())
    assert a.spec.id == rff(3, 8, seed=1, gamma="median", fit_sample=X.tolist()).spec.id
    full = np.median(np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))[np.triu_indices(400, 1)])
    # the sample median of 10001 pairs: relative sd about 1.25 / (sqrt(10001) f(m) m) ~ 1%; 5% is wide
    np.testing.assert_allclose(1 / math.sqrt(2 * a.params.gamma), full, rtol=0.05)


def test_nystroem_resolves_gamma_and_lengthscales_before_its_fit():
    X = points(60, 3, 13)
    request = {"method": "nystroem", "input_dim": 3, "n_components": 20, "seed": 4,
               "params": {"kernel": "matern", "nu": 1.5, "gamma": "median", "lengthscales": [1.0, 0.5, 2.0],
                          "fit_sample": X.tolist()}}
    m = create_map(request)
    assert isinstance(m.params.gamma, float) and m.params.nu == 1.5
    landmarks = np.array(m.params.landmarks)
    np.testing.assert_allclose(m.kernel(landmarks), m.exact_kernel(landmarks), atol=1e-9)
    residual = m.exact_kernel(X) - m.kernel(X)
    assert np.linalg.eigvalsh(residual).min() >= -1e-9
    np.testing.assert_allclose(m.exact_kernel(X[:4]), Matern([1 / math.sqrt(2 * m.params.gamma) * s for s in
                                                                (1.0, 0.5, 2.0)], nu=1.5)(X[:4]), rtol=1e-10)


@pytest.mark.parametrize("grid, D", [("dense", 82), ("sparse", 50), ("subsampled", 64), ("reweighted", 40)])
def test_quadrature_lengthscales_are_the_rule_of_the_scaled_inputs(grid, D):
    """Per-dimension lengthscales on a quadrature grid give the features (and kernels) of the same grid on
    x / l: every coordinate of the rule is divided by its scale, the reweighted fit is made on the sample / l."""
    scales = np.array([0.5, 1.0, 2.0, 1.5])
    X, sample = points(6, 4, 17), points(60, 4, 18)
    extra = {"points_per_dim": 3} if grid == "dense" else {"level": 2} if grid == "sparse" else {}
    made = {}
    for name, (rows, params) in {"ard": (sample, {"lengthscales": scales.tolist()}), "scaled": (sample / scales, {})}.items():
        fit = {"fit_sample": rows.tolist()} if grid == "reweighted" else {}
        made[name] = create_map({"method": "quadrature", "input_dim": 4, "n_components": D, "seed": 2,
                                 "params": {"grid": grid, "gamma": 0.3, **extra, **fit, **params}})
    np.testing.assert_allclose(made["ard"].kernel(X), made["scaled"].kernel(X / scales), atol=1e-12)
    np.testing.assert_allclose(made["ard"].exact_kernel(X), made["scaled"].exact_kernel(X / scales), rtol=1e-13)
    assert "lengthscales" not in made["scaled"].spec.params


# -- specs ---------------------------------------------------------------------------------------------------

def test_unset_new_params_leave_the_stored_spec_and_id_alone():
    plain = rff(4, 8, seed=2, gamma=0.5)
    assert set(plain.spec.params) == {"kernel", "gamma", "variant"}
    matern = rff(4, 8, seed=2, kernel="matern", gamma=0.5)
    assert matern.spec.params["nu"] == 1.5 and "lengthscales" not in matern.spec.params
    nystroem = create_map({"method": "nystroem", "input_dim": 2, "n_components": 2,
                           "params": {"fit_sample": [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]]}})
    assert "nu" not in nystroem.spec.params and "lengthscales" not in nystroem.spec.params
    # gamma 0.5 with unit lengthscales is the same kernel, a different (explicit) spec
    ard = rff(4, 8, seed=2, gamma=0.5, lengthscales=[1.0] * 4)
    assert ard.spec.id != plain.spec.id
    np.testing.assert_array_equal(ard.transform(points(3, 4, 0)), plain.transform(points(3, 4, 0)))


@pytest.mark.parametrize("method, params, field", [
    ("rff", {"nu": 1.5}, "params.nu"),
    ("rff", {"kernel": "matern", "nu": 0}, "params.nu"),
    ("rff", {"kernel": "matern", "frequencies": "structured"}, "params.frequencies"),
    ("rff", {"lengthscales": [1.0, 2.0], "frequencies": "structured"}, "params.frequencies"),
    ("rff", {"lengthscales": [1.0, 2.0, 3.0]}, "params.lengthscales"),
    ("rff", {"lengthscales": [1.0, -2.0]}, "params.lengthscales.1"),
    ("rff", {"lengthscales": [1.0, float("inf")]}, "params.lengthscales.1"),
    ("rff", {"gamma": "median"}, "params.fit_sample"),
    ("rff", {"gamma": "big"}, "params.gamma"),
    ("rff", {"gamma": 0.5, "fit_sample": [[0.0, 1.0]]}, "params.fit_sample"),
    ("rff", {"gamma": "median", "fit_sample": [[0.0, 1.0]]}, "params.fit_sample"),
    ("rff", {"gamma": "median", "fit_sample": [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]}, "params.fit_sample"),
    ("rff", {"gamma": "scale", "fit_sample": [[0.0, 1.0, 2.0]]}, "params.fit_sample"),
    ("nystroem", {"kernel": "matern", "nu": 0.7}, "params.nu"),
    ("nystroem", {"kernel": "chi2", "lengthscales": [1.0, 1.0]}, "params.lengthscales"),
    ("nystroem", {"kernel": "polynomial", "gamma": "scale"}, "params.gamma"),
    ("nystroem", {"lengthscales": [1.0]}, "params.lengthscales"),
    ("quadrature", {"lengthscales": [1.0, 2.0, 3.0]}, "params.lengthscales"),
])
def test_bad_params_are_refused_naming_the_field(method, params, field):
    if method == "nystroem":
        params = {**params, "fit_sample": [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]]}
    with pytest.raises(SpecError) as error:
        create_map({"method": method, "input_dim": 2, "n_components": 2, "params": params})
    assert error.value.field == field


# -- golden vectors ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden_vectors(name):
    case = GOLDEN[name]
    stored = case["spec"]
    made = create_map(case["request"])
    assert made.spec.id == stored["id"]
    assert {key: made.spec.to_dict()[key] for key in SPEC_FIELDS} == {key: stored[key] for key in SPEC_FIELDS}
    m = create_map({key: stored[key] for key in (*SPEC_FIELDS, "id")})
    X = np.array(case["input"], dtype=np.float64)
    expected = case["expected"]
    assert_dense_features_match(m.transform(X), m.transform(X, dtype=np.float64), expected["transform_float32"],
                                expected["transform_float64"])
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], rtol=1e-12, atol=1e-15)
    if stored["method"] == "rff":
        frequencies, _ = m._parameters_for(np.dtype(np.float64))
        np.testing.assert_allclose(frequencies[:3], expected["frequencies_head"], rtol=1e-12, atol=0)
    assert resolve_spec({key: stored[key] for key in (*SPEC_FIELDS, "id")}).id == stored["id"]


# -- adapters ------------------------------------------------------------------------------------------------------

def test_scikit_learn_estimators_pass_nu_lengthscales_and_gamma_rules():
    from featurehash.sklearn import NystroemFeatures, RandomFourierFeatures

    X = points(80, 3, 14)
    est = RandomFourierFeatures(n_components=16, kernel="matern", nu=2.5, gamma=0.5, lengthscales=[1.0, 2.0, 0.5],
                                random_state=3).fit(X)
    assert est.spec_["params"]["lengthscales"] == [1.0, 2.0, 0.5] and est.spec_["params"]["nu"] == 2.5
    np.testing.assert_array_equal(est.transform(X), create_map(est.spec_).transform(X, dtype=np.float64))
    scaled = RandomFourierFeatures(n_components=16, gamma="scale", random_state=3).fit(X)
    np.testing.assert_allclose(scaled.spec_["params"]["gamma"], 1.0 / (3 * X.var()), rtol=1e-12)
    ny = NystroemFeatures(n_components=10, kernel="matern", nu=0.5, lengthscales=2.0, gamma="median",
                          random_state=1).fit(X)
    assert ny.spec_["params"]["lengthscales"] == [2.0, 2.0, 2.0] and isinstance(ny.spec_["params"]["gamma"], float)


def test_service_creates_a_matern_map_and_returns_estimate_and_exact(service_client):
    X = points(6, 3, 15)
    created = service_client.post("/v1/maps", json={
        "method": "rff", "input_dim": 3, "n_components": 2048, "seed": 5,
        "params": {"kernel": "matern", "nu": 2.5, "gamma": "median", "lengthscales": [1.0, 2.0, 0.5],
                   "fit_sample": points(40, 3, 16).tolist()}})
    assert created.status_code in (200, 201), created.text
    spec = created.json()
    assert isinstance(spec["params"]["gamma"], float) and "fit_sample" not in spec["params"]
    local = create_map({key: spec[key] for key in (*SPEC_FIELDS, "id")})
    features = service_client.post(f"/v1/maps/{spec['id']}/transform", json={"vectors": X.tolist()})
    assert features.status_code == 200
    assert_dense_features_match(features.json()["features"], local.transform(X, dtype=np.float64),
                                local.transform(X), local.transform(X, dtype=np.float64))
    answer = service_client.post(f"/v1/maps/{spec['id']}/kernel", json={"x": X.tolist(), "y": X[:2].tolist()})
    assert answer.status_code == 200
    exact = np.array(answer.json()["exact"])
    np.testing.assert_allclose(exact, local.exact_kernel(X, X[:2]), rtol=1e-12)
    sd = estimate_sd(local, X, X[:2])
    assert np.all(np.abs(np.array(answer.json()["estimate"]) - exact) <= 5 * sd + 1e-6)
    refused = service_client.post("/v1/maps", json={"method": "rff", "input_dim": 3, "n_components": 8,
                                                     "params": {"kernel": "matern", "lengthscales": [1.0]}})
    assert refused.status_code == 422 and "params.lengthscales" in refused.text
