"""The similarity join's per-batch steps for an engine's plan, over `featurehash.dedup`'s own functions.

An engine join (Spark, Ray) runs the in-process join's steps as a plan of batches:
1. keys: each batch of rows -> the map's codes -> L uint64 band keys per row (`dedup.candidates.band_keys`,
   the same banding (L, r) as in process: `lsh.banding.choose_bands`), kept as int64 (the engines' bigint);
2. candidates: rows with an equal (band, key) are paired (i < j), by the engine's join or shuffle;
3. verify: each candidate carries both rows and both rows' keys; it is kept in the first band it shares
   only (`dedup.candidates.first_shared_band`, so a pair found in several bands is verified once), and
   scored by the pair kernel (`lsh.similarity.ExactPairs`, or `lsh.matches.CodePairs` from fingerprints).
So the pairs are those of `featurehash.dedup.similarity_join` on the same rows, with the same
similarities (to float rounding: a batch's pairs are summed in the same order; with gcws power != 1 the
rows are scaled per batch rather than once, ~1e-15 relative).
"""

from __future__ import annotations

import numpy as np

from ..dedup import candidates
from ..dedup.join import plan_bands  # noqa: F401  (the engines' joins take it from here)
from ..lsh.matches import CodePairs
from ..lsh.similarity import ExactPairs, similarity_of


def batch_keys(feature_map, rows, bands: int, rows_per_band: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys (n, L) int64, fingerprints (n, k) int32) of a batch of rows (text, vectors or CSR)."""
    n = len(rows) if isinstance(rows, list) else rows.shape[0]
    if n == 0:
        return (np.empty((0, bands), dtype=np.int64),
                np.empty((0, feature_map.spec.n_components), dtype=np.int32))
    keys, prints = candidates.band_keys(feature_map.hash(rows), bands, rows_per_band)
    return np.ascontiguousarray(keys.T).view(np.int64), prints.view(np.int32)


def first_band_mask(keys_i: np.ndarray, keys_j: np.ndarray, band: np.ndarray) -> np.ndarray:
    """Mask of candidates (their keys (m, L), found in `band`) that share no band before `band`."""
    keep = np.ones(band.size, dtype=bool)
    positions = np.arange(band.size)
    keys_x, keys_y = keys_i.T, keys_j.T
    for found in np.unique(band):   # a loop over bands; each is vectorised over its candidates
        at = positions[band == found]
        keep[at] = candidates.first_shared_band(keys_x, keys_y, int(found), at, at)
    return keep


def verify_pairs(feature_map, rows_i, rows_j, verify: str, prints_i=None, prints_j=None) -> np.ndarray:
    """Similarity of each candidate (rows_i[t], rows_j[t]): the exact kernel, or the codes' estimate."""
    if verify == "codes":
        positions = np.arange(prints_i.shape[0])
        return CodePairs(np.asarray(prints_i), np.asarray(prints_j))(positions, positions)
    X, Y = feature_map.check(rows_i, "x"), feature_map.check(rows_j, "y")
    positions = np.arange(X.shape[0])
    return ExactPairs(similarity_of(feature_map), X, Y)(positions, positions)
