"""A minhash map's codes in the LSH index (featurehash.store.index over real Redis, both layouts): the same
operations as GCWS's, re-ranked by the exact Jaccard of the stored sets (the Jaccard code family), with the near
cache (layout 3) and the duplicates scan. Fixtures: tests/index_support.py."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from featurehash.maps import create_map
from lsh_support import assert_layout_consistent
from index_support import client, indexes, key_prefix, layout, redis_url  # noqa: F401

D = 5000


def planted_sets(n: int, size: int, seed: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """n random sets of `size` columns, and a near copy of each (5 of its columns replaced)."""
    rng = np.random.default_rng(seed)
    columns = np.argsort(rng.random((n, D)), axis=1)[:, :size]
    copies = columns.copy()
    copies[:, :5] = rng.integers(0, D, (n, 5))
    def rows(c):
        X = sp.csr_matrix((np.ones(c.size), c.ravel(), np.arange(0, c.size + 1, size)), shape=(n, D))
        X.sum_duplicates()
        X.data[:] = 1.0
        return X
    return rows(columns), rows(copies)


def test_minhash_items_query_and_duplicates_by_exact_jaccard(client, indexes, layout):
    m = create_map({"method": "minhash", "input_dim": D, "n_components": 128, "seed": 4})
    X, Q = planted_sets(300, 60, seed=1)
    ids = [f"s{i}" for i in range(300)]
    index = indexes.create(m, name="sets", threshold=0.6, vectors="sparse")
    index.add(ids, X)
    assert_layout_consistent(client, index)
    exact = m.exact_kernel(Q[:20], X)
    result = index.query(Q[:20], top_k=3)
    for q, found in enumerate(result.results):
        assert found[0][0] == ids[q]
        assert found[0][1] == exact[q, q]   # the stored vectors' Jaccard, exactly
    if layout == 3:
        cached = indexes.open("sets").enable_near_cache()
        assert cached.query(Q[:20], top_k=3).results == result.results
    index.add([f"copy{i}" for i in range(10)], Q[:10])
    duplicates = index.duplicates(0.7)
    pairs = {frozenset(cluster.members) for cluster in duplicates.clusters}
    assert {frozenset((f"s{i}", f"copy{i}")) for i in range(10)} <= pairs, pairs
    assert duplicates.verify == "exact"
