"""block := block U in place, for a C-ordered float64 block (rows x k) and a C-ordered upper triangular U
(k x k): BLAS's triangular product (trmm, half a general product's flops), the Nystroem transform's
normalisation.

It calls numpy's own OpenBLAS (cblas_dtrmm of the scipy-openblas64 build numpy's wheels ship, found through
numpy's extension module) by ctypes, and scipy.linalg.blas.dtrmm only where numpy's library has no such
symbol (another BLAS). Why not scipy's wrapper always: it holds the GIL for the whole product (a Python
thread made 0.3 M steps/s during a 475 ms dtrmm against 10 M/s during a sleep, measured), so threads sharing
a batch (`_row_threads`) ran their products one at a time; and scipy's wheel brings a second OpenBLAS, whose
thread pool spun against numpy's on 2 cores. ctypes releases the GIL during the call, and numpy's OpenBLAS
is the library whose threads `_row_threads` holds to one while threads share a batch.
"""

from __future__ import annotations

import ctypes

import numpy as np

# CBLAS's enum values: row-major order, B := B op(A) (A on the right), A upper, not transposed, not unit.
_ROW_MAJOR, _RIGHT, _UPPER, _NO_TRANSPOSE, _NON_UNIT = 101, 142, 121, 111, 131
# ILP64 builds only (64-bit integers, the symbols' "64_" suffix): numpy's wheels since 2.0.
_SYMBOLS = ("scipy_cblas_dtrmm64_", "cblas_dtrmm64_")
_found: list = []   # [the ctypes function or None], once looked up


def _numpy_trmm():
    """numpy's OpenBLAS cblas_dtrmm (ILP64), or None."""
    if not _found:
        try:
            import numpy._core._multiarray_umath as umath
        except ImportError:  # numpy < 2
            import numpy.core._multiarray_umath as umath
        function = None
        try:
            library = ctypes.CDLL(umath.__file__)   # its dependencies' symbols too (numpy's OpenBLAS)
        except OSError:
            library = None
        for name in _SYMBOLS if library is not None else ():
            function = getattr(library, name, None)
            if function is not None:
                function.restype = None
                function.argtypes = [ctypes.c_int] * 5 + [ctypes.c_int64] * 2 + [ctypes.c_double, ctypes.c_void_p,
                                                                                 ctypes.c_int64, ctypes.c_void_p,
                                                                                 ctypes.c_int64]
                break
        _found.append(function)
    return _found[0]


def upper_product_in_place(block: np.ndarray, upper: np.ndarray) -> None:
    """block := block upper (block: rows x k float64 with contiguous rows; upper: k x k float64, C-ordered,
    upper triangular: its strictly lower part is not read)."""
    rows, k = block.shape
    if rows == 0 or k == 0:
        return
    trmm = _numpy_trmm()
    contiguous_rows = block.strides[1] == block.itemsize and block.strides[0] >= k * block.itemsize
    if trmm is not None and contiguous_rows and upper.flags.c_contiguous and block.dtype == upper.dtype == np.float64:
        trmm(_ROW_MAJOR, _RIGHT, _UPPER, _NO_TRANSPOSE, _NON_UNIT, rows, k, 1.0, upper.ctypes.data,
             upper.strides[0] // upper.itemsize, block.ctypes.data, block.strides[0] // block.itemsize)
        return
    from scipy.linalg import blas   # here: scipy.linalg costs ~70 ms to import

    # block^T (k x rows, Fortran-ordered) := L block^T with L = upper^T (lower, Fortran-ordered); in place
    # when block's rows are contiguous, else into a copy (f2py's), copied back
    product = blas.dtrmm(1.0, upper.T, block.T, lower=1, overwrite_b=1)
    if not np.may_share_memory(product, block):
        block[...] = product.T
