"""block := block U (`numerics._triangular_product`): numpy's OpenBLAS through ctypes, scipy's dtrmm where that
is not found or the block's rows are not contiguous; the same numbers either way."""

from __future__ import annotations

import numpy as np
import pytest

from featurehash.maps.numerics import _triangular_product as triangular


def upper(k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    matrix = np.triu(rng.standard_normal((k, k))) + 3 * np.eye(k)
    matrix[np.tril_indices(k, -1)] = np.nan   # the strictly lower part must not be read
    return matrix


@pytest.mark.parametrize("rows, k", [(1, 1), (7, 5), (300, 64), (33, 130)])
def test_the_product_is_blocks_times_the_upper_triangle(rows, k):
    U = upper(k, rows)
    block = np.random.default_rng(k).standard_normal((rows, k))
    expected = block @ np.triu(np.nan_to_num(U))
    fast = block.copy()
    triangular.upper_product_in_place(fast, U)
    np.testing.assert_allclose(fast, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_numpy_and_scipy_give_the_same_numbers_and_odd_layouts_take_scipy(monkeypatch):
    U = upper(96, 1)
    block = np.random.default_rng(2).standard_normal((50, 96))
    ours = block.copy()
    triangular.upper_product_in_place(ours, U)
    monkeypatch.setattr(triangular, "_found", [None])   # as where numpy's BLAS has no cblas_dtrmm64_
    theirs = block.copy()
    triangular.upper_product_in_place(theirs, U)
    np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-13 * np.abs(theirs).max())
    monkeypatch.undo()
    wide = np.zeros((50, 200))
    wide[:, 3:99] = block
    strided = wide[:, 3:99]   # rows not C-contiguous blocks of the array, but each row contiguous
    triangular.upper_product_in_place(strided, U)
    np.testing.assert_allclose(strided, ours, rtol=1e-13, atol=1e-13 * np.abs(ours).max())
    assert not wide[:, :3].any() and not wide[:, 99:].any()
    columns = np.asfortranarray(block)   # rows not contiguous: scipy's wrapper
    triangular.upper_product_in_place(columns, U)
    np.testing.assert_allclose(columns, ours, rtol=1e-13, atol=1e-13 * np.abs(ours).max())


def test_numpy_wheels_openblas_is_found():
    config = str(np.show_config(mode="dicts")["Build Dependencies"]["blas"])
    if "scipy-openblas" not in config:
        pytest.skip(f"numpy is built against another BLAS ({config[:80]})")
    assert triangular._numpy_trmm() is not None
