"""featurehash.maps.pair_similarity: the pair verifier (pGMM of pairs of rows in blocks) and the GMM exact kernel
of wide sparse rows it computes; gcws `exact_kernel` on text-stage rows equals the dense GMM kernel and, pair
for pair, the join's verified similarities."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash import create_map
from featurehash.dedup import similarity_join
from featurehash.maps import kernels
from featurehash.maps.pair_similarity import ExactPairs, GMMPairs, gmm_of_all_pairs, laplacian_of_all_pairs
from text_support import real_corpus


@pytest.mark.parametrize("power", [1.0, 0.5, 2.0])
def test_all_pairs_equal_the_dense_gmm_kernel_on_signed_sparse_rows(power):
    rng = np.random.default_rng(1)
    X = sp.random(30, 5000, density=0.01, random_state=2, data_rvs=rng.standard_normal, format="csr")
    Y = sp.random(20, 5000, density=0.01, random_state=3, data_rvs=rng.standard_normal, format="csr")
    X = sp.csr_matrix(sp.diags(np.r_[0.0, np.ones(29)]) @ X)   # row 0 all zero: GMM 1 with itself
    X.eliminate_zeros()
    ours = gmm_of_all_pairs(X, Y, power)
    np.testing.assert_allclose(ours, kernels.gmm(X.toarray(), Y.toarray(), power), rtol=1e-12, atol=1e-14)
    itself = gmm_of_all_pairs(X, None, power)
    assert itself[0, 0] == 1.0 and np.all(np.diag(itself) == 1.0)
    np.testing.assert_allclose(itself, kernels.gmm(X.toarray(), X.toarray(), power), rtol=1e-12, atol=1e-14)


def test_a_pair_does_not_depend_on_its_block():
    X = sp.random(50, 300, density=0.1, random_state=4, format="csr")
    pairs = ExactPairs(GMMPairs(1.0), X)
    i, j = np.array([3, 7, 9, 3]), np.array([5, 1, 9, 5])
    whole = pairs(i, j)
    pairs.block = 1
    np.testing.assert_array_equal(pairs(i, j), whole)


def test_gcws_exact_kernel_of_documents_is_the_joins_verified_similarity():
    documents = [part for text in real_corpus() for part in text.split("\n\n") if len(part.split()) >= 10][:100]
    documents += [" ".join(document.split()[1:]) for document in documents[:20]]   # near copies
    feature_map = create_map({"method": "gcws", "n_components": 64, "seed": 2,
                              "input": {"hashing": {"ngram_range": [1, 2]}}})
    exact = feature_map.exact_kernel(documents)
    assert exact.shape == (120, 120) and np.all(np.diag(exact) == 1.0)
    rows = feature_map.text_stage.transform(documents[:40], dtype=np.float64)
    np.testing.assert_allclose(exact[:40, :40], kernels.gmm(*kernels.shared_columns(rows, rows)), rtol=1e-12)
    pairs = similarity_join(documents, feature_map, 0.6)
    assert len(pairs) >= 20
    np.testing.assert_array_equal(pairs.similarity, exact[pairs.i, pairs.j])


def test_binning_exact_kernel_of_documents_is_the_laplacian_of_the_stage_rows():
    documents = [part for text in real_corpus() for part in text.split("\n\n") if len(part.split()) >= 10][:60]
    feature_map = create_map({"method": "binning", "n_components": 64, "seed": 2, "params": {"gamma": 0.05},
                              "input": {"hashing": {}}})
    exact = feature_map.exact_kernel(documents[:40], documents[20:])
    rows_x = feature_map.text_stage.transform(documents[:40], dtype=np.float64)
    rows_y = feature_map.text_stage.transform(documents[20:], dtype=np.float64)
    np.testing.assert_allclose(exact, kernels.laplacian(*kernels.shared_columns(rows_x, rows_y), 0.05), rtol=1e-12)
    np.testing.assert_allclose(exact, laplacian_of_all_pairs(rows_x, rows_y, 0.05), rtol=0)
    assert np.all(np.diag(exact[20:, :20]) == 1.0)
