"""Exact near-duplicate truth, computed by brute force independently of featurehash, and the fixed
collections the recall tests (tests/dedup/test_recall.py) and bench/bench_dedup.py measure on.

Truth. GMM(x, y) = sum_c min(x_c, y_c) / sum_c max(x_c, y_c) for nonnegative rows, computed literally
(numpy minimum / maximum, scipy's sparse minimum / maximum), never through the L1 identity the library's
verification uses; the Laplacian kernel exp(-gamma ||x - y||_1) through scipy's cityblock cdist.
- dense rows: every pair, in blocks of rows (time n^2 d / 2, memory `block` n d); sum max as
  sum x + sum y - sum min (max(a, b) = a + b - min(a, b) per coordinate).
- sparse rows: a pair that shares no coordinate has sum min = 0, so GMM 0. Of the pairs that share one,
  sum min <= sum_shared sqrt(x_c y_c) (min(a, b) <= sqrt(ab)) and sum max >= max(sum x, sum y), so
  GMM <= (sqrt(X) sqrt(X)^T)_ij / max(sum x_i, sum x_j); the pairs whose bound reaches the threshold
  (one sparse product) are then computed literally. Exact for every pair, without n^2 work.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist

from dedup_support import dense_planted, sparse_planted


def dense_gmm_pairs(X: np.ndarray, threshold: float, block: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, GMM) of every pair i < j of nonnegative dense rows with GMM >= threshold, sorted by (i, j)."""
    X = np.asarray(X, dtype=np.float64)
    sums = X.sum(axis=1)
    found = []
    for start in range(0, X.shape[0] - 1, block):   # a loop over blocks of rows: memory block * n * d
        low = np.minimum(X[start:start + block, None, :], X[None, start + 1:, :]).sum(axis=2)
        # max(a, b) = a + b - min(a, b) coordinate by coordinate, so sum max needs no second pass
        gmm = low / (sums[start:start + block, None] + sums[None, start + 1:] - low)
        a, b = np.nonzero(gmm >= threshold)
        i, j = start + a, start + 1 + b
        keep = i < j
        found.append((i[keep], j[keep], gmm[a[keep], b[keep]]))
    return _sorted(found)


def sparse_gmm_pairs(X, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, GMM) of every pair i < j of nonnegative sparse rows with GMM >= threshold, sorted by (i, j)."""
    X = sp.csr_matrix(X, dtype=np.float64)
    root = X.sqrt()
    sums = np.asarray(X.sum(axis=1)).ravel()
    bound = sp.triu(root @ root.T, 1).tocoo()
    # a hair of slack: for identical rows the bound equals the sum up to rounding
    keep = bound.data >= threshold * np.maximum(sums[bound.row], sums[bound.col]) * (1 - 1e-9)
    i, j = bound.row[keep].astype(np.int64), bound.col[keep].astype(np.int64)
    found = []
    for start in range(0, i.size, 1 << 16):   # literal min / max, in blocks of pairs
        a, b = X[i[start:start + (1 << 16)]], X[j[start:start + (1 << 16)]]
        gmm = np.asarray(a.minimum(b).sum(axis=1)).ravel() / np.asarray(a.maximum(b).sum(axis=1)).ravel()
        hit = gmm >= threshold
        found.append((i[start:start + (1 << 16)][hit], j[start:start + (1 << 16)][hit], gmm[hit]))
    return _sorted(found)


def laplacian_pairs(X: np.ndarray, gamma: float, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, exp(-gamma ||x_i - x_j||_1)) of every pair i < j at or above threshold, sorted by (i, j)."""
    K = np.exp(-gamma * cdist(X, X, "cityblock"))
    i, j = np.nonzero(np.triu(K >= threshold, 1))
    return i.astype(np.int64), j.astype(np.int64), K[i, j]


def _sorted(found) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not found:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0)
    i, j, s = (np.concatenate(part) for part in zip(*found))
    order = np.lexsort((j, i))
    return i[order].astype(np.int64), j[order].astype(np.int64), s[order]


# The collections. Each is sized so that every threshold 0.5 / 0.7 / 0.9 has >= ~290 exact pairs
# (counts in tests/dedup/test_recall.py), with a fixed seed.

def dense_set(n_groups: int = 400, n_background: int = 300, seed: int = 1) -> np.ndarray:
    """Planted dense rows, dim 32: groups of 4 (a base and 3 copies with log-normal noise of sd ~ U(0.02, 0.5))
    among unrelated log-normal rows (tests/dedup_support.py `dense_planted`)."""
    return dense_planted(n_groups, 4, n_background, dim=32, seed=seed, max_noise=0.5)


def sparse_set(n_groups: int = 300, n_background: int = 300, dim: int = 3000, nnz: int = 40, seed: int = 2):
    """Planted sparse rows, `nnz` nonzeros of `dim`: groups of 6 (a base and 5 copies moving a fraction
    ~ U(0, 0.15) of its coordinates, values jittered by exp(0.1 z)) among unrelated rows."""
    return sparse_planted(n_groups, 6, n_background, dim, nnz, seed=seed, max_change=0.15)


def digits_set(n_copies: int = 400, seed: int = 29) -> np.ndarray:
    """scikit-learn's digits (1,797 8x8 images, pixels 0..16, shipped with the package) plus noisy copies of
    `n_copies` of them (each pixel + sigma z, sigma ~ U(0, 1.5) per copy, rounded and clipped to 0..16),
    shuffled. The plain digits give the pairs at 0.5 and 0.7 (the nearest images of a class); they have
    almost none at 0.9 (5), which the copies supply."""
    from sklearn.datasets import load_digits

    digits = load_digits().data
    rng = np.random.default_rng(seed)
    picked = rng.choice(digits.shape[0], n_copies, replace=False)
    sigma = rng.uniform(0.0, 1.5, (n_copies, 1))
    copies = np.clip(np.rint(digits[picked] + sigma * rng.standard_normal((n_copies, digits.shape[1]))), 0, 16)
    rows = np.concatenate([digits, copies])
    return rows[rng.permutation(rows.shape[0])]


def laplacian_set(n_groups: int = 150, n_background: int = 200, dim: int = 8, seed: int = 3) -> np.ndarray:
    """Rows in [0, 1]^dim: groups of 4 (a base and 3 copies with Laplace noise of scale ~ U(0.002, 0.06)) among
    unrelated uniform rows (whose L1 distances, ~ dim / 3, give kernels ~ exp(-dim / 3) at gamma 1)."""
    rng = np.random.default_rng(seed)
    base = rng.random((n_groups, dim))
    noise = rng.laplace(0.0, 1.0, (n_groups, 3, dim)) * rng.uniform(0.002, 0.06, (n_groups, 3, 1))
    rows = np.concatenate([base, (base[:, None, :] + noise).reshape(-1, dim), rng.random((n_background, dim))])
    return rows[rng.permutation(rows.shape[0])]
