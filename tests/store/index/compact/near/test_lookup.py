"""The near cache's compiled probe (featurehash.store.index.compact.near.lookup): its helper here; the probe
against plain Python models is tests/store/index/compact/near/test_table.py."""

from __future__ import annotations

import numpy as np

from featurehash.store.index.compact.near.lookup import sorted_distinct


def test_sorted_distinct_is_np_unique():
    rng = np.random.default_rng(3)
    for size in (0, 1, 7, 1000):
        values = rng.integers(0, 50, size).astype(np.int64)
        np.testing.assert_array_equal(sorted_distinct(values.copy()), np.unique(values))
