"""The reweighted quadrature fit's least-squares problem, the same bits on every machine.

For fit pairs (x_i, x_j), delta = x_i - x_j, and candidate frequencies w_k, the design is
M[r, k] = cos(w_k . delta_r) and the target b_r = sum_S exp(-gamma ||delta_r,S||^2) (one term per
ANOVA subset; one subset of all coordinates without anova). `gram_moments` returns
G = M^T M / n, h = M^T b / n and b^T b / n, which is all the weight fit needs.

Why it is portable:
- M and b: a numba kernel (`_design_rows`) forms delta, the projections w . delta (coordinates in
  ascending order) and ||delta_S||^2 (in the subset's order) with one accumulator each, and applies
  `_portable_numba.cos` / `exp`. numba without fastmath neither fuses nor reassociates, so M and b
  are bit-identical everywhere (no BLAS, no libm, no SIMD-dependent numpy ufunc).
- h and b^T b: accumulated in the same kernel, row after row.
- G: the one large product, left to BLAS for speed but made exact, so that neither its kernel nor
  its blocking nor its thread count can change a bit (Ozaki, Ogita, Oishi, Rump, "Error-free
  transformations of matrix multiplication", Numer. Algorithms 2012). Each chunk of at most
  MAX_CHUNK_ROWS rows is split M = H + L with H = M rounded to multiples of 2^-s (s = SPLIT_BITS;
  |M| <= 1, so H is an integer below 2^s times 2^-s) and L = M - H rounded to multiples of 2^-2s.
  Every product of entries of H^T H is a multiple of 2^-2s below 1, every product in H^T L a
  multiple of 2^-3s below 2^-s-1; with at most 2^(53 - 2s) rows every partial sum, in whatever order
  BLAS adds them, is such a multiple below 2^53 times the grid: representable, so BLAS returns the
  exact H^T H and H^T L. These are summed over the chunks in order, then G = sum H^T H + (C + C^T)
with C = sum H^T L (exactly symmetric). The quantised
  design differs from M by at most 2^(-2s-1) = 1e-13 (and L^T L, below 2^-2s per row, is left out):
  far below what a kernel estimate can resolve, and the same everywhere.
Cost: two BLAS products per chunk (H^T H as a symmetric rank-k update, H^T L in full): ~1.5x the
one product M^T M of a plain fit.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp

from ..numerics._portable_numba import cos, exp

SPLIT_BITS = 21
# Rows per exact product: 2^(53 - 2 s), see the module docstring.
MAX_CHUNK_ROWS = 2 ** (53 - 2 * SPLIT_BITS)


@nb.njit(nogil=True, cache=True)
def _design_rows(sample, first, second, frequencies, coordinate_pointers, coordinate_candidates, coordinate_values, subset_pointers,
                 subset_coordinates, gamma, design, target, moment, totals):
    """Fill design (rows x candidates) and target (rows) for the pairs (first[r], second[r]); add
    M^T b to moment and b^T b to totals[0], row after row.

    Frequencies come dense (d x candidates; coordinate_pointers empty) or as the CSR rows of that
    matrix (coordinate c holds coordinate_values at the candidates
    coordinate_candidates[coordinate_pointers[c]:coordinate_pointers[c + 1]]): either way each
    projection sums its coordinates in ascending order."""
    d = sample.shape[1]
    n = design.shape[1]
    delta = np.empty(d)
    dense = coordinate_pointers.size == 0
    for r in range(first.size):
        x, y = sample[first[r]], sample[second[r]]
        for c in range(d):
            delta[c] = x[c] - y[c]
        row = design[r]
        row[:] = 0.0
        for c in range(d):
            component = delta[c]
            if dense:
                column = frequencies[c]
                for k in range(n):
                    row[k] += component * column[k]
            else:
                for e in range(coordinate_pointers[c], coordinate_pointers[c + 1]):
                    row[coordinate_candidates[e]] += component * coordinate_values[e]
        for k in range(n):
            row[k] = cos(row[k])
        value = 0.0
        for s in range(subset_pointers.size - 1):
            square = 0.0
            for e in range(subset_pointers[s], subset_pointers[s + 1]):
                component = delta[subset_coordinates[e]]
                square += component * component
            value += exp(-gamma * square)
        target[r] = value
        for k in range(n):
            moment[k] += row[k] * value
        totals[0] += value * value


def _add_exact_products(square: np.ndarray, cross: np.ndarray, design: np.ndarray) -> None:
    """square += H^T H and cross += H^T L, each product exact (see the module docstring)."""
    scale = 2.0**SPLIT_BITS
    high = np.rint(design * scale)
    high /= scale
    low = design - high
    low *= scale * scale
    np.rint(low, out=low)
    low /= scale * scale
    square += high.T @ high  # numpy hands A^T A to BLAS as a symmetric rank-k update
    cross += high.T @ low


def gram_moments(sample: np.ndarray, first: np.ndarray, second: np.ndarray, frequencies, subsets: list[list[int]],
                 gamma: float, chunk_rows: int) -> tuple[np.ndarray, np.ndarray, float, int]:
    """(G, h, b^T b / n, n) for the pairs (first[r], second[r]) of sample rows. `frequencies` is the
    candidates' d x candidates matrix, dense or scipy sparse (anova)."""
    if not 0 < chunk_rows <= MAX_CHUNK_ROWS:
        raise ValueError(f"chunk_rows must be in 1..{MAX_CHUNK_ROWS} for the product to be exact")
    sample = np.ascontiguousarray(sample, dtype=np.float64)
    if isinstance(frequencies, np.ndarray):
        dense = np.ascontiguousarray(frequencies, dtype=np.float64)
        pointers, rows, values = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    else:
        frequencies = sp.csr_matrix(frequencies)
        frequencies.sort_indices()
        dense = np.zeros((0, 0))
        pointers, rows = frequencies.indptr.astype(np.int64), frequencies.indices.astype(np.int64)
        values = frequencies.data.astype(np.float64)
    candidates = frequencies.shape[1]
    subset_pointers = np.cumsum([0] + [len(subset) for subset in subsets]).astype(np.int64)
    subset_coordinates = np.array([c for subset in subsets for c in subset], dtype=np.int64)
    first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    square, cross = np.zeros((candidates, candidates)), np.zeros((candidates, candidates))
    moment = np.zeros(candidates)
    totals = np.zeros(1)
    design = np.empty((min(chunk_rows, first.size), candidates))
    target = np.empty(design.shape[0])
    for start in range(0, first.size, chunk_rows):
        stop = min(start + chunk_rows, first.size)
        block = design[:stop - start]
        _design_rows(sample, first[start:stop], second[start:stop], dense, pointers, rows, values, subset_pointers,
                     subset_coordinates, float(gamma), block, target, moment, totals)
        _add_exact_products(square, cross, block)
    cross += cross.T  # cross[i, j] + cross[j, i]: exactly symmetric
    square += cross
    rows_total = int(first.size)
    return square / rows_total, moment / rows_total, float(totals[0]) / rows_total, rows_total
