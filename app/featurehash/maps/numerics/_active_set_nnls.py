"""Nonnegative least squares in Gram form for thousands of unknowns, compiled, in a fixed order.

Solves  min_a  1/2 a^T G a - m^T a  subject to a >= 0,  G symmetric positive definite (the caller
adds its ridge), i.e. a weighted least-squares fit by nonnegative combinations in normal-equation
form. With G positive definite the objective is strictly convex: its minimiser is unique.

Lawson and Hanson's active set ("Solving Least Squares Problems", 1974, ch. 23), sized for the
reweighted quadrature fit (2048 candidates, passive sets of 1500) and used by the SRF shell fit too:
numba loops, and the Cholesky factor G_PP = U^T U of the passive
set updated instead of refactored: a variable that enters appends a column (one triangular solve),
one that leaves deletes its column and restores the triangle with Givens rotations (rare: ~4% of
the steps in the fit). U and its transpose L are both kept, so that both triangular solves run
along contiguous rows. Each added variable costs O(p min(p, n - p)) for the gradient and O(p^2)
for the factor and the solve, so a whole solve costs about n p^2 flops.

Determinism: only +, -, *, /, sqrt, in loops of fixed order (numba keeps IEEE semantics: no fused
multiply-add, no reassociation; see `_portable_numba`), no BLAS. The variable that enters is the one
of largest gradient, the lowest index among equal ones; the passive set is kept in order of entry.
So the same (G, m) gives the same bits on every machine and thread count.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ._portable_numba import dot

# A variable enters only where its gradient exceeds this fraction of max |m|.
GRADIENT_TOLERANCE = 1e-12
# A column whose Cholesky pivot is below this fraction of its diagonal is (numerically) in the span
# of the passive columns: it does not enter this round.
PIVOT_FLOOR = 1e-13


@nb.njit(nogil=True, cache=True)
def _forward(U, p, rhs):
    """Overwrite rhs[:p] with the solution y of U^T y = rhs, column by column of U^T (rows of U)."""
    for i in range(p):
        y = rhs[i] / U[i, i]
        rhs[i] = y
        # Loops over views from index 0, so that numba's index checks do not stop vectorisation.
        tail, row = rhs[i + 1:p], U[i, i + 1:p]
        for t in range(tail.size):
            tail[t] -= row[t] * y


@nb.njit(nogil=True, cache=True)
def _append(U, L, p, G, passive, j, work):
    """Extend U (G_PP = U^T U, P = passive[:p]; L = U^T) by variable j; False if it is dependent."""
    column = G[j]  # = G[:, j]: G is symmetric
    for t in range(p):
        work[t] = column[passive[t]]
    _forward(U, p, work)
    pivot = G[j, j] - dot(work, work, p)
    if not pivot > PIVOT_FLOOR * G[j, j]:
        return False
    for t in range(p):
        U[t, p] = work[t]
        L[p, t] = work[t]
    U[p, p] = L[p, p] = math.sqrt(pivot)
    passive[p] = j
    return True


@nb.njit(nogil=True, cache=True)
def _remove(U, L, p, passive, position):
    """Drop the variable at `position` of the passive set from U; returns the new size p - 1."""
    for r in range(p):
        target, source = U[r, position:p - 1], U[r, position + 1:p]
        for k in range(target.size):
            target[k] = source[k]
    for i in range(position + 1, p):  # rows i-1, i: zero the subdiagonal left by the shift
        a, b = U[i - 1, i - 1], U[i, i - 1]
        radius = math.sqrt(a * a + b * b)
        c, s = a / radius, b / radius
        U[i - 1, i - 1] = radius
        U[i, i - 1] = 0.0
        upper, lower = U[i - 1, i:p - 1], U[i, i:p - 1]
        for k in range(upper.size):
            x, y = upper[k], lower[k]
            upper[k] = c * x + s * y
            lower[k] = c * y - s * x
    for k in range(position, p - 1):  # L = U^T again where U changed
        for i in range(k + 1):
            L[k, i] = U[i, k]
        passive[k] = passive[k + 1]
    return p - 1


@nb.njit(nogil=True, cache=True)
def _solve(U, L, p, rhs, z):
    """z = G_PP^{-1} rhs for the first p entries, by U^T y = rhs then U z = y (rhs is overwritten); both
    by columns of the triangle (rows of U, then rows of L = U^T), so the inner loops are contiguous."""
    _forward(U, p, rhs)
    for i in range(p - 1, -1, -1):
        value = rhs[i] / L[i, i]
        z[i] = value
        head, row = rhs[:i], L[i, :i]
        for t in range(i):
            head[t] -= row[t] * value


@nb.njit(nogil=True, cache=True)
def _gradient(G, m, a, passive, p, in_passive, w, packed):
    """w = m - G a on the variables outside the passive set, the passive terms in passive order."""
    n = m.size
    if p <= n - p:  # a few passive rows: stream them
        for k in range(n):
            w[k] = m[k]
        for t in range(p):
            j = passive[t]
            coefficient = a[j]
            row = G[j]
            for k in range(n):
                w[k] -= row[k] * coefficient
        return
    for t in range(p):  # many: one gathered dot per variable outside (G is symmetric)
        packed[t] = a[passive[t]]
    for k in range(n):
        if in_passive[k]:
            continue
        row = G[k]
        l0 = l1 = l2 = l3 = 0.0
        t = 0
        while t + 4 <= p:
            l0 += row[passive[t]] * packed[t]
            l1 += row[passive[t + 1]] * packed[t + 1]
            l2 += row[passive[t + 2]] * packed[t + 2]
            l3 += row[passive[t + 3]] * packed[t + 3]
            t += 4
        while t < p:
            l0 += row[passive[t]] * packed[t]
            t += 1
        w[k] = m[k] - ((l0 + l1) + (l2 + l3))


@nb.njit(nogil=True, cache=True)
def _active_set(G, m, threshold, max_additions):
    """Lawson-Hanson from a = 0. Returns (a, True) at the optimum, (a, False) after max_additions."""
    n = m.size
    U, L = np.zeros((n, n)), np.zeros((n, n))
    passive = np.zeros(n, dtype=np.int64)
    in_passive = np.zeros(n, dtype=np.bool_)
    blocked = np.zeros(n, dtype=np.bool_)
    a = np.zeros(n)
    w, z, work, packed = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    p = np.int64(0)
    for _ in range(max_additions + 1):
        _gradient(G, m, a, passive, p, in_passive, w, packed)
        # int64 (and p above), not literals: with those numba compiled `_append` twice, once for a Literal[int]
        # (~0.5 s of a fresh process's first SRF or reweighted quadrature fit, measured).
        entering, largest = np.int64(-1), threshold
        for k in range(n):
            if not in_passive[k] and not blocked[k] and w[k] > largest:
                entering, largest = k, w[k]
        if entering < 0:
            return a, True
        if not _append(U, L, p, G, passive, entering, work):
            blocked[entering] = True  # numerically in the span of the passive columns
            continue
        in_passive[entering] = True
        p += 1
        first = True
        while p > 0:
            for t in range(p):
                work[t] = m[passive[t]]
            _solve(U, L, p, work, z)
            feasible = True
            for t in range(p):
                if not z[t] > 0.0:
                    feasible = False
                    break
            if feasible:
                for t in range(p):
                    a[passive[t]] = z[t]
                blocked[:] = False
                break
            if first and not z[p - 1] > 0.0:
                # The entering variable would not grow (rounding): undo, and skip it this round.
                p -= 1
                in_passive[entering] = False
                blocked[entering] = True
                break
            first = False
            # Step from a toward z until the first passive variable reaches 0; drop it (and any at 0).
            step, leaving = 2.0, -1
            for t in range(p):
                if not z[t] > 0.0:
                    j = passive[t]
                    ratio = a[j] / (a[j] - z[t])
                    if ratio < step:
                        step, leaving = ratio, t
            for t in range(p):
                j = passive[t]
                a[j] = a[j] + step * (z[t] - a[j])
            a[passive[leaving]] = 0.0
            for t in range(p - 1, -1, -1):
                j = passive[t]
                if not a[j] > 0.0:
                    a[j] = 0.0
                    in_passive[j] = False
                    p = _remove(U, L, p, passive, t)
    return a, False


def nonnegative_least_squares(gram: np.ndarray, moment: np.ndarray, *, additions_per_variable: int = 5) -> np.ndarray:
    """The nonnegative minimiser of 1/2 a^T G a - m^T a (G positive definite; see the module docstring).
    Raises RuntimeError if the active set has not settled after `additions_per_variable` n + 100
    entering variables (ill-conditioned problems, such as the SRF shells of small d, need more)."""
    G = np.ascontiguousarray(gram, dtype=np.float64)
    m = np.ascontiguousarray(moment, dtype=np.float64)
    n = m.size
    largest = max((abs(value) for value in m.tolist()), default=0.0)  # max |m|: exact in any order
    limit = additions_per_variable * n + 100
    a, converged = _active_set(G, m, GRADIENT_TOLERANCE * largest, limit)
    if not converged:
        raise RuntimeError(f"nonnegative least squares did not settle after {limit} entering variables")
    return a
