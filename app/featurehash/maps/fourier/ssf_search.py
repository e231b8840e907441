"""The index set of an SSF map: coordinate ascent on the Riesz log-energy of its directions.

The method and the two stopping rules are in the docstring of `featurehash.maps.fourier.ssf` ("Index set",
"When to stop"), the measurements behind its constants in docs/methods/fourier.md ("Measurements behind the
design"); the map calls `optimised_index_set` when a new spec has no index set, and a stored spec carries its
set, so this search runs once per spec. Deterministic in its arguments on every machine: the candidate loops
are compiled from portable math (`_ssf_search_kernels`), and a split over two threads changes no result.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.fft

try:
    from scipy.fft._pocketfft import pypocketfft as _pocketfft
except ImportError:  # another scipy layout: the public call (same bits, slower)
    _pocketfft = None

from .. import randomness
from ..numerics import _portable_math as pm
from . import _ssf_search_kernels as search_kernels

# Coordinate ascent: the paper reports fewer than 10 sweeps; this only bounds pathological cases.
MAX_SWEEPS = 30
# Below this many (candidate, p) terms per sweep every unused index is evaluated exactly
# (true coordinate ascent). Above it, a second-order expansion of Q around the current h, which is
# two FFTs per coordinate, ranks all candidates and the best SHORTLIST are evaluated exactly.
EXACT_SEARCH_TERMS = 2**22
SHORTLIST = 16
# How the ascent stops (`search`): "until_unchanged" (specs made before the parameter, which leave the key
# out) sweeps until a sweep swaps nothing; "until_small_gain" (every new request) stops after a sweep whose
# energy gain is at most SMALL_GAIN times the first sweep's, and shortlists SMALL_GAIN_SHORTLIST candidates
# (the measurements behind both numbers: docs/methods/fourier.md, "Search: when to stop").
SEARCHES = ("until_unchanged", "until_small_gain")
SMALL_GAIN = 0.0005
SMALL_GAIN_SHORTLIST = 2
# "until_small_gain" with a shortlist skips a coordinate whose own index beat its best rival, at its last check,
# by more than SKIP_RATIO times the energy gained by all swaps since (~a third of the steps at d = 4096; 0.3
# skipped half but lost up to 0.44 random-set standard deviations of energy at (1024, 4096)).
SKIP_RATIO = 1.0
# At most this many (candidate, p) terms in all (~10-40 ns each): past it the ascent stops, mid-sweep
# if need be, and reports converged=False, so creating a huge spec takes seconds, not hours.
# d = 4096, D = 16384 (m = 2048, n = 4096), seed 7, "until_unchanged": 8 sweeps, ~0.8e9 terms budgeted
# (0.6e9 of them exact terms, ~3 ns each compiled), ~4 s of CPU; "until_small_gain": 7 sweeps, ~1 s.
SEARCH_TERM_BUDGET = 2**30
# A swap must raise Q by more than this (relative) to count: float noise cannot make sweeps cycle.
_RELATIVE_GAIN = 1e-12
# Coincident points make 1 - <u_i, u_j> zero; the search clips there (a huge penalty, still finite).
_FACTOR_FLOOR = 1e-12

# Candidate evaluations of at least this many terms are split over two threads (the kernel releases the
# GIL; the results do not depend on the split). A hop costs ~20-40 us of CPU, so smaller ones stay serial.
_THREADED_TERMS = 2**15
_SEARCH_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="featurehash-ssf-search")

# Whose Riesz energy the spec's index set minimises (module docstring, "Index set").
POINT_SETS = ("antipodal", "columns")
SPEC_POINT_SET = "antipodal"


# -------------------------------------------------------------------------------------------
# index set: coordinate ascent on the Riesz log-energy
# -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class IndexSetSearch:
    """The result of `optimised_index_set`: the set and how the search went."""

    index_set: tuple[int, ...]
    points: str             # whose energy: "antipodal" (+-V, the default) or "columns" (V)
    initial_energy: float   # Riesz log-energy of the seeded random start
    final_energy: float
    sweeps: int             # full passes over the m coordinates, the last one unchanged if converged
    swaps: int
    converged: bool         # False only when the term budget stopped it
    exact: bool             # every candidate evaluated exactly (else FFT-ranked shortlist)


def _unit_roots(n: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of 2 pi j / n, j = 0..n-1 (portable: the same bits on every machine)."""
    return pm.cos_sin((2.0 * np.pi / n) * np.arange(n))


def _exponentials(indices: np.ndarray, n: int, roots: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """h_p = sum_s exp(2 pi i k_s p / n) for p = 0..n-1, the terms added in the order of the set."""
    cos_table, sin_table = _unit_roots(n) if roots is None else roots
    real, imag = np.zeros(n), np.zeros(n)
    search_kernels.exponentials(np.asarray(indices, dtype=np.int64), cos_table, sin_table, real, imag)
    return real + 1j * imag


def _log_terms(real: np.ndarray, imag: np.ndarray, points: str, floor: float) -> np.ndarray:
    """Per-p terms of Q, with (real, imag) = h_p / m, the column inner products:
    "columns": log(1 - Re) + 1/2 log(1 - Im^2); "antipodal": log(1 - Re^2) + log(1 - Im^2).
    Factors are clipped at `floor` (0 gives -inf where points coincide)."""
    if points == "columns":
        real_factor = np.maximum(1.0 - real, floor)
        return 0.5 * pm.log(real_factor * real_factor * np.maximum(1.0 - imag * imag, floor))
    return pm.log(np.maximum(1.0 - real * real, floor) * np.maximum(1.0 - imag * imag, floor))


def _half_range(n: int) -> tuple[np.ndarray, np.ndarray]:
    """p = 1..n/2 and their weights: h_{n-p} = conj(h_p) and the terms are even in Im h."""
    p = np.arange(1, n // 2 + 1)
    weights = np.full(p.size, 2.0)
    if n % 2 == 0:
        weights[-1] = 1.0
    return p, weights


def riesz_log_energy(index_set, n: int, points: str = "antipodal") -> float:
    """Riesz log-energy sum_{i<j} -log ||u_i - u_j|| of the point set (inf if two points coincide).

    "columns": the 2n columns of V (the paper's energy):
        E = -n(2n-1)/2 log 2 - n/2 sum_{p=1}^{n-1} [log(1 - Re h_p/m) + 1/2 log(1 - (Im h_p/m)^2)];
    "antipodal": the 4n points +-V (those the features use):
        E = -2n log 2 - n(2n-1) log 4 - n sum_{p=1}^{n-1} [log(1 - (Re h_p/m)^2) + log(1 - (Im h_p/m)^2)].
    """
    index_set = np.asarray(index_set, dtype=np.int64)
    h = _exponentials(index_set, n)[1:] / index_set.size
    with np.errstate(divide="ignore"):
        q = float(pm.ordered_sum(_log_terms(h.real, h.imag, points, 0.0)))
    if points == "columns":
        return -n * (2 * n - 1) / 2 * np.log(2.0) - n / 2 * q
    return -2 * n * np.log(2.0) - n * (2 * n - 1) * np.log(4.0) - n * q


def random_index_set(m: int, n: int, seed: int) -> np.ndarray:
    """m distinct indices of 0..n-1 in a seeded random order: the search's starting point."""
    words = randomness.raw_words(seed, "ssf.index_start", n)
    return np.argsort(words, kind="stable")[:m].astype(np.int64)


def _inverse_dft(x: np.ndarray) -> np.ndarray:
    """scipy.fft.ifft(x, norm="forward") of a contiguous 1-d float64 or complex128 array: the same call
    into pocketfft without scipy's dispatch layers, which cost more than a 4096-point transform (the
    bits are the same: tests/maps/fourier/test_ssf_search.py)."""
    if _pocketfft is None:
        return scipy.fft.ifft(x, norm="forward")
    return _pocketfft.c2c(x, (-1,), False, 0, None, 1)  # inverse, no scaling (norm "forward"), one worker


class _CoordinateSearch:
    """State of the ascent: the set, which indices are used, and h = sum_s exp(2 pi i k_s p / n) (real
    and imaginary parts). The loops are compiled (`_ssf_search_kernels`, the same bits as numpy's
    formulas); only the two ranking FFTs and the shortlist's selection run in numpy/scipy."""

    def __init__(self, indices: np.ndarray, n: int, points: str):
        self.indices = indices.copy()
        self.m, self.n, self.points = indices.size, n, points
        self.antipodal = points == "antipodal"
        self.used = np.zeros(n, dtype=bool)
        self.used[indices] = True
        self.p, self.weights = _half_range(n)
        self.cos_table, self.sin_table = _unit_roots(n)
        self.h_real, self.h_imag = np.empty(n), np.empty(n)
        self.base_real, self.base_imag = np.empty(n), np.empty(n)  # h without the coordinate's index
        self.gradient, self.curvature = np.empty(n, dtype=np.complex128), np.empty(n)
        self.packed = np.empty(n, dtype=np.complex128)
        self.half_base = (self.base_real[1:self.p.size + 1], self.base_imag[1:self.p.size + 1])  # views, p = 1..P
        # For skipping settled coordinates (`sweep`'s skip_ratio): by how much Q preferred the coordinate's own
        # index to its best rival at its last exact check (-1: not settled), and the total gain then.
        self.total_gain = 0.0
        self.margin, self.margin_at = np.full(self.m, -1.0), np.zeros(self.m)
        self.refresh()

    def refresh(self) -> None:
        """Recompute h from the set (no drift from many incremental updates)."""
        search_kernels.exponentials(self.indices, self.cos_table, self.sin_table, self.h_real, self.h_imag)

    def exact_objectives(self, candidates: np.ndarray) -> np.ndarray:
        """Q with each candidate in place of the removed index (base = h - removed); large batches are
        split between two threads (each candidate's sum is computed whole by one of them)."""
        out = np.empty(candidates.size)
        base_real, base_imag = self.half_base

        def evaluate(part: slice) -> None:
            search_kernels.exact_objectives(base_real, base_imag, candidates[part], self.cos_table, self.sin_table,
                                            self.weights, self.m, self.antipodal, _FACTOR_FLOOR, out[part])
        if candidates.size * self.p.size < _THREADED_TERMS:
            search_kernels.exact_objectives(base_real, base_imag, candidates, self.cos_table, self.sin_table,
                                            self.weights, self.m, self.antipodal, _FACTOR_FLOOR, out)
            return out
        middle = (candidates.size + 1) // 2
        other = _SEARCH_POOL.submit(evaluate, slice(middle, None))
        evaluate(slice(0, middle))
        other.result()
        return out

    def _ranking_transforms(self) -> tuple[np.ndarray, np.ndarray]:
        """The inverse DFTs of the gradient and curvature inputs (a thread hop costs more than one of them)."""
        return _inverse_dft(self.gradient), _inverse_dft(self.curvature)

    def _packed_ranking_transforms(self) -> tuple[np.ndarray, np.ndarray]:
        """The real parts of the same two transforms, by one FFT (`_ssf_search_kernels.packed_ranking_input`);
        equal to `_ranking_transforms`' up to rounding."""
        search_kernels.packed_ranking_input(self.gradient, self.curvature, self.packed)
        both = _inverse_dft(self.packed)
        return both.real, both.imag

    def ranked_candidates(self, free: np.ndarray, count: int,
                          transforms: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """The `count` free indices with the best second-order estimate of Q (two FFTs), ascending,
        from the ranking inputs of the current base (`prepare_coordinate`).

        With (a, b) = h_p / m and f(a, b) the term of Q, adding index k moves (a_p, b_p) by
        (cos, sin)(2 pi k p / n) / m. To second order, sum_p f_a cos + f_b sin is
        Re sum_p (f_a - i f_b) e^{2 pi i k p / n}, and the quadratic part is a constant plus
        1/4 sum_p (f_aa - f_bb) cos(4 pi k p / n) (f_ab = 0): inverse DFTs read at k and 2k.
        """
        if free.size <= count:
            return free
        linear, quadratic = self._ranking_transforms() if transforms is None else transforms
        score = np.empty(free.size)
        search_kernels.shortlist_scores(linear, quadratic, free, self.m, score)
        best = np.argpartition(-score, count - 1)[:count]
        return free[np.sort(best)]

    def terms_per_coordinate(self, exact: bool, shortlist: int = SHORTLIST) -> int:
        """(candidate, p) terms one coordinate step evaluates: the unit of the search budget."""
        candidates = self.n - self.m if exact else shortlist
        return (candidates + 1) * self.p.size + (0 if exact else 3 * self.n)

    def sweep(self, exact: bool, coordinates: int, shortlist: int = SHORTLIST, packed: bool = False,
              skip_ratio: float | None = None) -> tuple[int, float]:
        """A pass over the coordinates q = 0..coordinates-1 (m for a full sweep); returns the swaps and
        the rise of Q they made (each swap's exact gain, summed in order). `packed` ranks by one FFT, not two.
        With `skip_ratio`, a coordinate whose index beat its best rival by more than skip_ratio times the gain
        of every swap made since is skipped: the landscape has not moved enough to change its choice."""
        swaps, gain = 0, 0.0
        tables = (self.cos_table, self.sin_table)
        free = np.empty(self.n, dtype=np.int64)
        shortlisted = np.empty(shortlist + 1, dtype=np.int64)
        for q in range(coordinates):
            if (skip_ratio is not None and self.margin[q] >= 0.0
                    and self.margin[q] > skip_ratio * (self.total_gain - self.margin_at[q])):
                continue
            removed = int(self.indices[q])
            count = search_kernels.prepare_coordinate(
                self.h_real, self.h_imag, removed, self.used, *tables, self.m, self.antipodal, not exact,
                self.base_real, self.base_imag, self.gradient, self.curvature, free)
            if exact or count <= shortlist:
                candidates = np.concatenate(([removed], free[:count]))
            else:
                transforms = self._packed_ranking_transforms() if packed else self._ranking_transforms()
                if search_kernels.shortlist(*transforms, free[:count], self.m, shortlist, removed, shortlisted):
                    candidates = shortlisted
                else:  # a tie at the shortlist's edge: numpy's selection decides, as it always did
                    candidates = np.concatenate(([removed], self.ranked_candidates(free[:count], shortlist,
                                                                                   transforms)))
            values = self.exact_objectives(candidates)
            # Candidates within the noise of the best tie (symmetries make exact ties common): the
            # lowest index wins, so rounding noise never decides.
            best, better = search_kernels.choose(values, _RELATIVE_GAIN)
            if better:
                added = int(candidates[best + 1])
                self.indices[q] = added
                self.used[removed], self.used[added] = False, True
                search_kernels.add_column(self.base_real, self.base_imag, added, 1, *tables, self.h_real, self.h_imag)
                swaps += 1
                gain += float(values[best + 1] - values[0])
                self.total_gain += float(values[best + 1] - values[0])
                self.margin[q] = -1.0
            else:
                self.margin[q] = float(values[0] - values[1:].max()) if values.size > 1 else -1.0
                self.margin_at[q] = self.total_gain
        self.refresh()
        return swaps, gain


@functools.lru_cache(maxsize=64)
def optimised_index_set(m: int, n: int, seed: int, points: str = "antipodal",
                        search: str = "until_unchanged") -> IndexSetSearch:
    """Coordinate ascent from `random_index_set(m, n, seed)`.

    Each coordinate k_q in turn is replaced by the unused index that most lowers the Riesz
    log-energy of `points` (see `riesz_log_energy`); every swap strictly lowers it, so the sweeps
    stop. `search` (module docstring, "Index set"): "until_unchanged" sweeps until one changes nothing
    (shortlist SHORTLIST); "until_small_gain" stops after a sweep that lowered the energy by less than
    SMALL_GAIN of what the first sweep did (shortlist SMALL_GAIN_SHORTLIST). Deterministic in
    (m, n, seed, points, search), including where SEARCH_TERM_BUDGET cuts a huge search short (then
    within a sweep).
    """
    if points not in POINT_SETS:
        raise ValueError(f"points must be one of {POINT_SETS}, not {points!r}")
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, not {search!r}")
    shortlist = SHORTLIST if search == "until_unchanged" else SMALL_GAIN_SHORTLIST
    start = random_index_set(m, n, seed)
    search_state = _CoordinateSearch(start, n, points)
    exact = m * (n - m) * search_state.p.size <= EXACT_SEARCH_TERMS
    step_terms = search_state.terms_per_coordinate(exact, shortlist)
    sweeps = swaps = spent = 0
    first_gain = None
    converged = n == m  # nothing to choose: L is every row
    while not converged and sweeps < MAX_SWEEPS and spent < SEARCH_TERM_BUDGET:
        coordinates = min(m, -(-(SEARCH_TERM_BUDGET - spent) // step_terms))
        small_gain = search == "until_small_gain"
        changed, gain = search_state.sweep(exact, coordinates, shortlist, packed=small_gain,
                                           skip_ratio=SKIP_RATIO if small_gain and not exact else None)
        sweeps += 1
        swaps += changed
        spent += coordinates * step_terms
        first_gain = gain if first_gain is None else first_gain
        small = search == "until_small_gain" and gain <= SMALL_GAIN * first_gain
        converged = (changed == 0 or small) and coordinates == m
    return IndexSetSearch(index_set=tuple(int(k) for k in search_state.indices), points=points,
                          initial_energy=riesz_log_energy(start, n, points),
                          final_energy=riesz_log_energy(search_state.indices, n, points),
                          sweeps=sweeps, swaps=swaps, converged=converged, exact=exact)
