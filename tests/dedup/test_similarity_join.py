"""similarity_join against brute force (featurehash.dedup; ALGORITHMS.md "GCWS", "Random binning").

Truth: every pair whose exact kernel (GMM for gcws, Laplacian for binning) is >= the threshold, from the full
n x n kernel of a few hundred planted rows (tests/dedup_support.py). GMM of the nonnegative rows is computed
through sklearn's L1 distances, checked against the map's own `exact_kernel` on a block.

Recall. The codes of k samples agree independently with probability s, so a pair of similarity s becomes a
candidate with probability p(s) = 1 - (1 - s^r)^L (the S-curve), and with exact verification it is returned
exactly then. choose_bands makes p(threshold) >= 0.95, and p grows with s, so every true pair is found with
probability >= 0.95: the found count is at least a sum of M Bernoulli(0.95) (pairs sharing a base row are
positively correlated, which the 4 standard deviations below absorb). Two checks: recall >= 0.95 - 4 sqrt(0.95
0.05 / M) (the worst case, every pair at the threshold) and recall >= E - 4 sd with E, sd the mean and standard
deviation of the found fraction under the S-curve at the pairs' true similarities (about 0.99 and <= 0.02 here).
Seeds are fixed, so the outcome is deterministic; the S-curve numbers for these sets are printed on failure.

Precision is exactly 1 with verify="exact": every returned pair is a true pair with its exact similarity.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dedup_support import brute_force_pairs, dense_planted, nonnegative_gmm, sparse_planted
from featurehash import create_map
from featurehash.dedup import similarity_join
from featurehash.maps import InputError
from featurehash.lsh.banding import collision_probability

K_CODES = 256
THRESHOLDS = (0.5, 0.7, 0.9)


@pytest.fixture(scope="module")
def dense_case():
    X = dense_planted(n_groups=150, group_size=4, n_background=200, dim=32, seed=1)
    m = create_map({"method": "gcws", "input_dim": 32, "n_components": K_CODES, "seed": 7})
    return X, m, nonnegative_gmm(sp.csr_matrix(X), sp.csr_matrix(X))


@pytest.fixture(scope="module")
def sparse_case():
    X = sparse_planted(n_groups=150, group_size=4, n_background=300, dim=3000, nnz=40, seed=2)
    m = create_map({"method": "gcws", "input_dim": 3000, "n_components": K_CODES, "seed": 7})
    return X, m, nonnegative_gmm(X, X)


@pytest.fixture(scope="module")
def binning_case():
    rng = np.random.default_rng(3)
    base = rng.random((120, 8))
    copies = base[:, None, :] + rng.laplace(0.0, 1.0, (120, 3, 8)) * rng.uniform(0.002, 0.08, (120, 3, 1))
    X = np.concatenate([base, copies.reshape(-1, 8), rng.random((150, 8))])
    X = X[rng.permutation(X.shape[0])]
    m = create_map({"method": "binning", "input_dim": 8, "n_components": K_CODES, "seed": 5,
                    "params": {"gamma": 1.0}})
    return X, m, m.exact_kernel(X)


def pair_set(result) -> set[tuple[int, int]]:
    return set(zip(result.i.tolist(), result.j.tolist()))


def check_recall_and_precision(result, K, threshold, self_join=True):
    truth = brute_force_pairs(K, threshold, self_join)
    found = pair_set(result)
    assert found <= truth   # precision 1.0
    np.testing.assert_allclose(result.similarity, K[result.i, result.j], rtol=1e-12, atol=1e-12)
    assert len(truth) >= 30
    s = np.array([K[i, j] for i, j in truth])
    p = collision_probability(s, result.bands, result.rows)
    expected, sd = p.mean(), np.sqrt((p * (1 - p)).sum()) / len(truth)
    recall = len(found & truth) / len(truth)
    context = (f"t={threshold} L={result.bands} r={result.rows} pairs={len(truth)} recall={recall:.4f} "
               f"S-curve mean={expected:.4f} sd={sd:.4f}")
    assert result.recall_at_threshold >= 0.95, context
    assert recall >= 0.95 - 4 * np.sqrt(0.95 * 0.05 / len(truth)), context
    assert recall >= expected - 4 * sd, context
    return recall


def test_the_map_kernel_is_the_truth(dense_case, sparse_case):
    for X, m, K in (dense_case, sparse_case):
        np.testing.assert_allclose(m.exact_kernel(X[:40], X[:70]), K[:40, :70], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_dense_gcws_recall_and_precision(dense_case, threshold):
    X, m, K = dense_case
    result = similarity_join(X, m, threshold, target_recall=0.95)
    assert check_recall_and_precision(result, K, threshold) >= 0.95


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_sparse_gcws_recall_and_precision(sparse_case, threshold):
    X, m, K = sparse_case
    result = similarity_join(X, m, threshold, target_recall=0.95, chunk_rows=97)
    assert check_recall_and_precision(result, K, threshold) >= 0.95


@pytest.mark.parametrize("threshold", (0.5, 0.8))
def test_binning_laplacian_recall_and_precision(binning_case, threshold):
    X, m, K = binning_case
    result = similarity_join(X, m, threshold)
    check_recall_and_precision(result, K, threshold)


def test_outputs_are_sorted_typed_and_deterministic(sparse_case):
    X, m, _ = sparse_case
    a = similarity_join(X, m, 0.6)
    b = similarity_join(X, m, 0.6, chunk_rows=50, block_pairs=7)   # other chunks and pair blocks, same answer
    assert a.i.dtype == a.j.dtype == np.int64 and a.similarity.dtype == np.float64
    assert np.all(a.i < a.j)
    keys = a.i * X.shape[0] + a.j
    assert np.all(np.diff(keys) > 0)   # sorted by (i, j), no pair twice
    for name in ("i", "j", "similarity"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.candidates == b.candidates


def test_two_collections_equal_brute_force(sparse_case):
    X, m, K = sparse_case
    left, right = X[:500], X[500:]
    result = similarity_join(left, m, 0.7, Y=right)
    block = K[:500, 500:]
    truth = brute_force_pairs(block, 0.7, self_join=False)
    found = pair_set(result)
    assert found <= truth and len(truth) >= 30
    np.testing.assert_allclose(result.similarity, block[result.i, result.j], rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(result.i * right.shape[0] + result.j) > 0)
    check_recall_and_precision(result, block, 0.7, self_join=False)
    # the same pairs as the one-collection join restricted to (left, right)
    whole = similarity_join(X, m, 0.7)
    across = (whole.i < 500) & (whole.j >= 500)
    assert found == set(zip(whole.i[across].tolist(), (whole.j[across] - 500).tolist()))


def test_dense_against_sparse_input_gives_the_same_pairs(dense_case):
    X, m, _ = dense_case
    a = similarity_join(X, m, 0.7)
    b = similarity_join(sp.csr_matrix(X), m, 0.7)
    np.testing.assert_array_equal(a.i, b.i)
    np.testing.assert_array_equal(a.j, b.j)
    np.testing.assert_allclose(a.similarity, b.similarity, rtol=1e-12)


def test_pgmm_power_is_the_maps_kernel():
    X = dense_planted(n_groups=40, group_size=3, n_background=40, dim=16, seed=4)
    m = create_map({"method": "gcws", "input_dim": 16, "n_components": K_CODES, "seed": 2,
                    "params": {"power": 0.5}})
    K = m.exact_kernel(X)
    result = similarity_join(X, m, 0.7)
    assert pair_set(result) <= brute_force_pairs(K, 0.7)
    np.testing.assert_allclose(result.similarity, K[result.i, result.j], rtol=1e-10)


def test_code_estimates_are_close_to_the_exact_similarities(sparse_case):
    """verify="codes": the match fraction of k codes is Binomial(k, s) / k (sd sqrt(s (1 - s) / k)); a
    candidate also shares c whole bands of r codes, which moves its estimate up by at most c r (1 - s) / k.
    Each pair must lie within 4 sd (floored at 1/k) plus that bias of its exact similarity, and the mean
    deviation over all pairs within the bias bound plus 4 standard errors."""
    X, m, K = sparse_case
    threshold = 0.6
    result = similarity_join(X, m, threshold, verify="codes")
    assert len(result) >= 100
    s = K[result.i, result.j]
    codes = m.hash(X)
    rows, bands = result.rows, result.bands
    blocks = codes[:, :rows * bands].reshape(X.shape[0], bands, rows)
    shared = (blocks[result.i] == blocks[result.j]).all(axis=2).sum(axis=1)
    assert shared.min() >= 1   # every candidate shares a band
    np.testing.assert_allclose(result.similarity, (codes[result.i] == codes[result.j]).mean(axis=1))
    sd = np.maximum(np.sqrt(s * (1 - s) / K_CODES), 1 / K_CODES)
    bias = shared * rows * (1 - s) / K_CODES
    deviation = result.similarity - s
    assert np.all(np.abs(deviation) <= 4 * sd + bias)
    assert abs(deviation.mean()) <= bias.mean() + 4 * np.sqrt((sd ** 2).sum()) / len(s)
    # the estimate keeps the pairs whose estimate passes: most true pairs, and few far below the threshold
    assert np.all(result.similarity >= threshold)
    assert np.all(s >= threshold - 4 * sd.max() - bias.max())


def test_refusals(dense_case):
    X, m, _ = dense_case
    rff = create_map({"method": "rff", "input_dim": 32, "n_components": 16})
    with pytest.raises(InputError):
        similarity_join(X, rff, 0.5)
    with pytest.raises(InputError):
        similarity_join(X, m, 0.0)
    with pytest.raises(InputError):
        similarity_join(X, m, 0.5, verify="maybe")
    with pytest.raises(InputError):
        similarity_join(X[:, :5], m, 0.5)


def test_identical_rows_form_one_giant_bucket_handled_in_blocks():
    """300 copies of one row share every bucket: 300 * 299 / 2 pairs, emitted in blocks of 1000."""
    rng = np.random.default_rng(9)
    X = np.concatenate([np.tile(rng.random((1, 8)) + 0.1, (300, 1)), rng.random((20, 8)) + 0.1])
    m = create_map({"method": "gcws", "input_dim": 8, "n_components": 64, "seed": 1})
    result = similarity_join(X, m, 0.95, block_pairs=1000)
    same = {(i, j) for i in range(300) for j in range(i + 1, 300)}
    assert same <= pair_set(result)
    assert result.candidates >= len(same)


def test_progress_bars_do_not_change_the_answer(dense_case, capsys):
    X, m, _ = dense_case
    quiet = similarity_join(X, m, 0.7)
    shown = similarity_join(X, m, 0.7, progress=True, chunk_rows=200)
    assert "similarity_join" in capsys.readouterr().err
    np.testing.assert_array_equal(quiet.i, shown.i)
    np.testing.assert_array_equal(quiet.j, shown.j)


def test_dart_sampler_codes_work_the_same_way(sparse_case):
    """DartMinHash codes agree with probability exactly GMM too, so the same S-curve holds."""
    X, _, K = sparse_case
    m = create_map({"method": "gcws", "input_dim": 3000, "n_components": K_CODES, "seed": 7,
                    "params": {"sampler": "dart"}})
    check_recall_and_precision(similarity_join(X, m, 0.7), K, 0.7)


def test_dense_rows_against_sparse_rows(sparse_case):
    X, m, _ = sparse_case
    a = similarity_join(X[:500].toarray(), m, 0.7, Y=X[500:])
    b = similarity_join(X[:500], m, 0.7, Y=X[500:])
    np.testing.assert_array_equal(a.i, b.i)
    np.testing.assert_array_equal(a.j, b.j)
    np.testing.assert_allclose(a.similarity, b.similarity, rtol=1e-12)


def test_documents_join_through_the_maps_text_stage():
    """A map with a text front stage joins documents (token lists, weighted tokens) as their hashed rows."""
    from featurehash.dedup import duplicate_clusters
    feature_map = create_map({"method": "gcws", "n_components": 128, "params": {"sampler": "dart"},
                              "input": {"hashing": {"ngram_range": [3, 3]}}})
    documents = ["the quick brown fox jumps over the lazy dog near the river bank today",
                 "an entirely different sentence about tables, numbers and contents here",
                 "the quick brown fox jumps over the lazy dog near the river bank tonight"]
    pairs = similarity_join(documents, feature_map, 0.5)
    rows = feature_map.text_stage.transform(documents, dtype=np.float64)
    expected = similarity_join(rows, feature_map, 0.5)
    assert (pairs.i.tolist(), pairs.j.tolist()) == ([0], [2]) == (expected.i.tolist(), expected.j.tolist())
    np.testing.assert_array_equal(pairs.similarity, expected.similarity)
    assert duplicate_clusters(documents, feature_map, 0.5).labels.tolist() == [0, 1, 0]


def test_empty_rows_with_the_code_option_are_duplicates_of_each_other_only():
    """gcws params.empty_rows "code": all-zero rows share the reserved code, so they are a group of exact
    duplicates (GMM(0, 0) = 1 by the kernel's convention) and never a nonempty row's; without the option
    the join refuses them, naming the rows."""
    X = np.abs(np.random.default_rng(5).standard_normal((40, 8)))
    X[[3, 7, 20]] = 0
    X[11] = X[10] * 1.001
    spec = {"method": "gcws", "input_dim": 8, "n_components": 64, "seed": 1, "params": {"sampler": "dart"}}
    m = create_map({**spec, "params": {**spec["params"], "empty_rows": "code"}})
    for verify in ("exact", "codes"):
        pairs = similarity_join(sp.csr_matrix(X), m, 0.8, verify=verify)
        found = dict(zip(zip(pairs.i.tolist(), pairs.j.tolist()), pairs.similarity.tolist()))
        with_empty = {pair: s for pair, s in found.items() if {3, 7, 20} & set(pair)}
        assert with_empty == {(3, 7): 1.0, (3, 20): 1.0, (7, 20): 1.0} and (10, 11) in found
    with pytest.raises(InputError, match=r"row\(s\) 3, 7, 20"):
        similarity_join(X, create_map(spec), 0.8)
