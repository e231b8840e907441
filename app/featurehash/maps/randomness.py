"""Random parameters derived from raw bit-generator words.

numpy promises stable raw streams from its bit generators but not stable variates
from `Generator.normal` and friends, so every random parameter of a map is computed
here from `PCG64(SeedSequence([seed, tag])).random_raw` words with formulas we own.
Each parameter block has its own string tag, so adding a block never shifts another.
Golden-vector tests pin the results.

For GCWS, whose variates are indexed by (sample j, coordinate i) over a possibly huge
index space, `counter_key` gives a 64-bit key for a counter-based mixer (see
`featurehash.maps.minhash._gcws_kernels`): the variates are a pure function of (seed, j, i).
"""

from __future__ import annotations

import hashlib
from typing import Iterator

import numpy as np
from scipy.special import ndtri

_TWO_POW_MINUS_53 = 2.0**-53


def _tag_word(tag: str) -> int:
    return int.from_bytes(hashlib.sha256(tag.encode("utf-8")).digest()[:8], "little")


# Words per block when a large parameter matrix is filled block by block: the float64 temporaries
# of a block stay a few MiB, whatever the size of the matrix.
BLOCK_WORDS = 2**19


def _stream(seed: int, tag: str) -> np.random.PCG64:
    return np.random.PCG64(np.random.SeedSequence([seed, _tag_word(tag)]))


def raw_words(seed: int, tag: str, count: int) -> np.ndarray:
    """`count` raw uint64 words of the stream named by (seed, tag)."""
    return np.asarray(_stream(seed, tag).random_raw(count), dtype=np.uint64)


def row_blocks(seed: int, tag: str, rows: int, width: int) -> Iterator[tuple[slice, np.ndarray]]:
    """The words of `raw_words(seed, tag, rows * width)`, as (row slice, words of those rows) blocks of
    about BLOCK_WORDS words: a (rows, width) parameter matrix is filled block by block straight into its
    final dtype, with the same numbers as from all the words at once (every formula here is elementwise)."""
    stream = _stream(seed, tag)
    step = max(1, BLOCK_WORDS // max(width, 1))
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        yield slice(start, stop), np.asarray(stream.random_raw((stop - start) * width), dtype=np.uint64)


def uniform_open(words: np.ndarray) -> np.ndarray:
    """U in (0, 1): the top 53 bits, offset by half a step so neither 0 nor 1 occurs."""
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * _TWO_POW_MINUS_53


def normal(words: np.ndarray) -> np.ndarray:
    """Standard normal by inversion: ndtri(U)."""
    return ndtri(uniform_open(words))


def cauchy(words: np.ndarray) -> np.ndarray:
    """Standard Cauchy by inversion: tan(pi * (U - 1/2))."""
    return np.tan(np.pi * (uniform_open(words) - 0.5))


def phase(words: np.ndarray) -> np.ndarray:
    """Uniform phase on [0, 2 pi)."""
    return 2.0 * np.pi * uniform_open(words)


def counter_key(seed: int, tag: str) -> np.uint64:
    """A 64-bit key for counter-based variates, itself drawn from the raw stream."""
    return raw_words(seed, tag, 1)[0]
