"""The near-duplicate clusters among the items of an LSH index (featurehash.store.index.handles), as step
generators written once for every layout (featurehash.store.index.state.LayoutSteps).

Candidates: every pair of items that share a level-0 bucket (one of the index's L bands of r codes), read
page by page through the layout's `shared_buckets_steps` (the buckets with >= 2 members), each pair kept once however
many bands it shares (the pages' pairs are merged by sorting). Under the index's banding a pair of
similarity s is a candidate with probability 1 - (1 - s^r)^L (the S-curve; Broder's minhash banding,
Leskovec, Rajaraman & Ullman, "Mining of Massive Datasets", ch. 3.4): the answer reports it at the
requested threshold as `recall_at_threshold` (below the index's own threshold it falls quickly).
Verification, in blocks of VERIFY_BLOCK_PAIRS pairs whose records are read by the layout's `records_steps` (never
the records of all items at once): the map's exact kernel on the stored vectors when the index keeps
them (featurehash.lsh.similarity, the map's code family: GMM / pGMM for gcws, Laplacian for binning; precision
1), else the match fraction of the k codes (`verify` = "codes": standard deviation sqrt(s (1 - s) / k),
and biased upward for candidates, which share a band by construction: pairs near the threshold are
both missed and wrongly kept). Pairs >= threshold are grouped by featurehash.lsh.clusters, as featurehash.dedup.duplicate_clusters
groups rows, with items ordered by id (Python string order): mode "components", the connected
components of the verified pairs (transitive: a chain becomes one cluster), or "representatives", no
chaining: in id order an item joins the first earlier representative it is similar to, else becomes
one. In both modes the representative is the member with the smallest id.

Cost: time, the SCAN of the L n bucket keys of n items (SCAN walks every key of the node: other data in
the same Redis adds to it) with a SCARD each, plus one record read per end of each candidate pair and its
kernel (O(d), O(nnz) or O(k)); memory, 16 bytes per distinct candidate pair, one page of buckets, one
block of records and the ids of the items in verified pairs. `max_pairs` bounds the candidate pairs
(InputError naming it past that), so the peak is about 64 bytes a pair it allows (a merge sorts up to
2 max_pairs pairs into a copy). Items written meanwhile may or may not be seen; a pair whose record
went is skipped.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...lsh.banding import collision_probability
from ...lsh.clusters import CLUSTER_MODES, representatives
from ...lsh.similarity import aligned_pairs
from ...maps import InputError
from ..lsh_layout import check_fraction, check_positive_int
from ..redis_steps import Compute, RoundTrip

DUPLICATE_MODES = CLUSTER_MODES
DEFAULT_MAX_PAIRS = 10_000_000  # 16 bytes a pair; a merge holds up to ~4x max_pairs of them (~640 MB)
SCAN_PAGE_KEYS = 1000           # bucket keys per SCAN page
VERIFY_BLOCK_PAIRS = 4096       # pairs verified per block (at most twice as many records read)

# CPU seconds (this process and Redis together) of a duplicates call, priced ~20% above what
# bench/bench_index_duplicates.py and its per-pair run measured (gcws k = 256, 21 bands; 2-core host):
# ~5 us per level-0 bucket key (SCAN page, script, decoding), ~23-25 us per candidate pair with
# codes or sparse vectors (merging the pairs of every band, reading and verifying) and 44 us with
# float32 vectors of d = 1,000 (reading two rows of d values).
SECONDS_PER_BUCKET = 6e-6
SECONDS_PER_PAIR = 30e-6
SECONDS_PER_PAIR_VALUE = 25e-9  # per stored dense value ("float32", "float16") of the two rows


def scan_seconds(bands: int, items: int) -> float:
    """Estimated CPU seconds of the bucket scan of `items` items in `bands` bands (SCAN also walks the
    node's other keys, ~0.2 us each in Redis: not counted)."""
    return items * bands * SECONDS_PER_BUCKET


def pairs_within(vectors: str, input_dim: int, seconds: float) -> int:
    """The most candidate pairs whose verification fits `seconds`, for the stored `vectors` kind."""
    dense = vectors in ("float32", "float16")
    per_pair = SECONDS_PER_PAIR + (2 * input_dim * SECONDS_PER_PAIR_VALUE if dense else 0.0)
    return max(0, int(seconds / per_pair))


@dataclass(frozen=True)
class DuplicateCluster:
    representative: str  # the smallest id of the cluster
    members: list[str]   # in id order, the representative first


@dataclass(frozen=True)
class Duplicates:
    clusters: list[DuplicateCluster]  # in their representatives' id order
    threshold: float
    mode: str
    verify: str                # "exact" (the kernel on stored vectors) or "codes" (match fraction of the k codes)
    bands: int
    rows: int
    recall_at_threshold: float  # 1 - (1 - threshold^rows)^bands: a pair at the threshold became a candidate
    candidates: int             # distinct candidate pairs verified
    pairs: int                  # of them, those >= threshold


@functools.lru_cache(maxsize=32)
def _triangle(size: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(size, 1)


class _CandidatePairs:
    """Distinct pairs (lo, hi) of item numbers, lo < hi, gathered from buckets; refused past max_pairs."""

    def __init__(self, max_pairs: int):
        self.max_pairs = max_pairs
        self.known = np.empty((0, 2), np.int64)
        self.pending: list[np.ndarray] = []
        self.pending_size = 0

    def _refuse(self, found: int) -> None:
        raise InputError("max_pairs", f"the index's shared buckets give at least {found} candidate pairs, over "
                         f"max_pairs = {self.max_pairs}; raise it, or find the duplicates in process "
                         "(featurehash.dedup.duplicate_clusters, or the `featurehash dedup` CLI) on the vectors")

    def add(self, buckets: list[np.ndarray]) -> None:
        sizes = np.array([members.size for members in buckets], dtype=np.int64)
        for size in np.unique(sizes):  # buckets of one size at once: a matrix, one row a bucket
            size = int(size)
            if size * (size - 1) // 2 > self.max_pairs:
                self._refuse(size * (size - 1) // 2)
            rows = np.flatnonzero(sizes == size)
            step = max(1, self.max_pairs // (size * (size - 1) // 2))  # at most ~max_pairs made at once
            for start in range(0, rows.size, step):
                members = np.sort(np.stack([buckets[row] for row in rows[start:start + step]]), axis=1)
                first, second = _triangle(size)
                self.pending.append(np.column_stack([members[:, first].ravel(), members[:, second].ravel()]))
                self.pending_size += self.pending[-1].shape[0]
                if self.pending_size > self.max_pairs:
                    self._merge()

    def _merge(self) -> None:
        pairs = np.ascontiguousarray(np.concatenate([self.known, *self.pending]))
        self.pending, self.pending_size = [], 0
        self.known = np.unique(pairs.view([("lo", np.int64), ("hi", np.int64)]).ravel()).view(np.int64).reshape(-1, 2)
        if self.known.shape[0] > self.max_pairs:
            self._refuse(self.known.shape[0])

    def result(self) -> np.ndarray:
        self._merge()
        return self.known


class _VerifiedPairs:
    """The pairs >= threshold found so far, and the ids of their items."""

    def __init__(self):
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        self.ids: dict[int, str] = {}


def duplicates_steps(index, threshold: float | None, mode: str, max_pairs: int, min_cluster_size: int):
    """The clusters of near-duplicates among the stored items, pairs >= threshold (default: the index's)."""
    config, steps = index.config, index.steps
    threshold = config.threshold if threshold is None else check_fraction(threshold, "threshold")
    if threshold <= 0:
        raise InputError("threshold", "must lie in (0, 1]")
    if mode not in DUPLICATE_MODES:
        raise InputError("mode", f"must be one of {', '.join(DUPLICATE_MODES)}")
    max_pairs = check_positive_int(max_pairs, "max_pairs")
    min_cluster_size = check_positive_int(min_cluster_size, "min_cluster_size")
    index._check_meta((yield RoundTrip([("GET", index.layout.meta)]))[0])
    candidates, cursor = _CandidatePairs(max_pairs), 0
    while True:
        buckets, cursor = yield from steps.shared_buckets_steps(cursor, SCAN_PAGE_KEYS)
        if buckets:
            yield Compute(candidates.add, (buckets,))
        if cursor == 0:
            break
    pairs = yield Compute(candidates.result)
    verified = _VerifiedPairs()
    for start in range(0, pairs.shape[0], VERIFY_BLOCK_PAIRS):
        block = pairs[start:start + VERIFY_BLOCK_PAIRS]
        numbers = np.unique(block)
        records = yield from steps.records_steps(numbers)
        yield Compute(_verify_block, (index, block, numbers, records, threshold, verified))
    index._check_meta((yield RoundTrip([("GET", index.layout.meta)]))[0])  # not deleted or replaced meanwhile
    clusters, found = yield Compute(_clusters, (verified, mode, min_cluster_size))
    return Duplicates(clusters, float(threshold), mode, "codes" if index.codec is None else "exact",
                      config.bands, config.rows, float(collision_probability(threshold, config.bands, config.rows)),
                      int(pairs.shape[0]), found)


def _verify_block(index, block: np.ndarray, numbers: np.ndarray, records, threshold: float,
                  verified: _VerifiedPairs) -> None:
    live, fingerprints, ids, vectors = index.steps.decode_records(records)
    if not live.any():
        return
    numbers = numbers[live]
    lo, hi = np.searchsorted(numbers, block[:, 0]), np.searchsorted(numbers, block[:, 1])
    inside = (lo < numbers.size) & (hi < numbers.size)
    lo, hi = lo[inside], hi[inside]
    present = (numbers[lo] == block[inside, 0]) & (numbers[hi] == block[inside, 1])
    lo, hi = lo[present], hi[present]
    if vectors is None:
        similarity = index.steps.pair_code_similarities(fingerprints[lo], fingerprints[hi])
    else:
        similarity = aligned_pairs(index.similarity, vectors[lo], vectors[hi])
    keep = similarity >= threshold
    lo, hi = lo[keep], hi[keep]
    verified.lo.append(numbers[lo])
    verified.hi.append(numbers[hi])
    for row in np.unique(np.concatenate([lo, hi])):
        verified.ids[int(numbers[row])] = ids[row]


def _clusters(verified: _VerifiedPairs, mode: str, min_cluster_size: int) -> tuple[list[DuplicateCluster], int]:
    """The clusters of the verified pairs (see the module doc) and the number of pairs."""
    lo = np.concatenate(verified.lo) if verified.lo else np.empty(0, np.int64)
    hi = np.concatenate(verified.hi) if verified.hi else np.empty(0, np.int64)
    numbers = np.unique(np.concatenate([lo, hi]))
    n = numbers.size
    if n == 0:
        return [], 0
    ordered = sorted(range(n), key=lambda node: verified.ids[int(numbers[node])])
    rank = np.empty(n, np.int64)
    rank[ordered] = np.arange(n)
    ids = [verified.ids[int(numbers[node])] for node in ordered]
    a, b = rank[np.searchsorted(numbers, lo)], rank[np.searchsorted(numbers, hi)]
    representative = representatives(np.minimum(a, b), np.maximum(a, b), n, mode)
    order = np.lexsort((np.arange(n), representative))
    bounds = np.flatnonzero(np.diff(representative[order])) + 1
    clusters = [DuplicateCluster(ids[int(group[0])], [ids[int(member)] for member in group])
                for group in np.split(order, bounds) if group.size >= min_cluster_size]
    return clusters, int(lo.size)
