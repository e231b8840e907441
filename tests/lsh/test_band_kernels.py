"""The compiled banding (featurehash.lsh.band_kernels) gives featurehash.lsh.banding's numbers bit for bit."""

from __future__ import annotations

import numba as nb
import numpy as np
from featurehash.lsh.band_kernels import band_identities, mix
from featurehash.lsh.banding import band_digests, code_fingerprints, mix64


def test_band_identities_are_the_band_digests_top_bits():
    fingerprints = code_fingerprints(np.random.default_rng(8).integers(0, 2**62, (5, 64)))
    for bands, rows, levels in ((16, 4, [4]), (9, 7, [7, 5, 2]), (1, 64, [64, 1])):
        expected = np.hstack([band_digests(fingerprints, bands, rows, None if level == 0 else prefix)
                              for level, prefix in enumerate(levels)]) >> np.uint64(32)
        np.testing.assert_array_equal(band_identities(fingerprints, bands, rows, levels), expected.astype(np.uint32))


@nb.njit
def _mixed(words):
    out = np.empty_like(words)
    for i in range(words.size):
        out[i] = mix(words[i])
    return out


def test_the_compiled_mixer_is_mix64():
    words = np.random.default_rng(9).integers(0, 2**63, 1000, dtype=np.int64).view(np.uint64)
    words[:3] = [0, 1, 2**64 - 1]
    np.testing.assert_array_equal(_mixed(words), mix64(words))
