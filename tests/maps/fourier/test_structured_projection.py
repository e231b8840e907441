"""Structured frequencies without the dense W (`_structured_projection`): the O(D log d) projection
is X W^T for the W of `structured_gaussian`, the maps' features match the dense-W path within the
documented dense-feature promise (docs/exactness.md), the map holds O(D) bytes, and the transform is the
same whatever the row split, sparse or dense input, and compiles without fused multiply-adds."""

from __future__ import annotations

import re

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from feature_promises import assert_dense_features_match
from featurehash.maps import SpecError, create_map
from featurehash.maps.fourier import _orthogonal_frequencies as orthogonal
from featurehash.maps.fourier import _structured_projection as structured

FUSED_MULTIPLY_ADD = re.compile(r"\bv?f(n?m(add|sub)|mla|mls)\w*", re.IGNORECASE)


@pytest.mark.parametrize("d,count", [(1, 3), (3, 10), (5, 20), (8, 8), (100, 300), (128, 1000), (1000, 700)])
def test_projection_is_the_dense_product(d, count):
    rng = np.random.default_rng(d)
    W = orthogonal.structured_gaussian(11, "t", count, d)
    factors = rng.uniform(0.5, 2.0, count)
    X = rng.standard_normal((9, d))
    expected = X @ (W * factors[:, None]).T
    projection = structured.StructuredProjection(11, "t", count, d, factors, np.float64)
    got = projection.project(X)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13 * np.abs(expected).max())
    X[np.abs(X) < 1.0] = 0.0
    np.testing.assert_array_equal(projection.project(sp.csr_matrix(X)), projection.project(X))


def test_row_squares_are_exact_integers():
    for d in (3, 5, 8, 100, 600):
        width = orthogonal.padded_width(d)
        W = orthogonal.structured_gaussian(2, "t", 2 * width + 3, d) * width   # integers, exactly
        np.testing.assert_array_equal(structured.structured_row_squares(2, "t", 2 * width + 3, d),
                                      np.sum(W * W, axis=1))


def test_the_row_split_changes_no_bit():
    d, count = 300, 1200
    X = np.random.default_rng(1).standard_normal((300, d)).astype(np.float32)
    projection = structured.StructuredProjection(5, "t", count, d, np.full(count, 0.3), np.float32)
    whole = projection.project(X)    # two threads
    np.testing.assert_array_equal(np.vstack([projection.project(X[i:i + 7]) for i in range(0, 300, 7)]), whole)


def _maps(method, variant, d, D, **params):
    request = {"method": method, "input_dim": d, "n_components": D, "seed": 17,
               "params": {"variant": variant, "frequencies": "structured", **params}}
    return create_map(request), create_map(request)


def _dense_path(m):
    for dtype in (np.float32, np.float64):
        m._structured[np.dtype(dtype)] = None  # as if the frequencies could overflow: the dense W
    return m


@pytest.mark.parametrize("method,params", [("rff", {"gamma": 0.3}), ("nrff", {"gamma": 1.5}),
                                           ("srf", {"degree": 3, "bias": 4.0})])
@pytest.mark.parametrize("variant", ["cos_sin", "phase"])
@pytest.mark.parametrize("d", [7, 64, 200, 300])
def test_features_match_the_dense_path_within_the_promise(method, params, variant, d):
    fast, dense = _maps(method, variant, d, 3 * d + 2 + d % 2, **params)
    _dense_path(dense)
    X = np.random.default_rng(d).standard_normal((50, d))
    assert_dense_features_match(fast.transform(X), fast.transform(X, dtype=np.float64),
                                dense.transform(X), dense.transform(X, dtype=np.float64))
    fast_path = orthogonal.padded_width(d) >= structured.StructuredProjection.SMALLEST_WIDTH
    assert (not fast._frequencies) == fast_path   # no dense W was made (small d: the dense W, faster there)


def test_the_map_holds_o_of_d_bytes():
    d, D = 1024, 4096
    m = create_map({"method": "rff", "input_dim": d, "n_components": D,
                    "params": {"frequencies": "structured"}}).materialize()
    assert m.nbytes == m.planned_nbytes < 16 * D     # 3 sign bytes per padded row, a float32 factor each
    dense = create_map({"method": "rff", "input_dim": d, "n_components": D}).materialize()
    assert dense.nbytes == 4 * d * D // 2


def test_inputs_near_the_float32_limit_are_scaled_not_overflowed():
    d, count = 200, 256
    X = np.random.default_rng(3).standard_normal((4, d)) * 1e37   # intermediates would reach ~1e39
    projection = structured.StructuredProjection(4, "t", count, d, np.full(count, 1e-37), np.float32)
    expected = X @ (orthogonal.structured_gaussian(4, "t", count, d) * 1e-37).T
    np.testing.assert_allclose(projection.project(X.astype(np.float32)), expected, rtol=0,
                               atol=1e-5 * np.abs(expected).max())
    fast, dense = _maps("rff", "cos_sin", d, count, gamma=1e-74)
    _dense_path(dense)
    fast.refuse_overflow(fast.check(X))
    np.testing.assert_allclose(fast.transform(X), dense.transform(X), rtol=0, atol=1e-4)


def test_frequencies_that_overflow_float32_are_refused_as_before():
    m, _ = _maps("rff", "cos_sin", 200, 8, gamma=1e78)
    with pytest.raises(SpecError) as error:
        m.transform(np.ones((1, 200)))
    assert error.value.field == "params.gamma"
    assert np.isfinite(m.transform(np.ones((1, 200)) * 1e-80, dtype=np.float64)).all()
    assert m._structured_for(np.dtype(np.float64)) is not None


def test_projection_kernels_compile_without_fused_multiply_add():
    signs = np.ones((1, 3, 8), dtype=np.int8)
    for dtype in (np.float32, np.float64):
        out = np.empty((2, 8), dtype=dtype)
        for kernel, arguments in [
            (structured._project_dense, (np.ones((2, 5), dtype=dtype), signs, np.ones(8, dtype=dtype), 0.125, 1.0)),
            (structured._project_csr, (np.array([0, 1, 2]), np.array([0, 3], dtype=np.int32), np.ones(2, dtype=dtype),
                                       signs, np.ones(8, dtype=dtype), 0.125, 1.0)),
        ]:
            fresh = numba.njit(kernel.py_func)
            fresh(*arguments, out, 0, 2)
            assembly = "\n".join(fresh.inspect_asm().values())
            assert "ret" in assembly and not FUSED_MULTIPLY_ADD.search(assembly), kernel.__name__
