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

from .numerics import _portable_math as pm

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


# -- variates that need more than one word (Matérn frequencies, the median bandwidth rule) --------------

# chi-square variates with an integer number of degrees of freedom up to this are sums of squared normals.
MAX_SUMMED_DOF = 64
# Marsaglia-Tsang accepts at least 95% of its proposals, so every variate is drawn long before this.
_GAMMA_ROUNDS = 64


def chi_square(seed: int, tag: str, count: int, dof: float) -> np.ndarray:
    """`count` chi-square variates with `dof` > 0 degrees of freedom, float64.

    Integer dof <= MAX_SUMMED_DOF: the sum of dof squared normals (`normal`), added in a fixed order;
    otherwise 2 Gamma(dof / 2, 1) (`gamma_variates`). Both use only ndtri, IEEE +, -, *, /, sqrt and the
    portable exp / log of `numerics._portable_math`, so the numbers are the same bits on every machine."""
    if float(dof).is_integer() and dof <= MAX_SUMMED_DOF:
        normals = normal(raw_words(seed, tag, count * int(dof))).reshape(count, int(dof))
        total = np.zeros(count)
        for column in range(int(dof)):
            total += normals[:, column] * normals[:, column]
        return total
    return 2.0 * gamma_variates(seed, tag, count, dof / 2.0)


def gamma_variates(seed: int, tag: str, count: int, shape: float) -> np.ndarray:
    """`count` Gamma(shape, 1) variates, shape > 0, by Marsaglia & Tsang ("A simple method for generating
    gamma variables", ACM TOMS 2000): d = a - 1/3, c = 1 / sqrt(9 d); propose v = (1 + c x)^3, x normal,
    accept d v when log U < x^2 / 2 + d - d v + d log v. Round r draws the next 2 count words of the stream
    (x of variate i from word i, U from word count + i) whether or not i is still pending, so variate i is a
    function of (seed, tag, count, i) alone, whatever happens to the others. Shape < 1 uses
    Gamma(a) = Gamma(a + 1) U^(1/a) with U from the stream `tag`.boost."""
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.zeros(count)
    pending = np.ones(count, dtype=bool)
    stream = _stream(seed, tag)
    for _ in range(_GAMMA_ROUNDS):
        if not pending.any():
            break
        words = np.asarray(stream.random_raw(2 * count), dtype=np.uint64)
        x = normal(words[:count])
        base = 1.0 + c * x
        v = base * base * base
        positive = v > 0
        safe_v = np.where(positive, v, 1.0)
        accept = positive & (pm.log(uniform_open(words[count:])) < 0.5 * x * x + d - d * safe_v + d * pm.log(safe_v))
        taken = pending & accept
        out[taken] = d * safe_v[taken]
        pending &= ~accept
    if pending.any():   # about 0.05^64 per variate: never seen, refused rather than looped on
        raise RuntimeError("gamma sampler did not accept within its rounds")
    if shape < 1.0:
        boost = uniform_open(raw_words(seed, f"{tag}.boost", count))
        out = out * pm.exp(pm.log(boost) / shape)
    return out


def distinct_pairs(seed: int, tag: str, rows: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) index pairs of distinct rows of `rows`: every pair i < j once when there are at most `count`,
    else `count` pairs drawn uniformly with replacement (i = floor(n U), j = floor((n - 1) U') shifted past
    i), exact integer arithmetic on the stream's words."""
    if rows < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if rows * (rows - 1) // 2 <= count:
        first, second = np.triu_indices(rows, k=1)
        return first.astype(np.int64), second.astype(np.int64)
    words = raw_words(seed, tag, 2 * count)
    first = np.floor(uniform_open(words[:count]) * rows).astype(np.int64)
    second = np.floor(uniform_open(words[count:]) * (rows - 1)).astype(np.int64)
    second += second >= first
    return first, second
