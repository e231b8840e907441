"""The random parameters of an SSF map (`featurehash.maps.fourier.ssf`, "Randomisation"): the sign flips, the
phases of the structured rotation and the radii of the 2n directions, each drawn from the spec's seeded streams
and held per working precision. A base of `SSFMap`, which computes the features from them.
"""

from __future__ import annotations

import numpy as np
import scipy.fft
from scipy.special import gammaincinv

from .. import randomness
from ..numerics import _row_threads as row_threads

# scipy.fft workers: -1 = one per core; batched transforms are split over rows.
FFT_WORKERS = -1
# Phase diagonals of the random rotation P4 F P3 F P2 F P1 (the ssf module docstring, "Randomisation").
ROTATION_BLOCKS = 4


def fft_workers() -> int:
    """All cores for a batch's FFTs, one on a thread that shares a batch's rows with others (`_row_threads`)."""
    return 1 if row_threads.in_shared_section() else FFT_WORKERS


def arccos_order(kernel: str) -> int:
    return int(kernel.removeprefix("arccos"))


class SSFParameters:
    """Needs m, n, spec, params, method and the caches _parameters and _phases (set by SSFMap.__init__)."""

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
        (`randomization` "rotation"; the ssf module docstring, "Randomisation")."""
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
        quantiles = chi_ppf((np.arange(directions) + offsets) / directions, 2 * self.m)
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

    def directions(self) -> np.ndarray:
        """V, the 2m x 2n matrix of unit columns, built explicitly (for checks; O(m n) memory)."""
        F = np.exp(-2j * np.pi * np.multiply.outer(self.index_set, np.arange(self.n)) / self.n)
        return np.block([[F.real, -F.imag], [F.imag, F.real]]) / np.sqrt(self.m)


def chi_ppf(q: np.ndarray, df: int) -> np.ndarray:
    """scipy.stats.chi.ppf(q, df) for q in (0, 1), by the same formula scipy.stats evaluates (bit-identical,
    checked by a test), without importing scipy.stats (~0.6 s of CPU, measured)."""
    return np.sqrt(2 * gammaincinv(0.5 * df, q))
