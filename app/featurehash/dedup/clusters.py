"""Near-duplicate clusters from the verified pairs of a similarity join."""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..maps.errors import InputError
from .join import DEFAULT_BLOCK_PAIRS, DEFAULT_CHUNK_ROWS, SimilarPairs, similarity_join


@dataclass(frozen=True)
class DuplicateClusters:
    """`labels` (n,) int64: the cluster of each row, numbered by their representatives' order;
    `representatives` (n_clusters,) int64: the row kept for each cluster (the lowest index of its
    members in both modes); `pairs`: the verified pairs the clusters were built from."""

    labels: np.ndarray
    representatives: np.ndarray
    mode: str
    pairs: SimilarPairs

    @property
    def n_clusters(self) -> int:
        return int(self.representatives.size)

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=self.n_clusters)


def duplicate_clusters(X, feature_map, threshold: float, *, mode: str = "components",
                       target_recall: float = 0.95, verify: str = "exact",
                       chunk_rows: int = DEFAULT_CHUNK_ROWS, block_pairs: int = DEFAULT_BLOCK_PAIRS,
                       progress: bool = False) -> DuplicateClusters:
    """Group the rows of X into near-duplicate clusters (deterministic for a given map and X).

    The pairs are those of `similarity_join(X, feature_map, threshold, ...)` (kernel: GMM / pGMM for
    gcws, Laplacian for binning; candidates from LSH bands with the S-curve 1 - (1 - s^r)^L, Broder /
    "Mining of Massive Datasets" ch. 3; see there for the recall and cost).

    mode="components": the connected components of the graph of verified pairs
    (scipy.sparse.csgraph.connected_components). Transitive: a chain of similar rows becomes one
    cluster even if its ends are not similar. Representative: the lowest row index.
    mode="representatives": no chaining. Rows are taken in index order; a row joins the earliest
    (lowest-index) representative it is similar to (a verified pair >= threshold), else it becomes a
    representative itself. Every member is then similar to its representative, and the representative
    is the lowest index of its cluster. Linear in the number of pairs (one compiled pass).
    Clusters are numbered by their representatives' order; a row with no pair is its own cluster.
    """
    if mode not in ("components", "representatives"):
        raise InputError("mode", "must be 'components' or 'representatives'")
    pairs = similarity_join(X, feature_map, threshold, target_recall=target_recall, verify=verify,
                            chunk_rows=chunk_rows, block_pairs=block_pairs, progress=progress)
    n = X.shape[0] if hasattr(X, "shape") else len(X)
    if mode == "components":
        graph = sp.coo_matrix((np.ones(len(pairs), dtype=np.int8), (pairs.i, pairs.j)), shape=(n, n)).tocsr()
        _, components = connected_components(graph, directed=False)
        representative = np.full(components.max(initial=-1) + 1, n, dtype=np.int64)
        np.minimum.at(representative, components, np.arange(n, dtype=np.int64))
        row_representative = representative[components]
    else:
        order = np.lexsort((pairs.i, pairs.j))   # earlier neighbours of each row, ascending
        starts = np.concatenate(([0], np.cumsum(np.bincount(pairs.j, minlength=n)))).astype(np.int64)
        row_representative = _greedy_representatives(starts, pairs.i[order])
    representatives, labels = np.unique(row_representative, return_inverse=True)
    return DuplicateClusters(labels=labels.astype(np.int64).ravel(), representatives=representatives.astype(np.int64),
                             mode=mode, pairs=pairs)


@nb.njit(cache=True, nogil=True)
def _greedy_representatives(starts: np.ndarray, earlier: np.ndarray) -> np.ndarray:
    """For rows in index order: the first earlier neighbour that is a representative, else itself.
    `earlier[starts[j]:starts[j + 1]]` are row j's earlier neighbours, ascending."""
    n = starts.size - 1
    out = np.empty(n, dtype=np.int64)
    for row in range(n):
        out[row] = row
        for position in range(starts[row], starts[row + 1]):
            neighbour = earlier[position]
            if out[neighbour] == neighbour:
                out[row] = neighbour
                break
    return out
