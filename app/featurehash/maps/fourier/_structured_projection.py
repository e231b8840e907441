"""X W^T for "structured" frequencies (`_orthogonal_frequencies.structured_gaussian`) without the dense W.

Yu et al., "Orthogonal Random Features", NIPS 2016, section 4 (SORF). Block b of W (d' rows, d' the
power of two >= d) is c_i M_b[:, :d] row i scaled by c_i, with M_b = H S0 H S1 H S2 (H the unnormalised
Walsh-Hadamard matrix, S_k the diagonals of random signs `structured_signs`). So for an input x padded
with zeros to d',
    (W x)_block = c * (H S0 H S1 H S2 [x; 0]),
three in-place fast Walsh-Hadamard transforms of one row: O(d' log d') per block, O(D log d') per
row in all (D/d' blocks), against O(D d) for the dense product; the map holds 3 signs per frequency
(bytes) and one factor c_i, O(D), not the D x d matrix. Maps use it from d' = SMALLEST_WIDTH on.

Same bits on every machine: the transform is additions and subtractions of float32 or float64
numbers, multiplications by +-1 (exact) and by powers of two (exact), then one multiplication by
c_i: IEEE operations in a fixed order, which numba compiles without contraction or reassociation
(`_portable_numba`); vectorising them over SIMD lanes does not change any result. The factors are
computed in float64 from exact integers (`structured_row_squares`).

Ranges. Each entry is first scaled by 2^-k (d' = 2^k; exact), so every intermediate is at most
sqrt(d' d) max|x| in magnitude (the l2 norm grows by sqrt(d') per transform), below the bound of the
product itself unless max|x| is near the top of the range: there the chunk is scaled down by a
further power of two, undone after the factor. So an input overflows only when its projection does.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numba as nb
import numpy as np
import scipy.sparse as sp

from ._orthogonal_frequencies import padded_width, structured_signs
from ..numerics._portable_math import ordered_sum

# Rows per thread task: below two tasks' worth the calling thread does all (no pool hop).
_ROWS_PER_TASK = 64
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="featurehash-sorf")


@nb.njit(inline="always")
def _walsh_hadamard(buffer):
    """The unnormalised Walsh-Hadamard transform of `buffer` (length a power of two), in place."""
    width = buffer.size
    # Two butterfly stages at once for the short strides (no vector lanes there).
    if width >= 4:
        for start in range(0, width, 4):
            a, b, c, d = buffer[start], buffer[start + 1], buffer[start + 2], buffer[start + 3]
            ab, a_b, cd, c_d = a + b, a - b, c + d, c - d
            buffer[start], buffer[start + 1] = ab + cd, a_b + c_d
            buffer[start + 2], buffer[start + 3] = ab - cd, a_b - c_d
        half = 4
    else:
        half = 1
    while half < width:
        for start in range(0, width, 2 * half):
            low = buffer[start:start + half]
            high = buffer[start + half:start + 2 * half]
            for j in range(half):
                a, b = low[j], high[j]
                low[j] = a + b
                high[j] = a - b
        half *= 2


@nb.njit(inline="always")
def _sorf_block(buffer, signs):
    """buffer = H S0 H S1 H S2 buffer."""
    for j in range(buffer.size):
        buffer[j] = buffer[j] * signs[2, j]
    _walsh_hadamard(buffer)
    for j in range(buffer.size):
        buffer[j] = buffer[j] * signs[1, j]
    _walsh_hadamard(buffer)
    for j in range(buffer.size):
        buffer[j] = buffer[j] * signs[0, j]
    _walsh_hadamard(buffer)


@nb.njit(inline="always")
def _write_block(buffer, factors, start, take, postscale, out_row):
    for i in range(take):
        out_row[start + i] = buffer[i] * factors[start + i]
    if postscale != 1.0:
        for i in range(take):
            out_row[start + i] = out_row[start + i] * postscale


@nb.njit(nogil=True, cache=True)
def _project_dense(X, signs, factors, prescale, postscale, out, first, last):
    """out[r] = factors * (M [X[r] * prescale; 0]) * postscale for rows first..last-1."""
    d = X.shape[1]
    blocks, _, width = signs.shape
    count = factors.size
    buffer = np.empty(width, dtype=out.dtype)
    for r in range(first, last):
        for block in range(blocks):
            for j in range(d):
                buffer[j] = X[r, j] * prescale
            buffer[d:] = 0
            _sorf_block(buffer, signs[block])
            start = block * width
            _write_block(buffer, factors, start, min(width, count - start), postscale, out[r])


@nb.njit(nogil=True, cache=True)
def _project_csr(indptr, indices, data, signs, factors, prescale, postscale, out, first, last):
    """As `_project_dense` for a CSR matrix."""
    blocks, _, width = signs.shape
    count = factors.size
    buffer = np.empty(width, dtype=out.dtype)
    for r in range(first, last):
        for block in range(blocks):
            buffer[:] = 0
            for position in range(indptr[r], indptr[r + 1]):
                buffer[indices[position]] = data[position] * prescale
            _sorf_block(buffer, signs[block])
            start = block * width
            _write_block(buffer, factors, start, min(width, count - start), postscale, out[r])


def _largest_entry(X) -> float:
    values = X.data if sp.issparse(X) else X
    return float(max(values.max(), -values.min())) if values.size else 0.0


class StructuredProjection:
    """X -> X W^T for W = diag(c) (rows of M_b[:, :d] over the blocks b), in O(D log d') per row.

    `factors` (float64, one per frequency): c_i times d', i.e. W_i = factors_i M_i[:d] / d'
    (`structured_gaussian` times a scale is factors = scale). Held in `dtype`, the working precision."""

    # Below this padded width the maps use the dense W (`structured_gaussian`): it is small, and one
    # BLAS product beat the transforms there (CPU time of one thread, n = 4096, D = 4d, float32: dense
    # 0.5x the time at d = 32-64, even at d = 128, structured 0.7x at d = 256 and 0.35x at d = 1024).
    SMALLEST_WIDTH = 128

    def __init__(self, seed: int, tag: str, count: int, d: int, factors: np.ndarray, dtype):
        self.d, self.count, self.width = d, count, padded_width(d)
        blocks = -(-count // self.width)
        self.signs = structured_signs(seed, tag, blocks, self.width).astype(np.int8)
        self.dtype = np.dtype(dtype)
        self.factors = np.ascontiguousarray(factors, dtype=self.dtype)

    @property
    def nbytes(self) -> int:
        return self.signs.nbytes + self.factors.nbytes

    @staticmethod
    def planned_nbytes(count: int, d: int) -> int:
        """Bytes held for float32 work: 3 sign bytes per row of the padded blocks, a float32 factor per row."""
        width = padded_width(d)
        return 3 * width * -(-count // width) + 4 * count

    def _scales(self, X) -> tuple[float, float]:
        """(prescale, postscale): 2^-k, and a further 2^-e (undone after) if intermediates could overflow."""
        bound = math.sqrt(self.width * self.d) * _largest_entry(X)
        limit = float(np.finfo(self.dtype).max) / 16.0
        extra = 0
        while bound > limit:
            bound /= 2.0
            extra += 1
        return math.ldexp(1.0, -(self.width.bit_length() - 1) - extra), math.ldexp(1.0, extra)

    def project(self, X, out: np.ndarray | None = None) -> np.ndarray:
        """X W^T into `out` (rows of X, count), X dense or CSR in the working precision."""
        if out is None:
            out = np.empty((X.shape[0], self.count), dtype=self.dtype)
        prescale, postscale = self._scales(X)
        if sp.issparse(X):
            arguments = (X.indptr, X.indices, X.data, self.signs, self.factors, prescale, postscale, out)
            kernel = _project_csr
        else:
            arguments = (np.ascontiguousarray(X), self.signs, self.factors, prescale, postscale, out)
            kernel = _project_dense
        rows = X.shape[0]
        if rows < 2 * _ROWS_PER_TASK:
            kernel(*arguments, 0, rows)
            return out
        # Two halves on two threads (the kernel releases the GIL); rows are independent, so the
        # split changes no result.
        middle = rows // 2
        other = _POOL.submit(kernel, *arguments, middle, rows)
        kernel(*arguments, 0, middle)
        other.result()
        return out


def structured_row_squares(seed: int, tag: str, count: int, d: int) -> np.ndarray:
    """||M_i[:, :d]||^2 for the `count` rows (float64): exact integers, computed column by column as
    M e_j (the transform of unit vectors), over the d columns or, when fewer, the d' - d others
    (rows of M have squared norm d'^3 exactly: M M^T = d'^3 I). Exact for d' <= 2^17 (sums below 2^53)."""
    width = padded_width(d)
    if d == width:
        return np.full(count, float(width) ** 3)
    columns = np.arange(d) if d <= width - d else np.arange(d, width)
    transform = StructuredProjection(seed, tag, count, width, np.ones(count), np.float64)
    total = np.zeros(count)
    step = max(1, 2**20 // max(count, 1))
    for start in range(0, columns.size, step):
        chosen = columns[start:start + step]
        unit = np.zeros((chosen.size, width))
        unit[np.arange(chosen.size), chosen] = float(width)  # times d': undoes the 2^-k prescale exactly
        values = transform.project(unit)
        total += ordered_sum(values * values, axis=0)
    return total if d <= width - d else float(width) ** 3 - total
