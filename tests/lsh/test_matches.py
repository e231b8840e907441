"""The code estimate (featurehash.lsh.matches): match fractions of fingerprints, full and b-bit, one query to rows
and pairs of rows."""

from __future__ import annotations

import numpy as np
from featurehash.lsh.banding import code_fingerprints
from featurehash.lsh.matches import (
    CodePairs,
    aligned_match_fractions,
    b_bit_estimate,
    b_bit_match_fractions,
    match_fractions,
)
from featurehash.maps import create_map
from featurehash.maps.base import match_fraction

GCWS = {"method": "gcws", "input_dim": 24, "n_components": 64, "seed": 5}


def positive_rows(seed: int, n: int, d: int = 24) -> np.ndarray:
    return np.random.default_rng(seed).random((n, d)) + 0.01


def near_copies(X: np.ndarray, seed: int, noise: float = 0.05) -> np.ndarray:
    return X * (1.0 + noise * np.random.default_rng(seed).random(X.shape))


def test_match_fractions_of_fingerprints_are_the_gcws_estimate():
    """(moved from tests/store/test_lsh_index.py)"""
    m = create_map(GCWS)
    X, Y = positive_rows(3, 5), near_copies(positive_rows(3, 30), 4, 0.5)
    fx, fy = code_fingerprints(m.hash(X)), code_fingerprints(m.hash(Y))
    estimate = np.array([match_fractions(row, fy) for row in fx])
    np.testing.assert_array_equal(estimate, match_fraction(m.hash(X), m.hash(Y)))
    np.testing.assert_array_equal(estimate, m.kernel(X, Y))


def test_pairs_of_rows_give_the_query_forms_numbers():
    rng = np.random.default_rng(4)
    fx, fy = rng.integers(0, 4, (30, 64)).astype(np.uint32), rng.integers(0, 4, (20, 64)).astype(np.uint32)
    i, j = rng.integers(0, 30, 100), rng.integers(0, 20, 100)
    expected = np.array([match_fractions(fx[a], fy[b:b + 1])[0] for a, b in zip(i, j)])
    np.testing.assert_array_equal(aligned_match_fractions(fx[i], fy[j]), expected)
    np.testing.assert_array_equal(CodePairs(fx, fy)(i, j), expected)
    np.testing.assert_array_equal(CodePairs(fx)(i, i), np.ones(100))
    low = (fx & 0xFF).astype(np.uint8), (fy & 0xFF).astype(np.uint8)
    b_bit = np.array([b_bit_match_fractions(low[0][a], low[1][b:b + 1], 8)[0] for a, b in zip(i, j)])
    np.testing.assert_array_equal(aligned_match_fractions(low[0][i], low[1][j], 8), b_bit)
    assert match_fractions(fx[0], fy[:0]).size == 0 and b_bit_match_fractions(fx[0], fy[:0], 8).size == 0


def test_the_b_bit_estimate_removes_chance_agreement():
    chance = 2.0 ** -8
    np.testing.assert_array_equal(b_bit_estimate(np.array([chance, 1.0, 0.0, 0.5]), 8),
                                  [0.0, 1.0, 0.0, (0.5 - chance) / (1.0 - chance)])
