"""The client's work in a layout-3 query (featurehash.store.index.compact.probe) as a few compiled calls.

A one-vector query spends less time in its arithmetic than in the Python around it: each numpy call costs
~1-3 us, and the plan (fingerprints, low bits, bucket identities, bucket addresses) and the pool (where each
candidate's vector and id lie in the probe's reply, sorted by item number) took ~25 of them. Here each is one
call, with the same results bit for bit:

- `query_plan`: from a map's codes, the low FINGERPRINT_BITS of each 32-bit fingerprint
  (featurehash.lsh.banding.code_fingerprints) and the bucket identities of every level
  (featurehash.lsh.band_kernels.band_identities);
- `probe_addresses`: CompactLayout.probe_addresses (level byte, partition u32 BE, field big-endian) of
  some rows, each at its own level;
- `tail_positions`: the word starts, byte ends and id starts of the padded tails a probe returned
  (featurehash.store.index.compact.scripts.PROBE_FETCH), the items gone (empty tails) left out;
- `merged_by_number`: those merged into a pool's, sorted by item number;
- `rows_of`: the pool rows of a query's candidates (the numbers without a record dropped).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ....lsh.band_kernels import identities, mix
from ....lsh.banding import FINGERPRINT_SALT

# how a tail starts (featurehash.store.lsh_vectors): no vector, a sparse one (uint32 nnz first), a fixed width
TAIL_ID_ONLY, TAIL_SPARSE, TAIL_FIXED = 0, 1, 2


@nb.njit(cache=True, nogil=True)
def _plan(words, bands, rows, level_rows, bits):
    n, k = words.shape
    fingerprints = np.empty((n, k), np.uint32)
    low = np.empty((n, k), np.uint8)
    mask = np.uint32((1 << bits) - 1)
    for i in range(n):
        for j in range(k):
            fingerprint = np.uint32(mix(words[i, j] + FINGERPRINT_SALT) >> np.uint64(32))
            fingerprints[i, j] = fingerprint
            low[i, j] = np.uint8(fingerprint & mask)
    return low, identities(fingerprints, bands, rows, level_rows)


def query_plan(codes: np.ndarray, bands: int, rows: int, level_rows: np.ndarray, bits: int):
    """(low `bits` of each code's fingerprint (n, k) uint8, bucket identities (n, bands x levels) uint32)."""
    words = np.ascontiguousarray(codes, dtype=np.int64).view(np.uint64)
    return _plan(words, bands, rows, level_rows, bits)


@nb.njit(cache=True, nogil=True)
def probe_addresses(identities, rows, levels, bands, bucket_bits, field_bytes):
    """The bucket addresses (uint8, row after row, `bands` each) of identities' `rows`, row i at level levels[i]."""
    stride = 5 + field_bytes
    out = np.empty(rows.size * bands * stride, np.uint8)
    field_mask = np.uint64((1 << (32 - bucket_bits)) - 1)
    at = 0
    for i in range(rows.size):
        level = levels[i]
        for band in range(bands):
            identity = np.uint64(identities[rows[i], level * bands + band])
            partition = identity >> np.uint64(32 - bucket_bits)  # 0 when there is one partition
            field = identity & field_mask
            out[at] = level & 0xFF
            for byte in range(4):
                out[at + 1 + byte] = (partition >> np.uint64(8 * (3 - byte))) & np.uint64(0xFF)
            for byte in range(field_bytes):
                out[at + 5 + byte] = (field >> np.uint64(8 * (field_bytes - 1 - byte))) & np.uint64(0xFF)
            at += stride
    return out


@nb.njit(cache=True, nogil=True)
def tail_positions(words, base, lengths, numbers, kind, fixed_bytes):
    """(numbers, word starts, byte ends, id byte starts) of the live tails among `lengths` (unpadded byte
    lengths; 0: the item is gone), laid out from word `base` of `words`, each padded to whole words."""
    live = 0
    for i in range(lengths.size):
        if lengths[i]:
            live += 1
    kept, starts = np.empty(live, np.int64), np.empty(live, np.int64)
    ends, id_starts = np.empty(live, np.int64), np.empty(live, np.int64)
    at, out = base, 0
    for i in range(lengths.size):
        length = np.int64(lengths[i])
        if length:
            vector = 0 if kind == TAIL_ID_ONLY else (4 + 8 * np.int64(words[at]) if kind == TAIL_SPARSE
                                                     else fixed_bytes)
            kept[out], starts[out], ends[out], id_starts[out] = numbers[i], at, 4 * at + length, 4 * at + vector
            out += 1
        at += (length + 3) // 4
    return kept, starts, ends, id_starts


@nb.njit(cache=True, nogil=True)
def merged_by_number(numbers, starts, ends, id_starts, more_numbers, more_starts, more_ends, more_id_starts):
    """Two sets of tail positions as one, sorted by item number (distinct); also the order that sorts
    (numbers then more_numbers), for what the caller keeps beside them."""
    all_numbers = np.concatenate((numbers, more_numbers))
    order = np.argsort(all_numbers, kind="mergesort")
    return (all_numbers[order], np.concatenate((starts, more_starts))[order],
            np.concatenate((ends, more_ends))[order], np.concatenate((id_starts, more_id_starts))[order], order)


@nb.njit(cache=True, nogil=True)
def rows_of(pool_numbers, numbers):
    """Positions in `pool_numbers` (sorted) of `numbers` (sorted) that it holds."""
    out = np.empty(numbers.size, np.int64)
    kept, row = 0, 0
    for i in range(numbers.size):
        while row < pool_numbers.size and pool_numbers[row] < numbers[i]:
            row += 1
        if row < pool_numbers.size and pool_numbers[row] == numbers[i]:
            out[kept] = row
            kept += 1
    return out[:kept]
