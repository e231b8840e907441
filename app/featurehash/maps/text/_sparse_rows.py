"""Row normalisation of CSR data in place, as scikit-learn's `inplace_csr_row_normalize_l1` / `_l2` (its
`normalize` on sparse input) computes it: each term in the data's type (a float32 square stays float32), summed
left to right in float64, each value divided in float64 and rounded back. So the compatibility mode's values are
bit for bit theirs, and the same on every CPU (no pairwise or SIMD sums)."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(nogil=True, cache=True)
def _normalize_l2(data, indptr):
    for row in range(indptr.size - 1):
        total = 0.0
        for at in range(indptr[row], indptr[row + 1]):
            total += data[at] * data[at]
        if total == 0.0:
            continue
        norm = np.sqrt(total)
        for at in range(indptr[row], indptr[row + 1]):
            data[at] /= norm


@nb.njit(nogil=True, cache=True)
def _normalize_l1(data, indptr):
    for row in range(indptr.size - 1):
        total = 0.0
        for at in range(indptr[row], indptr[row + 1]):
            total += abs(data[at])
        if total == 0.0:
            continue
        for at in range(indptr[row], indptr[row + 1]):
            data[at] /= total


def normalize_rows(data: np.ndarray, indptr: np.ndarray, norm: str) -> None:
    """Divide each row of a CSR (data, indptr) by its l1 or l2 norm ("none": nothing); all-zero rows stay."""
    if norm == "none" or data.size == 0:
        return
    (_normalize_l2 if norm == "l2" else _normalize_l1)(data, indptr.astype(np.int64, copy=False))
