"""MurmurHash3_x86_32 written once (app/featurehash/maps/numerics/_murmur.py) against scikit-learn's
`murmurhash3_32` (the reference the text stage must match) for every length 0-40 (every tail length, blocks
and none), any seed, and tokens read from the middle of a larger buffer (the clamped tail reads stay in the token)."""

from __future__ import annotations

import numba as nb
import numpy as np
from sklearn.utils import murmurhash3_32

from featurehash.maps.numerics._murmur import murmur3_32


@nb.njit
def _hash(buf, begin, end, seed):
    return murmur3_32(buf, begin, end, seed)


def test_the_reference_bits_for_every_length_and_seed():
    rng = np.random.default_rng(3)
    for length in range(41):
        token = rng.integers(0, 256, length, dtype=np.uint8)
        padded = np.concatenate([rng.integers(0, 256, 5, dtype=np.uint8), token,
                                 rng.integers(0, 256, 7, dtype=np.uint8)])
        for seed in (0, 1, 2**32 - 1):
            expected = murmurhash3_32(token.tobytes(), seed=seed, positive=True)
            assert _hash(token, 0, length, np.uint32(seed)) == expected
            assert _hash(padded, 5, 5 + length, np.uint32(seed)) == expected


def test_an_empty_token_of_an_empty_buffer():
    assert _hash(np.empty(0, dtype=np.uint8), 0, 0, np.uint32(0)) == murmurhash3_32(b"", seed=0, positive=True)
