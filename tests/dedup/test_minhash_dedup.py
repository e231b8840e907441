"""similarity_join with minhash maps (featurehash.dedup; the Jaccard code family), against brute force.

Truth: every pair whose Jaccard similarity of supports is >= the threshold. On binary rows GMM is that Jaccard
(sum min / sum max of 0/1 rows), so gcws and minhash verify the same truth: both joins must return subsets of it
(precision 1 with exact verification) at the S-curve's recall, and at equal recall the same pairs. The recall
checks are test_similarity_join.py's (`check_recall_and_precision`): the S-curve's bound over the true pairs.
Seeds fixed: deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest

from dedup_support import brute_force_pairs, nonnegative_gmm, sparse_planted
from featurehash import create_map
from featurehash.dedup import similarity_join
from test_similarity_join import check_recall_and_precision, pair_set


@pytest.fixture(scope="module")
def binary_case():
    X = sparse_planted(n_groups=120, group_size=4, n_background=300, dim=3000, nnz=40, seed=12)
    X.data[:] = 1.0
    return X, nonnegative_gmm(X, X)


@pytest.mark.parametrize("variant", ["one_permutation", "k_permutation"])
def test_minhash_join_finds_the_jaccard_pairs(binary_case, variant):
    X, K = binary_case
    m = create_map({"method": "minhash", "input_dim": 3000, "n_components": 128, "seed": 7,
                    "params": {"variant": variant}})
    np.testing.assert_allclose(m.exact_kernel(X[:50], X[:80]), K[:50, :80], rtol=1e-12, atol=1e-12)
    result = similarity_join(X, m, 0.6, target_recall=0.95, chunk_rows=101)
    check_recall_and_precision(result, K, 0.6)


def test_on_binary_rows_minhash_and_gcws_return_the_same_pairs(binary_case):
    X, K = binary_case
    truth = brute_force_pairs(K, 0.6)
    found = {}
    for spec in ({"method": "minhash"}, {"method": "gcws", "params": {"sampler": "dart"}}):
        m = create_map({**spec, "input_dim": 3000, "n_components": 256, "seed": 3})
        result = similarity_join(X, m, 0.6, target_recall=0.99)
        found[spec["method"]] = pair_set(result)
        assert found[spec["method"]] <= truth
    # both at recall >= 0.99 of the truth's few hundred pairs: the same pairs but for a handful
    assert len(found["minhash"] ^ found["gcws"]) <= 0.02 * len(truth)
    assert len(found["minhash"]) >= 0.97 * len(truth)


def test_text_dedup_through_the_stage():
    docs = [f"alpha beta gamma delta epsilon zeta eta theta iota kappa w{i}" for i in range(40)]
    docs += [f"lorem ipsum dolor sit amet consectetur adipiscing elit sed do{i} x{i} y{i}" for i in range(40)]
    m = create_map({"method": "minhash", "n_components": 128, "seed": 2,
                    "input": {"hashing": {"analyzer": "word", "ngram_range": [1, 1]}}})
    result = similarity_join(docs, m, 0.8)
    pairs = pair_set(result)
    # the first 40 share 10 of 11 words (J = 10/12), the next 40 share 8 of 11 (J = 8/14 < 0.8)
    assert all(i < 40 and j < 40 for i, j in pairs)
    assert len(pairs) >= 0.9 * (40 * 39 // 2)
    np.testing.assert_allclose(result.similarity, 10 / 12)
