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


def cosine_similarity(X, Y) -> np.ndarray:
    X, Y = _dense64(X), _dense64(Y)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    Yn = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    return np.clip(Xn @ Yn.T, -1.0, 1.0)


def normalized_rbf(X, Y, gamma: float) -> np.ndarray:
    """exp(-gamma * (1 - rho)), rho the cosine similarity (Li, papers/004_*, eq. 14)."""
    return np.exp(-gamma * (1.0 - cosine_similarity(X, Y)))


def _signed_split(X: np.ndarray, power: float) -> tuple[np.ndarray, np.ndarray]:
    """The 2d-dimensional nonnegative transform u~ as (positive part, negative part), ^power."""
    return np.maximum(X, 0.0) ** power, np.maximum(-X, 0.0) ** power


def gmm(X, Y, power: float = 1.0) -> np.ndarray:
    """Generalized min-max: sum min(u~, v~) / sum max(u~, v~); pGMM applies `power` to u~.

    Li, "Linearized GMM kernels and normalized random Fourier features" (papers/004_*),
    eq. (7)-(8); the tunable pGMM raises the transformed entries to `power`.
    """
    Xp, Xn = _signed_split(_dense64(X), power)
    Yp, Yn = _signed_split(_dense64(Y), power)
    x_mass = (Xp + Xn).sum(axis=1)
    y_mass = (Yp + Yn).sum(axis=1)
    n, m, d = Xp.shape[0], Yp.shape[0], Xp.shape[1]
    block = max(1, _GMM_BLOCK_ELEMENTS // max(1, m * d))
    minimum_sum = np.empty((n, m))
    for start in range(0, n, block):
        rows = slice(start, start + block)
        minimum_sum[rows] = (
            np.minimum(Xp[rows, None, :], Yp[None]).sum(axis=2)
            + np.minimum(Xn[rows, None, :], Yn[None]).sum(axis=2)
        )
    maximum_sum = x_mass[:, None] + y_mass[None, :] - minimum_sum
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(maximum_sum > 0, minimum_sum / maximum_sum, 1.0)
