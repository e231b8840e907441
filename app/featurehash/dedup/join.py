"""Similarity join of row collections through LSH bands of GCWS / binning codes, verified exactly."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..maps.errors import InputError
from ..maps.lsh import choose_bands, collision_probability
from . import candidates
from .verify import CodePairs, ExactPairs, SUPPORTED_METHODS

DEFAULT_CHUNK_ROWS = 8192
DEFAULT_BLOCK_PAIRS = 1 << 20


@dataclass(frozen=True)
class SimilarPairs:
    """The pairs a join found: `i`, `j` (int64, rows of X and of Y, or of X with i < j) and their
    `similarity` (float64: the exact kernel, or the code estimate with verify="codes"), sorted by
    (i, j). `bands` x `rows` is the banding used, `recall_at_threshold` = 1 - (1 - t^r)^L the chance a
    pair exactly at the threshold became a candidate, `candidates` the number of distinct candidate
    pairs verified."""

    i: np.ndarray
    j: np.ndarray
    similarity: np.ndarray
    threshold: float
    bands: int
    rows: int
    recall_at_threshold: float
    candidates: int
    verify: str
    self_join: bool = field(default=True)

    def __len__(self) -> int:
        return int(self.i.size)


def similarity_join(X, feature_map, threshold: float, *, Y=None, target_recall: float = 0.95,
                    verify: str = "exact", chunk_rows: int = DEFAULT_CHUNK_ROWS,
                    block_pairs: int = DEFAULT_BLOCK_PAIRS, progress: bool = False) -> SimilarPairs:
    """Every pair of rows whose similarity under the map's kernel is >= `threshold`.

    One collection (Y None): pairs (i, j) of rows of X with i < j. Two: pairs (i, j) of a row i of X
    and a row j of Y. The similarity is the kernel the map's codes estimate (`feature_map.exact_kernel`):
    GMM / pGMM for `gcws` (Li's generalised consistent weighted sampling, after Ioffe's ICWS; a code
    agrees with probability exactly GMM), the Laplacian exp(-gamma ||x - y||_1) for `binning`
    (Rahimi & Recht; a grid's code agrees with exactly that probability).

    Method (minhash banding: Broder 1997; Leskovec, Rajaraman & Ullman, "Mining of Massive Datasets",
    ch. 3.4): the map's k codes are cut into L bands of r codes, (L, r) = `choose_bands(k, threshold,
    target_recall)`, so that a pair of similarity s shares at least one band with probability
    1 - (1 - s^r)^L, which is >= target_recall at s = threshold and larger above it (if no L r <= k
    reaches it, r = 1, L = k is used and `recall_at_threshold` says what it gives). Rows are hashed in
    chunks of `chunk_rows` (memory: L 8-byte keys per row, plus k 4-byte fingerprints with
    verify="codes"; never the features of all rows); each band's keys are grouped by sorting; the
    pairs of a bucket are emitted vectorised, in blocks of `block_pairs`, each pair in the first band
    it shares only, and verified block by block. A bucket of b rows costs b (b - 1) / 2 pair
    verifications (quadratic time for giant buckets such as many identical rows; memory stays a block).

    verify="exact": each candidate's exact kernel, computed from the rows in blocks (dense or sparse):
    precision is 1 and recall is the S-curve's. verify="codes": the fraction of equal codes (for callers
    who cannot keep the vectors; X and Y are then only hashed). That estimate is noisy, standard
    deviation sqrt(s (1 - s) / k), and biased upward for candidates (they share a whole band of r
    codes by construction, about + r (1 - s) / k per shared band): pairs near the threshold are both
    missed and wrongly kept.

    With gcws `zero_bit` the codes keep i* only and agree with probability close to, not exactly, GMM, so
    the S-curve's recall is approximate there. Requires a map with discrete codes ("gcws" or "binning"). `progress` shows
    tqdm bars for the hashing and the bands.
    """
    method = getattr(feature_map, "method", None)
    if not getattr(feature_map, "has_hash", False) or method not in SUPPORTED_METHODS:
        raise InputError("feature_map", f"needs a map with discrete codes ({', '.join(SUPPORTED_METHODS)}), "
                                        f"got '{method}'")
    if not 0.0 < threshold <= 1.0:
        raise InputError("threshold", "must lie in (0, 1]")
    if verify not in ("exact", "codes"):
        raise InputError("verify", "must be 'exact' or 'codes'")
    if chunk_rows < 1 or block_pairs < 1:
        raise InputError("chunk_rows", "chunk_rows and block_pairs must be positive")
    self_join = Y is None
    X = feature_map.check(X, "x")
    Y = X if self_join else feature_map.check(Y, "y")
    k = feature_map.spec.n_components
    bands, rows = choose_bands(k, threshold, target_recall)

    keys_x, prints_x = _hash(feature_map, X, bands, rows, chunk_rows, verify == "codes", progress)
    keys_y, prints_y = ((keys_x, prints_x) if self_join else
                        _hash(feature_map, Y, bands, rows, chunk_rows, verify == "codes", progress))
    score = (ExactPairs(feature_map, X, None if self_join else Y) if verify == "exact"
             else CodePairs(prints_x, None if self_join else prints_y))

    found_i, found_j, found_s = [], [], []
    n_candidates = 0
    for band in _bar(range(bands), progress, "bands"):
        blocks = (candidates.self_pairs(keys_x[band], block_pairs) if self_join
                  else candidates.cross_pairs(keys_x[band], keys_y[band], block_pairs))
        for i, j in blocks:
            if band:
                first = candidates.first_shared_band(keys_x, keys_y, band, i, j)
                i, j = i[first], j[first]
            n_candidates += i.size
            similarity = score(i, j)
            hit = similarity >= threshold
            found_i.append(i[hit])
            found_j.append(j[hit])
            found_s.append(similarity[hit])
    i = np.concatenate(found_i) if found_i else np.empty(0, dtype=np.int64)
    j = np.concatenate(found_j) if found_j else np.empty(0, dtype=np.int64)
    s = np.concatenate(found_s) if found_s else np.empty(0)
    order = np.lexsort((j, i))
    return SimilarPairs(i=i[order].astype(np.int64), j=j[order].astype(np.int64), similarity=s[order],
                        threshold=float(threshold), bands=bands, rows=rows,
                        recall_at_threshold=float(collision_probability(threshold, bands, rows)),
                        candidates=n_candidates, verify=verify, self_join=self_join)


def _hash(feature_map, X, bands: int, rows: int, chunk_rows: int, keep_prints: bool, progress: bool):
    n, k = X.shape[0], feature_map.spec.n_components
    keys = np.empty((bands, n), dtype=np.uint64)
    prints = np.empty((n, k), dtype=np.uint32) if keep_prints else None
    for start in _bar(range(0, n, chunk_rows), progress, "hash"):
        stop = min(n, start + chunk_rows)
        chunk_keys, chunk_prints = candidates.band_keys(feature_map.hash(X[start:stop]), bands, rows)
        keys[:, start:stop] = chunk_keys
        if keep_prints:
            prints[start:stop] = chunk_prints
    return keys, prints


def _bar(iterable, progress: bool, what: str):
    if not progress:
        return iterable
    from tqdm import tqdm
    return tqdm(iterable, desc=f"similarity_join: {what}")
