"""Compiled inner loops of GCWS (numba), kept apart from the map's bookkeeping.

The variates of sample j at transformed coordinate i are a pure function of
(key, j, i): a splitmix64-style counter-based mixer gives five uniforms, from which
r, c ~ Gamma(2, 1) = -log(U1 U2) and beta ~ U(0, 1). The map stores, per (i, j),
float32 constants (1/r, beta, r, log c - r (1 - beta)), so each (j, i) costs one
multiply-add, a floor, one multiply-add and a compare. A table of these constants is
only a cache of `sample_constants`: on-demand generation gives bit-identical codes.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..numerics import _row_threads as row_threads
from ..numerics._counter_random import GOLDEN, ONE, mix, uniform

_UNIFORMS_PER_ENTRY = np.uint64(5)


@nb.njit(inline="always")
def sample_constants(stream, i):
    """(1/r, beta, r, log c - r (1 - beta)) as float32 for coordinate i of a sample's stream."""
    base = np.uint64(i) * _UNIFORMS_PER_ENTRY
    r = np.float32(-np.log(uniform(stream, base + ONE) * uniform(stream, base + np.uint64(2))))
    c = -np.log(uniform(stream, base + np.uint64(3)) * uniform(stream, base + np.uint64(4)))
    beta = np.float32(uniform(stream, base + np.uint64(5)))
    r64 = np.float64(r)
    inverse_r = np.float32(1.0 / r64)
    offset = np.float32(np.log(c) - r64 * (1.0 - np.float64(beta)))
    return inverse_r, beta, r, offset


# Table entries per chunk of coordinates handed to a thread.
TABLE_CHUNK_ENTRIES = 1 << 16


def build_table(streams: np.ndarray, n_coordinates: int) -> tuple[np.ndarray, ...]:
    """Constants for every (coordinate, sample): four float32 arrays of shape (2d, k), filled by chunks of
    coordinates on row threads. One serial kernel: numba's parallel=True form of it took ~0.7 s longer to
    compile on a fresh machine (measured), and each entry is the same pure function either way."""
    k = streams.size
    table = tuple(np.empty((n_coordinates, k), dtype=np.float32) for _ in range(4))
    rows = max(1, TABLE_CHUNK_ENTRIES // max(1, k))
    chunks = [(start, min(n_coordinates, start + rows)) for start in range(0, n_coordinates, rows)]
    row_threads.run_chunks(lambda chunk: _fill_table(streams, chunk[0], chunk[1], *table), chunks,
                           row_threads.thread_count())
    return table


@nb.njit(nogil=True, cache=True)
def _fill_table(streams, first, last, inverse_r, beta, r, offset):
    """Rows first..last-1 of the table."""
    for i in range(first, last):
        for j in range(streams.size):
            inverse_r[i, j], beta[i, j], r[i, j], offset[i, j] = sample_constants(streams[j], i)


@nb.njit(nogil=True, cache=True)
def _hash_row(row, indptr, indices, data, power, streams, use_table, inverse_r, beta, r, offset, i_star, t_star):
    """CWS of one row's transformed vector u~ (u~_{2c} = max(x_c, 0), u~_{2c+1} = max(-x_c, 0)).

    Writes i*_j (transformed coordinate) and t*_j; rows must have sorted column indices,
    so strict `<` breaks exact ties towards the smallest coordinate whatever the input
    layout. A row with no nonzero keeps i* = -1 (callers reject such rows first).
    """
    k = streams.size
    best_a = np.full(k, np.inf)
    best_i = np.full(k, -1, dtype=np.int64)
    best_t = np.zeros(k)
    for p in range(indptr[row], indptr[row + 1]):
        value = data[p]
        if value == 0:
            continue
        coordinate = 2 * np.int64(indices[p]) + (0 if value > 0 else 1)
        log_u = power * np.log(abs(np.float64(value)))
        if use_table:
            for j in range(k):
                t = np.floor(log_u * inverse_r[coordinate, j] + beta[coordinate, j])
                a = offset[coordinate, j] - r[coordinate, j] * t
                if a < best_a[j]:
                    best_a[j] = a
                    best_i[j] = coordinate
                    best_t[j] = t
        else:
            for j in range(k):
                c_inverse_r, c_beta, c_r, c_offset = sample_constants(streams[j], coordinate)
                t = np.floor(log_u * c_inverse_r + c_beta)
                a = c_offset - c_r * t
                if a < best_a[j]:
                    best_a[j] = a
                    best_i[j] = coordinate
                    best_t[j] = t
    for j in range(k):
        i_star[row, j] = best_i[j]
        # |t| beyond 2^31 needs r < 1e-8 or so (probability ~1e-16): saturate.
        t_star[row, j] = np.int64(min(max(best_t[j], -2147483648.0), 2147483647.0))


@nb.njit(parallel=True, nogil=True, cache=True)
def hash_csr_parallel(indptr, indices, data, power, streams, use_table, inverse_r, beta, r, offset,
                      i_star, t_star):
    """`_hash_row` for every row, rows spread over numba's threads."""
    for row in nb.prange(indptr.size - 1):
        _hash_row(row, indptr, indices, data, power, streams, use_table, inverse_r, beta, r, offset,
                  i_star, t_star)


@nb.njit(nogil=True, cache=True)
def hash_csr_serial(indptr, indices, data, power, streams, use_table, inverse_r, beta, r, offset,
                    i_star, t_star):
    """`_hash_row` for every row on the calling thread: no thread wake-up for small batches."""
    for row in range(indptr.size - 1):
        _hash_row(row, indptr, indices, data, power, streams, use_table, inverse_r, beta, r, offset,
                  i_star, t_star)


@nb.njit(nogil=True, cache=True)
def mixed_codes(keys, codes):
    """mix(keys[j] + G codes[r, j]) >> 1 for every row r and sample j: a seeded bijection of each
    sample's code whose low bits are uniform whatever the code's structure (int64, >= 0)."""
    out = np.empty(codes.shape, dtype=np.int64)
    for r in range(codes.shape[0]):
        for j in range(codes.shape[1]):
            out[r, j] = np.int64(mix(keys[j] + GOLDEN * np.uint64(codes[r, j])) >> ONE)
    return out


@nb.njit(nogil=True, cache=True)
def full_codes(i_star, t_star):
    """(i* << 32) | zigzag(t*) in its low 32 bits, element by element: the codes of `GCWSMap._codes` in one
    pass (numpy's five array operations cost ~5 us for a vector of k = 256, measured)."""
    rows, k = i_star.shape
    codes = np.empty((rows, k), dtype=np.int64)
    for row in range(rows):
        for j in range(k):
            t = t_star[row, j]
            codes[row, j] = (i_star[row, j] << 32) | (((t << 1) ^ (t >> 63)) & 0xFFFFFFFF)
    return codes

