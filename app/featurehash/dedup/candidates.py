"""Candidate pairs from LSH bands of discrete codes (Broder's minhash banding; Leskovec, Rajaraman &
Ullman, "Mining of Massive Datasets", ch. 3.4).

k codes per row split into L bands of r consecutive codes; two rows are a candidate pair when
all r codes of some band agree. A code agrees with probability s (the map's kernel), independently
across samples, so Pr[candidate] = 1 - (1 - s^r)^L: the S-curve (`featurehash.lsh.banding`).

Each band's r codes are mixed into one uint64 key (`lsh.banding.band_digests` over 32-bit code
fingerprints, seeded by the band): equal band codes give equal keys, and a spurious key collision
(about r 2^-32 per band of different codes) only adds a candidate that verification removes.

Grouping is by sorting: per band, a stable argsort of the keys gives buckets as runs, and the pairs
of every bucket are emitted at once with np.repeat / np.arange arithmetic, in blocks of at most
`block_pairs` pairs (one row's pairs are never split, so a block holds at most
max(block_pairs, n) pairs). A bucket of b rows yields b (b - 1) / 2 pairs: the time of a giant
bucket (e.g. many identical rows) is quadratic in b, its memory stays one block.

A pair that shares several bands is kept only in the first band it shares (`first_shared_band`),
so each candidate is verified once and no set of all candidates is ever held.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ..lsh.banding import band_digests, code_fingerprints


def band_keys(codes: np.ndarray, bands: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys (bands, n) uint64, fingerprints (n, k) uint32) of int64 codes (n, k)."""
    fingerprints = code_fingerprints(codes)
    keys = band_digests(fingerprints, bands, rows)
    return np.ascontiguousarray(keys.T), fingerprints


def _emit(left_rows: np.ndarray, right_start: np.ndarray, counts: np.ndarray, right_rows: np.ndarray,
          block_pairs: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs (left_rows[e], right_rows[right_start[e] + t]) for t < counts[e], in blocks."""
    keep = counts > 0
    left_rows, right_start, counts = left_rows[keep], right_start[keep], counts[keep].astype(np.int64)
    if counts.size == 0:
        return
    cumulative = np.cumsum(counts)
    first = 0
    while first < counts.size:   # one pass per block of pairs, never per row
        base = cumulative[first - 1] if first else 0
        last = max(first + 1, int(np.searchsorted(cumulative, base + block_pairs, side="right")))
        block_counts = counts[first:last]
        total = int(block_counts.sum())
        segment_starts = np.repeat(np.cumsum(block_counts) - block_counts, block_counts)
        offsets = np.arange(total, dtype=np.int64) - segment_starts
        left = np.repeat(left_rows[first:last], block_counts)
        right = right_rows[np.repeat(right_start[first:last], block_counts) + offsets]
        yield left, right
        first = last


def self_pairs(keys: np.ndarray, block_pairs: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs (i, j), i < j, of rows with equal `keys` (one band's keys, (n,))."""
    n = keys.size
    if n < 2:
        return
    order = np.argsort(keys, kind="stable")   # equal keys keep row order: left < right
    ordered = keys[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    ends = np.append(starts[1:], n)
    group_end = np.repeat(ends, ends - starts)
    position = np.arange(n, dtype=np.int64)
    yield from _emit(order, position + 1, group_end - position - 1, order, block_pairs)


def cross_pairs(keys_x: np.ndarray, keys_y: np.ndarray, block_pairs: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs (i, j) of a row i of X and a row j of Y with equal keys."""
    if keys_x.size == 0 or keys_y.size == 0:
        return
    order_y = np.argsort(keys_y, kind="stable")
    ordered_y = keys_y[order_y]
    start = np.searchsorted(ordered_y, keys_x, side="left")
    stop = np.searchsorted(ordered_y, keys_x, side="right")
    yield from _emit(np.arange(keys_x.size, dtype=np.int64), start, stop - start, order_y, block_pairs)


def first_shared_band(keys_x: np.ndarray, keys_y: np.ndarray, band: int, i: np.ndarray,
                      j: np.ndarray) -> np.ndarray:
    """Mask of the pairs that share no band before `band` (so each pair is kept once, in its first band)."""
    seen = np.zeros(i.size, dtype=bool)
    for earlier in range(band):   # a loop over bands; each step is vectorised over the block
        seen |= keys_x[earlier, i] == keys_y[earlier, j]
    return ~seen
