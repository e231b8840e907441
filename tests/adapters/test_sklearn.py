"""featurehash.sklearn: scikit-learn's own estimator checks, tuning, dtypes, and spec parity."""

from __future__ import annotations

import inspect
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_circles
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

from featurehash import InputError, SpecError, create_map
from featurehash.maps.base import EMPTY_CODE
from featurehash.maps import METHODS
from featurehash.sklearn import (ESTIMATORS, AdditiveChi2Features, GCWSFeatures, HashingFeatures,
                                 NormalizedRandomFourierFeatures, NystroemFeatures, QuadratureFeatures,
                                 RandomBinningFeatures, RandomFourierFeatures, RandomMaclaurinFeatures, SkewedChi2Features, SphericalRandomFeatures,
                                 SphericalStructuredFeatures, TensorSketchFeatures)

# Each method at its defaults, plus the variants that change what fit does or what sizes are valid.
CHECKED = [
    RandomFourierFeatures(), RandomFourierFeatures(variant="phase", kernel="laplacian"),
    NormalizedRandomFourierFeatures(), GCWSFeatures(), GCWSFeatures(zero_bit=True, bits=4, sampler="dart"),
    SphericalRandomFeatures(), SphericalStructuredFeatures(), SphericalStructuredFeatures(kernel="arccos1"),
    QuadratureFeatures(), QuadratureFeatures(grid="reweighted", n_components=20), RandomBinningFeatures(),
    RandomMaclaurinFeatures(), TensorSketchFeatures(), NystroemFeatures(), NystroemFeatures(kernel="arccos1"),
    AdditiveChi2Features(), AdditiveChi2Features(sample_steps=4, sample_interval=0.3), SkewedChi2Features(),
    SkewedChi2Features(skewedness=5.0),
]
# These checks transform standardised data (entries down to about -1.5): below -skewedness at the default 1.
# scikit-learn's own SkewedChi2Sampler passes them only by its class name (_enforce_estimator_tags_X shifts the
# data of an estimator named "SkewedChi2Sampler"; a subclass under another name fails the same three checks),
# and no tag says "entries > -c": positive_only would make fit refuse every negative entry
# (check_positive_only_tag_during_fit), which the kernel accepts down to -skewedness.
BELOW_MINUS_SKEWEDNESS_CHECKS = ("check_transformer_data_not_an_array", "check_transformer_general",
                                 "check_transformer_preserve_dtypes")
# check_array_api_input too (its data reach -2.6): run for every estimator but the default SkewedChi2Features.
ARRAY_API_CHECKED = [e for e in CHECKED if not (isinstance(e, SkewedChi2Features) and e.skewedness <= 1.5)]


def expected_failures(estimator) -> dict[str, str]:
    """The only expected failures: where scikit-learn's own equivalent cannot pass either."""
    if isinstance(estimator, SkewedChi2Features) and estimator.skewedness <= 1.5:
        return {name: "entries <= -skewedness have no log(x + c): refused like scikit-learn's SkewedChi2Sampler, "
                "which passes only through a class-name exception in scikit-learn's checks (skewedness=5 passes)"
                for name in BELOW_MINUS_SKEWEDNESS_CHECKS}
    return {}


# An expected failure that passes fails the run (scikit-learn >= 1.7; 1.6, the floor the extra allows, has no
# xfail_strict and reports it as XPASS).
STRICT = {"xfail_strict": True} if "xfail_strict" in inspect.signature(parametrize_with_checks).parameters else {}


@pytest.mark.filterwarnings("ignore:n_components=1:UserWarning")   # the checks' size, raised to a valid one
@parametrize_with_checks(CHECKED, expected_failed_checks=expected_failures, **STRICT)
def test_sklearn_estimator_checks(estimator, check):
    # check_array_api_input is skipped by scikit-learn itself unless SCIPY_ARRAY_API=1 was set before scipy
    # was imported: test_array_api_checks_in_a_fresh_process runs it with that set.
    check(estimator)


def test_array_api_checks_in_a_fresh_process():
    if "expect_only_array_outputs" not in inspect.signature(estimator_checks.check_array_api_input).parameters:
        pytest.skip("scikit-learn < 1.7: its array API check needs array-api-compat and numpy >= 2, and cannot "
                    "be told that the one-hot maps answer with sparse matrices")
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from sklearn.utils.estimator_checks import check_array_api_input
        from test_sklearn import ARRAY_API_CHECKED
        for estimator in ARRAY_API_CHECKED:
            check_array_api_input(type(estimator).__name__, estimator, array_namespace="numpy",
                                  expect_only_array_outputs=False)
        print("ok", len(ARRAY_API_CHECKED))
    """)
    done = subprocess.run([sys.executable, "-c", script, os.path.dirname(__file__)],
                          env={**os.environ, "SCIPY_ARRAY_API": "1"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["ok", str(len(ARRAY_API_CHECKED))]


# -- conventions ---------------------------------------------------------------------------

def test_every_method_has_an_estimator_whose_defaults_are_the_specs():
    assert set(ESTIMATORS) == set(METHODS)
    for method, cls in ESTIMATORS.items():
        estimator_defaults = cls().get_params()
        # A new request's defaults (attributes: the dump leaves out keys at their legacy default).
        spec_defaults = METHODS[method].complete_new_request(METHODS[method].Params())
        if cls is HashingFeatures:  # HashingVectorizer's width; stateless, so a fixed seed
            assert estimator_defaults["n_components"] == 2**20 and estimator_defaults["random_state"] == 0
        elif cls is not AdditiveChi2Features:  # its width follows from n_features; it has no randomness
            assert estimator_defaults["n_components"] == 100
            assert estimator_defaults["random_state"] is None
        for name in cls._spec_params:
            if name == "empty_rows":   # the explicit empty result, so that a pipeline's empty rows pass
                assert getattr(spec_defaults, name) == "error" and estimator_defaults[name] in ("zero", "code")
                continue
            assert estimator_defaults[name] == getattr(spec_defaults, name), (method, name)


def _data(n=40, d=6, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d)) + 0.1


@pytest.mark.parametrize("cls", [NormalizedRandomFourierFeatures, SphericalRandomFeatures, GCWSFeatures])
def test_all_zero_rows_get_the_empty_result_or_the_error_asked_for(cls):
    """empty_rows: the explicit empty result by default (in spec_), or "error" as the spec's default; the
    nonzero rows' features are those of the map without the option."""
    X = 1 + np.abs(3 * _data(n=6))
    X[[1, 4]] = 0
    kept = [0, 2, 3, 5]
    estimator = cls(n_components=16, random_state=0).fit(X)
    assert estimator.spec_["params"]["empty_rows"] == estimator.empty_rows
    refusing = cls(n_components=16, random_state=0, empty_rows="error").fit(X[kept])
    assert "empty_rows" not in refusing.spec_["params"]   # the spec's default: left out, the id unchanged
    with pytest.raises(InputError, match=r"row\(s\) 1, 4"):
        refusing.transform(X)
    Z = _dense(estimator.transform(X))
    np.testing.assert_allclose(Z[kept], _dense(refusing.transform(X[kept])), atol=1e-12)
    if cls is GCWSFeatures:
        codes = estimator.hash(X)
        assert (codes[[1, 4]] == EMPTY_CODE).all() and not (codes[kept] == EMPTY_CODE).any()
        # Two empty rows share every one-hot feature (GMM(0, 0) = 1); with a nonempty row about 2^-bits.
        assert Z[1] @ Z[4] == pytest.approx(1.0) and (Z[kept] @ Z[1]).max() < 0.2
    else:
        assert not Z[[1, 4]].any()   # the zero feature vector: kernel estimate 0 with every row
    with pytest.raises(SpecError) as bad:
        cls(empty_rows="zero" if cls is GCWSFeatures else "code").fit(X)
    assert bad.value.field == "empty_rows"


@pytest.mark.parametrize("estimator, n_features, expected", [
    (RandomFourierFeatures(n_components=7), 3, 8), (RandomFourierFeatures(n_components=7, variant="phase"), 3, 7),
    (NormalizedRandomFourierFeatures(n_components=5, variant="cos_sin"), 3, 6),
    (SphericalStructuredFeatures(n_components=1), 5, 12), (SphericalStructuredFeatures(n_components=13), 5, 16),
    (SphericalStructuredFeatures(n_components=100), 64, 128), (QuadratureFeatures(n_components=9), 3, 10)],
    ids=repr)
def test_n_components_is_raised_to_the_next_size_the_map_has(estimator, n_features, expected):
    X = _data(d=n_features)
    asked = estimator.n_components
    if expected == asked:
        estimator.fit(X)   # no warning: a size the map has
    else:
        with pytest.warns(UserWarning, match=f"n_components={asked}: .*using n_components={expected}"):
            estimator.fit(X)
    assert estimator.spec_["n_components"] == expected == estimator.transform(X).shape[1]
    assert estimator.n_components == asked   # the parameter is left as given (scikit-learn's convention)
    with pytest.raises(SpecError) as bad:
        type(estimator)(n_components=0).fit(X)
    assert bad.value.field == "n_components"


@pytest.mark.parametrize("method", sorted(set(ESTIMATORS) - {"hashing"}))   # text: test_sklearn_text.py
def test_spec_gives_the_same_features(method):
    """spec_ is the resolved spec: create_map(spec_) gives the same features, bit for bit, in float32 and
    float64; the seed is random_state; pickles carry the spec, not the parameters."""
    X = np.abs(_data()) if method in ("gcws", "additive_chi2", "skewed_chi2") else _data()
    if method == "additive_chi2":  # deterministic, its width set by n_features
        estimator = ESTIMATORS[method]().fit(X)
    else:
        estimator = ESTIMATORS[method](n_components=16, random_state=7).fit(X)
        assert estimator.spec_["seed"] == 7
    assert estimator.spec_["input_dim"] == estimator.n_features_in_ == X.shape[1]
    feature_map = create_map(estimator.spec_)
    assert feature_map.spec.id == estimator.spec_["id"]
    for dtype in (np.float32, np.float64):
        Z = estimator.transform(X.astype(dtype))
        expected = feature_map.transform(X.astype(dtype), dtype=dtype)
        if feature_map.one_hot:
            assert sp.isspmatrix_csr(Z) and Z.dtype == dtype
            np.testing.assert_array_equal(Z.toarray(), expected.to_csr(dtype).toarray())
            np.testing.assert_array_equal(estimator.hash(X), feature_map.hash(X))
        else:
            assert isinstance(Z, np.ndarray) and Z.dtype == dtype
            np.testing.assert_array_equal(Z, expected)
    restored = pickle.loads(pickle.dumps(estimator))
    np.testing.assert_array_equal(_dense(restored.transform(X)), _dense(estimator.transform(X)))


def _dense(Z):
    return Z.toarray() if sp.issparse(Z) else Z


def test_pickle_carries_the_spec_not_the_parameters():
    X = _data(d=64)
    estimator = RandomFourierFeatures(n_components=4096, random_state=0).fit(X)
    estimator.transform(X)  # materialises 64 x 2048 frequencies (0.5 MB in float32)
    assert estimator.feature_map_.nbytes >= 64 * 2048 * 4
    assert len(pickle.dumps(estimator)) < 2000


def test_sparse_input_gives_the_dense_features():
    X = _data(d=20)
    X[np.abs(X) < 0.8] = 0
    for estimator in (RandomFourierFeatures(random_state=1), GCWSFeatures(random_state=1)):
        estimator.fit(sp.csr_matrix(X))
        np.testing.assert_allclose(_dense(estimator.transform(sp.csr_matrix(X))), _dense(estimator.transform(X)),
                                   atol=1e-12)


@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_a_malformed_sparse_matrix_is_refused_naming_x(layout):
    """scipy does not check a matrix's indices; scikit-learn's validation then converts or indexes it in
    compiled code (an index past the width crashed fit and transform, or read memory beyond the arrays)."""
    X = sp.csr_matrix(np.abs(_data(d=5)) + 1.0)
    bad = X.copy() if layout == "csr" else sp.csc_matrix(X)
    bad.indices = bad.indices.copy()
    bad.indices[7] = 10**9 if layout == "csr" else X.shape[0] + 3
    fitted = RandomFourierFeatures(random_state=1).fit(X)
    for call in (fitted.transform, RandomFourierFeatures(gamma="scale", random_state=1).fit,
                 RandomBinningFeatures(random_state=1).fit(X).hash, AdditiveChi2Features().fit(X).transform):
        with pytest.raises(InputError) as info:
            call(bad)
        assert info.value.field == "X" and "a malformed sparse matrix" in info.value.message


def test_feature_names_and_pandas_output():
    pd = pytest.importorskip("pandas")
    X = _data()
    estimator = RandomFourierFeatures(n_components=8, random_state=0).set_output(transform="pandas").fit(X)
    names = estimator.get_feature_names_out()
    assert list(names) == [f"randomfourierfeatures{i}" for i in range(8)]
    frame = estimator.transform(X)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == list(names)
    gcws = GCWSFeatures(n_components=4, bits=2).fit(np.abs(X))
    assert len(gcws.get_feature_names_out()) == gcws.transform(np.abs(X)).shape[1] == 4 << 2


def test_bad_parameters_name_the_estimator_parameter():
    X = _data()
    with pytest.raises(SpecError) as bad_gamma:
        RandomFourierFeatures(gamma=-1.0).fit(X)
    assert bad_gamma.value.field == "gamma" and "RandomFourierFeatures" in str(bad_gamma.value)
    with pytest.raises(SpecError) as bad_seed:
        RandomFourierFeatures(random_state=-3).fit(X)
    assert bad_seed.value.field == "random_state"
    with pytest.raises(SpecError) as bad_rows:
        QuadratureFeatures(grid="reweighted", fit_rows=1).fit(X)
    assert bad_rows.value.field == "fit_rows"
    with pytest.raises(SpecError) as bad_size:
        SphericalStructuredFeatures(n_components=-4).fit(X)
    assert bad_size.value.field == "n_components"


def test_numpy_scalars_from_parameter_grids_are_accepted():
    X = _data()
    estimator = RandomFourierFeatures(n_components=np.int64(8), gamma=np.float64(0.5), random_state=np.int64(3))
    reference = RandomFourierFeatures(n_components=8, gamma=0.5, random_state=3)
    assert estimator.fit(X).spec_["id"] == reference.fit(X).spec_["id"]


def test_random_state_none_or_randomstate_draws_the_seed():
    X = _data()
    first = RandomFourierFeatures(random_state=np.random.RandomState(0)).fit(X).spec_["seed"]
    again = RandomFourierFeatures(random_state=np.random.RandomState(0)).fit(X).spec_["seed"]
    assert first == again
    assert 0 <= RandomFourierFeatures().fit(X).spec_["seed"] < 2**63


def test_reweighted_quadrature_is_fitted_to_x_in_fit():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 4)) * np.array([1.0, 0.3, 0.3, 0.1])
    estimator = QuadratureFeatures(grid="reweighted", n_components=32, gamma=0.5, fit_rows=200,
                                   random_state=0).fit(X)
    params = estimator.spec_["params"]
    assert params["fit_sample"] is None and len(params["points"]) == len(params["weights"]) == 16
    assert QuadratureFeatures(grid="reweighted", n_components=32, gamma=0.5, fit_rows=200,
                              random_state=0).fit(X).spec_["id"] == estimator.spec_["id"]
    other = QuadratureFeatures(grid="reweighted", n_components=32, gamma=0.5, fit_rows=200,
                               random_state=0).fit(X * 3)
    assert other.spec_["params"]["weights"] != params["weights"]
    # The fit is to the data: on held-out rows of the same distribution the estimate is close to the kernel.
    held_out = rng.standard_normal((60, 4)) * np.array([1.0, 0.3, 0.3, 0.1])
    Z = estimator.transform(held_out)
    exact = estimator.feature_map_.exact_kernel(held_out)
    assert np.sqrt(np.mean((Z @ Z.T - exact) ** 2)) < 0.05


@pytest.mark.parametrize("estimator, method, params", [
    (NystroemFeatures(n_components=12, gamma="median", sampling="uniform", fit_rows=40, random_state=2), "nystroem",
     {"kernel": "gaussian", "gamma": "median", "sampling": "uniform"}),
    (RandomFourierFeatures(n_components=16, gamma="scale", fit_rows=40, random_state=2), "rff",
     {"kernel": "gaussian", "gamma": "scale", "variant": "cos_sin"}),
    (QuadratureFeatures(grid="reweighted", n_components=8, gamma=0.5, fit_rows=40, random_state=2), "quadrature",
     {"grid": "reweighted", "gamma": 0.5}),
], ids=["nystroem", "rff", "quadrature"])
def test_fit_passes_its_rows_as_an_array_with_the_spec_of_the_rows_as_lists(estimator, method, params):
    """fit hands the spec its rows as a float64 array (no lists): the spec is that of the same rows as lists,
    for float32 X (its values, exactly) as for float64 X."""
    X = np.random.default_rng(6).standard_normal((90, 3)).astype(np.float32)
    X[0, :2] = [-0.0, np.float32(1e-42)]
    rows = X[np.unique(np.linspace(0, 89, 40).round().astype(int))]
    from_lists = create_map({"method": method, "input_dim": 3, "n_components": estimator.n_components, "seed": 2,
                             "params": {**params, "fit_sample": rows.tolist()}})
    assert estimator.fit(X).spec_["id"] == from_lists.spec.id
    assert estimator.fit(X.astype(np.float64)).spec_["id"] == from_lists.spec.id


def test_grid_search_over_gamma_finds_the_bandwidth():
    X, y = make_circles(n_samples=300, noise=0.08, factor=0.4, random_state=0)
    pipeline = make_pipeline(RandomFourierFeatures(n_components=200, random_state=0), LogisticRegression(C=10))
    search = GridSearchCV(pipeline, {"randomfourierfeatures__gamma": [1e-3, 2.0, 1e3]}, cv=3).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_ == {"randomfourierfeatures__gamma": 2.0}
    assert scores[1] > 0.95 and scores[0] < 0.75 and scores[2] < 0.9
    assert search.best_estimator_[0].spec_["params"]["gamma"] == 2.0


_CACHE_PROBE = textwrap.dedent("""
    import gc, json
    import numpy as np
    from numba.core.dispatcher import Dispatcher
    from featurehash.sklearn import RandomFourierFeatures
    X = np.random.default_rng(0).standard_normal((50, 8))
    RandomFourierFeatures(n_components=64, random_state=0).fit(X).transform(X)
    ours = [o for o in gc.get_objects() if isinstance(o, Dispatcher) and o.py_func.__module__.startswith("featurehash")]
    print(json.dumps({"hits": sum(sum(o.stats.cache_hits.values()) for o in ours),
                      "misses": sum(sum(o.stats.cache_misses.values()) for o in ours)}))
""")


def test_a_second_process_loads_the_kernels_from_numbas_cache(tmp_path):
    # What a GridSearchCV or Dask worker relies on: kernels compiled by one process (cache=True) are loaded,
    # not compiled, by the next one that shares NUMBA_CACHE_DIR.
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    first, second = (json.loads(subprocess.run([sys.executable, "-c", _CACHE_PROBE], env=env, check=True,
                                               capture_output=True, text=True).stdout) for _ in range(2))
    assert first["misses"] > 0 and first["hits"] == 0
    assert second["hits"] > 0 and second["misses"] == 0   # (a kernel called by another loads with it)
    assert list(tmp_path.rglob("*.nbi")) and list(tmp_path.rglob("*.nbc"))
