"""Compiled passes of the set minhash (`minhash.py`): one pass over each set's elements, integer arithmetic only.

A batch is one flat array of elements (uint64 tokens, or a CSR matrix's int32/int64 column indices) and row
offsets: row r is elements[offsets[r]:offsets[r + 1]]. Repeated elements need no removal, a minimum does not
change when its element comes again.

Every kernel is written so that the loop over the k samples is innermost, over contiguous uint64 (or uint32)
arrays with no branch: LLVM turns it into vector multiply, add and min (vpmullq / vpminuq with AVX-512, emulated
multiplies with AVX2). Integer results do not depend on the vector width, so the codes are the same bits on
every machine.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..numerics._counter_random import GOLDEN, mix
from ..numerics._murmur import MASK32, block_step, finish, load32, load_tail

_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_THIRTY_TWO = np.uint64(32)
_ONE = np.uint64(1)
EMPTY = np.int64(2**63 - 1)   # featurehash.maps.base.EMPTY_CODE: no element, no minimum


@nb.njit(inline="always")
def premix(element, key):
    """The element's pseudo-random 64-bit image: a keyed bijection (xor, then splitmix64's finaliser), so equal
    images mean equal elements and structure in the input (consecutive columns) is gone."""
    return mix(np.uint64(element) ^ key)


@nb.njit(inline="always")
def _bin(word, k):
    """floor(word k / 2^64) from the top 32 bits: the bin of a premixed element among k (< 2^32) bins, unsigned
    (an index numba adds no negative-index fix-up to)."""
    return ((word >> _THIRTY_TWO) * np.uint64(k)) >> _THIRTY_TWO


# -- classical k-permutation minhash: h_j(x) = a_j premix(x) + b_j (mod 2^64), a_j odd -----------------------


@nb.njit(nogil=True, inline="always")
def _k_permutation_row(elements, start, stop, key, multipliers, offsets_b, minima):
    minima[:] = _ALL_ONES
    k = minima.size
    for p in range(start, stop):
        y = premix(elements[p], key)
        for j in range(k):   # the vector loop: multiply, add, min over contiguous lanes
            value = multipliers[j] * y + offsets_b[j]
            minima[j] = min(minima[j], value)


@nb.njit(nogil=True, cache=True)
def k_permutation_rows(elements, offsets, first, last, key, multipliers, offsets_b, codes):
    """Codes of rows first..last-1 into codes[first:last]: the minimum of each sample's permutation, >> 1 (an
    int64 >= 0; a multiply by an odd number plus an offset is a bijection of 2^64 words, so equal minima mean
    the same element)."""
    minima = np.empty(multipliers.size, dtype=np.uint64)
    for row in range(first, last):
        start, stop = offsets[row], offsets[row + 1]
        if start == stop:
            codes[row, :] = EMPTY
            continue
        _k_permutation_row(elements, start, stop, key, multipliers, offsets_b, minima)
        for j in range(minima.size):
            codes[row, j] = np.int64(minima[j] >> _ONE)


# -- C-MinHash (X. Li & P. Li, ICML 2022): h_j(x) = pi[(sigma[x] + j) mod D] ---------------------------------


@nb.njit(nogil=True, cache=True)
def circulant_rows(elements, offsets, first, last, sigma, pi_wrapped, codes):
    """Codes of rows first..last-1: min over the set of pi[(sigma[x] + j) mod D] for j < k. `pi_wrapped` is pi
    followed by its first k entries, so sample j of element x reads pi_wrapped[sigma[x] + j]: a contiguous
    slice, whose minimum with the running minima is the vector loop. Elements must be < D (checked by the
    caller)."""
    k = codes.shape[1]
    minima = np.empty(k, dtype=pi_wrapped.dtype)
    for row in range(first, last):
        start, stop = offsets[row], offsets[row + 1]
        if start == stop:
            codes[row, :] = EMPTY
            continue
        minima[:] = np.iinfo(pi_wrapped.dtype).max
        for p in range(start, stop):
            base = np.int64(sigma[np.int64(elements[p])])
            for j in range(k):
                minima[j] = min(minima[j], pi_wrapped[base + j])
        for j in range(k):
            codes[row, j] = np.int64(minima[j])


# -- one-permutation hashing with optimal densification (Li, Owen & Zhang 2012; Shrivastava 2017) -----------


PREMIX_BLOCK = 32   # elements premixed per step of the one-permutation pass (a vector loop), then scattered


@nb.njit(inline="always")
def _bin_of(y, shift, k):
    """floor(y k / 2^64): y's top bits when k = 2^s (shift = 64 - s), else from the top 32 bits."""
    return y >> shift if shift else _bin(y, k)


@nb.njit(inline="always")
def _keep_least(minima, y, shift, k):
    b = _bin_of(y, shift, k)
    low = minima[b]
    minima[b] = y if y < low else low


@nb.njit(nogil=True, inline="always")
def _one_permutation_row(elements, start, stop, key, minima, shift, words):
    """The least premixed element of each bin. A fixed block of PREMIX_BLOCK elements is premixed into
    `words` (a vector loop: independent multiplies), then scattered; unsigned element and bin indices (numba
    adds no negative-index fix-up to an unsigned index) and a select, not a branch, for the minimum. Written
    so, the pass ran 1.3-1.5x faster than one loop premixing and scattering each element in turn, and ~2x
    faster than blocks of a variable length over signed indices. `shift`: 64 - s when k = 2^s, else 0."""
    minima[:] = _ALL_ONES
    k, shift = np.uint64(minima.size), np.uint64(shift)
    p, stop = np.uint64(start), np.uint64(stop)
    block = np.uint64(PREMIX_BLOCK)
    while p + block <= stop:
        for i in range(PREMIX_BLOCK):
            words[i] = premix(elements[p + np.uint64(i)], key)
        for i in range(PREMIX_BLOCK):
            _keep_least(minima, words[i], shift, k)
        p += block
    while p < stop:
        _keep_least(minima, premix(elements[p], key), shift, k)
        p += _ONE


@nb.njit(inline="always")
def _power_of_two_shift(k):
    """64 - s when k = 2^s with 1 <= s <= 32, else 0 (k = 1 included: a shift by 64 is undefined)."""
    s = 1
    while s <= 32:
        if k == 1 << s:
            return 64 - s
        s += 1
    return 0


# The first tries of every bin's probe sequence kept in a table (the tries all but a tiny few short sets need),
# try-major so that one pass over the bins still empty reads one row. 64 bytes a bin either way: 32 tries of
# uint16 bins while k <= 2^16, 16 tries of uint32 bins above.
_SMALL_K = 1 << 16


def probes_cached(k: int) -> int:
    """How many tries of each bin's probe sequence `probe_table` keeps for k bins."""
    return 32 if k <= _SMALL_K else 16


@nb.njit(inline="always")
def probe(densify_key, j, attempt, k):
    """The bin an empty bin j looks at on its attempt-th try (attempt >= 1): a hash of (j, attempt) alone, the
    same for every set, which is what makes the filled codes match with probability J (Shrivastava 2017)."""
    counter = (np.uint64(j) << _THIRTY_TWO) | np.uint64(attempt)
    return _bin(mix(densify_key + GOLDEN * counter), k)


@nb.njit(nogil=True, cache=True)
def _fill_probe_table(densify_key, table):
    tries, k = table.shape
    for t in range(tries):
        for j in range(k):
            table[t, j] = probe(densify_key, j, t + 1, k)


def probe_table_nbytes(k: int) -> int:
    return probes_cached(k) * k * (2 if k <= _SMALL_K else 4)


def probe_table(densify_key, k: int) -> np.ndarray:
    """table[t, j] = probe(densify_key, j, t + 1, k) for t < probes_cached(k), j < k: a cache of the probe
    sequences, so densifying a short set costs table reads; later tries are computed (the same numbers)."""
    table = np.empty((probes_cached(k), k), dtype=np.uint16 if k <= _SMALL_K else np.uint32)
    _fill_probe_table(densify_key, table)
    return table


@nb.njit(nogil=True, inline="always")
def _densify(minima, filled, pending, waiting, densify_key, probes):
    """filled = minima, each empty bin (all ones) replaced by the minimum of the first nonempty bin of its probe
    sequence. Tries go in passes over the bins still empty, a list compacted without a branch into a second
    list (compacting in place made each pass's loads wait on its own stores), all indices unsigned: a try per
    bin in a branchy loop mispredicted on most bins of a short set."""
    k = minima.size
    count = np.uint64(0)
    for j in range(np.uint64(k)):
        value = minima[j]
        filled[j] = value
        pending[count] = j
        count += np.uint64(value == _ALL_ONES)
    attempt = 0
    while count > 0:   # the set has an element, so some bin is nonempty: this ends
        attempt += 1
        still = np.uint64(0)
        if attempt <= probes.shape[0]:
            tried = probes[attempt - 1]
            for i in range(count):
                j = pending[i]
                value = minima[np.uint64(tried[j])]
                filled[j] = value
                waiting[still] = j
                still += np.uint64(value == _ALL_ONES)
        else:
            for i in range(count):
                j = pending[i]
                value = minima[probe(densify_key, j, attempt, k)]
                filled[j] = value
                waiting[still] = j
                still += np.uint64(value == _ALL_ONES)
        count = still
        pending, waiting = waiting, pending


@nb.njit(nogil=True, cache=True)
def one_permutation_rows(elements, offsets, first, last, key, densify_key, probes, codes):
    """Codes of rows first..last-1: bin j's code is the least premixed element in bin j (bins cut the 2^64
    range in k equal parts, so codes of different bins never coincide), >> 1; an empty bin takes the code of
    the first nonempty bin of its probe sequence (optimal densification). `probes`: `probe_table`."""
    k = probes.shape[1]
    minima = np.empty(k, dtype=np.uint64)
    filled = np.empty(k, dtype=np.uint64)
    pending = np.empty(k, dtype=np.uint64)
    waiting = np.empty(k, dtype=np.uint64)
    words = np.empty(PREMIX_BLOCK, dtype=np.uint64)
    shift = _power_of_two_shift(k)
    for row in range(first, last):
        start, stop = offsets[row], offsets[row + 1]
        if start == stop:
            codes[row, :] = EMPTY
            continue
        _one_permutation_row(elements, start, stop, key, minima, shift, words)
        _densify(minima, filled, pending, waiting, densify_key, probes)
        for j in range(k):
            codes[row, j] = np.int64(filled[j] >> _ONE)


@nb.njit(nogil=True, cache=True)
def mixed_low_bits(keys, codes, bits):
    """The lowest `bits` bits of mix(keys[j] + G codes[r, j]): b-bit codes (Li & Koenig) whose bits are uniform
    and independent between distinct codes, whatever the structure of the codes. EMPTY stays EMPTY."""
    out = np.empty(codes.shape, dtype=np.int64)
    mask = (np.uint64(1) << np.uint64(bits)) - _ONE
    for r in range(codes.shape[0]):
        for j in range(codes.shape[1]):
            code = codes[r, j]
            out[r, j] = code if code == EMPTY else np.int64(mix(keys[j] + GOLDEN * np.uint64(code)) & mask)
    return out


@nb.njit(nogil=True, cache=True)
def csr_support(indptr, indices, data):
    """(offsets, columns) of a CSR matrix's nonzero entries: explicit zeros are not in a row's set."""
    n = indptr.size - 1
    offsets = np.empty(n + 1, dtype=np.int64)
    columns = np.empty(indices.size, dtype=np.int64)
    at = 0
    offsets[0] = 0
    for row in range(n):
        for p in range(indptr[row], indptr[row + 1]):
            if data[p] != 0:
                columns[at] = indices[p]
                at += 1
        offsets[row + 1] = at
    return offsets, columns[:at]


_HIGH_BITS = np.uint64(0x8080808080808080)
_LOW_SEVEN = np.uint64(0x7F7F7F7F7F7F7F7F)
_BYTE_RANKS = np.uint64(0x0001020304050607)


@nb.njit(inline="always")
def _load64(buf, at):
    """The little-endian 64-bit word of buf[at:at + 8] (uint8); unsigned indices, so LLVM merges the reads."""
    at = np.uint64(at)
    word = np.uint64(0)
    for i in range(8):
        word |= np.uint64(buf[at + np.uint64(i)]) << np.uint64(8 * i)
    return word


@nb.njit(nogil=True, cache=True)
def _separators(data, expected):
    """The positions of the zero bytes of `data`, then data.size (int64, `expected` of them), or an empty array
    when there are not exactly expected - 1 zero bytes. Eight bytes a step: a word's zero bytes are exactly its
    bytes whose high bit survives ~(((v & 0x7f..) + 0x7f..) | v) (no borrow crosses bytes, unlike the shorter
    (v - 0x01..) & ~v test), and each one's byte index is the top byte of (bit >> 7) x 0x0001..07."""
    ends = np.empty(expected, dtype=np.int64)
    limit = expected - 1
    count = 0
    full = data.size - data.size % 8
    for p in range(0, full, 8):
        v = _load64(data, p)
        zeros = ~(((v & _LOW_SEVEN) + _LOW_SEVEN) | v) & _HIGH_BITS
        while zeros != np.uint64(0):
            if count == limit:
                return np.empty(0, dtype=np.int64)
            lowest = zeros & (~zeros + _ONE)
            ends[count] = p + np.int64(((lowest >> np.uint64(7)) * _BYTE_RANKS) >> np.uint64(56))
            count += 1
            zeros ^= lowest
    for p in range(full, data.size):
        if data[p] == 0:
            if count == limit:
                return np.empty(0, dtype=np.int64)
            ends[count] = p
            count += 1
    if count != limit:
        return np.empty(0, dtype=np.int64)
    ends[count] = data.size
    return ends


@nb.njit(nogil=True, cache=True)
def separated_token_columns(data, expected, seed, width):
    """The text stage's column of each token of `data`: tokens joined by zero bytes (UTF-8 has no zero byte
    but U+0000's), each hashed by MurmurHash3_x86_32 keyed by `seed` (featurehash.maps.numerics._murmur, the
    stage's own hash) and placed as the stage places it, floor(h width / 2^32). Returns an empty array when
    `data` does not hold exactly `expected` tokens (a token containing U+0000): the caller then takes the
    general path. The caller passes at least one byte."""
    ends = _separators(data, expected)
    if ends.size != expected:
        return np.empty(0, dtype=np.uint64)
    columns = np.empty(expected, dtype=np.uint64)
    key, w = np.uint64(seed) & MASK32, np.uint64(width)
    begin = 0
    for t in range(expected):
        stop = ends[t]
        length = stop - begin
        h1 = key
        tail = begin + (length & ~3)
        for at in range(begin, tail, 4):
            h1 = block_step(h1, load32(data, at))
        # an empty token's clamped read lands on its separator or a neighbour's byte: masked off by `finish`
        word = load_tail(data, tail, max(stop - 1, 0))
        columns[t] = (finish(h1, word, length & 3, length) * w) >> _THIRTY_TWO
        begin = stop + 1
    return columns
