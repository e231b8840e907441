"""Nonnegative least squares in a fixed order of operations (the same bits on every machine).

Solves  min_a  1/2 a^T G a - m^T a + ridge/2 ||a||^2  subject to a >= 0,
for a symmetric positive semidefinite Gram matrix G = A^T W A and moment m = A^T W b, i.e. the
weighted least-squares fit of b by nonnegative combinations of the columns of A. With ridge > 0
the objective is strictly convex, so the optimum is unique and this is the only answer there is.

The method is Lawson and Hanson's active set ("Solving Least Squares Problems", 1974, ch. 23),
on the normal equations: add the variable whose gradient most wants to grow, solve the
unconstrained problem on the passive set (Cholesky, compiled, fixed loop order), and step
back to the boundary while a passive variable would turn negative. Ties go to the lowest index.
Meant for problems whose solution has few nonzeros (passive sets of tens to a few hundred).
"""

from __future__ import annotations

import numba
import numpy as np

from ._portable_math import ordered_sum


@numba.njit(cache=True)
def _cholesky_solve(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve gram x = rhs (Cholesky, then two triangular solves), every sum in index order.

    Compiled loops keep IEEE order: numba without fastmath neither fuses a * b + c nor vectorises
    reductions (tests/test_portability.py checks both on the running machine)."""
    n = rhs.size
    lower = np.zeros((n, n))
    for j in range(n):
        for i in range(j, n):
            total = gram[i, j]
            for k in range(j):
                total -= lower[i, k] * lower[j, k]
            if i == j:
                if not total > 0.0:
                    raise np.linalg.LinAlgError("the Gram matrix of the passive set is not positive definite")
                lower[j, j] = np.sqrt(total)
            else:
                lower[i, j] = total / lower[j, j]
    y = np.zeros(n)
    for i in range(n):
        total = rhs[i]
        for k in range(i):
            total -= lower[i, k] * y[k]
        y[i] = total / lower[i, i]
    x = np.zeros(n)
    for i in range(n - 1, -1, -1):
        total = y[i]
        for k in range(i + 1, n):
            total -= lower[k, i] * x[k]
        x[i] = total / lower[i, i]
    return x


def nonnegative_least_squares(gram: np.ndarray, moment: np.ndarray, ridge: float = 0.0, *,
                              tolerance: float = 1e-11, max_iterations: int | None = None) -> np.ndarray:
    """The nonnegative minimiser a of 1/2 a^T G a - m^T a + ridge/2 |a|^2 (see the module docstring).

    `tolerance` is relative to max |m|: a variable enters only where its gradient exceeds it.
    """
    G = np.asarray(gram, dtype=np.float64) + ridge * np.eye(len(moment))
    m = np.asarray(moment, dtype=np.float64)
    n = m.size
    limit = max_iterations or 10 * n + 100
    threshold = tolerance * float(np.max(np.abs(m), initial=0.0))
    solution = np.zeros(n)
    passive: list[int] = []
    for _ in range(limit):
        # Gradient of the negated objective, the columns of the passive set added in index order.
        residual = m - ordered_sum(G[:, passive] * solution[passive], axis=1) if passive else m.copy()
        candidates = np.where(np.isin(np.arange(n), passive), -np.inf, residual)
        best = int(np.argmax(candidates))  # the lowest index among equal maxima
        if not candidates[best] > threshold:
            return solution
        passive = sorted([*passive, best])
        while True:
            trial = _cholesky_solve(np.ascontiguousarray(G[np.ix_(passive, passive)]), m[passive].copy()).tolist()
            if all(t > 0.0 for t in trial):
                solution[:] = 0.0
                solution[passive] = trial
                break
            # Step from the current solution toward the trial one until a variable reaches 0.
            step = min(solution[i] / (solution[i] - t) for i, t in zip(passive, trial) if t <= 0.0)
            for i, t in zip(passive, trial):
                solution[i] += step * (t - solution[i])
            passive = [i for i in passive if solution[i] > 0.0]
            solution[[i for i in range(n) if i not in passive]] = 0.0
            if not passive:
                break
    raise RuntimeError(f"nonnegative least squares did not converge in {limit} iterations")
