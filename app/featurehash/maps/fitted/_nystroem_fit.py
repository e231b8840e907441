"""The Nystroem fit in a fixed order of operations: landmark choice and normalisation, the same bits on
every machine (see `_portable_math` for why; tests/test_portability.py checks it).

Kernel columns k(X, y) are computed from IEEE basic operations, `_portable_math`'s exp / log /
integer_power / ordered sums and a portable arctangent (below); the Gaussian, Laplacian, polynomial and
chi2 columns, the partial Cholesky updates, the pivot draws and the triangular inverse are compiled loops
(`_fitted_kernels`: each number's operations in index order, numba without fastmath neither fuses
a * b + c nor reorders sums, the independent rows side by side in SIMD lanes). The same bits as the
plain loops they replaced (checked on 112 fits of every kernel and rule: identical), 5x faster.

Landmark rules:
- "rpcholesky": randomly pivoted Cholesky (Chen, Epperly, Tropp, Webber, "Randomly pivoted Cholesky:
  practical approximation of a kernel matrix with few entry evaluations", CPAM 2024): the next landmark
  is drawn with probability proportional to the residual diagonal diag(K - K_nS K_SS^-1 K_Sn), the
  kernel-space analogue of k-means++'s D^2 seeding. Its expected trace error is within (1 + eps) of the
  best rank-r approximation's once m >= r / eps + r log(1 / (eps eta)), eta the relative tail.
- "uniform": rows in a seeded random order (scikit-learn's rule), skipping rows the landmarks
  already span.
Either way a row whose residual is at most RELATIVE_FLOOR k(x, x) is never taken (it would only add
an ill-conditioned direction), so fewer than m landmarks come out when the sample's numerical rank is
lower. The landmark Gram matrix is K_SS = L L^T with L the (lower triangular) partial Cholesky factor
read at the landmark rows, and the features use L^-1: z(x) = L^-1 k_S(x), so <z(x), z(y)> =
k_S(x)^T K_SS^-1 k_S(y), the Nystroem estimate (scikit-learn's K_SS^-1/2 differs by a rotation only).
"""

from __future__ import annotations

import math

import numpy as np

from ..numerics import _portable_math as pm
from . import _fitted_kernels as compiled
from .. import randomness

RELATIVE_FLOOR = 1e-8
_ATAN_TERMS = [(-1.0) ** n / (2 * n + 1) for n in range(14)]  # |t| <= tan(pi/16): next term < 1e-20


def _atan_unit(t: np.ndarray) -> np.ndarray:
    """atan t for t in [0, 1]: two halvings atan t = 2 atan(t / (1 + sqrt(1 + t^2))), then Taylor."""
    for _ in range(2):
        t = t / (1.0 + np.sqrt(1.0 + t * t))
    square = t * t
    series = np.full_like(t, _ATAN_TERMS[-1])
    for c in reversed(_ATAN_TERMS[:-1]):
        series = series * square + c
    return 4.0 * (t * series)


def angle_of(opposite: np.ndarray, adjacent: np.ndarray) -> np.ndarray:
    """atan2(opposite, adjacent) for opposite, adjacent >= 0, in [0, pi/2]."""
    large = np.maximum(opposite, adjacent)
    ratio = np.minimum(opposite, adjacent) / np.where(large > 0, large, 1.0)
    angle = _atan_unit(ratio)
    return np.where(opposite > adjacent, math.pi / 2 - angle, angle)


def _norms(X: np.ndarray) -> np.ndarray:
    return np.sqrt(pm.ordered_sum(X * X, axis=1))


def _arccos(X: np.ndarray, Y: np.ndarray, order: int) -> np.ndarray:
    """`kernels.arccos` for paired rows, portably; theta = 2 atan2(|x^ - y^|, |x^ + y^|)."""
    x_norms, y_norms = _norms(X), _norms(Y)
    x_dir = X / np.where(x_norms > 0, x_norms, 1.0)[:, None]
    y_dir = Y / np.where(y_norms > 0, y_norms, 1.0)[:, None]
    theta = 2.0 * angle_of(_norms(x_dir - y_dir), _norms(x_dir + y_dir))
    theta = np.where((x_norms == 0) | (y_norms == 0), math.pi / 2, theta)
    cos, sin = pm.cos_sin(theta)
    rest = math.pi - theta
    if order == 0:
        angular = rest
    elif order == 1:
        angular = sin + rest * cos
    else:
        angular = 3.0 * sin * cos + rest * (1.0 + 2.0 * cos * cos)
    return pm.integer_power(x_norms * y_norms, order) * angular / math.pi


def _portable_power(a: np.ndarray, power: float) -> np.ndarray:
    if power == 1.0:
        return a
    positive = a > 0
    return np.where(positive, pm.exp(power * pm.log(np.where(positive, a, 1.0))), 0.0)


def _gmm(X: np.ndarray, Y: np.ndarray, power: float) -> np.ndarray:
    """`kernels.gmm` for paired rows, portably (each pair scaled by its largest magnitude)."""
    peak = np.maximum(np.abs(X).max(axis=1), np.abs(Y).max(axis=1))
    peak = np.where(peak > 0, peak, 1.0)[:, None]
    u, v = X / peak, Y / peak
    parts = [(_portable_power(np.maximum(s * u, 0.0), power), _portable_power(np.maximum(s * v, 0.0), power))
             for s in (1.0, -1.0)]
    minimum = np.concatenate([np.minimum(a, b) for a, b in parts], axis=1)
    maximum = np.concatenate([np.maximum(a, b) for a, b in parts], axis=1)
    low, high = pm.ordered_sum(minimum, axis=1), pm.ordered_sum(maximum, axis=1)
    return np.where(high > 0, low / np.where(high > 0, high, 1.0), 1.0)


_SQUARED_DISTANCE, _L1_DISTANCE, _INNER_PRODUCT = 0, 1, 2
_COMPILED_COLUMNS = {"gaussian": compiled.GAUSSIAN, "laplacian": compiled.LAPLACIAN,
                     "polynomial": compiled.POLYNOMIAL, "chi2": compiled.CHI2}


def _matern(r: np.ndarray, gamma: float, nu: float) -> np.ndarray:
    """`kernels.matern_of_distance` for nu in {1/2, 3/2, 5/2}, with the portable exp."""
    z = math.sqrt(4.0 * nu * gamma) * r
    if nu == 0.5:
        return pm.exp(-z)
    if nu == 1.5:
        return (1.0 + z) * pm.exp(-z)
    return (1.0 + z + z * z / 3.0) * pm.exp(-z)


def paired_kernel(kernel: str, params, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """k(x_r, y_r) for paired rows (Y may be one row, broadcast), float64, the same bits everywhere."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    rows = np.ascontiguousarray(np.atleast_2d(Y), dtype=np.float64)
    if kernel == "gaussian":
        return pm.exp(-params.gamma * compiled.paired_sums(X, rows, _SQUARED_DISTANCE))
    if kernel == "laplacian":
        return pm.exp(-params.gamma * compiled.paired_sums(X, rows, _L1_DISTANCE))
    if kernel == "matern":
        return _matern(np.sqrt(compiled.paired_sums(X, rows, _SQUARED_DISTANCE)), params.gamma, params.nu)
    if kernel == "polynomial":
        return pm.integer_power(params.gamma * compiled.paired_sums(X, rows, _INNER_PRODUCT) + params.coef0, params.degree)
    Y = np.broadcast_to(rows, X.shape)
    if kernel == "chi2":
        total, diff = X + Y, X - Y
        terms = np.where(total > 0, diff * diff / np.where(total > 0, total, 1.0), 0.0)
        return pm.exp(-params.gamma * pm.ordered_sum(terms, axis=1))
    if kernel == "gmm":
        return _gmm(X, Y, params.power)
    return _arccos(X, Y, int(kernel[-1]))


def _pivot_sequence(seed: int, rows: int) -> np.ndarray:
    """The seeded order of the "uniform" rule."""
    return np.argsort(randomness.raw_words(seed, "nystroem.order", rows), kind="stable").astype(np.int64)


def _pivot_uniforms(seed: int, attempts: int) -> np.ndarray:
    """The uniform numbers of the "rpcholesky" draws."""
    return randomness.uniform_open(randomness.raw_words(seed, "nystroem.pivots", attempts))


def _pivot_order(rule: str, seed: int, rows: int, attempts: int):
    """A generator of candidate pivots given the residual: drawn from it (rpcholesky) or a seeded order."""
    if rule == "uniform":
        order = _pivot_sequence(seed, rows)
        position = 0

        def next_pivot(residual, floor):
            nonlocal position
            while position < rows and not residual[order[position]] > floor[order[position]]:
                position += 1
            position += 1
            return int(order[position - 1]) if position <= rows else None
        return next_pivot
    uniforms = _pivot_uniforms(seed, attempts)
    drawn = 0

    def next_pivot(residual, floor):
        nonlocal drawn
        if drawn >= attempts:
            return None
        pivot = compiled.draw_pivot(residual, floor, uniforms[drawn])
        if pivot < 0:
            return None
        drawn += 1
        return int(pivot)
    return next_pivot


def kernel_column(kernel: str, params, sample: np.ndarray, sample_t: np.ndarray, pivot: int) -> np.ndarray:
    """k(x_r, x_pivot) for every row of the sample: `paired_kernel`'s bits, compiled for the kernels whose
    column is one sum per row (`_fitted_kernels.kernel_column`), else `paired_kernel` itself."""
    kind = _COMPILED_COLUMNS.get(kernel)
    if kind is None:
        return paired_kernel(kernel, params, sample, sample[pivot])
    polynomial = kernel == "polynomial"
    return compiled.kernel_column(sample_t, sample[pivot], kind, float(params.gamma),
                                  float(params.coef0) if polynomial else 0.0, int(params.degree) if polynomial else 0)


def fit_landmarks(sample: np.ndarray, kernel: str, params, n_landmarks: int, rule: str,
                  seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(landmark row indices into `sample`, L^-1 as a k x k lower triangular matrix), k <= n_landmarks."""
    sample = np.ascontiguousarray(sample, dtype=np.float64)
    sample_t = np.ascontiguousarray(sample.T)
    rows = sample.shape[0]
    diagonal = paired_kernel(kernel, params, sample, sample)
    floor = RELATIVE_FLOOR * np.maximum(diagonal, 0.0)
    residual = diagonal.copy()
    factors_t = np.zeros((n_landmarks, rows))  # row k: the factor column of landmark k
    pivots = np.zeros(n_landmarks, dtype=np.int64)
    kind = _COMPILED_COLUMNS.get(kernel)
    if kind is not None:   # the whole loop compiled
        polynomial = kernel == "polynomial"
        uniform = rule == "uniform"
        count = compiled.pivoted_cholesky(
            sample_t, sample, diagonal, floor, kind, float(params.gamma), float(params.coef0) if polynomial else 0.0,
            int(params.degree) if polynomial else 0,
            np.zeros(0) if uniform else _pivot_uniforms(seed, 2 * n_landmarks + 16),
            _pivot_sequence(seed, rows) if uniform else np.zeros(0, dtype=np.int64), factors_t, pivots)
        return _normalization(factors_t, pivots[:count])
    next_pivot = _pivot_order(rule, seed, rows, 2 * n_landmarks + 16)
    count = 0
    while count < n_landmarks:
        pivot = next_pivot(residual, floor)
        if pivot is None:
            break
        column = kernel_column(kernel, params, sample, sample_t, pivot)
        compiled.subtract_projections(column, factors_t, count, pivot)
        if not (column[pivot] > floor[pivot] and diagonal[pivot] > 0):
            residual[pivot] = 0.0  # spanned already: the updated residual says so more precisely
            continue
        pivots[count] = pivot
        compiled.accept_pivot(column, pivot, factors_t, count, residual, pivots)
        count += 1
    return _normalization(factors_t, pivots[:count])


def _normalization(factors_t: np.ndarray, pivots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pivots, L^-1) with L the factors at the landmark rows (lower triangular)."""
    lower = np.tril(factors_t[:pivots.size, pivots].T)
    return pivots, compiled.lower_inverse(np.ascontiguousarray(lower))
