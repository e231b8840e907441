"""Compiled loops of the Nystroem fit (`_nystroem_fit`), in a fixed order of operations per output number.

Every number here is the same sequence of IEEE operations as the plain loop it replaces (each row's
sum in index order, never fused: numba without fastmath neither contracts a * b + c nor reassociates),
so the fit gives the same bits as before on every CPU. What changed is only which loop is innermost:
the independent rows (or columns) are, so LLVM runs them side by side in SIMD lanes and the arrays
stream in memory order. The factors are held transposed (one row per landmark, `factors_t[k, r]`) for
that reason (the speed-up: docs/methods/fitted.md, "Measurements behind the design").
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..numerics._portable_math import LN2_HI, LN2_LO
from ..numerics._portable_numba import _EXP, _horner

GAUSSIAN, LAPLACIAN, POLYNOMIAL, CHI2 = 0, 1, 2, 3
# 2^j for j = _LOWEST_HALF .. 512: the two scalings of `_portable_math.exp` (k in [-1076, 1024] is split in
# floor(k / 2) and the rest, each in [-538, 512]), as products by exact powers of two, which round as
# ldexp does (correctly, once each) but vectorise (ldexp is a libm call: 47 ns an element, measured).
_LOWEST_HALF = -538
_TWO_POWERS = np.ldexp(1.0, np.arange(_LOWEST_HALF, 513))


@nb.njit(nogil=True, cache=True)
def paired_sums(X: np.ndarray, Y: np.ndarray, kind: int) -> np.ndarray:
    """Per row r, sum_i of (x_ri - y_i)^2, |x_ri - y_i| or x_ri y_i (y = Y[r], or Y[0] for one row),
    added in index order: the bits of numpy's elementwise terms then `ordered_sum`."""
    n, d = X.shape
    out = np.empty(n)
    for r in range(n):
        y = Y[0] if Y.shape[0] == 1 else Y[r]
        total = 0.0
        for i in range(d):
            if kind == 0:
                difference = X[r, i] - y[i]
                total += difference * difference
            elif kind == 1:
                total += abs(X[r, i] - y[i])
            else:
                total += X[r, i] * y[i]
        out[r] = total
    return out


@nb.njit(nogil=True, cache=True)
def _integer_power(x, exponent):
    """`_portable_math.integer_power` for a scalar: squaring in the same order."""
    result = 1.0
    base = x
    while exponent:
        if exponent & 1:
            result = result * base
        exponent >>= 1
        if exponent:
            base = base * base
    return result


@nb.njit(nogil=True, cache=True, inline="always")
def _term(x, y, kind):
    if kind == GAUSSIAN:
        difference = x - y
        return difference * difference
    if kind == LAPLACIAN:
        return abs(x - y)
    if kind == POLYNOMIAL:
        return x * y
    total = x + y
    difference = x - y
    return difference * difference / total if total > 0 else 0.0


@nb.njit(nogil=True, cache=True, inline="always")
def _add_terms(sums, sample_t, y, kind):
    """sums[r] += term(sample_t[i, r], y[i]) for i in index order, four coordinates per pass over the rows."""
    d, n = sample_t.shape
    i = 0
    while i + 4 <= d:
        a, b, c, e = sample_t[i], sample_t[i + 1], sample_t[i + 2], sample_t[i + 3]
        ya, yb, yc, ye = y[i], y[i + 1], y[i + 2], y[i + 3]
        for r in range(n):
            total = sums[r] + _term(a[r], ya, kind)
            total = total + _term(b[r], yb, kind)
            total = total + _term(c[r], yc, kind)
            sums[r] = total + _term(e[r], ye, kind)
        i += 4
    while i < d:
        a, ya = sample_t[i], y[i]
        for r in range(n):
            sums[r] = sums[r] + _term(a[r], ya, kind)
        i += 1


@nb.njit(nogil=True, cache=True)
def kernel_column(sample_t, y, kind, gamma, coef0, degree):
    """k(x_r, y) for every row r of the sample, given transposed (`sample_t[i, r]`): the bits of
    `_nystroem_fit.paired_kernel` (each row's sum over i in index order from 0.0, then the portable exp or
    power). One call per kind, each with a constant kind, so the compiled loop has no branch."""
    n = sample_t.shape[1]
    sums = np.zeros(n)
    if kind == GAUSSIAN:
        _add_terms(sums, sample_t, y, GAUSSIAN)
    elif kind == LAPLACIAN:
        _add_terms(sums, sample_t, y, LAPLACIAN)
    elif kind == POLYNOMIAL:
        _add_terms(sums, sample_t, y, POLYNOMIAL)
    else:
        _add_terms(sums, sample_t, y, CHI2)
    if kind == POLYNOMIAL:
        for r in range(n):
            sums[r] = _integer_power(gamma * sums[r] + coef0, degree)
        return sums
    negative_gamma = -gamma
    for r in range(n):
        sums[r] = negative_gamma * sums[r]
    exp_in_place(sums)
    return sums


@nb.njit(nogil=True, cache=True)
def exp_in_place(x):
    """e^x for finite x, elementwise in place: the bits of `_portable_math.exp`."""
    for r in range(x.size):
        clipped = min(max(x[r], -746.0), 710.0)
        k = np.rint(clipped / LN2_HI)
        reduced = (clipped - k * LN2_HI) - k * LN2_LO
        half = math.floor(k / 2.0)
        scaled = _horner(_EXP, reduced) * _TWO_POWERS[int(half) - _LOWEST_HALF]
        x[r] = scaled * _TWO_POWERS[int(k - half) - _LOWEST_HALF]


@nb.njit(nogil=True, cache=True)
def subtract_projections(column, factors_t, count, pivot):
    """column[r] -= factors_t[k, r] * factors_t[k, pivot] for k = 0 .. count - 1 in that order, in place:
    each row's terms subtracted in index order, four landmarks per pass over the rows."""
    n = column.size
    k = 0
    while k + 4 <= count:
        a, b, c, e = factors_t[k], factors_t[k + 1], factors_t[k + 2], factors_t[k + 3]
        pa, pb, pc, pe = a[pivot], b[pivot], c[pivot], e[pivot]
        for r in range(n):
            total = column[r] - a[r] * pa
            total = total - b[r] * pb
            total = total - c[r] * pc
            column[r] = total - e[r] * pe
        k += 4
    while k < count:
        a = factors_t[k]
        pa = a[pivot]
        for r in range(n):
            column[r] = column[r] - a[r] * pa
        k += 1


@nb.njit(nogil=True, cache=True)
def accept_pivot(column, pivot, factors_t, count, residual, pivots):
    """Landmark `count` is row `pivot`: its factor column / sqrt(column[pivot]) and the residual diagonal
    minus its square, zero at every landmark (`pivots[:count + 1]`)."""
    root = math.sqrt(column[pivot])
    factor = factors_t[count]
    for r in range(column.size):
        factor[r] = column[r] / root
        residual[r] = residual[r] - factor[r] * factor[r]
    for i in range(count + 1):
        residual[pivots[i]] = 0.0


@nb.njit(nogil=True, cache=True)
def draw_pivot(residual, floor, uniform):
    """The row drawn with probability proportional to the residual above the floor: the first r whose
    running sum (in index order) exceeds uniform * total; -1 if the total is not positive."""
    n = residual.size
    cumulative = np.empty(n)
    total = 0.0
    for r in range(n):
        total += residual[r] if residual[r] > floor[r] else 0.0
        cumulative[r] = total
    if not total > 0:
        return -1
    target = uniform * total
    for r in range(n):
        if cumulative[r] > target:
            return r
    return n - 1


@nb.njit(nogil=True, cache=True)
def lower_inverse(lower):
    """The inverse of a lower triangular matrix with positive diagonal: entry (i, j) is
    -(sum_{k=j}^{i-1} lower[i, k] inverse[k, j]) / lower[i, i], its terms added in k order starting from 0,
    computed for a whole row i at once (row k of the inverse is contiguous)."""
    m = lower.shape[0]
    inverse = np.zeros((m, m))
    sums = np.empty(m)
    for i in range(m):
        for j in range(i):
            sums[j] = 0.0
        for k in range(i):
            factor = lower[i, k]
            row = inverse[k]
            for j in range(k + 1):
                sums[j] += factor * row[j]
        for j in range(i):
            inverse[i, j] = -sums[j] / lower[i, i]
        inverse[i, i] = 1.0 / lower[i, i]
    return inverse


@nb.njit(nogil=True, cache=True)
def pivoted_cholesky(sample_t, sample, diagonal, floor, kind, gamma, coef0, degree, uniforms, order, factors_t,
                     pivots):
    """`_nystroem_fit.fit_landmarks`'s loop in one compiled call, for the kernels of `kernel_column`: the same
    steps in the same order (so the same bits), without ~5 Python-level calls a landmark. Candidates are
    drawn from the residual with `uniforms` (rpcholesky) or, if `order` is not empty, taken in that order
    (uniform). Returns the number of landmarks; `pivots` and `factors_t` hold them."""
    rows = diagonal.size
    residual = diagonal.copy()
    drawn = 0
    position = 0
    count = 0
    while count < pivots.size:
        if order.size:
            while position < rows and not residual[order[position]] > floor[order[position]]:
                position += 1
            position += 1
            if position > rows:
                break
            pivot = order[position - 1]
        else:
            if drawn >= uniforms.size:
                break
            pivot = draw_pivot(residual, floor, uniforms[drawn])
            if pivot < 0:
                break
            drawn += 1
        column = kernel_column(sample_t, sample[pivot], kind, gamma, coef0, degree)
        subtract_projections(column, factors_t, count, pivot)
        if not (column[pivot] > floor[pivot] and diagonal[pivot] > 0):
            residual[pivot] = 0.0
            continue
        pivots[count] = pivot
        accept_pivot(column, pivot, factors_t, count, residual, pivots)
        count += 1
    return count
