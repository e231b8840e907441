"""Counter-based random words for numba kernels (GCWS, random binning).

A splitmix64-style mixer: stream_key(key, s) = mix(key + G (s + 1)) names a stream (a GCWS
sample, a binning grid), and uniform(stream, c) = the top 53 bits of mix(stream + G c), offset
by half a step (the formula of `randomness.uniform_open`). Every variate is then a pure function
of (seed key, stream, counter), so a precomputed table and on-demand generation agree bit for
bit, for index spaces of any size.
"""

from __future__ import annotations

import numba as nb
import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
ONE = np.uint64(1)
_TWO_POW_MINUS_53 = 2.0**-53


@nb.njit(inline="always")
def mix(z):
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@nb.njit(inline="always")
def uniform(stream, counter):
    word = mix(stream + GOLDEN * counter)
    return (np.float64(word >> np.uint64(11)) + 0.5) * _TWO_POW_MINUS_53


@nb.njit(inline="always")
def stream_key(key, s):
    return mix(key + GOLDEN * (np.uint64(s) + ONE))


def stream_keys(key, count: int) -> np.ndarray:
    """The keys of streams 0..count-1: `stream_key` in numpy's uint64 arithmetic (which wraps as the
    compiled one does: the same bits), so a map's creation compiles nothing (the kernel took ~0.3 s)."""
    z = np.uint64(key) + GOLDEN * (np.arange(count, dtype=np.uint64) + ONE)
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@nb.njit(inline="always")
def word(stream, counter):
    """The raw 64-bit word behind `uniform(stream, counter)`."""
    return mix(stream + GOLDEN * counter)
