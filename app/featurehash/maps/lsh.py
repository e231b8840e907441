"""LSH over discrete codes (GCWS, binning): band keys, their compact form for an index,
the choice of bands for a similarity threshold, and re-ranking by match fraction.

k codes split into bands of r consecutive samples; two vectors share a band's bucket
exactly when all r codes agree. For GCWS a code matches with probability GMM = s, so
Pr[some band of L collides] = 1 - (1 - s^r)^L: the S-curve.

- `band_keys`: the strings of POST /hash: the band index and a 128-bit BLAKE2b digest of
  its r codes (up to a 2^-128 digest collision, equal keys <=> equal band codes).
- `code_fingerprints` / `band_digests`: the compact form an index stores. A code becomes a
  32-bit fingerprint (a 64-bit mixer's top half), so two different codes agree with
  probability 2^-32: the match fraction of fingerprints overestimates s by at most
  (1 - s) 2^-32, nothing next to its standard deviation sqrt(s (1 - s) / k). A band's
  digest mixes its r fingerprints into 64 bits (seeded by the band), computed for all
  rows and bands at once; a spurious bucket share only adds a candidate that re-ranking
  then scores by its real match fraction.
- `exact_similarities`: the kernel the codes estimate (GMM / pGMM for GCWS, Laplacian for
  binning), of one query against stored candidates, for exact re-ranking; O(nnz) for sparse
  candidates. `collision_probability` at a similarity is the chance an item of that similarity
  becomes a candidate: with exact re-ranking it is the item's chance to be returned.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import scipy.sparse as sp

from .errors import InputError

FINGERPRINT_DTYPE = np.dtype("<u4")
_MIX_1, _MIX_2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_FINGERPRINT_SALT = np.uint64(0x9E3779B97F4A7C15)
_BAND_SALT = np.uint64(0x632BE59BD9B4E019)
# Similarities at which the S-curve's false-positive area is integrated (see choose_bands).
_CURVE_GRID = np.linspace(0.0, 1.0, 1001)


def band_keys(codes: np.ndarray, bands: int, field: str = "bands") -> np.ndarray:
    """The (n, bands) array of band keys of int64 codes (n, k): strings "<band>:<32 hex digits>" (numpy's
    fixed-width str dtype), the same strings a JSON answer lists. A 128-bit digest does not fit a uint64,
    and the strings are what POST /hash has always answered."""
    n, k = codes.shape
    if bands < 1 or k % bands:
        raise InputError(field, f"must be a positive divisor of the number of samples ({k})")
    blocks = np.ascontiguousarray(codes, dtype="<i8").reshape(n, bands, k // bands)
    keys = [f"{band}:{hashlib.blake2b(row[band].tobytes(), digest_size=16).hexdigest()}"
            for row in blocks for band in range(bands)]
    return np.array(keys, dtype=band_key_dtype(bands)).reshape(n, bands)


def band_key_dtype(bands: int) -> np.dtype:
    """The str dtype that holds a band key of `bands` bands: the band's digits, ':' and 32 hex digits."""
    return np.dtype(f"<U{len(str(bands - 1)) + 33}")


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 whose output bits each depend on all input bits."""
    z = z ^ (z >> np.uint64(30))
    z = z * _MIX_1
    z = z ^ (z >> np.uint64(27))
    z = z * _MIX_2
    return z ^ (z >> np.uint64(31))


def code_fingerprints(codes: np.ndarray) -> np.ndarray:
    """32-bit fingerprints (uint32, little-endian) of int64 codes, same shape."""
    words = np.ascontiguousarray(codes, dtype=np.int64).view(np.uint64)
    return (_mix64(words + _FINGERPRINT_SALT) >> np.uint64(32)).astype(FINGERPRINT_DTYPE)


def band_digests(fingerprints: np.ndarray, bands: int, rows: int, prefix: int | None = None) -> np.ndarray:
    """uint64 digests (n, bands) of each band's `rows` fingerprints: band b covers samples
    b*rows .. (b+1)*rows - 1; samples past bands*rows take part in re-ranking only. With
    `prefix` < rows, the digests of each band's first `prefix` samples (a forest level: two
    vectors that share a band also share every prefix of it)."""
    n = fingerprints.shape[0]
    blocks = fingerprints[:, :bands * rows].reshape(n, bands, rows).astype(np.uint64)
    digests = np.broadcast_to(_mix64(np.arange(bands, dtype=np.uint64) + _BAND_SALT), (n, bands))
    for sample in range(rows if prefix is None else prefix):
        digests = _mix64(digests ^ blocks[:, :, sample])
    return digests


def match_fractions(query: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Fraction of the k fingerprints each row of `items` (m, k) shares with `query` (k,):
    the estimate of the similarity (GMM for GCWS) over all k samples."""
    return (items == query).mean(axis=1) if len(items) else np.empty(0)


def b_bit_match_fractions(query: np.ndarray, items: np.ndarray, bits: int) -> np.ndarray:
    """The similarity estimate from the low `bits` bits of each fingerprint (b-bit minwise hashing,
    Li & Konig 2010): two codes' b-bit fingerprints agree with probability P = s + (1 - s) 2^-b, so
    the match fraction m gives the unbiased (m - 2^-b) / (1 - 2^-b), here clipped to [0, 1]. Its
    variance P (1 - P) / (k (1 - 2^-b)^2) is the full fingerprints' s (1 - s) / k times ~1.01 at
    b = 8, s = 0.7 (sd 0.0287 against 0.0286 at k = 256): the ranking noise b bits cost."""
    if not len(items):
        return np.empty(0)
    chance = 2.0 ** -bits
    return np.clip(((items == query).mean(axis=1) - chance) / (1.0 - chance), 0.0, 1.0)


def best_matches(similarities: np.ndarray, tie_breaks: np.ndarray, top_k: int,
                 min_similarity: float) -> np.ndarray:
    """Positions of the `top_k` highest similarities >= min_similarity, best first; equal
    similarities in `tie_breaks` order (so results do not depend on storage order)."""
    eligible = np.flatnonzero(similarities >= min_similarity)
    if eligible.size > top_k:  # keep every tie of the k-th value before the exact sort
        kth = np.partition(similarities[eligible], eligible.size - top_k)[eligible.size - top_k]
        eligible = eligible[similarities[eligible] >= kth]
    order = np.lexsort((tie_breaks[eligible], -similarities[eligible]))
    return eligible[order[:top_k]]


def _l1_distances(query: np.ndarray, candidates) -> np.ndarray:
    """||query - row||_1 for each row of candidates (dense (m, d) or CSR), query dense (d,)."""
    if not sp.issparse(candidates):
        return np.abs(candidates - query).sum(axis=1)
    candidates = sp.csr_matrix(candidates)
    owners = np.repeat(np.arange(candidates.shape[0]), np.diff(candidates.indptr))
    at = query[candidates.indices]
    # |q - v|_1 = |q|_1 + sum over the row's nonzeros of (|q_j - v_j| - |q_j|)
    change = np.bincount(owners, np.abs(at - candidates.data) - np.abs(at), minlength=candidates.shape[0])
    return np.abs(query).sum() + change


def exact_similarities(method: str, params: dict, query: np.ndarray, candidates) -> np.ndarray:
    """The similarity a code match estimates, of `query` (d,) to each candidate row (float64).

    gcws: pGMM(x, y) = sum min(u~, v~) / sum max(u~, v~) with u~ the split vector raised to
    `power` (featurehash.maps.kernels.gmm). Written with t(x) = sign(x) |x|^p, for which the split
    parts give |u~ - v~|_1 = ||t(x) - t(y)||_1 and sum u~ = ||t(x)||_1, through
    min + max = u~ + v~ and max - min = |u~ - v~|: pGMM = (S - D) / (S + D), S = ||t(x)||_1 +
    ||t(y)||_1, D = ||t(x) - t(y)||_1. All vectors are first divided by one common scale (the
    ratio does not change), so no power overflows. Two zero vectors: 1.
    binning: the Laplacian kernel exp(-gamma ||x - y||_1).
    """
    if method == "binning":
        return np.exp(-params["gamma"] * _l1_distances(query, candidates))
    if method != "gcws":
        raise ValueError(f"no exact re-ranking for '{method}' codes")
    power = params.get("power", 1.0)
    peak = max(float(np.abs(query).max(initial=0.0)), float(abs(candidates).max()) if candidates.shape[0] else 0.0)
    scale = 1.0 / peak if peak > 0 else 1.0
    def signed_power(values):
        return np.sign(values) * np.abs(values * scale) ** power

    q = signed_power(query)
    if sp.issparse(candidates):
        candidates = sp.csr_matrix(candidates, copy=True)
        candidates.data = signed_power(candidates.data)
        sums = np.asarray(abs(candidates).sum(axis=1)).ravel()
    else:
        candidates = signed_power(candidates)
        sums = np.abs(candidates).sum(axis=1)
    total = np.abs(q).sum() + sums
    distance = _l1_distances(q, candidates)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total + distance > 0, (total - distance) / (total + distance), 1.0)


# -- the S-curve -----------------------------------------------------------------------------

def collision_probability(similarity, bands: int, rows: int):
    """Pr[two vectors share at least one of `bands` buckets of `rows` codes each]."""
    return 1.0 - (1.0 - np.asarray(similarity, dtype=np.float64) ** rows) ** bands


def half_point(bands: int, rows: int) -> float:
    """The similarity at which the collision probability is 1/2 (the S-curve's middle)."""
    return float((1.0 - 0.5 ** (1.0 / bands)) ** (1.0 / rows))


def check_bands(n_codes: int, bands: int, rows: int) -> None:
    if bands < 1:
        raise InputError("bands", "must be at least 1")
    if rows < 1:
        raise InputError("rows", "must be at least 1")
    if bands * rows > n_codes:
        raise InputError("bands", f"bands * rows = {bands * rows} exceeds the map's {n_codes} codes per vector")


def choose_bands(n_codes: int, threshold: float, recall_at_threshold: float = 0.9,
                 max_bands: int | None = None) -> tuple[int, int]:
    """(bands, rows) with bands * rows <= n_codes for finding items of similarity >= threshold.

    Rule: an item exactly at the threshold must become a candidate with probability >=
    recall_at_threshold (items above it do so more often); among the (L, r) that achieve
    it, take the one with the least false-positive area, the integral of the S-curve over
    [0, threshold] (datasketch's criterion without its false-negative term, which the
    constraint replaces by a number a user can state). For each r the smallest such L is
    best, L = ceil(log(1 - recall) / log(1 - t^r)), so only k values of r are tried. If no
    (L, r) reaches the recall, the steepest curve at the threshold (r = 1, L = k) is used;
    the index reports the probability it achieves. `max_bands` caps L (a storage limit).
    """
    if not 0.0 < threshold <= 1.0:
        raise InputError("threshold", "must lie in (0, 1]")
    if not 0.0 < recall_at_threshold < 1.0:
        raise InputError("recall_at_threshold", "must lie in (0, 1)")
    best: tuple[float, int, int] | None = None
    below = _CURVE_GRID[_CURVE_GRID <= threshold]
    for rows in range(1, n_codes + 1):
        band_hit = threshold ** rows
        if band_hit == 0.0:   # t^r underflowed: no L reaches the recall, for these rows or more
            break
        needed = 1.0 if band_hit >= 1.0 else math.log1p(-recall_at_threshold) / math.log1p(-band_hit)
        if not needed <= n_codes:  # it only grows with rows (inf where t^r is subnormal)
            break
        bands = math.ceil(needed)
        if bands * rows > n_codes or (max_bands is not None and bands > max_bands):
            continue
        curve = collision_probability(below, bands, rows)
        false_positive_area = float(np.sum((curve[1:] + curve[:-1]) * np.diff(below)) / 2.0)
        if best is None or false_positive_area < best[0]:
            best = (false_positive_area, bands, rows)
    if best is None:
        return min(n_codes, max_bands or n_codes), 1
    return best[1], best[2]
