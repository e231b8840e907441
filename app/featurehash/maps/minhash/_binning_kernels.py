"""Compiled inner loops of random binning (numba), kept apart from the map's bookkeeping.

Grid p, coordinate i: the variates are a pure function of (key, p, i), made by a splitmix64-style
counter-based mixer (as for GCWS, app/featurehash/maps/minhash/_gcws_kernels.py): three uniforms U1, U2, U3 in (0, 1)
(the formula of `randomness.uniform_open`), G = -log(U1 U2) ~ Gamma(2, 1), and
    pitch delta = G / gamma ~ Gamma(2, scale 1/gamma),  shift u = U3 delta ~ U[0, delta),
    bin(x_i) = floor((x_i - u) / delta), computed as floor(x_i * (gamma / G) - U3).
A table of (gamma / G, U3) per (i, p) is only a cache of `grid_constants`: on-demand generation
gives bit-identical bins.

Zero is always in bin -1 (0 <= u < delta), which is what makes sparse input cheap. The code of
grid p is an additive hash of the d bin numbers,
    code_p(x) = ( sum_{i : bin_i != -1} h_p(i, bin_i) )  mod 2^64,  top bit cleared,
h_p a 64-bit mix of (p, i, bin). Bin -1 contributes 0, so every coordinate in the zero bin (all
zeros of a sparse row) costs nothing, and a row costs O(nnz * P). Two different bin vectors give
the same code only if the sum of the h differences over the coordinates where they differ is
0 or 2^63 mod 2^64: about 2^-63 per pair of vectors and grid for a well-mixed h.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..numerics._counter_random import ONE, mix, stream_key, uniform

# Multiplies the bin number before the last mix: odd, so it is a bijection of the 64-bit words.
_BIN_MULTIPLIER = np.uint64(0xD6E8FEB86659FD93)
_UNIFORMS_PER_ENTRY = np.uint64(3)
_LOW_63_BITS = np.uint64(0x7FFFFFFFFFFFFFFF)
# Bin numbers are clamped here before hashing: only |x| * gamma / G beyond 4.6e18 reaches it, where
# the Laplacian kernel between distinct such values is exp(-huge) = 0 anyway.
BIN_LIMIT = 2.0**62


@nb.njit(inline="always")
def grid_constants(stream, i, gamma):
    """(gamma / G, U3) for coordinate i of a grid's stream: bin(x) = floor(x * gamma / G - U3)."""
    base = np.uint64(i) * _UNIFORMS_PER_ENTRY
    g = -np.log(uniform(stream, base + ONE) * uniform(stream, base + np.uint64(2)))
    return gamma / g, uniform(stream, base + np.uint64(3))


@nb.njit(inline="always")
def _bin_term(code_stream, i, bin_number):
    """h_p(i, bin): a 64-bit mix of the coordinate, then of the bin number."""
    return mix(stream_key(code_stream, i) + np.uint64(bin_number) * _BIN_MULTIPLIER)


@nb.njit(nogil=True, cache=True)
def build_table(streams, n_coordinates, gamma):
    """(gamma / G, U3) for every (coordinate, grid): two float64 arrays of shape (d, P)."""
    grids = streams.size
    inverse_pitch = np.empty((n_coordinates, grids))
    shift = np.empty((n_coordinates, grids))
    for i in range(n_coordinates):
        for p in range(grids):
            inverse_pitch[i, p], shift[i, p] = grid_constants(streams[p], i, gamma)
    return inverse_pitch, shift


@nb.njit(nogil=True, cache=True)
def _hash_row(row, indptr, indices, data, streams, code_streams, gamma, use_table, inverse_pitch, shift, codes):
    grids = streams.size
    total = np.zeros(grids, dtype=np.uint64)
    for t in range(indptr[row], indptr[row + 1]):
        value = data[t]
        if value == 0.0:
            continue  # bin -1, which contributes 0
        i = indices[t]
        for p in range(grids):
            if use_table:
                scale, offset = inverse_pitch[i, p], shift[i, p]
            else:
                scale, offset = grid_constants(streams[p], i, gamma)
            bin_number = np.floor(value * scale - offset)
            if bin_number != -1.0:
                bin_number = min(max(bin_number, -BIN_LIMIT), BIN_LIMIT)
                total[p] += _bin_term(code_streams[p], i, np.int64(bin_number))
    for p in range(grids):
        codes[row, p] = np.int64(total[p] & _LOW_63_BITS)


@nb.njit(parallel=True, nogil=True, cache=True)
def hash_csr_parallel(indptr, indices, data, streams, code_streams, gamma, use_table, inverse_pitch, shift, codes):
    """`_hash_row` for every row, rows spread over numba's threads."""
    for row in nb.prange(indptr.size - 1):
        _hash_row(row, indptr, indices, data, streams, code_streams, gamma, use_table, inverse_pitch, shift, codes)


@nb.njit(nogil=True, cache=True)
def hash_csr_serial(indptr, indices, data, streams, code_streams, gamma, use_table, inverse_pitch, shift, codes):
    """`_hash_row` for every row on the calling thread: no thread wake-up for small batches."""
    for row in range(indptr.size - 1):
        _hash_row(row, indptr, indices, data, streams, code_streams, gamma, use_table, inverse_pitch, shift, codes)
