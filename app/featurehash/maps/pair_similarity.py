"""The exact similarity of pairs of rows, block by block: the verifier of near-duplicate joins (featurehash.dedup,
the engines, the index's duplicates, through featurehash.lsh.similarity) and the exact kernels (GMM, L1 Laplacian)
of rows far wider than their nonzeros (text hashed into 2^30 columns), so that both compute the same numbers the
same way.

pGMM (Li, KDD 2017; featurehash.maps.kernels.gmm): with t(x) = sign(x) |x / c|^p for one common scale c (the
largest magnitude of all rows: the ratio does not change, and no power overflows), pGMM(x, y) = (S - D) / (S + D),
S = ||t(x)||_1 + ||t(y)||_1, D = ||t(x) - t(y)||_1 (two zero vectors: 1). Invariant: a pair's value depends on
the pair and the common scale only, not on the block it is computed in; the rows are never copied whole (only
with power != 1, whose t(x) is computed once), and only the nonzeros of a block's rows are touched, so the cost of
an n x m kernel of sparse rows is O(n m nnz per row), never O(n m width).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .mapped_pages import MAPPED_BLOCK_PAIRS, mapped_buffers, random_access, release

# elements of one block's gathered rows (dense) or nonzeros (sparse): ~32 MB of float64
BLOCK_ELEMENTS = 1 << 22


class GMMPairs:
    """pGMM's pieces for ExactPairs: the common scale, t(x), and (S, D) -> pGMM."""

    def __init__(self, power: float = 1.0):
        self.power = float(power)
        self.transforms = self.power != 1.0   # at power 1, t(x) = x: the rows of pairs are not copied

    @staticmethod
    def scale(peak: float) -> float:
        """The common scale of a set of rows whose largest magnitude is `peak`."""
        return 1.0 / peak if peak > 0 else 1.0

    def signed_power(self, values: np.ndarray, scale: float) -> np.ndarray:
        """t(x) = sign(x) |x scale|^power, elementwise."""
        return np.sign(values) * np.abs(values * scale) ** self.power

    def combine(self, total, distance: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total + distance > 0, (total - distance) / (total + distance), 1.0)


class LaplacianPairs:
    """The L1 Laplacian exp(-gamma ||x - y||_1) for ExactPairs (no transform: the distance only)."""

    transforms = False

    def __init__(self, gamma: float):
        self.gamma = float(gamma)

    def combine(self, total, distance: np.ndarray) -> np.ndarray:
        return np.exp(-self.gamma * distance)


def all_pairs(similarity, X, Y=None) -> np.ndarray:
    """The (n, m) similarity of every row of X against every row of Y (Y None: X against itself), computed by the
    pair verifier: sparse rows cost their nonzeros per pair, whatever their width."""
    n = X.shape[0]
    m = n if Y is None else Y.shape[0]
    pairs = ExactPairs(similarity, X, Y)
    i = np.repeat(np.arange(n, dtype=np.int64), m)
    j = np.tile(np.arange(m, dtype=np.int64), n)
    return pairs(i, j).reshape(n, m)


def laplacian_of_all_pairs(X, Y, gamma: float) -> np.ndarray:
    """The (n, m) L1 Laplacian of every pair of rows, by the pair verifier (see `all_pairs`)."""
    return all_pairs(LaplacianPairs(gamma), X, Y)


def gmm_of_all_pairs(X, Y, power: float = 1.0) -> np.ndarray:
    """The (n, m) pGMM of every row of X against every row of Y (Y None: X against itself), computed by the
    pair verifier: sparse rows cost their nonzeros per pair, whatever their width."""
    return all_pairs(GMMPairs(power), X, Y)


def row_l1(X) -> np.ndarray:
    """Row sums of |X| in float64, by blocks of rows (X dense or CSR, maybe memory-mapped)."""
    out = np.empty(X.shape[0])
    buffers = mapped_buffers(X)   # a mapped file's pages handed back block by block: it is read whole here
    step = max(1, BLOCK_ELEMENTS // max(1, (X.nnz // max(1, X.shape[0])) if sp.issparse(X) else X.shape[1]))
    for start in range(0, X.shape[0], step):
        rows = X[start:start + step].astype(np.float64, copy=False)
        out[start:start + step] = np.asarray(abs(rows).sum(axis=1)).ravel() if sp.issparse(X) else np.abs(rows).sum(axis=1)
        release(buffers)
    return out



class ExactPairs:
    """Callable (i, j) -> the exact similarity of rows X[i], Y[j] (float64), computed in blocks of pairs: dense
    rows by gathering both blocks and subtracting, sparse rows by CSR row indexing and a sparse difference (its
    cost is the nonzeros of the block's rows). The common GMM scale is the largest magnitude of X and Y.
    `similarity`: an object with `transforms`, `scale`, `signed_power` and `combine` (GMMPairs, or
    featurehash.lsh.similarity's RowSimilarity classes)."""

    def __init__(self, similarity, X, Y=None):
        self.similarity = similarity
        same = Y is None
        sparse = sp.issparse(X) or (not same and sp.issparse(Y))
        X = _as(X, sparse)
        Y = X if same else _as(Y, sparse)
        if similarity.transforms:
            scale = similarity.scale(max(_peak(X), 0.0 if same else _peak(Y)))
            X = _signed_power(similarity, X, scale)
            Y = X if same else _signed_power(similarity, Y, scale)
        self.X, self.Y, self.sparse = X, Y, sparse
        self.x_sums = row_l1(X)
        self.y_sums = self.x_sums if same else row_l1(Y)
        width = max(1, (X.nnz / max(1, X.shape[0])) if sparse else X.shape[1])
        self.block = max(1, int(BLOCK_ELEMENTS // width))
        # rows in mapped files (a join's spilled rows): the pages a block read are handed back after it, or
        # random pairs would leave the whole file resident in this process
        self.buffers = mapped_buffers(X, None if same else Y)
        if self.buffers:
            random_access(self.buffers)
            self.block = min(self.block, MAPPED_BLOCK_PAIRS)

    def distances(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        out = np.empty(i.size)
        for start in range(0, i.size, self.block):   # a loop over blocks of pairs
            a, b = i[start:start + self.block], j[start:start + self.block]
            x, y = _float64(self.X[a]), _float64(self.Y[b])   # rows cast by block: X may be float32 or mapped
            if self.sparse:
                out[start:start + a.size] = np.asarray(abs(x - y).sum(axis=1)).ravel()
            else:
                out[start:start + a.size] = np.abs(x - y).sum(axis=1)
            release(self.buffers)
        return out

    def __call__(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return self.similarity.combine(self.x_sums[i] + self.y_sums[j], self.distances(i, j))


def _as(X, sparse: bool):
    """X without copying its values (they may be memory-mapped, larger than memory): CSR, or a 2-D array."""
    if sparse:
        return X if sp.isspmatrix_csr(X) else sp.csr_matrix(X)
    return X if isinstance(X, np.ndarray) else np.asarray(X)


def _float64(rows):
    return rows.astype(np.float64, copy=False)


def _peak(X) -> float:
    if sp.issparse(X):
        return float(np.abs(X.data).max(initial=0.0))
    return float(np.abs(X).max(initial=0.0))


def _signed_power(similarity: GMMPairs, X, scale: float):
    if sp.issparse(X):
        X = X.astype(np.float64)   # a copy, whatever the dtype
        X.data = similarity.signed_power(X.data, scale)
        return X
    return similarity.signed_power(np.asarray(X, dtype=np.float64), scale)
