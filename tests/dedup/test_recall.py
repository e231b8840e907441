"""Recall and precision of similarity_join against exact pairs found by brute force (issue 29), at
target_recall=0.95, on four fixed collections (tests/dedup_truth.py): planted dense rows (dim 32), planted
sparse rows (40 of 50,000 coordinates), scikit-learn's digits plus noisy copies (a real set shipped with the
package) for gcws (GMM) at thresholds 0.5 / 0.7 / 0.9, and planted rows for binning (Laplacian) at 0.7.
The truth is computed literally (sum min / sum max; exp(-gamma L1) from scipy), never by the library.

Precision: with verify="exact" every returned pair is an exact pair, with its exact similarity (1.0).

Recall, and why `recall >= 0.95` is a sound assert with a fixed seed. The k codes of a pair of similarity s
agree independently with probability s, so the pair becomes a candidate (and, verified exactly, is returned)
with probability p(s) = 1 - (1 - s^r)^L, the S-curve; choose_bands makes p(threshold) >= 0.95 and p rises
with s, so the expected recall E = mean p(s) over the m true pairs is above 0.95 by the pairs' spread above
the threshold: E - 0.95 is 0.032-0.048 on these sets. The found fraction scatters around E over map seeds.
Were the m pairs independent its sd would be sqrt(sum p (1 - p)) / m (<= sqrt(0.95 0.05 / m)), but pairs
that share a row, or join near-identical rows, succeed or fail together. `row_sd` bounds the sd for pairs
correlated through a shared row: Cov(a, b) <= sd_a sd_b when they share a row, so Var <= sum over rows of
(sum of sd_a over the row's pairs)^2. Measured over 20 map seeds (python bench/bench_dedup.py --seeds 20)
the sd of the recall is 0.9-2.2 x the independent-pairs value on the planted sets and below `row_sd`, and
on the digits (~500 true pairs per row at 0.5, among look-alike images) 0.0071 / 0.0073 at 0.5 / 0.7,
42 x / 9 x the independent value and 1.4 x / 1.1 x `row_sd`. The test requires E - 0.95 >= 3 row_sd:
with the measured sds that is >= 4.4 sd on every set (the lowest recall over the 20 seeds was 0.966).
"""

from __future__ import annotations

import numpy as np
import pytest

from dedup_support import nonnegative_gmm
from dedup_truth import (dense_gmm_pairs, dense_set, digits_set, laplacian_pairs, laplacian_set,
                         sparse_gmm_pairs, sparse_set)
from featurehash import create_map
from featurehash.dedup import similarity_join
from featurehash.lsh.banding import collision_probability

K_CODES = 256
MAP_SEED = 7
TARGET = 0.95
THRESHOLDS = (0.5, 0.7, 0.9)
MIN_PAIRS = 200


def gcws_case(X, truth):
    m = create_map({"method": "gcws", "input_dim": X.shape[1], "n_components": K_CODES, "seed": MAP_SEED})
    return X, m, truth(X, min(THRESHOLDS))


@pytest.fixture(scope="module")
def cases():
    X = laplacian_set()
    binning = create_map({"method": "binning", "input_dim": X.shape[1], "n_components": K_CODES,
                          "seed": MAP_SEED, "params": {"gamma": 1.0}})
    return {"dense": gcws_case(dense_set(), dense_gmm_pairs),
            "sparse": gcws_case(sparse_set(), sparse_gmm_pairs),
            "digits": gcws_case(digits_set(), dense_gmm_pairs),
            "laplacian": (X, binning, laplacian_pairs(X, 1.0, 0.7))}


def row_sd(n: int, i: np.ndarray, j: np.ndarray, p: np.ndarray) -> float:
    """Bound on the sd of the found fraction when pairs sharing a row may be fully correlated."""
    sd = np.sqrt(p * (1.0 - p))
    per_row = np.bincount(i, sd, minlength=n) + np.bincount(j, sd, minlength=n)
    return float(np.sqrt((per_row ** 2).sum()) / p.size)


def check(result, n: int, truth, threshold: float) -> float:
    ti, tj, ts = truth
    true = ts >= threshold
    ti, tj, ts = ti[true], tj[true], ts[true]
    assert ti.size >= MIN_PAIRS
    truth_keys = ti * n + tj   # sorted, as the truth is sorted by (i, j)
    found_keys = result.i * n + result.j
    # precision 1.0: each returned pair is an exact pair, with its exact similarity
    at = np.minimum(np.searchsorted(truth_keys, found_keys), truth_keys.size - 1)
    assert np.array_equal(truth_keys[at], found_keys)
    np.testing.assert_allclose(result.similarity, ts[at], rtol=1e-12, atol=1e-12)

    recall = found_keys.size / truth_keys.size
    p = collision_probability(ts, result.bands, result.rows)
    expected, bound = float(p.mean()), row_sd(n, ti, tj, p)
    context = (f"t={threshold} L={result.bands} r={result.rows} pairs={ti.size} recall={recall:.4f} "
               f"S-curve mean={expected:.4f} row_sd={bound:.4f}")
    assert result.recall_at_threshold >= TARGET, context
    assert expected - TARGET >= 3 * bound, context   # the set leaves the margin the docstring argues for
    assert recall >= TARGET, context
    return recall


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("name", ("dense", "sparse", "digits"))
def test_gcws_join_finds_95_percent_of_exact_pairs_and_only_them(cases, name, threshold):
    X, m, truth = cases[name]
    result = similarity_join(X, m, threshold, target_recall=TARGET, verify="exact")
    check(result, X.shape[0], truth, threshold)


def test_binning_join_finds_95_percent_of_exact_laplacian_pairs_and_only_them(cases):
    X, m, truth = cases["laplacian"]
    result = similarity_join(X, m, 0.7, target_recall=TARGET, verify="exact")
    check(result, X.shape[0], truth, 0.7)


def test_brute_force_truth_agrees_with_the_maps_kernel(cases):
    """The literal truth and the map's exact_kernel (its L1 identity; sklearn's sparse L1 distances for the
    sparse rows, which exact_kernel would densify) agree on the pairs of a block, so the computations check
    each other (pairs within 1e-9 of the threshold may fall either way by rounding)."""
    for name in ("dense", "sparse", "digits", "laplacian"):
        X, m, (ti, tj, ts) = cases[name]
        K = nonnegative_gmm(X[:300], X[:300]) if name == "sparse" else m.exact_kernel(X[:300])
        threshold = 0.7 if name == "laplacian" else min(THRESHOLDS)
        inside = tj < 300
        np.testing.assert_allclose(K[ti[inside], tj[inside]], ts[inside], rtol=1e-12, atol=1e-12)
        clear = np.triu(K >= threshold + 1e-9, 1)
        clear[ti[inside], tj[inside]] = False
        assert not clear.any()   # no pair clearly above the threshold is missing from the truth
