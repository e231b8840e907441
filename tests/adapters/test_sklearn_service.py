"""Offline to online parity: an estimator fitted offline, its spec created in a real `featurehash serve`.

The service must give the estimator's id and its features: discrete codes and one-hot indices exactly,
float32 features bit for bit from the same float32 input, float64 features to 1e-12, and the service's
default float32 features (from float64 input) within the documented bound (docs/guides/offline-training.md) of
the estimator's float64 features.
"""

from __future__ import annotations

import numpy as np
import pytest
from service_support import NPY, load_npy, npy_bytes

from featurehash import OneHotFeatures
from featurehash.sklearn import (AdditiveChi2Features, GCWSFeatures, NormalizedRandomFourierFeatures,
                                 NystroemFeatures, QuadratureFeatures, RandomBinningFeatures, RandomFourierFeatures,
                                 RandomMaclaurinFeatures, SkewedChi2Features, SphericalRandomFeatures,
                                 SphericalStructuredFeatures, TensorSketchFeatures)

# The documented bound (docs/guides/offline-training.md, "Offline training, online scoring"): float32 features
# differ from float64 ones by at most this times the largest feature (64 float32 epsilons; measured up to 20).
# Not for Laplacian RFF, whose Cauchy frequencies make cosine arguments in the thousands: their float32
# rounding is the documented exception.
FLOAT32_BOUND = 64 * 2.0**-24

ESTIMATORS = [
    RandomFourierFeatures(n_components=256, gamma=0.1), RandomFourierFeatures(n_components=255, gamma=0.05,
                                                                             kernel="laplacian", variant="phase"),
    NormalizedRandomFourierFeatures(n_components=128, gamma=2.0), GCWSFeatures(n_components=64, bits=4),
    SphericalRandomFeatures(n_components=256, degree=4), SphericalStructuredFeatures(n_components=64, gamma=0.1),
    SphericalStructuredFeatures(n_components=64, kernel="arccos1"), QuadratureFeatures(n_components=128, gamma=0.1),
    QuadratureFeatures(n_components=64, gamma=0.1, grid="reweighted", fit_rows=100),
    RandomBinningFeatures(n_components=64, gamma=0.2, bits=4), RandomMaclaurinFeatures(n_components=128, degree=2),
    TensorSketchFeatures(n_components=128, degree=3, coef0=0.5),
]


def _post_vectors(http, map_id: str, X: np.ndarray, route: str = "transform", **params):
    response = http.post(f"/v1/maps/{map_id}/{route}", content=npy_bytes(X), params=params,
                         headers={"Content-Type": NPY, "Accept": NPY})
    assert response.status_code == 200, response.text
    return response


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_the_service_gives_the_estimators_id_and_features(embedded_server, estimator):
    rng = np.random.default_rng(12)
    X_train, X_score = rng.standard_normal((200, 16)) + 0.2, rng.standard_normal((50, 16)) + 0.2
    estimator.set_params(random_state=5).fit(X_train)
    with embedded_server.client() as http:
        created = http.post("/v1/maps", json=estimator.spec_)
        assert created.status_code in (200, 201), created.text
        assert created.json() == estimator.spec_
        map_id = created.json()["id"]

        if estimator.feature_map_.one_hot:
            response = _post_vectors(http, map_id, X_score)
            served = OneHotFeatures(load_npy(response.content), float(response.headers["X-Feature-Scale"]),
                                    int(response.headers["X-Feature-Dim"]))
            assert (served.to_csr(np.float64) != estimator.transform(X_score)).nnz == 0
            codes = load_npy(_post_vectors(http, map_id, X_score, "hash").content)
            np.testing.assert_array_equal(codes, estimator.hash(X_score))
            return

        float32_served = load_npy(_post_vectors(http, map_id, X_score.astype(np.float32)).content)
        np.testing.assert_array_equal(float32_served, estimator.transform(X_score.astype(np.float32)))
        float64_served = load_npy(_post_vectors(http, map_id, X_score, dtype="float64").content)
        expected = estimator.transform(X_score)
        assert float64_served.dtype == expected.dtype == np.float64
        np.testing.assert_allclose(float64_served, expected, rtol=1e-12, atol=1e-14)
        default_served = load_npy(_post_vectors(http, map_id, X_score).content)
        assert default_served.dtype == np.float32
        if getattr(estimator, "kernel", None) != "laplacian":
            assert np.abs(default_served - expected).max() <= FLOAT32_BOUND * np.abs(expected).max()


# scikit-learn's kernel_approximation methods (issue 18), on nonnegative data (the chi-squared kernels' domain).
HISTOGRAM_ESTIMATORS = [
    NystroemFeatures(n_components=64, gamma=0.1, fit_rows=150, random_state=5),
    NystroemFeatures(n_components=32, kernel="chi2", gamma=0.3, random_state=5),
    AdditiveChi2Features(), SkewedChi2Features(n_components=64, skewedness=0.5, random_state=5),
]


@pytest.mark.parametrize("estimator", HISTOGRAM_ESTIMATORS, ids=repr)
def test_kernel_approximation_methods_through_the_service(embedded_server, estimator):
    """Create from spec_, transform (float32 bit for bit, float64 to 1e-12) and the kernel route; a
    negative entry is a 422 naming the vectors for the chi-squared maps."""
    rng = np.random.default_rng(13)
    X_train, X_score = np.abs(rng.standard_normal((200, 16))), np.abs(rng.standard_normal((30, 16)))
    estimator.fit(X_train)
    with embedded_server.client() as http:
        created = http.post("/v1/maps", json=estimator.spec_)
        assert created.status_code in (200, 201), created.text
        assert created.json() == estimator.spec_
        map_id = created.json()["id"]
        served = load_npy(_post_vectors(http, map_id, X_score.astype(np.float32)).content)
        np.testing.assert_array_equal(served, estimator.transform(X_score.astype(np.float32)))
        float64_served = load_npy(_post_vectors(http, map_id, X_score, dtype="float64").content)
        np.testing.assert_allclose(float64_served, estimator.transform(X_score), rtol=1e-12, atol=1e-14)
        kernel = http.post(f"/v1/maps/{map_id}/kernel", json={"x": X_score[:5].tolist()})
        assert kernel.status_code == 200, kernel.text
        np.testing.assert_allclose(kernel.json()["exact"], estimator.feature_map_.exact_kernel(X_score[:5]))
        if not isinstance(estimator, NystroemFeatures) or estimator.kernel == "chi2":
            refused = http.post(f"/v1/maps/{map_id}/transform", json={"vectors": [[-1.5] * 16]})
            assert refused.status_code == 422 and "vectors" in refused.text
