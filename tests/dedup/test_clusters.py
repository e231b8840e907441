"""duplicate_clusters: components equal to the connected components of the brute-force pairs, and the
representatives mode never chains (every member is similar to its representative).

Components are compared with the brute-force truth's: the join misses a true pair with probability <= 5%
(S-curve, test_similarity_join.py), and a missed pair splits a component when no other path of found pairs
joins its rows. So at target_recall 0.95 the components are checked as a refinement of the truth's (every
found component inside one true component, at most 5% more of them), and at target_recall 0.999 as equal
(fixed seeds: deterministic)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from dedup_support import brute_force_pairs, dense_planted, nonnegative_gmm, sparse_planted
from featurehash import create_map
from featurehash.dedup import duplicate_clusters
from featurehash.maps import InputError


@pytest.fixture(scope="module")
def sparse_case():
    X = sparse_planted(n_groups=150, group_size=4, n_background=300, dim=3000, nnz=40, seed=2)
    m = create_map({"method": "gcws", "input_dim": 3000, "n_components": 256, "seed": 7})
    return X, m, nonnegative_gmm(X, X)


def canonical(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered by each cluster's lowest row (so two labelings of one partition compare equal)."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inverse.ravel()]


def truth_components(K, threshold):
    n = K.shape[0]
    pairs = np.array(sorted(brute_force_pairs(K, threshold))).reshape(-1, 2)
    graph = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    return connected_components(graph, directed=False)[1]


@pytest.mark.parametrize("threshold", (0.5, 0.7, 0.9))
def test_components_equal_brute_force_components(sparse_case, threshold):
    X, m, K = sparse_case
    truth = canonical(truth_components(K, threshold))
    # at target_recall 0.95 one pair of the 443 above 0.5 (GMM 0.53) is missed and splits its group:
    # the components are then a refinement of the truth's, equal to the components of the found pairs
    clusters = duplicate_clusters(X, m, threshold)
    labels = clusters.labels
    for label in np.unique(labels):
        assert np.unique(truth[labels == label]).size == 1
    assert clusters.n_clusters - np.unique(truth).size <= max(1, 0.05 * len(brute_force_pairs(K, threshold)))
    # at target_recall 0.999 every pair is found (expected misses: 443 * 0.001 at worst), so they are equal
    clusters = duplicate_clusters(X, m, threshold, target_recall=0.999)
    labels = clusters.labels
    np.testing.assert_array_equal(canonical(labels), truth)
    # labels numbered by representative, which is the lowest index of each cluster
    np.testing.assert_array_equal(labels, canonical(labels))
    first = np.array([np.flatnonzero(labels == c)[0] for c in range(clusters.n_clusters)])
    np.testing.assert_array_equal(clusters.representatives, first)
    assert clusters.sizes.sum() == X.shape[0]


def test_representatives_never_chain(sparse_case):
    X, m, K = sparse_case
    threshold = 0.5
    clusters = duplicate_clusters(X, m, threshold, mode="representatives")
    labels, representatives = clusters.labels, clusters.representatives
    rep_of_row = representatives[labels]
    members = rep_of_row != np.arange(X.shape[0])
    assert members.any()
    # every member is similar to its representative, which comes before it
    assert np.all(K[np.flatnonzero(members), rep_of_row[members]] >= threshold)
    assert np.all(rep_of_row <= np.arange(X.shape[0]))
    # representatives themselves are representatives of their own cluster
    np.testing.assert_array_equal(rep_of_row[representatives], representatives)
    # the greedy rule, checked row by row on the found pairs: the earliest similar representative, else itself
    pairs = clusters.pairs
    neighbours = {}
    for i, j in zip(pairs.i.tolist(), pairs.j.tolist()):
        neighbours.setdefault(j, []).append(i)
    expected = np.arange(X.shape[0])
    for row in range(X.shape[0]):
        for earlier in sorted(neighbours.get(row, [])):
            if expected[earlier] == earlier:
                expected[row] = earlier
                break
    np.testing.assert_array_equal(rep_of_row, expected)
    # each representatives cluster lies inside one connected component
    components = duplicate_clusters(X, m, threshold).labels
    for label in range(clusters.n_clusters):
        assert np.unique(components[labels == label]).size == 1


def test_a_chain_is_one_component_but_not_one_representative_cluster():
    """Rows a - b - c with GMM(a, b), GMM(b, c) >= t > GMM(a, c): components join all three, representatives
    keep c apart from a."""
    a = np.array([[4.0, 0.0, 0.0, 1.0]])
    b = np.array([[2.0, 2.0, 0.0, 1.0]])
    c = np.array([[0.0, 4.0, 0.0, 1.0]])
    X = np.concatenate([a, b, c, np.array([[0.0, 0.0, 5.0, 0.1]])])
    m = create_map({"method": "gcws", "input_dim": 4, "n_components": 512, "seed": 3})
    K = m.exact_kernel(X)
    threshold = 0.4
    assert K[0, 1] >= threshold and K[1, 2] >= threshold and K[0, 2] < threshold
    components = duplicate_clusters(X, m, threshold)
    representatives = duplicate_clusters(X, m, threshold, mode="representatives")
    np.testing.assert_array_equal(components.labels, [0, 0, 0, 1])
    np.testing.assert_array_equal(representatives.labels, [0, 0, 1, 2])
    np.testing.assert_array_equal(representatives.representatives, [0, 2, 3])


def test_deterministic_and_dense_works_too():
    X = dense_planted(n_groups=60, group_size=3, n_background=60, dim=24, seed=11)
    m = create_map({"method": "gcws", "input_dim": 24, "n_components": 256, "seed": 4})
    for mode in ("components", "representatives"):
        a = duplicate_clusters(X, m, 0.7, mode=mode)
        b = duplicate_clusters(X, m, 0.7, mode=mode, chunk_rows=33)
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_array_equal(a.representatives, b.representatives)
        assert a.labels.dtype == np.int64 and a.representatives.dtype == np.int64
    with pytest.raises(InputError):
        duplicate_clusters(X, m, 0.7, mode="chains")
