"""The SSF index-set search as numpy formulas (the implementation before the compiled loops of
`featurehash.maps.fourier._ssf_search_kernels`): tests/maps/fourier/test_ssf_search.py checks that the compiled search
picks bit-identical objectives and the very same index sets."""

from __future__ import annotations

import numpy as np
import scipy.fft
from featurehash.maps.numerics import _portable_math as pm
from featurehash.maps.fourier.ssf_search import (_FACTOR_FLOOR, _RELATIVE_GAIN, EXACT_SEARCH_TERMS, MAX_SWEEPS, SEARCH_TERM_BUDGET,
                                  SHORTLIST, _half_range, _unit_roots, random_index_set)

_CANDIDATE_CHUNK_TERMS = 2**20


def _exponentials(indices: np.ndarray, n: int, roots=None) -> np.ndarray:
    cos_table, sin_table = _unit_roots(n) if roots is None else roots
    p = np.arange(n)
    phases = np.multiply.outer(np.asarray(indices, dtype=np.int64), p) % n
    return pm.ordered_sum(cos_table[phases], axis=0) + 1j * pm.ordered_sum(sin_table[phases], axis=0)


def _log_terms(real, imag, points, floor):
    if points == "columns":
        real_factor = np.maximum(1.0 - real, floor)
        return 0.5 * pm.log(real_factor * real_factor * np.maximum(1.0 - imag * imag, floor))
    return pm.log(np.maximum(1.0 - real * real, floor) * np.maximum(1.0 - imag * imag, floor))


class ReferenceCoordinateSearch:
    """State of the ascent: the set, which indices are used, and h = sum_s exp(2 pi i k_s p / n)."""

    def __init__(self, indices: np.ndarray, n: int, points: str):
        self.indices = indices.copy()
        self.m, self.n, self.points = indices.size, n, points
        self.used = np.zeros(n, dtype=bool)
        self.used[indices] = True
        self.p, self.weights = _half_range(n)
        self.cos_table, self.sin_table = _unit_roots(n)
        self.refresh()

    def refresh(self) -> None:
        """Recompute h from the set (no drift from many incremental updates)."""
        self.h_full = _exponentials(self.indices, self.n, (self.cos_table, self.sin_table))

    def column(self, k: int, p: np.ndarray) -> np.ndarray:
        """exp(2 pi i k p / n) from exact tables."""
        phase = (k * p) % self.n
        return self.cos_table[phase] + 1j * self.sin_table[phase]

    def exact_objectives(self, base: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Q with each candidate in place of the removed index; base = h - removed, half range."""
        p, m, n = self.p, self.m, self.n
        out = np.empty(candidates.size)
        rows = max(1, _CANDIDATE_CHUNK_TERMS // max(1, p.size))
        for start in range(0, candidates.size, rows):
            chunk = candidates[start:start + rows]
            phase = np.multiply.outer(chunk, p) % n
            real = (base.real + self.cos_table[phase]) / m
            imag = (base.imag + self.sin_table[phase]) / m
            terms = _log_terms(real, imag, self.points, _FACTOR_FLOOR) * self.weights
            out[start:start + chunk.size] = pm.ordered_sum(terms, axis=1)
        return out

    def ranked_candidates(self, base_full: np.ndarray, free: np.ndarray, count: int) -> np.ndarray:
        """The `count` free indices with the best second-order estimate of Q (two FFTs).

        With (a, b) = h_p / m and f(a, b) the term of Q, adding index k moves (a_p, b_p) by
        (cos, sin)(2 pi k p / n) / m. To second order, sum_p f_a cos + f_b sin is
        Re sum_p (f_a - i f_b) e^{2 pi i k p / n}, and the quadratic part is a constant plus
        1/4 sum_p (f_aa - f_bb) cos(4 pi k p / n) (f_ab = 0): inverse DFTs read at k and 2k.
        """
        m, n = self.m, self.n
        a = np.clip(base_full.real / m, -1.0 + 1e-6, 1.0 - 1e-6)
        b = np.clip(base_full.imag / m, -1.0 + 1e-6, 1.0 - 1e-6)
        one_minus_b2 = 1.0 - b * b
        if self.points == "columns":  # f = log(1 - a) + 1/2 log(1 - b^2)
            f_a, f_aa = -1.0 / (1.0 - a), -1.0 / (1.0 - a) ** 2
            f_b, f_bb = -b / one_minus_b2, -(1.0 + b * b) / one_minus_b2**2
        else:  # f = log(1 - a^2) + log(1 - b^2)
            one_minus_a2 = 1.0 - a * a
            f_a, f_aa = -2.0 * a / one_minus_a2, -2.0 * (1.0 + a * a) / one_minus_a2**2
            f_b, f_bb = -2.0 * b / one_minus_b2, -2.0 * (1.0 + b * b) / one_minus_b2**2
        gradient = f_a - 1j * f_b
        curvature = f_aa - f_bb
        gradient[0] = curvature[0] = 0.0  # p = 0 pairs a column with itself or its partner: fixed
        linear = scipy.fft.ifft(gradient, norm="forward").real / m
        quadratic = scipy.fft.ifft(curvature, norm="forward").real / (4.0 * m * m)
        if free.size <= count:
            return free
        score = linear[free] + quadratic[(2 * free) % n]
        best = np.argpartition(-score, count - 1)[:count]
        return free[np.sort(best)]

    def terms_per_coordinate(self, exact: bool) -> int:
        """(candidate, p) terms one coordinate step evaluates: the unit of the search budget."""
        candidates = self.n - self.m if exact else SHORTLIST
        return (candidates + 1) * self.p.size + (0 if exact else 3 * self.n)

    def sweep(self, exact: bool, coordinates: int) -> int:
        """A pass over the coordinates q = 0..coordinates-1 (m for a full sweep); returns the swaps."""
        swaps = 0
        all_indices = np.arange(self.n)
        for q in range(coordinates):
            removed = int(self.indices[q])
            base_full = self.h_full - self.column(removed, all_indices)
            free = all_indices[~self.used]
            if not exact:
                free = self.ranked_candidates(base_full, free, SHORTLIST)
            values = self.exact_objectives(base_full[self.p], np.concatenate(([removed], free)))
            current, top = values[0], float(values[1:].max())
            # Candidates within the noise of the best tie (symmetries make exact ties common): the
            # lowest index wins, so rounding noise never decides.
            best = int(np.flatnonzero(values[1:] >= top - _RELATIVE_GAIN * max(1.0, abs(top)))[0])
            if top > current + _RELATIVE_GAIN * max(1.0, abs(current)):
                added = int(free[best])
                self.indices[q] = added
                self.used[removed], self.used[added] = False, True
                self.h_full = base_full + self.column(added, all_indices)
                swaps += 1
        self.refresh()
        return swaps


def reference_index_set(m: int, n: int, seed: int, points: str = "antipodal") -> tuple[int, ...]:
    """`ssf.optimised_index_set(...).index_set` as the numpy search computed it."""
    search = ReferenceCoordinateSearch(random_index_set(m, n, seed), n, points)
    exact = m * (n - m) * search.p.size <= EXACT_SEARCH_TERMS
    step_terms = search.terms_per_coordinate(exact)
    sweeps = spent = 0
    converged = n == m
    while not converged and sweeps < MAX_SWEEPS and spent < SEARCH_TERM_BUDGET:
        coordinates = min(m, -(-(SEARCH_TERM_BUDGET - spent) // step_terms))
        changed = search.sweep(exact, coordinates)
        sweeps += 1
        spent += coordinates * step_terms
        converged = changed == 0 and coordinates == m
    return tuple(int(k) for k in search.indices)
