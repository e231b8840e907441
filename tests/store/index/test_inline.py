"""Which CPU steps run on the caller's event loop (featurehash.store.index.inline): few rows, little hashing."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from featurehash.store.index.inline import INLINE_HASH_WORK, INLINE_ROWS, _small_input


def test_few_rows_of_little_work_run_inline_and_anything_else_does_not():
    small = np.ones((INLINE_ROWS, 4))
    assert _small_input(small, 64) and _small_input(sp.csr_matrix(small), 64)
    assert _small_input(small.tolist(), 64)
    assert not _small_input(np.ones((INLINE_ROWS + 1, 4)), 64)  # too many rows
    assert not _small_input(np.ones((1, INLINE_HASH_WORK // 64 + 1)), 64)  # too much hashing
    assert not _small_input([["a", "b"]], 64)  # not numbers: the map's check reports it, off the loop
