"""Banding (featurehash.lsh.banding): pinned fingerprints and band digests, band keys, the S-curve and the choice
of bands (moved from tests/store/test_lsh_index.py, whose index depends on them)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from featurehash.lsh.banding import (
    band_digests,
    band_key_dtype,
    band_keys,
    check_bands,
    choose_bands,
    code_fingerprints,
    collision_probability,
    half_point,
)
from featurehash.maps import InputError, create_map

GCWS = {"method": "gcws", "input_dim": 24, "n_components": 64, "seed": 5}


def positive_rows(seed: int, n: int, d: int = 24) -> np.ndarray:
    return np.random.default_rng(seed).random((n, d)) + 0.01


def near_copies(X: np.ndarray, seed: int, noise: float = 0.05) -> np.ndarray:
    return X * (1.0 + noise * np.random.default_rng(seed).random(X.shape))


def test_fingerprints_and_band_digests_are_pinned():
    """Stored indexes depend on these functions: they must never change."""
    codes = np.array([[0, 1, 2, 2**40 + 7, -5, 2**62, 123456789, 42]], dtype=np.int64)
    fingerprints = code_fingerprints(codes)
    assert fingerprints.dtype == np.dtype("<u4")
    assert fingerprints.tolist() == [[3793791033, 2433363436, 2539140574, 3108012970, 380750761, 11161834,
                                      574387417, 3184996902]]
    assert band_digests(fingerprints, 2, 4)[0].tolist() == [0x22845056EDF73B9D, 0x6B1313852C08AEE1]
    assert band_digests(fingerprints, 4, 2)[0].tolist() == [0xBBE4CA24B6553431, 0xB0F775616D9607E9,
                                                             0xA6966F0D27B63E4D, 0xED273749CE10B518]


def test_band_digests_are_equal_exactly_when_the_band_codes_are():
    m = create_map(GCWS)
    base = positive_rows(1, 40)
    codes = m.hash(np.vstack([base, near_copies(base, 2, 0.3)]))
    bands, rows = 8, 8
    digests = band_digests(code_fingerprints(codes), bands, rows)
    blocks = codes.reshape(len(codes), bands, rows)
    same_codes = (blocks[:, None] == blocks[None, :]).all(axis=3)
    same_digests = digests[:, None] == digests[None, :]
    np.testing.assert_array_equal(same_digests, same_codes)
    assert same_codes[:40, 40:].any() and not same_codes[:40, 40:].all()  # the copies share some bands only
    # identical codes in different bands still make different digests (the band seeds the digest)
    repeated = np.tile(code_fingerprints(codes[:1, :rows]), bands)
    assert len(set(band_digests(repeated, bands, rows)[0].tolist())) == bands


def test_band_keys_are_equal_exactly_when_the_band_codes_are():
    codes = np.array([[1, 2, 3, 4], [1, 2, 3, 5], [9, 9, 3, 4]], dtype=np.int64)
    keys = band_keys(codes, 2)
    assert keys.dtype == band_key_dtype(2) and keys.shape == (3, 2)
    assert [key.split(":")[0] for key in keys[0]] == ["0", "1"]
    assert keys[0, 0] == keys[1, 0] and keys[0, 1] != keys[1, 1]
    assert keys[0, 1] == keys[2, 1] and keys[0, 0] != keys[2, 0]
    with pytest.raises(InputError) as bad:
        band_keys(codes, 3)
    assert bad.value.field == "bands"


def test_check_bands_names_the_field():
    check_bands(64, 8, 8)
    for bands, rows, field in ((0, 8, "bands"), (8, 0, "rows"), (9, 8, "bands")):
        with pytest.raises(InputError) as bad:
            check_bands(64, bands, rows)
        assert bad.value.field == field


@pytest.mark.parametrize("n_codes,threshold", [(64, 0.5), (64, 0.8), (128, 0.7), (256, 0.3), (512, 0.9)])
def test_choose_bands_meets_the_recall_with_the_least_false_positive_area(n_codes, threshold):
    """Brute force over every (L, r) with L * r <= k: the choice reaches the recall at the threshold
    and no other (L, r) that reaches it has a smaller false-positive area."""
    bands, rows = choose_bands(n_codes, threshold, 0.9)
    assert bands * rows <= n_codes
    assert collision_probability(threshold, bands, rows) >= 0.9
    grid = np.linspace(0.0, threshold, 2001)

    def area(b, r):
        curve = collision_probability(grid, b, r)
        return np.sum((curve[1:] + curve[:-1]) * np.diff(grid)) / 2

    best = min(area(b, r) for r in range(1, n_codes + 1) for b in range(1, n_codes // r + 1)
               if collision_probability(threshold, b, r) >= 0.9)
    assert area(bands, rows) <= best * (1 + 1e-3)
    assert half_point(bands, rows) < threshold  # the curve's middle sits below the similarity sought


def test_choose_bands_falls_back_to_the_steepest_curve_when_k_is_too_small():
    assert choose_bands(4, 0.1, 0.9) == (4, 1)
    assert choose_bands(64, 0.1, 0.9, max_bands=10) == (10, 1)


@pytest.mark.parametrize("threshold", [1e-200, 1e-160, 1e-10])
def test_choose_bands_stops_where_the_band_probability_underflows(threshold):
    """With a tiny recall_at_threshold the search goes on to many rows, where t^r underflows to a subnormal
    or to 0: the search stops there instead of dividing by zero (the fuzz found POST /v1/indexes answering
    500 for threshold 1e-200 and a recall of 1e-300)."""
    for max_bands in (None, 10):
        bands, rows = choose_bands(64, threshold, 1e-300, max_bands=max_bands)
        assert 1 <= bands * rows <= 64 and threshold ** rows > 0.0
        assert -math.expm1(bands * math.log1p(-threshold ** rows)) >= 1e-300 * (1 - 1e-9)   # the recall is met
    with pytest.raises(InputError) as bad:
        choose_bands(64, 0.0)
    assert bad.value.field == "threshold"
