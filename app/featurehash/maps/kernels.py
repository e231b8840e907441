"""Exact kernels, computed directly, for checking every feature map against its target.

All functions take two 2-D arrays (dense or scipy.sparse) of equal width and return
the n x m kernel matrix in float64. They favour clarity over speed: O(n m d).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def cdist(X, Y, metric: str) -> np.ndarray:
    """scipy.spatial.distance.cdist, imported on first use (scipy.spatial took ~0.3 s of every process's
    start, most of which never asks for an exact kernel)."""
    from scipy.spatial.distance import cdist as scipy_cdist

    return scipy_cdist(X, Y, metric)

# Pairs handled per block by the GMM kernel, which needs an n x m x d intermediate.
_GMM_BLOCK_ELEMENTS = 2**24


def _dense64(X) -> np.ndarray:
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    return np.ascontiguousarray(X, dtype=np.float64)


def _dense_pair(X, Y) -> tuple[np.ndarray, np.ndarray]:
    """X and Y dense, float64. Sparse rows far wider than their nonzeros (text hashed into 2^30 columns) keep
    only the columns where X or Y has an entry: every kernel using this sums per-coordinate terms that are 0
    where both entries are 0, so the value is unchanged and the width is at most nnz(X) + nnz(Y)."""
    if (sp.issparse(X) or sp.issparse(Y)) and X.shape[1] > 2 * (_nnz(X) + _nnz(Y)) + 64:
        X, Y = shared_columns(X, Y)
    return _dense64(X), _dense64(Y)


def shared_columns(X, Y) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """X and Y as CSR over only the columns where either has an entry, in column order: what kernels that sum
    per-coordinate terms vanishing at (0, 0) need of rows far wider than their nonzeros. O(nnz); the indices are
    remapped by hand, since scipy's column indexing allocates a table as wide as the matrix (2^30 entries)."""
    X, Y = sp.csr_matrix(X), sp.csr_matrix(Y)
    columns = np.union1d(X.indices, Y.indices)
    return tuple(sp.csr_matrix((M.data, np.searchsorted(columns, M.indices), M.indptr),
                               shape=(M.shape[0], max(1, columns.size))) for M in (X, Y))


def _nnz(X) -> int:
    return X.nnz if sp.issparse(X) else int(np.prod(np.shape(X)))


def squared_distances(X, Y) -> np.ndarray:
    X, Y = _dense_pair(X, Y)
    return np.maximum(cdist(X, Y, "sqeuclidean"), 0.0)


def gaussian(X, Y, gamma: float) -> np.ndarray:
    """exp(-gamma * ||x - y||_2^2)."""
    return np.exp(-gamma * squared_distances(X, Y))


def laplacian(X, Y, gamma: float) -> np.ndarray:
    """exp(-gamma * ||x - y||_1)."""
    return np.exp(-gamma * cdist(*_dense_pair(X, Y), "cityblock"))


def gaussian_anova(X, Y, gamma: float, subsets) -> np.ndarray:
    """Sparse ANOVA kernel sum_{S in subsets} prod_{i in S} exp(-gamma (x_i - y_i)^2)
    = sum_S exp(-gamma ||x_S - y_S||^2) (Dao, De Sa, Re, papers/002_*, section 4).
    `subsets` is a sequence of coordinate index lists; k(x, x) = len(subsets)."""
    X, Y = _dense64(X), _dense64(Y)
    out = np.zeros((X.shape[0], Y.shape[0]))
    for subset in subsets:
        columns = np.asarray(subset, dtype=np.intp)
        out += np.exp(-gamma * np.maximum(cdist(X[:, columns], Y[:, columns], "sqeuclidean"), 0.0))
    return out


def _unit(X: np.ndarray) -> np.ndarray:
    scaled = X / np.abs(X).max(axis=1, keepdims=True)  # no overflow when squaring
    return scaled / np.linalg.norm(scaled, axis=1, keepdims=True)


def cosine_similarity(X, Y) -> np.ndarray:
    X, Y = _dense_pair(X, Y)
    return np.clip(_unit(X) @ _unit(Y).T, -1.0, 1.0)


def normalized_rbf(X, Y, gamma: float) -> np.ndarray:
    """exp(-gamma * (1 - rho)), rho the cosine similarity (Li, papers/004_*, eq. 14)."""
    return np.exp(-gamma * (1.0 - cosine_similarity(X, Y)))


def inner_products(X, Y) -> np.ndarray:
    """<x, y> for every pair; sparse inputs stay sparse (cost of their nonzeros)."""
    if sp.issparse(X) or sp.issparse(Y):
        return (sp.csr_matrix(X, dtype=np.float64) @ sp.csr_matrix(Y, dtype=np.float64).T).toarray()
    return _dense64(X) @ _dense64(Y).T


def polynomial(X, Y, degree: int, coef0: float) -> np.ndarray:
    """(coef0 + <x, y>)^degree on the raw inputs (Random Maclaurin, TensorSketch)."""
    return (coef0 + inner_products(X, Y)) ** degree


def spherical_polynomial(X, Y, degree: int, bias: float) -> np.ndarray:
    """(1 - ||x - y||^2 / a^2)^p = alpha (q + <x, y>)^p with q = a^2/2 - 1, alpha = (2/a^2)^p,
    for x, y scaled to unit norm (Pennington et al., papers/000_*, eq. 2; SRF).

    Written with rho = <x, y> as (1 - (2 - 2 rho) / a^2)^p, which lies in [(1 - 4/a^2)^p, 1]
    for a >= 2 and never forms the huge q^p or tiny alpha.
    """
    rho = cosine_similarity(X, Y)
    return (1.0 - (2.0 - 2.0 * rho) / bias**2) ** degree


def _norms_and_directions(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row norms and unit rows, without overflow; a zero row keeps norm 0 and direction 0."""
    peaks = np.abs(X).max(axis=1, keepdims=True)
    peaks[peaks == 0] = 1.0
    scaled = X / peaks
    scaled_norms = np.linalg.norm(scaled, axis=1, keepdims=True)
    directions = scaled / np.where(scaled_norms > 0, scaled_norms, 1.0)
    return (peaks * scaled_norms).ravel(), directions


def arccos(X, Y, order: int) -> np.ndarray:
    """Arc-cosine kernel of order 0, 1 or 2 (Cho & Saul, NIPS 2009; ALGORITHMS.md "SSF"):
    k_b(x, y) = (1/pi) ||x||^b ||y||^b J_b(theta), theta the angle between x and y, with
    J_0 = pi - theta, J_1 = sin theta + (pi - theta) cos theta,
    J_2 = 3 sin theta cos theta + (pi - theta) (1 + 2 cos^2 theta).
    theta = 2 atan2(||x^ - y^||, ||x^ + y^||) on unit rows x^, y^, which stays accurate near 0
    (arccos of a rounded cosine does not). A zero vector has no direction: its angle to anything is
    taken as pi/2, the value step(0) = 1/2 gives the random-feature estimate; it matters for order
    0 only (k_0 = 1/2), since ||x||^b = 0 otherwise.
    """
    if order not in (0, 1, 2):
        raise ValueError(f"arc-cosine kernels of order 0, 1, 2 only, not {order}")
    X, Y = _dense_pair(X, Y)
    x_norms, x_directions = _norms_and_directions(X)
    y_norms, y_directions = _norms_and_directions(Y)
    difference = np.minimum(cdist(x_directions, y_directions, "sqeuclidean"), 4.0)
    theta = 2.0 * np.arctan2(np.sqrt(difference), np.sqrt(4.0 - difference))
    theta[(x_norms == 0)[:, None] | (y_norms == 0)[None, :]] = np.pi / 2
    sin, cos, rest = np.sin(theta), np.cos(theta), np.pi - theta
    if order == 0:
        angular = rest
    elif order == 1:
        angular = sin + rest * cos
    else:
        angular = 3.0 * sin * cos + rest * (1.0 + 2.0 * cos**2)
    return np.multiply.outer(x_norms**order, y_norms**order) * angular / np.pi


def gmm(X, Y, power: float = 1.0) -> np.ndarray:
    """Generalized min-max: sum min(u~, v~) / sum max(u~, v~); pGMM applies `power` to u~.

    Li, "Linearized GMM kernels and normalized random Fourier features" (papers/004_*),
    eq. (7)-(8); the tunable pGMM raises the transformed entries to `power`. GMM does not
    change when both vectors are scaled alike, so each pair is divided by its largest
    magnitude before the power is taken: no overflow, however large `power` or the data.
    Two all-zero vectors have GMM 1 by convention.
    """
    X, Y = _dense_pair(X, Y)
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


def _pairwise_sum(X, Y, term) -> np.ndarray:
    """sum_i term(x_i, y_i) for every pair, in row blocks so the n x m x d intermediate stays bounded."""
    X, Y = _dense_pair(X, Y)
    n, m, d = X.shape[0], Y.shape[0], X.shape[1]
    block = max(1, _GMM_BLOCK_ELEMENTS // max(1, m * d))
    out = np.empty((n, m))
    for start in range(0, n, block):
        out[start:start + block] = term(X[start:start + block, None, :], Y[None, :, :]).sum(axis=2)
    return out


def _chi2_term(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    total = x + y
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (x - y) ** 2 / np.where(total > 0, total, 1.0), 0.0)


def chi2(X, Y, gamma: float) -> np.ndarray:
    """Exponentiated chi-squared kernel exp(-gamma sum_i (x_i - y_i)^2 / (x_i + y_i)) for nonnegative
    rows (scikit-learn's chi2_kernel; Zhang, Marszalek, Lazebnik, Schmid, IJCV 2007); 0/0 terms count 0."""
    return np.exp(-gamma * _pairwise_sum(X, Y, _chi2_term))


def _additive_chi2_term(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    total = x + y
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, 2.0 * x * y / np.where(total > 0, total, 1.0), 0.0)


def additive_chi2(X, Y) -> np.ndarray:
    """Additive chi-squared kernel sum_i 2 x_i y_i / (x_i + y_i) for nonnegative rows (Vedaldi &
    Zisserman, "Efficient additive kernels via explicit feature maps", PAMI 2012); 0/0 terms count 0."""
    return _pairwise_sum(X, Y, _additive_chi2_term)


def skewed_chi2(X, Y, skewedness: float) -> np.ndarray:
    """Skewed chi-squared kernel prod_i 2 sqrt(x_i + c) sqrt(y_i + c) / (x_i + y_i + 2 c), c the skewedness,
    for entries > -c (Li, Ionescu, Sminchisescu, "Random Fourier approximations for skewed multiplicative
    histogram kernels", DAGM 2010). Computed as exp of a sum of logs: no underflow of the product."""
    c = skewedness

    def log_term(x, y):
        return 0.5 * (np.log(x + c) + np.log(y + c)) + np.log(2.0) - np.log(x + y + 2.0 * c)

    return np.exp(_pairwise_sum(X, Y, log_term))
