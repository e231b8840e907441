"""Exact kernels, computed directly, for checking every feature map against its target.

All functions take two 2-D arrays (dense or scipy.sparse) of equal width and return
the n x m kernel matrix in float64. They favour clarity over speed: O(n m d).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist

# Pairs handled per block by the GMM kernel, which needs an n x m x d intermediate.
_GMM_BLOCK_ELEMENTS = 2**24


def _dense64(X) -> np.ndarray:
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    return np.ascontiguousarray(X, dtype=np.float64)


def squared_distances(X, Y) -> np.ndarray:
    X, Y = _dense64(X), _dense64(Y)
    return np.maximum(cdist(X, Y, "sqeuclidean"), 0.0)


def gaussian(X, Y, gamma: float) -> np.ndarray:
    """exp(-gamma * ||x - y||_2^2)."""
    return np.exp(-gamma * squared_distances(X, Y))


def laplacian(X, Y, gamma: float) -> np.ndarray:
    """exp(-gamma * ||x - y||_1)."""
    return np.exp(-gamma * cdist(_dense64(X), _dense64(Y), "cityblock"))


def _unit(X: np.ndarray) -> np.ndarray:
    scaled = X / np.abs(X).max(axis=1, keepdims=True)  # no overflow when squaring
    return scaled / np.linalg.norm(scaled, axis=1, keepdims=True)


def cosine_similarity(X, Y) -> np.ndarray:
    return np.clip(_unit(_dense64(X)) @ _unit(_dense64(Y)).T, -1.0, 1.0)


def normalized_rbf(X, Y, gamma: float) -> np.ndarray:
    """exp(-gamma * (1 - rho)), rho the cosine similarity (Li, papers/004_*, eq. 14)."""
    return np.exp(-gamma * (1.0 - cosine_similarity(X, Y)))


def gmm(X, Y, power: float = 1.0) -> np.ndarray:
    """Generalized min-max: sum min(u~, v~) / sum max(u~, v~); pGMM applies `power` to u~.

    Li, "Linearized GMM kernels and normalized random Fourier features" (papers/004_*),
    eq. (7)-(8); the tunable pGMM raises the transformed entries to `power`. GMM does not
    change when both vectors are scaled alike, so each pair is divided by its largest
    magnitude before the power is taken: no overflow, however large `power` or the data.
    Two all-zero vectors have GMM 1 by convention.
    """
    X, Y = _dense64(X), _dense64(Y)
    x_peak, y_peak = np.abs(X).max(axis=1), np.abs(Y).max(axis=1)
    n, m, d = X.shape[0], Y.shape[0], X.shape[1]
    block = max(1, _GMM_BLOCK_ELEMENTS // max(1, m * d))
    out = np.empty((n, m))
    for start in range(0, n, block):
        rows = slice(start, start + block)
        peak = np.maximum(x_peak[rows, None], y_peak[None, :])
        peak[peak == 0] = 1.0
        u = X[rows, None, :] / peak[:, :, None]
        v = Y[None, :, :] / peak[:, :, None]
        minimum_sum = np.zeros(peak.shape)
        maximum_sum = np.zeros(peak.shape)
        for sign in (1.0, -1.0):
            a = np.maximum(sign * u, 0.0) ** power
            b = np.maximum(sign * v, 0.0) ** power
            minimum_sum += np.minimum(a, b).sum(axis=2)
            maximum_sum += np.maximum(a, b).sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[rows] = np.where(maximum_sum > 0, minimum_sum / maximum_sum, 1.0)
    return out
