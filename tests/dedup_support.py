"""Planted near-duplicate sets for the dedup tests and bench/bench_dedup.py: groups of a base row and
perturbed copies (so their similarities spread from well below to near 1), plus unrelated rows,
shuffled by a fixed permutation. Everything is seeded: the same call gives the same rows."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def dense_planted(n_groups: int, group_size: int, n_background: int, dim: int, seed: int,
                  max_noise: float = 1.0) -> np.ndarray:
    """Nonnegative dense rows (log-normal entries); copies multiply each entry by exp(sigma z),
    sigma ~ U(0.02, max_noise) per copy (GMM of a copy to its base ~ 1 - 0.8 sigma for small sigma)."""
    rng = np.random.default_rng(seed)
    base = rng.lognormal(0.0, 1.5, (n_groups, dim))
    sigma = rng.uniform(0.02, max_noise, (n_groups, group_size - 1, 1))
    copies = base[:, None, :] * np.exp(sigma * rng.standard_normal((n_groups, group_size - 1, dim)))
    rows = np.concatenate([base, copies.reshape(-1, dim), rng.lognormal(0.0, 1.5, (n_background, dim))])
    return rows[rng.permutation(rows.shape[0])]


def sparse_planted(n_groups: int, group_size: int, n_background: int, dim: int, nnz: int, seed: int,
                   max_change: float = 0.45, return_groups: bool = False):
    """Nonnegative CSR rows with `nnz` random coordinates each; a copy moves a fraction ~ U(0, max_change)
    of its base's coordinates elsewhere and jitters the values by exp(0.1 z). With `return_groups`, also
    each row's group (-1 for the unrelated rows). Large sets (n_rows * dim > 2^26) draw coordinates with
    replacement (a repeat is summed) instead of distinct ones, to stay within memory."""
    rng = np.random.default_rng(seed)
    n_rows = n_groups * group_size + n_background
    columns = np.empty((n_rows, nnz), dtype=np.int64)
    values = rng.lognormal(0.0, 1.0, (n_rows, nnz))
    if n_rows * dim <= 1 << 26:
        columns[:] = np.argsort(rng.random((n_rows, dim)), axis=1)[:, :nnz]   # distinct coordinates per row
    else:
        columns[:] = rng.integers(0, dim, (n_rows, nnz))
    bases = np.arange(n_groups) * group_size
    for offset in range(1, group_size):   # copies of base rows (a loop over the group size only)
        rows = bases + offset
        moved = rng.random((n_groups, nnz)) < rng.uniform(0.0, max_change, (n_groups, 1))
        columns[rows] = np.where(moved, columns[rows], columns[bases])
        values[rows] = np.where(moved, values[rows], values[bases] * np.exp(0.1 * rng.standard_normal((n_groups, nnz))))
    # a moved coordinate may land on a kept one: duplicates in a row are summed by the CSR constructor
    X = sp.csr_matrix((values.ravel(), columns.ravel(), np.arange(0, n_rows * nnz + 1, nnz)), shape=(n_rows, dim))
    X.sum_duplicates()
    order = rng.permutation(n_rows)
    if return_groups:
        groups = np.concatenate([np.repeat(np.arange(n_groups), group_size), np.full(n_background, -1)])
        return X[order], groups[order]
    return X[order]


def brute_force_pairs(K: np.ndarray, threshold: float, self_join: bool = True) -> set[tuple[int, int]]:
    """Every (i, j) (i < j for one collection) with K[i, j] >= threshold."""
    hits = K >= threshold
    if self_join:
        hits = np.triu(hits, 1)
    i, j = np.nonzero(hits)
    return set(zip(i.tolist(), j.tolist()))


def nonnegative_gmm(X, Y) -> np.ndarray:
    """GMM of nonnegative rows through L1 distances (sklearn's sparse manhattan_distances): sum min =
    (S - D) / 2, sum max = (S + D) / 2 with S the two rows' sums and D their L1 distance."""
    from sklearn.metrics.pairwise import manhattan_distances
    D = manhattan_distances(X, Y)
    sums_x = np.asarray(X.sum(axis=1)).ravel()
    sums_y = np.asarray(Y.sum(axis=1)).ravel()
    S = sums_x[:, None] + sums_y[None, :]
    return (S - D) / (S + D)
