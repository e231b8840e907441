"""Clusters of verified pairs (featurehash.lsh.clusters; this module is not test_clusters.py, which
tests/dedup/ has: test modules share one namespace). Both rules against a direct reference: components as
scipy's connected components, each represented by its lowest row (what the index's duplicates computed), and
greedy representatives row by row; streamed blocks give the in-memory answer."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from featurehash.lsh.clusters import (
    greedy_representatives,
    representatives,
    roots,
    scatter_earlier,
    union_pairs,
)
from scipy.sparse.csgraph import connected_components


def reference(i: np.ndarray, j: np.ndarray, n: int, mode: str) -> np.ndarray:
    if mode == "components":
        graph = sp.coo_matrix((np.ones(i.size, np.int8), (i, j)), shape=(n, n)).tocsr()
        _, labels = connected_components(graph, directed=False)
        first = np.full(labels.max(initial=-1) + 1, n, np.int64)
        np.minimum.at(first, labels, np.arange(n))
        return first[labels]
    out = np.arange(n)
    for row in range(n):
        for neighbour in sorted(i[j == row].tolist()):
            if out[neighbour] == neighbour:
                out[row] = neighbour
                break
    return out


def random_pairs(rng, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = a != b
    return np.minimum(a, b)[keep], np.maximum(a, b)[keep]


@pytest.mark.parametrize("mode", ["components", "representatives"])
def test_representatives_are_the_reference(mode):
    rng = np.random.default_rng(1)
    for n, m in ((1, 0), (5, 3), (40, 30), (200, 150), (200, 2000)):
        i, j = random_pairs(rng, n, m)
        np.testing.assert_array_equal(representatives(i, j, n, mode), reference(i, j, n, mode))


def test_a_chain_is_one_component_but_not_one_greedy_cluster():
    i, j = np.array([0, 1, 2]), np.array([1, 2, 3])
    assert representatives(i, j, 5, "components").tolist() == [0, 0, 0, 0, 4]
    assert representatives(i, j, 5, "representatives").tolist() == [0, 0, 2, 2, 4]


def test_streamed_blocks_give_the_same_answer():
    rng = np.random.default_rng(2)
    n = 300
    i, j = random_pairs(rng, n, 400)
    parent = np.arange(n, dtype=np.int64)
    for start in range(0, i.size, 37):
        union_pairs(parent, i[start:start + 37], j[start:start + 37])
    np.testing.assert_array_equal(roots(parent), representatives(i, j, n, "components"))
    starts = np.concatenate(([0], np.cumsum(np.bincount(j, minlength=n)))).astype(np.int64)
    earlier, cursor = np.empty(i.size, np.int64), starts[:-1].copy()
    order = rng.permutation(i.size)   # any order of the pairs
    for start in range(0, i.size, 37):
        block = order[start:start + 37]
        scatter_earlier(cursor, earlier, i[block], j[block])
    np.testing.assert_array_equal(greedy_representatives(starts, earlier),
                                  representatives(i, j, n, "representatives"))
