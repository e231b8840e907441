"""Clusters of verified pairs, with no I/O: connected components (union-find) and greedy representatives.

Both rules number rows 0 .. n-1 (dedup: row positions; an index's duplicates: items ranked by id) and give each
row its representative, the lowest row of its cluster:
- components: the connected components of the graph of pairs, by union-find (union by the lower root, with path
  compression: each root is its component's lowest row). Transitive: a chain of similar rows becomes one cluster
  even if its ends are not similar.
- representatives: no chaining. Rows are taken in order; a row joins the lowest earlier representative it is
  paired with, else becomes a representative itself; every member is then similar to its representative.

The kernels (`union_pairs`, `roots`, `scatter_earlier`, `greedy_representatives`) take pairs in blocks, so a caller
may stream them (featurehash.dedup.clusters); `representatives` does it all for pairs held in memory.
"""

from __future__ import annotations

import numba as nb
import numpy as np

CLUSTER_MODES = ("components", "representatives")


@nb.njit(cache=True, nogil=True)
def _find(parent: np.ndarray, row: int) -> int:
    root = row
    while parent[root] != root:
        root = parent[root]
    while parent[row] != root:   # path compression
        parent[row], row = root, parent[row]
    return root


@nb.njit(cache=True, nogil=True)
def union_pairs(parent: np.ndarray, i: np.ndarray, j: np.ndarray) -> None:
    """Join the components of each pair (i[t], j[t]) in the union-find forest `parent` (start: np.arange(n))."""
    for t in range(i.size):
        a, b = _find(parent, i[t]), _find(parent, j[t])
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b


@nb.njit(cache=True, nogil=True)
def roots(parent: np.ndarray) -> np.ndarray:
    """Each row's root: parent[row] <= row always (roots are their components' lowest rows), so one
    ascending pass finds every root from the already final roots below it."""
    out = np.empty_like(parent)
    for row in range(parent.size):
        out[row] = out[parent[row]] if parent[row] != row else row
    return out


@nb.njit(cache=True, nogil=True)
def scatter_earlier(cursor: np.ndarray, earlier: np.ndarray, i: np.ndarray, j: np.ndarray) -> None:
    """File each pair's i (the earlier row) under its j: earlier[cursor[j]], cursor[j] moving on."""
    for t in range(i.size):
        earlier[cursor[j[t]]] = i[t]
        cursor[j[t]] += 1


@nb.njit(cache=True, nogil=True)
def greedy_representatives(starts: np.ndarray, earlier: np.ndarray) -> np.ndarray:
    """For rows in index order: the lowest earlier neighbour that is a representative, else itself.
    `earlier[starts[j]:starts[j + 1]]` are row j's earlier neighbours, in any order."""
    n = starts.size - 1
    out = np.empty(n, dtype=np.int64)
    for row in range(n):
        out[row] = row
        for position in range(starts[row], starts[row + 1]):
            neighbour = earlier[position]
            if out[neighbour] == neighbour and neighbour < out[row]:
                out[row] = neighbour
    return out


def representatives(i: np.ndarray, j: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Each of n rows' representative (int64) from pairs (i[t] < j[t]) held in memory, by `mode`
    ("components" or "representatives")."""
    i, j = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    if mode == "components":
        parent = np.arange(n, dtype=np.int64)
        union_pairs(parent, i, j)
        return roots(parent)
    starts = np.concatenate(([0], np.cumsum(np.bincount(j, minlength=n)))).astype(np.int64)
    earlier = np.empty(i.size, dtype=np.int64)
    scatter_earlier(starts[:-1].copy(), earlier, i, j)
    return greedy_representatives(starts, earlier)
