"""Orthogonal and structured frequency matrices for the Gaussian Fourier maps (rff, nrff, srf).

Yu, Suresh, Choromanski, Holtmann-Rice, Kumar, "Orthogonal Random Features", NIPS 2016:
- "orthogonal" (ORF): W = S Q, built in blocks of d rows. Q: a block G of standard normals
  (raw words, `randomness.normal`), its rows orthonormalised (QR, signs fixed so that R has a positive
  diagonal: Q is then the unique orthogonal factor, uniform on O(d), so every row is a uniform
  direction and the rows of a block are exactly orthogonal). S: one chi_d length per row, the norm
  of a separate row of d standard normals, so each row of W is N(0, I_d) in law and
  E[cos(w.(x - y))] is the kernel exactly, while the rows of a block are not independent: the
  estimate's variance is lower (Theorem 1 of the paper). Blocks are independent; the last one is
  cut to the rows needed.
- "structured" (SORF): W = sqrt(d') H D1 H D2 H D3 per block of d' rows, d' the power of two
  >= d (inputs padded with zeros, so W keeps its first d columns), H the normalised Hadamard
  matrix and D_i diagonals of random signs (the top bit of a raw word). Entries have unit
  variance; the law is only close to Gaussian, so the estimate is slightly biased (the paper's
  Theorem 3 bounds it as O(1/sqrt(d))). That bias is fixed by d', not by D (docs/methods/fourier.md,
  "Structured frequencies' bias", measured by bench/bench_ssf_bias.py). The maps never
  build this W: `_structured_projection` applies the sign diagonals and fast Walsh-Hadamard
  transforms to each input row, O(D log d'), holding O(D) bytes. `structured_gaussian` builds the
  dense rows for checks (three transforms per row, O(D d' log d')); the entries are integers times
  one power of two, computed exactly, so they are the same bits everywhere.

Same on every machine: the random words are the raw streams; the ORF's QR is LAPACK's, whose
last bits vary with the CPU and BLAS (~1e-15 relative on W): that is far inside the
dense-feature promise (float64 features to 1e-11), which tests/test_portability.py checks. The
chi lengths are sums of squares in a fixed order.
"""

from __future__ import annotations

import numpy as np

from .. import randomness

FREQUENCIES = ("iid", "orthogonal", "structured")


def orthogonal_unit_rows(seed: int, tag: str, count: int, d: int) -> np.ndarray:
    """`count` unit rows in blocks of up to d, each block's rows orthonormal and uniform (Haar).
    A block of b rows costs O(d b^2): the QR of its d x b transpose."""
    rows = []
    for block, start in enumerate(range(0, count, d)):
        size = min(d, count - start)
        words = randomness.raw_words(seed, f"{tag}.block{block}", size * d)
        q, r = np.linalg.qr(randomness.normal(words).reshape(size, d).T)
        # Signs fixed by R's diagonal: the unique factor with R_ii > 0, so Haar-distributed.
        rows.append((q * np.where(np.diag(r) < 0, -1.0, 1.0)).T)
    return np.concatenate(rows)


def chi_lengths(seed: int, tag: str, count: int, d: int) -> np.ndarray:
    """`count` chi_d variates: the norms of rows of d standard normals (summed in a fixed order)."""
    normals = randomness.normal(randomness.raw_words(seed, tag, count * d)).reshape(count, d)
    total = np.zeros(count)
    for column in range(d):
        total += normals[:, column] ** 2
    return np.sqrt(total)


def orthogonal_gaussian(seed: int, tag: str, count: int, d: int) -> np.ndarray:
    """ORF: `count` rows, each N(0, I_d) in law, orthogonal within blocks of d rows."""
    return orthogonal_unit_rows(seed, f"{tag}.orthogonal", count, d) * chi_lengths(seed, f"{tag}.lengths",
                                                                                     count, d)[:, None]


def _walsh_hadamard_rows(a: np.ndarray) -> None:
    """The unnormalised Walsh-Hadamard transform of every row of `a` (width a power of two), in place."""
    rows, width = a.shape
    half = 1
    while half < width:
        view = a.reshape(rows, width // (2 * half), 2, half)
        first = view[:, :, 0, :].copy()
        view[:, :, 0, :] += view[:, :, 1, :]
        np.subtract(first, view[:, :, 1, :], out=view[:, :, 1, :])
        half *= 2


def padded_width(d: int) -> int:
    """d' = the power of two >= d: the width of a structured block."""
    return 1 << max(0, (d - 1).bit_length())


def structured_signs(seed: int, tag: str, blocks: int, width: int) -> np.ndarray:
    """The sign diagonals (S0, S1, S2) of each block, float64 +-1, shape (blocks, 3, width)."""
    signs = np.empty((blocks, 3, width))
    for block in range(blocks):
        words = randomness.raw_words(seed, f"{tag}.structured{block}", 3 * width)
        signs[block] = (1.0 - 2.0 * (words >> np.uint64(63)).astype(np.float64)).reshape(3, width)
    return signs


def structured_gaussian(seed: int, tag: str, count: int, d: int) -> np.ndarray:
    """SORF: `count` rows of sqrt(d') H D1 H D2 H D3 (blocks of d' rows), first d columns. The dense
    matrix, for checks: the maps project with `_structured_projection`, O(D log d') without it."""
    width = padded_width(d)
    rows = []
    for block, signs in enumerate(structured_signs(seed, tag, -(-count // width), width)):
        take = min(width, count - block * width)
        # Row i of M = H D1 H D2 H D3 (H unnormalised, symmetric) is ((e_i H D1) H D2) H D3.
        m = np.zeros((take, width))
        m[np.arange(take), np.arange(take)] = 1.0
        for sign in signs:
            _walsh_hadamard_rows(m)
            m *= sign
        # Integers below d'^2 in magnitude: exact. sqrt(d') H^3 / sqrt(d')^3 = M / d'.
        rows.append(m[:, :d] / width)
    return np.concatenate(rows)
