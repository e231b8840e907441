"""Orthogonal and structured frequencies (`params.frequencies`) of rff, nrff and srf, and the
compiled sin/cos pass of the dense Fourier maps:
- stored ids unchanged at the default "iid"; refused for the Laplacian kernel;
- orthogonal blocks are orthonormal directions with chi lengths; structured rows have unit
  mean square entries;
- orthogonal features are unbiased for the exact kernel (tolerance from the i.i.d. variance,
  which bounds the orthogonal one), and their Gram error is below i.i.d. at equal D;
- the float64 sin/cos pass matches numpy's, also beyond its reduction range;
- golden vectors (tests/golden/frequencies.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from feature_promises import assert_dense_features_match
from featurehash.maps import kernels
from featurehash.maps import SpecError, create_map
from featurehash.maps.fourier import _fourier_kernels as fourier
from featurehash.maps.fourier import _orthogonal_frequencies as orthogonal

GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "golden" / "frequencies.json").read_text())["cases"]


def rff(d, D, seed=0, **params):
    return create_map({"method": "rff", "input_dim": d, "n_components": D, "seed": seed, "params": params})


@pytest.mark.parametrize("method", ["rff", "nrff", "srf"])
def test_default_iid_keeps_the_stored_id(method):
    request = {"method": method, "input_dim": 5, "n_components": 8, "seed": 3}
    plain = create_map(request)
    explicit = create_map({**request, "params": {"frequencies": "iid"}})
    assert explicit.spec.id == plain.spec.id
    assert "frequencies" not in plain.spec.to_dict()["params"]
    assert create_map({**request, "params": {"frequencies": "orthogonal"}}).spec.id != plain.spec.id


def test_laplacian_refuses_orthogonal_frequencies():
    with pytest.raises(SpecError) as error:
        rff(4, 8, kernel="laplacian", frequencies="orthogonal")
    assert error.value.field == "params.frequencies"


def test_orthogonal_blocks_are_orthonormal_with_chi_lengths():
    d, count = 16, 40
    rows = orthogonal.orthogonal_unit_rows(5, "t", count, d)
    for start in range(0, count, d):
        block = rows[start:start + d]
        np.testing.assert_allclose(block @ block.T, np.eye(len(block)), atol=1e-13)
    lengths = orthogonal.chi_lengths(5, "t", 20000, d)
    # chi_16: E r^2 = 16, sd of r^2 = sqrt(2 * 16); the mean of 20000 is within 5 sd / sqrt(20000).
    assert abs(np.mean(lengths**2) - d) < 5 * np.sqrt(2 * d / 20000)


def test_structured_rows_have_unit_mean_square_entries():
    W = orthogonal.structured_gaussian(7, "t", 64, 32)
    np.testing.assert_allclose(np.mean(W**2, axis=1), 1.0, rtol=1e-12)
    block = W[:32]
    np.testing.assert_allclose(block @ block.T, 32 * np.eye(32), atol=1e-9)


def _data(n=40, d=24, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_orthogonal_rff_is_unbiased():
    X, gamma, D, seeds = _data(), 0.6, 48, 60
    K = kernels.gaussian(X, X, gamma)
    mean = np.mean([(Z := rff(24, D, seed, gamma=gamma, frequencies="orthogonal").transform(X, dtype=np.float64))
                    @ Z.T for seed in range(seeds)], axis=0)
    # i.i.d. cos_sin variance per frequency: (1 + k(2 delta)) / 2 - k^2, with k(2 delta) = k^4; the
    # orthogonal estimate's is lower (Yu et al., Theorem 1). Mean of `seeds` maps of D/2 frequencies.
    variance = (1 + K**4) / 2 - K**2
    tolerance = 5 * np.sqrt(variance / (D // 2) / seeds) + 1e-12
    assert np.all(np.abs(mean - K) <= tolerance)


@pytest.mark.parametrize("method,params", [("rff", {"gamma": 0.6}), ("nrff", {"gamma": 1.5})])
def test_orthogonal_gram_error_is_below_iid(method, params):
    X, D, seeds = _data(), 48, 12
    errors = {}
    for kind in ("iid", "orthogonal"):
        values = []
        for seed in range(seeds):
            m = create_map({"method": method, "input_dim": 24, "n_components": D, "seed": seed,
                            "params": {**params, "frequencies": kind}})
            K = m.exact_kernel(X)
            Z = m.transform(X, dtype=np.float64)
            values.append(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))
        errors[kind] = (np.mean(values), np.std(values, ddof=1) / np.sqrt(seeds))
    margin = 2 * np.hypot(errors["iid"][1], errors["orthogonal"][1])
    assert errors["orthogonal"][0] < errors["iid"][0] - margin, errors


def test_structured_rff_error_is_close_to_orthogonal():
    X, D, gamma = _data(), 64, 0.6
    K = kernels.gaussian(X, X, gamma)

    def error(kind):
        values = []
        for seed in range(8):
            Z = rff(24, D, seed, gamma=gamma, frequencies=kind).transform(X, dtype=np.float64)
            values.append(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))
        return np.mean(values)
    assert error("structured") < error("iid")


def test_float64_sin_cos_pass_matches_numpy():
    rng = np.random.default_rng(2)
    P = np.concatenate([rng.uniform(-4, 4, 5000), rng.uniform(-8e5, 8e5, 5000), [0.0, -0.0, np.pi / 4]])
    out = np.empty((1, 2 * P.size))
    assert fourier.cos_sin_into(P[None, :], np.ones(P.size), out, False) == 0
    np.testing.assert_allclose(out[0, :P.size], np.cos(P), rtol=0, atol=4e-16)
    np.testing.assert_allclose(out[0, P.size:], np.sin(P), rtol=0, atol=4e-16)
    shifted = np.array([[1e7, 3.0]])
    assert fourier.shifted_cos_inplace(shifted, np.zeros(2), 1.0, False) == 1   # beyond the reduction: counted


def test_arguments_beyond_the_reduction_fall_back_to_numpy():
    X = np.random.default_rng(0).standard_normal((5, 4)) * 1e4
    for variant in ("cos_sin", "phase"):
        m = rff(4, 16, 1, gamma=1e4, variant=variant)
        W, b = m._parameters_for(np.dtype(np.float64))
        projection = X @ W.T
        expected = (np.hstack([np.cos(projection), np.sin(projection)]) if b is None
                    else np.cos(projection + b)) * np.sqrt(2 / 16)
        np.testing.assert_allclose(m.transform(X, dtype=np.float64), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(name):
    case = GOLDEN[name]
    m = create_map(case["request"])
    assert m.describe() == case["spec"]
    frequencies, offsets = m._parameters_for(np.dtype(np.float64))
    np.testing.assert_allclose(frequencies[:3], case["expected"]["frequencies_head"], rtol=1e-12, atol=1e-14)
    if offsets is not None:
        np.testing.assert_array_equal(offsets[:5], case["expected"]["offsets_head"])
    X = np.array(case["input"])
    assert_dense_features_match(m.transform(X), m.transform(X, dtype=np.float64),
                                case["expected"]["transform_float32"], case["expected"]["transform_float64"])
