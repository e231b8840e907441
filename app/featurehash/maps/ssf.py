"""Spherical structured features (Lyu, "Spherical Structured Feature Maps for Kernel
Approximation", ICML 2017; papers/003_*, restated in ALGORITHMS.md "SSF").

Kernels:
- "gaussian": k(x, y) = exp(-gamma ||x - y||^2), i.e. sigma^2 = 1 / (2 gamma);
- "arccos0/1/2": the arc-cosine kernel of order b (Cho & Saul, NIPS 2009),
  k_b(x, y) = (1/pi) ||x||^b ||y||^b J_b(theta) (`featurehash.kernels.arccos`).

Point set. x is padded to d' = 2m >= d (m = ceil(d/2)). With n >= m and an index set
L = (k_1..k_m) of distinct rows of the n-point DFT F[k, j] = exp(-2 pi i k j / n),
    V = [[Re F_L, -Im F_L], [Im F_L, Re F_L]] / sqrt(m)            (2m x 2n)
has unit columns: 2n points on S^{2m-1}.

Projection in O(n log n). x~ = diag(s) x (s random signs), c = x~[:m] + i x~[m:] (then rotated, see
"Randomisation"); put c_s at
position k_s of a zero length-n vector z. Then y_j = sum_s conj(F[k_s, j]) c_s / sqrt(m)
= ifft(z, norm="forward")_j / sqrt(m) (numpy's unnormalised inverse DFT, exp(+2 pi i k j / n)),
and V^T x~ = [Re y, Im y]. One batched FFT per row chunk (scipy.fft, all cores).

Features (N = 2n directions v_i, P_i = v_i^T x~):
- Gaussian: z(x) = 1/sqrt(N) [cos(t_i P_i), sin(t_i P_i)]_i with ONE radius per direction:
  t_i = F^{-1}_{chi_d'}((pi(i) - 1 + u_i) / N) * sqrt(2 gamma), pi a seeded permutation, so the N
  radii are stratified quantiles of chi with d' = 2m degrees of freedom (the points live on
  S^{d'-1}, so w = t v ~ N(0, 2 gamma I_{d'})): jittered, u_i ~ U(0, 1), with "rotation"; the
  midpoints u_i = 1/2 with "signs".
- arc-cosine b: z(x) = sqrt(E[r^2b] / N) [step(P_i) P_i^b, step(-P_i) (-P_i)^b]_i, r ~ chi_d'
  (E[r^2b] = 1, d', d'(d'+2)), step(0) = 1/2: each direction with its antipode (the paper's
  "bidirectional" form), so E<z(x), z(y)> = 2 E[r^2b] E_v[step(v.x) step(v.y) (v.x v.y)^b] = k_b.
Both give D = n_components = 4n: n = D / 4, which must be a whole number >= m. Other D are
refused (SpecError naming n_components) rather than truncated: dropping a cos or a sin (or one
half-space) of a direction biases the estimate. So SSF needs D >= 4 ceil(d/2) (about 2d); at
D = 4m, n = m and V is an orthonormal basis of R^{2m}.

Why one stratified radius per direction rather than the paper's M radii shared by all directions
(D = 4 n M). Measured (bench/bench_ssf.py's protocol: unit-norm rows, breast_cancer standardised
first, gamma = 1 / median ||x - y||^2, 5 seeds), SSF / RFF error at equal D, relative Frobenius
and relative max:
                  breast_cancer (d = 30)               digits (d = 64)
  D =        4d        8d        64d       256d     4d        8d        64d       128d
  M = 1   .62/.75   .62/.75   .40/.69   .63/1.39  .52/.67   .53/.70   .49/.66   .51/.64
  M = 2   .85/1.15  .87/1.05  .59/.80      -      .75/1.08  .75/.95   .65/.90      -
  M = 4      -     1.17/1.60  .98/1.28     -         -     1.09/1.53  .96/1.29     -
  per-dir .66/.82   .62/.77   .40/.55   .51/1.14  .53/.69   .53/.71   .43/.61   .38/.56
More radii per direction lose at every D (they take directions away, and directions are what the
structure makes good). One shared radius (M = 1) ties with per-direction radii up to ~8d, then its
fixed radial bias shows (256d, 128d). Per-direction radii integrate the radial law with N points
at no cost (the FFT yields all N projections anyway); averaged over the seeded permutation they
are the N x N tensor rule. So D = 4n, M = 1, each direction its own radius.
(Those figures predate `randomization`: they are "signs". For "rotation" see bench/results/ssf_bias.txt:
SSF / i.i.d. the same within the seed spread at 2d, 4d, 8d.)

Randomisation (`randomization`). Unbiasedness needs each direction v_i (and radius t_i) to have the
exact law of the kernel's integral: v_i uniform on S^{2m-1}, t_i ~ chi_{2m}.
- "signs" (specs stored before the parameter, which leave the key out): x~ = diag(s) x with random
  signs s, and midpoint radii. Every column of V has modulus 1/sqrt(m) in each complex coordinate
  (the points lie on a torus inside S^{2m-1}) and sign flips keep them there, so the estimate
  averaged over seeds does not converge to the kernel: over 100 seeds at d = 6, D = 24 the largest
  |mean error| / standard error is 17-36 (Gaussian, arccos0/1/2), and the error has a floor that
  RFF's does not (at 256d on breast_cancer the max error exceeds RFF's).
- "rotation" (every new request): c = x~[:m] + i x~[m:] is multiplied by U = P4 F P3 F P2 F P1 (F
  the unitary m-point DFT, P_k diagonals of seeded uniform phases), a unitary of C^m, i.e. a
  rotation of R^{2m}, in O(m log m) (three FFTs of size m beside the projection's FFT of size n),
  and the radii are jittered. The whole point set is rotated jointly, so its low energy (the
  structure) is kept, and each direction is close to uniform on the sphere: a Haar-random unitary
  would make it exactly uniform (U(m) is transitive on S^{2m-1}), and four phase blocks measure as
  such: the largest |z| of the mean error over 100-300 seeds is 2.0-3.5 with mean z^2 0.7-1.4 for
  every kernel at d = 6, 7, 16, 64, as for an unbiased estimate (a dense Haar rotation gives the
  same), where two blocks (P3 F P2 F P1) still left |z| up to 9 (Gaussian) and 32 (arccos1) on
  digits. bench/bench_ssf_bias.py measures it for every dense map (bench/results/ssf_bias.txt). The
  error is that of "signs" within the seed spread (SSF / i.i.d. there); the transform takes 1.4-1.7x
  the time of "signs" (d = 256-4096, D = 4d).

Index set. L is chosen by coordinate ascent on a Riesz log-energy (`optimised_index_set`), a pure
function of (m, n, seed), cached, and stored in the spec (params.index_set) so it is covered by the
spec id and never recomputed from a stored spec. With h_p = sum_s exp(2 pi i k_s p / n), the inner
products between columns are Re h_p / m and -Im h_p / m (see `riesz_log_energy`); swapping k_q for
k changes h by exp(2 pi i k p / n) - exp(2 pi i k_q p / n), so a candidate costs O(n), not the
O(n^2) point pairs. Small searches evaluate every free index so (exact coordinate ascent); large
ones rank all free indices by a second-order expansion (two FFTs per coordinate) and evaluate a
shortlist exactly, which found the very same sets wherever both were run. The search computes with
`_portable_math` (exact trigonometric tables, logs and ordered sums, no BLAS), so the stored set is
the same on every machine. Its loops are compiled (`_ssf_search_kernels`: the same operations in the
same order, vectorised, no FMA; tests/test_ssf_search.py checks the bits and the sets against the numpy
formulation, tests/ssf_reference_search.py): ~30x less CPU than numpy. Only the shortlist ranking of large
searches uses scipy's FFT, whose
last bits could differ across platforms, and the exact choice within the shortlist makes that matter
only if two candidates tie to ~1e-13 at the shortlist's edge and that one is the best.

When to stop (`search`). "until_unchanged" (specs stored before the parameter, which leave the key out;
a request may still state it) sweeps until a sweep swaps nothing, with a shortlist of 16: at m = 2048,
n = 4096 that is 8-12 sweeps, ~4.5-6 s of CPU. Nearly all the gain is in the first sweep (seed 7: 0.39 of
0.405 in energy, 23 of 24 standard deviations of the energy over random sets); the later sweeps swap
62, 30, 30, 9, 10, 3 of the 2048 indices and the last one swaps none. "until_small_gain" (every new
request without an index set) stops after a sweep that lowers the energy by at most SMALL_GAIN = 5e-4
of what the first sweep did, shortlists 2 candidates (the FFT ranking's top two held the exact best at
every step measured: shortlists of 2, 4, 8 and 16 made the same sets at seed 7), ranks them by one
FFT of both ranking inputs packed together (`_ssf_search_kernels.packed_ranking_input`), and, when
shortlisting, skips a coordinate whose own index beat its best rival at its last exact check by more
than SKIP_RATIO times the energy gained by all swaps since (a third of the steps at d = 4096). Measured
against "until_unchanged" (bench/bench_ssf_search.py, bench/results/ssf_search.txt: final energy difference
in standard deviations of the energy over random sets, positive = worse; seeds 1-4): (64, 256) the same
sets (exact evaluation, no skipping); (512, 2048) +0.10, 0, 0, 0; (1024, 4096) +0.001, +0.07, +0.11, 0;
(2048, 4096) +0.006, +0.001, +0.04, -0.10, where the whole optimisation gains 10-25 of those deviations.
Trajectories that part within a shortlist differ by about +-0.1 either way; the slow tail (sweeps gaining
1e-3 of the first, then more again) is what the rule gives up. Without the skipping the worst case was
similar (+0.23 at (1024, 4096) seed 3) at 1.5x the CPU; SKIP_RATIO 0.3 lost up to 0.44. The search CPU
is 3-7x lower at those sizes; `create_map` at d = 4096, D = 16384 takes 0.9-1.6 s of CPU, 1.0-1.5 s wall (the
3-candidate evaluations stay on one thread) instead of 4.5-6.8 s CPU, 3.7-5.5 s wall, at load ~1 on 2 cores;
the maps' Gram errors (300 rows, d = 4096, seeds 7-11) agree within 0.5% between the two searches.

The energy is that of the 4n points +-V ("antipodal"), not of the 2n columns alone ("columns",
ALGORITHMS.md's form): the features use each direction with its antipode (cos is even; the arc-cosine
features take both half-spaces), so an antipodal pair of columns is as wasted as a coincident one, yet
the columns' energy rewards it: for n = 2m its optimum is the cross-polytope (L = the odd rows, every column's
antipode is a column). Measured (ratios to i.i.d. as above, L random / "columns"-optimised /
"antipodal"-optimised):
  gaussian  breast_cancer 8d .65/.87 | .76/1.14 | .62/.77    digits 8d .53/.73 | .66/.95 | .53/.71
  arccos1   breast_cancer 8d .19/.16 | .24/.22  | .19/.16    digits 8d .11/.17 | .12/.21 | .11/.17
With the antipodal energy the errors are those of a random L within the seed spread (bench_ssf.py's
"randL" column: a little better or worse case by case); the columns' energy is clearly worse. So
the optimisation is kept (it is the paper's method, cheap, and stored once) but buys little here;
ALGORITHMS.md's prototype gain for arccos1 (0.070 -> 0.030) did not reproduce.

Transforms are computed in float32 unless float64 is asked for, in row chunks (bounded
temporaries). For small d (Gaussian kernel, d <= DENSE_MAX_DIM) the projection is one BLAS product with
the d x 2n matrix of the basis vectors' projections (made once, by the FFTs in float64): the same
linear map, rounded once to the working precision; 1.05-2.6x faster than the FFTs at d = 32-64 (n = 1
to 100000 rows, D = 512-4096), even at d = 96-128, slower from d = 256 (measured, float32). Sparse input is densified one chunk at a time: the FFT costs O(n log n) per row
whatever the sparsity, so a sparse path would save nothing that matters.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import scipy.fft

try:
    from scipy.fft._pocketfft import pypocketfft as _pocketfft
except ImportError:  # another scipy layout: the public call (same bits, slower)
    _pocketfft = None
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field, model_serializer
from scipy import stats

from .. import kernels
from . import _portable_math as pm
from . import _row_threads as row_threads
from . import _ssf_search_kernels as search_kernels
from . import randomness
from ._fourier_pass import FourierPass, block_rows
from .base import CHUNK_ELEMENTS, DenseFeatureMap, require
from .errors import SpecError
from .inputs import output_dtype
from .spec import MapSpec

# scipy.fft workers: -1 = one per core; batched transforms are split over rows.
FFT_WORKERS = -1
# d up to which the Gaussian projection is a BLAS product (module docstring), and the largest d x 2n
# product matrix (4 bytes each in float32).
DENSE_MAX_DIM = 64
DENSE_MAX_ELEMENTS = 2**22
# The Fourier pass's blocks are 4x the default (`_fourier_pass.block_rows`): each costs ~10 numpy and
# scipy calls; 1.3-2x faster at (n, d, D) = (1000, 32, 1024) and (100000, 64, 512) (measured).
SSF_BLOCK_SCALE = 4


def by_product(input_dim: int, n: int, gaussian: bool) -> bool:
    """Whether the Gaussian projection of n complex directions is one BLAS product (module docstring)."""
    return gaussian and input_dim <= DENSE_MAX_DIM and input_dim * 2 * n <= DENSE_MAX_ELEMENTS


def product_bytes(input_dim: int, n: int, gaussian: bool) -> int:
    """Bytes of the float32 d x 2n product matrix (`by_product`), or 0 where the FFTs project."""
    return 4 * input_dim * 2 * n if by_product(input_dim, n, gaussian) else 0


def fft_workers() -> int:
    """All cores for a batch's FFTs, one on a thread that shares a batch's rows with others (`_row_threads`)."""
    return 1 if row_threads.in_shared_section() else FFT_WORKERS


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
# (module docstring, "Index set": the measurements behind both numbers).
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

# Phase diagonals of the random rotation P4 F P3 F P2 F P1 (module docstring, "Randomisation").
ROTATION_BLOCKS = 4

# Whose Riesz energy the spec's index set minimises (module docstring, "Index set").
POINT_SETS = ("antipodal", "columns")
SPEC_POINT_SET = "antipodal"

IndexValue = Annotated[int, Field(strict=True, ge=0)]


class SSFParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kernel: Literal["gaussian", "arccos0", "arccos1", "arccos2"] = "gaussian"
    # Gaussian only (default 1.0 there); the arc-cosine kernels have no bandwidth.
    gamma: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    # The DFT rows L, in the order that pairs them with the input coordinates; filled in by
    # `complete_params` (optimised from the seed) unless given.
    index_set: list[IndexValue] | None = None
    # None (an absent key: every spec stored before the parameter) means "signs"; new requests get
    # "rotation" written out by `complete_new_request` (module docstring, "Randomisation").
    randomization: Literal["signs", "rotation"] | None = None
    # How the index set was searched (`optimised_index_set`): None (an absent key: every spec stored before
    # the parameter) means "until_unchanged"; new requests without an index set get "until_small_gain"
    # written out by `complete_new_request`. A spec with its index set never searches again.
    search: Literal["until_unchanged", "until_small_gain"] | None = None

    @model_serializer(mode="wrap")
    def _omit_legacy_values(self, handler):
        """Stored params leave `randomization` out at "signs" and `search` at "until_unchanged" (or unset):
        specs made before these parameters keep their canonical JSON, hence their ids."""
        params = handler(self)
        if params.get("randomization") in ("signs", None):
            params.pop("randomization", None)
        if params.get("search") in ("until_unchanged", None):
            params.pop("search", None)
        return params

    @property
    def rotates(self) -> bool:
        return self.randomization == "rotation"


def structure(input_dim: int, n_components: int) -> tuple[int, int]:
    """(m, n): input pairs (d' = 2m) and DFT size for D = n_components = 4n; SpecError otherwise."""
    m = (input_dim + 1) // 2
    smallest = 4 * m
    if n_components % 4 or n_components < smallest:
        below = max(smallest, n_components - n_components % 4)
        nearest = sorted({below, max(smallest, below + 4)})
        raise SpecError("n_components", (
            f"SSF gives 4 features per DFT column (cos and sin, or both half-spaces, of the column's two "
            f"real projections), with at least ceil(input_dim/2) = {m} columns: n_components must be a "
            f"multiple of 4 and >= {smallest} for input_dim {input_dim} (nearest valid: "
            f"{' or '.join(map(str, nearest))}); for fewer features use 'rff'"))
    return m, n_components // 4


def arccos_order(kernel: str) -> int:
    return int(kernel.removeprefix("arccos"))


def chi_moment(order: int, dof: int) -> float:
    """E[r^(2 order)] for r ~ chi with `dof` degrees of freedom (orders 0, 1, 2)."""
    return (1.0, float(dof), float(dof) * (dof + 2))[order]


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
    bits are the same: tests/test_ssf_search.py)."""
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


# -------------------------------------------------------------------------------------------
# the map
# -------------------------------------------------------------------------------------------

class SSFMap(DenseFeatureMap):
    method = "ssf"
    Params = SSFParams
    shares_rows = True

    def __init__(self, spec: MapSpec):
        super().__init__(spec)
        self.m, self.n = structure(spec.input_dim, spec.n_components)
        self.index_set = np.asarray(self.params.index_set, dtype=np.int64)
        # DFT row k -> which complex coordinate goes there (m: none, a zero).
        self._position = np.full(self.n, self.m, dtype=np.intp)
        self._position[self.index_set] = np.arange(self.m)
        self._parameters: dict[np.dtype, tuple[np.ndarray, np.ndarray | None]] = {}
        self._phases: dict[np.dtype, np.ndarray] = {}  # complex working precision -> phases
        self._passes: dict[np.dtype, FourierPass] = {}
        self._products: dict[np.dtype, np.ndarray] = {}
        self._by_product = by_product(spec.input_dim, self.n, self.params.kernel == "gaussian")

    @classmethod
    def complete_params(cls, params: SSFParams, *, input_dim: int, n_components: int, seed: int) -> SSFParams:
        m, n = structure(input_dim, n_components)
        if params.kernel != "gaussian" and params.gamma is not None:
            raise SpecError("params.gamma", f"the kernel {params.kernel!r} has no bandwidth: leave gamma out")
        updates = {}
        if params.kernel == "gaussian" and params.gamma is None:
            updates["gamma"] = 1.0
        if params.index_set is None:
            search = params.search or "until_unchanged"
            updates["index_set"] = list(optimised_index_set(m, n, seed, SPEC_POINT_SET, search).index_set)
        # A stored spec has both already and comes back as it was.
        return params.model_copy(update=updates) if updates else params

    @classmethod
    def complete_new_request(cls, params: SSFParams) -> SSFParams:
        updates = {}
        if params.randomization is None:
            updates["randomization"] = "rotation"
        if params.search is None and params.index_set is None:
            updates["search"] = "until_small_gain"
        return params.model_copy(update=updates) if updates else params

    @classmethod
    def check_spec(cls, spec: MapSpec) -> None:
        m, n = structure(spec.input_dim, spec.n_components)
        index_set = spec.params["index_set"]
        require(len(index_set) == m, "params.index_set",
                f"needs ceil(input_dim/2) = {m} DFT rows, got {len(index_set)}")
        require(max(index_set) < n, "params.index_set",
                f"rows of the {n}-point DFT are 0..{n - 1}; got {max(index_set)}")
        require(len(set(index_set)) == m, "params.index_set", "the DFT rows must be distinct")

    # -- random parameters ---------------------------------------------------------

    @property
    def order(self) -> int | None:
        """The arc-cosine order b, or None for the Gaussian kernel."""
        return None if self.params.kernel == "gaussian" else arccos_order(self.params.kernel)

    def signs(self) -> np.ndarray:
        """The random sign flips s of the 2m padded coordinates (+1 or -1), from the top bit."""
        words = randomness.raw_words(self.spec.seed, f"{self.method}.signs", 2 * self.m)
        return 1.0 - 2.0 * (words >> np.uint64(63)).astype(np.float64)

    def phases(self) -> np.ndarray:
        """The unit complex diagonals e^{i phi} of the random rotation, shape (ROTATION_BLOCKS, m)
        (`randomization` "rotation"; module docstring, "Randomisation")."""
        words = randomness.raw_words(self.spec.seed, f"{self.method}.rotation_phases", ROTATION_BLOCKS * self.m)
        return np.exp(1j * randomness.phase(words)).reshape(ROTATION_BLOCKS, self.m)

    def rotate(self, c: np.ndarray) -> np.ndarray:
        """U c for the rows c of a complex (rows, m) array, which it overwrites: U = P4 F P3 F P2 F P1, F the
        unitary m-point DFT and P_k = diag(phases[k]), a unitary of C^m, i.e. a rotation of R^{2m}, in
        O(m log m)."""
        phases = self._phases_for(c.dtype)
        c *= phases[0]
        for block in phases[1:]:
            c = scipy.fft.fft(c, axis=1, norm="ortho", workers=fft_workers(), overwrite_x=True)
            c *= block
        return c

    def rotation_matrix(self) -> np.ndarray:
        """The real 2m x 2m orthogonal matrix R with [Re U c, Im U c] = R [Re c, Im c] (for checks)."""
        m = self.m
        basis = np.vstack([np.eye(m), 1j * np.eye(m)]).astype(np.complex128)
        rotated = self.rotate(basis)
        return np.hstack([rotated.real, rotated.imag]).T

    def _phases_for(self, dtype: np.dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        if dtype not in self._phases:
            self._phases[dtype] = self.phases().astype(dtype)
        return self._phases[dtype]

    def unit_radii(self) -> np.ndarray:
        """Radii t_i / sqrt(2 gamma) of the 2n directions, in V's column order.

        Stratified quantiles of chi_{2m}, one per direction, handed out by a seeded permutation so
        that no direction is tied to a radius by its position in the DFT: the midpoints (q + 1/2) / N
        ("signs"), or jittered points (q + U_q) / N with U_q ~ U(0, 1) ("rotation"), so that each
        radius is exactly chi-distributed (the midpoint rule's bias goes away, most of the
        stratification's variance gain stays).
        """
        directions = 2 * self.n
        offsets = 0.5
        if self.params.rotates:
            offsets = randomness.uniform_open(randomness.raw_words(self.spec.seed, f"{self.method}.radius_jitter",
                                                                   directions))
        quantiles = stats.chi.ppf((np.arange(directions) + offsets) / directions, df=2 * self.m)
        owner = np.argsort(randomness.raw_words(self.spec.seed, f"{self.method}.radius_order", directions),
                           kind="stable")
        radii = np.empty(directions)
        radii[owner] = quantiles
        return radii

    def _parameters_for(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray | None]:
        """(signs / sqrt(m), radii or None) in the working precision."""
        if dtype not in self._parameters:
            scaled_signs = (self.signs() / np.sqrt(self.m)).astype(dtype)
            radii = None
            if self.order is None:
                radii = (self.unit_radii() * np.sqrt(2.0 * self.params.gamma)).astype(dtype)
            self._parameters[dtype] = (scaled_signs, radii)
        return self._parameters[dtype]

    def materialize(self) -> "SSFMap":
        self._parameters_for(np.dtype(np.float32))
        if self.params.rotates:
            self._phases_for(np.dtype(np.complex64))
        if self._by_product:
            self._product_for(np.dtype(np.float32))
        return self

    @property
    def planned_nbytes(self) -> int:
        return (self._parameter_bytes(self.m, self.n, self.order is None, self.params.rotates)
                + product_bytes(self.input_dim, self.n, self.order is None))

    @classmethod
    def planned_nbytes_bound(cls, spec: MapSpec, **options) -> int:
        m, n = structure(spec.input_dim, spec.n_components)
        gaussian = spec.params.get("kernel", "gaussian") == "gaussian"
        return cls._parameter_bytes(m, n, gaussian, True) + product_bytes(spec.input_dim, n, gaussian)

    @staticmethod
    def _parameter_bytes(m: int, n: int, gaussian: bool, rotates: bool) -> int:
        # float32 signs (2m) and radii (2n, Gaussian only); int64 index set (m) and positions (n);
        # complex64 rotation phases (ROTATION_BLOCKS m).
        return 4 * (2 * m + (2 * n if gaussian else 0)) + 8 * m + 8 * n + (8 * ROTATION_BLOCKS * m if rotates else 0)

    @property
    def nbytes(self) -> int:
        held = sum(a.nbytes for pair in self._parameters.values() for a in pair if a is not None)
        held += sum(a.nbytes for a in self._phases.values()) + sum(a.nbytes for a in self._products.values())
        return held + self.index_set.nbytes + self._position.nbytes

    def directions(self) -> np.ndarray:
        """V, the 2m x 2n matrix of unit columns, built explicitly (for checks; O(m n) memory)."""
        F = np.exp(-2j * np.pi * np.multiply.outer(self.index_set, np.arange(self.n)) / self.n)
        return np.block([[F.real, -F.imag], [F.imag, F.real]]) / np.sqrt(self.m)

    # -- features ------------------------------------------------------------------

    def _working_copy(self, X, dtype: np.dtype) -> np.ndarray:
        """A dense chunk in the working precision (the FFT needs every coordinate anyway)."""
        return super()._working_copy(X.toarray() if sp.issparse(X) else X, dtype)

    def _fourier(self, X: np.ndarray) -> np.ndarray:
        """y with V^T x~ = [Re y, Im y], complex (rows, n), by one inverse FFT of the rows."""
        m, d = self.m, self.input_dim
        scaled_signs, _ = self._parameters_for(X.dtype)
        # c = x~[:m] + i x~[m:] and a zero in column m: z = c[:, position] puts c_s at k_s and
        # zeros elsewhere as a gather, ~10x faster than scattering into zeros (measured).
        c = np.zeros((X.shape[0], m + 1), dtype=np.result_type(X.dtype, np.complex64))
        np.multiply(X[:, :m], scaled_signs[:m], out=c.real[:, :m])
        # An odd d leaves the last imaginary coordinate as padding: zero.
        np.multiply(X[:, m:], scaled_signs[m:d], out=c.imag[:, :d - m])
        if self.params.rotates:
            c[:, :m] = self.rotate(c[:, :m])
        z = np.take(c, self._position, axis=1)
        return scipy.fft.ifft(z, axis=1, norm="forward", workers=fft_workers(), overwrite_x=True)

    def projections(self, X, *, dtype=np.float64) -> np.ndarray:
        """V^T diag(s) x for each row: the 2n projections, in V's column order, by FFT."""
        X = self.check(X)
        dtype = output_dtype(dtype)
        out = np.empty((X.shape[0], 2 * self.n), dtype=dtype)
        rows = max(1, CHUNK_ELEMENTS // (2 * self.n))
        for start in range(0, X.shape[0], rows):
            y = self._fourier(self._working_copy(X[start:start + rows], dtype))
            out[start:start + rows, :self.n] = y.real
            out[start:start + rows, self.n:] = y.imag
        return out

    def _magnitude_bound(self, l1: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """|projection| <= ||x||_1 max|s|; times the largest radius (Gaussian) or to the power b (arc-cosine)."""
        scaled_signs, radii = self._parameters_for(dtype)
        projection = l1 * float(np.abs(scaled_signs).max())
        if radii is not None:
            return projection * float(radii.max())
        return np.maximum(projection, 1.0) ** max(self.order, 1) * chi_moment(self.order, 2 * self.m)

    def _features_into(self, X, out: np.ndarray) -> bool | None:
        if self.order is None:
            return self._pass_for(out.dtype).run(self._projector(out.dtype), X, out)
        self._features_from_projections(self._fourier(X), out)
        return None

    def _projector(self, dtype: np.dtype):
        """project(rows, into): into = the 2n projections t_i P_i of the rows (FFT, or the product for a
        small d), for the Fourier pass."""
        if self._by_product:
            product = self._product_for(dtype)
            return lambda rows, into: np.matmul(rows, product, out=into)
        _, radii = self._parameters_for(dtype)
        n = self.n

        def project(rows, into):
            y = self._fourier(rows)
            np.multiply(y.real, radii[:n], out=into[:, :n])
            np.multiply(y.imag, radii[n:], out=into[:, n:])
        return project

    def _product_for(self, dtype: np.dtype) -> np.ndarray:
        """The d x 2n matrix whose row j holds the 2n projections t_i P_i of the basis vector e_j (FFTs
        in float64, then rounded to `dtype`): rows X times it are X's projections."""
        if dtype not in self._products:
            held = (set(self._parameters), set(self._phases))
            _, radii = self._parameters_for(np.dtype(np.float64))
            y = self._fourier(np.eye(self.input_dim))
            self._products[dtype] = np.hstack([y.real * radii[:self.n], y.imag * radii[self.n:]]).astype(dtype)
            # float32 features need only the product: the float64 signs, radii and phases were its means.
            for made, before in zip((self._parameters, self._phases), held):
                for key in set(made) - before:
                    del made[key]
        return self._products[dtype]

    def _pass_for(self, dtype: np.dtype) -> FourierPass:
        """1/sqrt(N) [cos, sin] of the N = 2n angles (Gaussian kernel)."""
        if dtype not in self._passes:
            self._passes[dtype] = FourierPass(dtype, np.full(2 * self.n, 1.0 / np.sqrt(2 * self.n)),
                                              **self._block_rule())
        return self._passes[dtype]

    def _block_rule(self) -> dict:
        """A BLAS product's blocks, or the FFTs' (`_fourier_pass.block_rows`)."""
        return {"product": True} if self._by_product else {"block_scale": SSF_BLOCK_SCALE, "product": False}

    @property
    def shared_chunk_rows(self) -> int:
        return block_rows(self.input_dim, 2 * self.n, **self._block_rule())

    def _prepare_shared(self, dtype: np.dtype) -> None:
        self._parameters_for(dtype)
        if self.params.rotates:
            self._phases_for(np.result_type(dtype, np.complex64))
        if self.order is None:
            self._pass_for(dtype)
            self._projector(dtype)   # the product matrix, before threads share the batch

    def _features_from_projections(self, y: np.ndarray, out: np.ndarray) -> None:
        """The arc-cosine features of the projections y (complex, (rows, n))."""
        n, directions = self.n, 2 * self.n
        positive, negative = out[:, :directions], out[:, directions:]
        positive[:, :n] = y.real
        positive[:, n:] = y.imag
        np.negative(positive, out=negative)
        if self.order == 0:
            # step(P) with step(0) = 1/2 (Cho & Saul), so a zero vector gets k_0 = 1/2 as exact.
            np.sign(out, out=out)
            out += 1.0
            out *= out.dtype.type(0.5)
        else:
            np.maximum(out, 0.0, out=out)
            if self.order == 2:
                np.square(out, out=out)
        out *= out.dtype.type(np.sqrt(chi_moment(self.order, 2 * self.m) / directions))

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        if self.order is None:
            return kernels.gaussian(X, Y, self.params.gamma)
        return kernels.arccos(X, Y, self.order)


def arccos_random_features(X, n_components: int, order: int, seed: int, *, bidirectional: bool = False) -> np.ndarray:
    """The i.i.d. baseline for the arc-cosine kernels (Cho & Saul): sqrt(2/D) step(w.x) (w.x)^b,
    w ~ N(0, I_d), D = n_components, in float64 (benchmarks and tests compare SSF against it).

    `bidirectional` uses D/2 Gaussian directions with their antipodes instead, scaled sqrt(1/(D/2))
    as in SSF, to tell the structured point set's gain from the antipodal pairing's.
    """
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    count = n_components // 2 if bidirectional else n_components
    words = randomness.raw_words(seed, "ssf.iid_baseline", X.shape[1] * count)
    P = X @ randomness.normal(words).reshape(X.shape[1], count)
    if bidirectional:
        P = np.hstack([P, -P])
    step = 0.5 * (1.0 + np.sign(P))
    features = step if order == 0 else step * P**order
    return features * np.sqrt((1.0 if bidirectional else 2.0) / count)
