"""The compiled banding of featurehash.lsh.banding, for the hot paths that call it once per query.

- `mix`: splitmix64's finaliser (banding.mix64) inside compiled code;
- `identities` / `band_identities`: a layout-3 index's bucket identities of rows of fingerprints (the top 32 bits
  of banding.band_digests of every level) in one call, without ~6 numpy calls per sample and level.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .banding import BAND_SALT, MIX_1, MIX_2


@nb.njit(cache=True, nogil=True, inline="always")
def mix(z):
    """featurehash.lsh.banding.mix64 of one uint64, compiled."""
    z = z ^ (z >> np.uint64(30))
    z = z * MIX_1
    z = z ^ (z >> np.uint64(27))
    z = z * MIX_2
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True, nogil=True)
def identities(fingerprints, bands, rows, level_rows):
    """band_identities' kernel (uint32 fingerprints (n, k), level_rows int64), callable from compiled code."""
    n = fingerprints.shape[0]
    out = np.empty((n, bands * level_rows.size), np.uint32)
    for i in range(n):
        for level in range(level_rows.size):
            depth = rows if level == 0 else level_rows[level]
            for band in range(bands):
                digest = mix(np.uint64(band) + BAND_SALT)
                for sample in range(depth):
                    digest = mix(digest ^ np.uint64(fingerprints[i, band * rows + sample]))
                out[i, level * bands + band] = np.uint32(digest >> np.uint64(32))
    return out


def band_identities(fingerprints: np.ndarray, bands: int, rows: int, level_rows) -> np.ndarray:
    """(n, bands x levels) uint32: the top 32 bits of featurehash.lsh.banding.band_digests of every level (level 0
    the bands, then each forest prefix), in one compiled call: what a layout-3 index files a row under
    (featurehash.store.index.compact.keys.CompactLayout.identities)."""
    return identities(np.ascontiguousarray(fingerprints, np.uint32), bands, rows,
                      np.asarray(level_rows, dtype=np.int64))
