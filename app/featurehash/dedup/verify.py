"""Verification of candidate pairs: the exact kernel of each pair, or its estimate from the codes.

Exact kernels (what `feature_map.exact_kernel` computes, evaluated for pairs (i_t, j_t) only, never
as an n x m matrix):
- gcws: pGMM(x, y) = sum min(u~, v~) / sum max(u~, v~), with u~ the positive and negative parts
  of x raised to `power` (Li, "Linearized GMM kernels and normalized random Fourier features",
  KDD 2017; sampled by Ioffe's ICWS as generalised by Li's GCWS). With t(x) = sign(x) |x|^p, the
  split parts give sum |u~ - v~| = ||t(x) - t(y)||_1, so pGMM = (S - D) / (S + D) with
  S = ||t(x)||_1 + ||t(y)||_1 and D = ||t(x) - t(y)||_1 (min + max = u~ + v~, max - min =
  |u~ - v~|). For power != 1 all rows are first divided by one common scale (the ratio does not
  change), so no power overflows. Two zero vectors: 1.
- binning: the Laplacian kernel exp(-gamma ||x - y||_1) (Rahimi & Recht's random binning).
D is computed in blocks of pairs: dense rows by gathering both blocks and subtracting, sparse rows
by CSR row indexing and a sparse difference (its cost is the nonzeros of the block's rows). The rows are
never copied whole (only with power != 1, whose t(x) is computed once): they may be memory-mapped, and
are cast to float64 block by block.

Code estimates: the fraction of the k codes (as 32-bit fingerprints) on which a pair agrees,
Binomial(k, s) / k for GCWS and binning; see `similarity_join` for its noise and bias.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

# elements of one block's gathered rows (dense) or nonzeros (sparse): ~32 MB of float64
_BLOCK_ELEMENTS = 1 << 22

SUPPORTED_METHODS = ("gcws", "binning")


class ExactPairs:
    """Callable (i, j) -> exact kernel of rows X[i], Y[j] (float64) for a GCWS or binning map."""

    def __init__(self, feature_map, X, Y=None):
        method = feature_map.method
        if method not in SUPPORTED_METHODS:
            raise ValueError(f"no exact pair kernel for '{method}' maps (supported: {SUPPORTED_METHODS})")
        self.method = method
        self.gamma = float(feature_map.params.gamma) if method == "binning" else None
        power = float(feature_map.params.power) if method == "gcws" else 1.0
        same = Y is None
        sparse = sp.issparse(X) or (not same and sp.issparse(Y))
        X = _as(X, sparse)
        Y = X if same else _as(Y, sparse)
        if method == "gcws" and power != 1.0:   # at power 1, t(x) = x: no copy of the rows
            peak = max(_peak(X), 0.0 if same else _peak(Y))
            scale = 1.0 / peak if peak > 0 else 1.0
            X = _signed_power(X, scale, power)
            Y = X if same else _signed_power(Y, scale, power)
        self.X, self.Y, self.sparse = X, Y, sparse
        self.x_sums = _row_l1(X)
        self.y_sums = self.x_sums if same else _row_l1(Y)
        width = max(1, (X.nnz / max(1, X.shape[0])) if sparse else X.shape[1])
        self.block = max(1, int(_BLOCK_ELEMENTS // width))

    def distances(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        out = np.empty(i.size)
        for start in range(0, i.size, self.block):   # a loop over blocks of pairs
            a, b = i[start:start + self.block], j[start:start + self.block]
            x, y = _float64(self.X[a]), _float64(self.Y[b])   # rows cast by block: X may be float32 or mapped
            if self.sparse:
                out[start:start + a.size] = np.asarray(abs(x - y).sum(axis=1)).ravel()
            else:
                out[start:start + a.size] = np.abs(x - y).sum(axis=1)
        return out

    def __call__(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        distance = self.distances(i, j)
        if self.method == "binning":
            return np.exp(-self.gamma * distance)
        total = self.x_sums[i] + self.y_sums[j]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total + distance > 0, (total - distance) / (total + distance), 1.0)


class CodePairs:
    """Callable (i, j) -> fraction of equal code fingerprints of rows i and j."""

    def __init__(self, fingerprints_x: np.ndarray, fingerprints_y: np.ndarray | None = None):
        self.fx = fingerprints_x
        self.fy = fingerprints_x if fingerprints_y is None else fingerprints_y
        self.block = max(1, _BLOCK_ELEMENTS // max(1, self.fx.shape[1]))

    def __call__(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        out = np.empty(i.size)
        for start in range(0, i.size, self.block):
            a, b = i[start:start + self.block], j[start:start + self.block]
            out[start:start + a.size] = (self.fx[a] == self.fy[b]).mean(axis=1)
        return out


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


def _signed_power(X, scale: float, power: float):
    if sp.issparse(X):
        X = X.astype(np.float64)   # a copy, whatever the dtype
        X.data = np.sign(X.data) * np.abs(X.data * scale) ** power
        return X
    X = np.asarray(X, dtype=np.float64)
    return np.sign(X) * np.abs(X * scale) ** power


def _row_l1(X) -> np.ndarray:
    """Row sums of |X| in float64, by blocks of rows (X may be memory-mapped)."""
    out = np.empty(X.shape[0])
    step = max(1, _BLOCK_ELEMENTS // max(1, (X.nnz // max(1, X.shape[0])) if sp.issparse(X) else X.shape[1]))
    for start in range(0, X.shape[0], step):
        rows = _float64(X[start:start + step])
        out[start:start + step] = np.asarray(abs(rows).sum(axis=1)).ravel() if sp.issparse(X) else np.abs(rows).sum(axis=1)
    return out
