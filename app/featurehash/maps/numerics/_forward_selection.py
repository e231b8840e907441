"""Greedy forward selection of least-squares columns in Gram form, compiled, in a fixed order.

Chooses `count` of n candidate columns for min_a 1/2 a^T G a - m^T a (G symmetric positive definite,
the caller adds its ridge), one at a time: each step takes the candidate whose entry lowers the
unconstrained least-squares objective on the chosen set the most, i.e. the largest c_j^2 / s_j,
where c = m - G_{:,S} G_SS^{-1} m_S is the residual correlation and s_j = G_jj - G_jS G_SS^{-1} G_Sj
the part of column j outside the chosen ones ("orthogonal least squares", Chen, Billings, Luo,
"Orthogonal least squares methods and their application to non-linear system identification",
Int. J. Control 1989). Only candidates with c_j > 0 enter (their weight would start positive): the
caller refits the chosen set by nonnegative least squares. Both c and s are updated in O(n) per
chosen column from the columns' G-orthogonalised directions, so selecting p columns costs about
n p^2 flops, and no least-squares problem is solved on the way.

Why here (the reweighted quadrature fit, `_quadrature_rules.fit_weights`): in d >= 30 the plain
NNLS over the candidates keeps nearly all of them, so which D/2 survive decides the error; the l1
path's choice got worse with more candidates, this one better (bench/bench_quadrature.py).

Determinism: only +, -, *, /, sqrt in loops of fixed order (see `_portable_numba`), no BLAS; the
largest score wins, the lowest index among equal ones. Same (G, m), same bits on every machine.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

# A candidate whose part outside the chosen columns is below this fraction of its diagonal is
# (numerically) in their span: it cannot enter.
RESIDUAL_FLOOR = 1e-10


@nb.njit(nogil=True, cache=True)
def _select(G, m, count, forced):
    """Indices of up to `count` columns in the order chosen; the columns in `forced` first, in their
    order (they enter whatever their score). Stops early when no candidate has c_j > 0 left."""
    n = m.size
    directions = np.zeros((count, n))  # row t: G-orthonormal direction of the t-th chosen column
    correlation = m.copy()
    residual = np.empty(n)
    for j in range(n):
        residual[j] = G[j, j]
    chosen = np.full(count, -1, dtype=np.int64)
    taken = np.zeros(n, dtype=np.bool_)
    u = np.empty(n)
    for step in range(count):
        k = -1
        if step < forced.size:
            k = forced[step]
        else:
            best = 0.0
            for j in range(n):
                if taken[j] or not correlation[j] > 0.0 or not residual[j] > RESIDUAL_FLOOR * G[j, j]:
                    continue
                score = correlation[j] * correlation[j] / residual[j]
                if score > best:
                    k, best = j, score
        if k < 0 or not residual[k] > RESIDUAL_FLOOR * G[k, k]:
            break
        # u = (G[k] - sum_t directions[t, k] directions[t]) / sqrt(residual[k]), t ascending.
        row = G[k]
        for j in range(n):
            u[j] = row[j]
        for t in range(step):
            previous = directions[t]
            coefficient = previous[k]
            for j in range(n):
                u[j] -= previous[j] * coefficient
        norm = math.sqrt(residual[k])
        ratio = correlation[k] / norm
        target = directions[step]
        for j in range(n):
            value = u[j] / norm
            target[j] = value
            correlation[j] -= value * ratio
            residual[j] -= value * value
        taken[k] = True
        chosen[step] = k
    used = 0
    while used < count and chosen[used] >= 0:
        used += 1
    return chosen[:used]


def forward_selection(gram: np.ndarray, moment: np.ndarray, count: int,
                      forced: np.ndarray | None = None) -> np.ndarray:
    """Up to `count` candidate indices, in the order chosen (see the module docstring)."""
    G = np.ascontiguousarray(gram, dtype=np.float64)
    m = np.ascontiguousarray(moment, dtype=np.float64)
    first = np.zeros(0, dtype=np.int64) if forced is None else np.ascontiguousarray(forced, dtype=np.int64)
    return _select(G, m, int(min(count, m.size)), first)
