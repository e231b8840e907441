"""Exact kernels, computed directly, for checking every feature map against its target.

All functions take two 2-D arrays (dense or scipy.sparse) of equal width and return
the n x m kernel matrix in float64. They favour clarity over speed: O(n m d).

Scales: `gamma` everywhere (DESIGN.md), and optionally per-dimension (ARD) `lengthscales` l, which divide
the inputs coordinatewise before the kernel sees them (u = x / l). Which "Laplacian" is which:
- `laplacian` is the L1 kernel exp(-gamma ||u - v||_1), a product of one-dimensional kernels (its
  spectrum is a product of Cauchy densities): featurehash's "laplacian" everywhere;
- `matern` with nu = 1/2 is the L2 "exponential" kernel exp(-sqrt(2 gamma) ||u - v||_2) (its spectrum is
  a multivariate Cauchy, t with 1 degree of freedom); the two agree only in one dimension.
The data-driven bandwidths ("scale", "median") are computed here from a fit sample (`data_bandwidth`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln, kve

from .errors import SpecError
from .numerics import _portable_math as pm


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
    if wide_sparse(X, Y):
        X, Y = shared_columns(X, Y)
    return _dense64(X), _dense64(Y)


def wide_sparse(X, Y) -> bool:
    """Whether X or Y is sparse with far more columns than X and Y have nonzeros (text hashed into 2^30 columns)."""
    return (sp.issparse(X) or sp.issparse(Y)) and X.shape[1] > 2 * (_nnz(X) + _nnz(Y)) + 64


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


def scaled(X, lengthscales=None):
    """X with column i divided by lengthscales[i] (per-dimension, ARD, scales); X itself without them.
    Sparse input stays sparse (its stored entries are divided)."""
    if lengthscales is None:
        return X
    scales = np.asarray(lengthscales, dtype=np.float64)
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64, copy=True)
        X.data /= scales[X.indices]
        return X
    return np.asarray(X, dtype=np.float64) / scales


def gaussian(X, Y, gamma: float, lengthscales=None) -> np.ndarray:
    """exp(-gamma * ||u - v||_2^2), u = x / lengthscales (coordinatewise; u = x without them)."""
    return np.exp(-gamma * squared_distances(scaled(X, lengthscales), scaled(Y, lengthscales)))


def laplacian(X, Y, gamma: float, lengthscales=None) -> np.ndarray:
    """The L1 Laplacian exp(-gamma * ||u - v||_1), u = x / lengthscales: a product over coordinates (not the
    L2 exponential kernel, which is `matern` with nu = 1/2)."""
    return np.exp(-gamma * cdist(*_dense_pair(scaled(X, lengthscales), scaled(Y, lengthscales)), "cityblock"))


# nu with a closed form: k = p(z) e^-z, p a polynomial (Rasmussen & Williams 2006, eq. 4.16-4.17).
MATERN_CLOSED_FORMS = (0.5, 1.5, 2.5)


def matern(X, Y, gamma: float, nu: float, lengthscales=None) -> np.ndarray:
    """Matérn kernel (Rasmussen & Williams, "Gaussian Processes for Machine Learning", 2006, eq. 4.14):
        k(r) = 2^(1 - nu) / Gamma(nu) z^nu K_nu(z),  z = sqrt(2 nu) r / l,  r = ||u - v||_2,
    u = x / lengthscales, with the length l = 1 / sqrt(2 gamma): scikit-learn's Matern(length_scale=l, nu),
    and as nu -> infinity the Gaussian exp(-gamma r^2) of the same gamma. So scikit-learn's
    Matern(length_scale=s, nu) is gamma = 1/2 with lengthscales s (a vector, or s repeated), or
    gamma = 1 / (2 s^2) without lengthscales. K_nu is the modified Bessel function of the second kind."""
    distances = np.sqrt(squared_distances(scaled(X, lengthscales), scaled(Y, lengthscales)))
    return matern_of_distance(distances, gamma, nu)


def matern_of_distance(r: np.ndarray, gamma: float, nu: float) -> np.ndarray:
    """The Matérn kernel of `matern` as a function of the (scaled) L2 distance r >= 0.
    nu = 1/2: e^-z; 3/2: (1 + z) e^-z; 5/2: (1 + z + z^2/3) e^-z (R & W eq. 4.16-4.17); other nu from
    the exponentially scaled Bessel function in log space, log k = (1 - nu) log 2 - log Gamma(nu)
    + nu log z + log(K_nu(z) e^z) - z, so neither z^nu nor K_nu(z) overflows."""
    z = np.sqrt(4.0 * nu * gamma) * np.asarray(r, dtype=np.float64)
    if nu == 0.5:
        return np.exp(-z)
    if nu == 1.5:
        return (1.0 + z) * np.exp(-z)
    if nu == 2.5:
        return (1.0 + z + z * z / 3.0) * np.exp(-z)
    positive = z > 1e-12   # below, k = 1 - O(z^min(2, 2 nu)) rounds to 1 for every nu the maps accept
    safe = np.where(positive, z, 1.0)
    with np.errstate(over="ignore", divide="ignore"):
        log_k = ((1.0 - nu) * np.log(2.0) - gammaln(nu) + nu * np.log(safe) + np.log(kve(nu, safe)) - safe)
    return np.where(positive, np.exp(np.minimum(log_k, 0.0)), 1.0)


def gaussian_anova(X, Y, gamma: float, subsets) -> np.ndarray:
    """Sparse ANOVA kernel sum_{S in subsets} prod_{i in S} exp(-gamma (x_i - y_i)^2)
    = sum_S exp(-gamma ||x_S - y_S||^2) (Dao, De Sa, Re, NIPS 2017, section 4;
    docs/methods/fourier.md, "Gaussian quadrature").
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
    """exp(-gamma * (1 - rho)), rho the cosine similarity (Li, KDD 2017, eq. 14;
    docs/methods/fourier.md, "NRFF: Li 2017")."""
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
    for x, y scaled to unit norm (Pennington et al., NIPS 2015, eq. 2; SRF:
    docs/methods/fourier.md, "SRF").

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
    """Arc-cosine kernel of order 0, 1 or 2 (Cho & Saul, NIPS 2009; docs/methods/fourier.md, "SSF"):
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

    Li, "Linearized GMM kernels and normalized random Fourier features", KDD 2017,
    eq. (7)-(8) (docs/methods/minhash.md, "GCWS: Li 2017"); the tunable pGMM raises the
    transformed entries to `power`. GMM does not
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


# -- data-driven bandwidths -----------------------------------------------------------------------------

BANDWIDTH_RULES = ("scale", "median")
# Elements of pair differences held at once while the median rule measures distances.
_PAIR_BLOCK_ELEMENTS = 2**20


def _sequential_sum(values: np.ndarray, term) -> float:
    """sum of term(values) added strictly in index order, block by block (each block's accumulate starts
    from the running total: the same bits as one accumulate over everything, with block-sized temporaries)."""
    total = 0.0
    for start in range(0, values.size, _PAIR_BLOCK_ELEMENTS):
        block = term(values[start:start + _PAIR_BLOCK_ELEMENTS])
        total = float(np.add.accumulate(np.concatenate(([total], block)))[-1])
    return total


def check_lengthscales(lengthscales, input_dim: int) -> None:
    """Per-dimension lengthscales: one per input coordinate (positive and finite: the params model)."""
    if lengthscales is not None and len(lengthscales) != input_dim:
        raise SpecError("params.lengthscales", f"one lengthscale per input dimension: {input_dim} numbers, "
                        f"not {len(lengthscales)}")


def data_bandwidth(rule: str, kernel: str, sample: np.ndarray, pairs: tuple[np.ndarray, np.ndarray]) -> float:
    """gamma from the rows of `sample` (already divided by any lengthscales), the same float on every machine.

    - "scale": scikit-learn's SVC rule gamma = 1 / (d var(X)), the variance over all entries (1.0 when it is
      0, as scikit-learn does); for the L1 `laplacian`, whose gamma multiplies a distance rather than a
      squared one, gamma = 1 / (d std(X)).
    - "median": the median heuristic (e.g. Gretton et al., "A kernel two-sample test", JMLR 2012): m the
      median distance between the rows of `pairs` (`randomness.distinct_pairs`: all pairs of a small
      sample, else a seeded sample of them), gamma = 1 / (2 m^2) for the Gaussian and Matérn (length
      l = m), gamma = 1 / m for the L1 Laplacian (m the median L1 distance).
    Only IEEE +, -, *, /, sqrt and sums in index order (`ordered_sum`), and the lower median of the sorted
    distances (an element, not an average): no BLAS reduction whose order varies with the machine.
    """
    n, d = sample.shape
    l1 = kernel == "laplacian"
    if rule == "scale":
        entries = np.ascontiguousarray(sample, dtype=np.float64).ravel()
        mean = _sequential_sum(entries, lambda block: block) / entries.size
        variance = _sequential_sum(entries, lambda block: (block - mean) * (block - mean)) / entries.size
        if variance == 0.0:
            return 1.0
        return 1.0 / (d * float(np.sqrt(variance))) if l1 else 1.0 / (d * variance)
    first, second = pairs
    if first.size == 0:
        raise SpecError("params.fit_sample", "the median rule needs at least 2 rows")
    distances = np.empty(first.size)
    step = max(1, _PAIR_BLOCK_ELEMENTS // max(d, 1))
    for start in range(0, first.size, step):
        block = slice(start, start + step)
        difference = sample[first[block]] - sample[second[block]]
        terms = np.abs(difference) if l1 else difference * difference
        distances[block] = pm.ordered_sum(terms, axis=1)
    if not l1:
        distances = np.sqrt(distances)
    median = float(np.sort(distances)[(distances.size - 1) // 2])
    if not median > 0.0:
        raise SpecError("params.fit_sample", "the median distance between sampled rows is 0 (mostly "
                        "repeated rows): send more varied rows or give gamma as a number")
    return 1.0 / median if l1 else 1.0 / (2.0 * median * median)
