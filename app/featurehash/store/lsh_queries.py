"""Querying an LSH index as step generators (no I/O): the buckets of each row, level by level of the
forest, the candidates they name, and their ranking by exact similarity."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..lsh.banding import collision_probability
from ..lsh.matches import match_fractions
from ..lsh.rerank import top_matches
from ..lsh.similarity import RowSimilarity
from ..maps import InputError
from ..maps.kernels import shared_columns
from .lsh_inline import INLINE_COMPARISONS, INLINE_ROWS, _small_input
from .lsh_layout import (IndexConfig, check_fraction, check_positive_int, check_query_ids, item_number,
                         unpack_records_and_vectors)
from .lsh_vectors import VectorCodec
from .redis_steps import Compute, RoundTrip

READ_BATCH_KEYS = 10_000        # keys per MGET
# CPU seconds (this process and Redis together) of a query's candidate, ~50% above what 200 rows of 10,000
# near-identical gcws items (float16 vectors, d = 64) measured: walking it in a bucket, fetching its tail once,
# re-ranking it per row (~1 us in all); dense stored vectors add their values' reading and kernel.
SECONDS_PER_CANDIDATE = 1.5e-6
SECONDS_PER_CANDIDATE_VALUE = 10e-9  # per stored dense value ("float32", "float16")


def candidates_within(vectors: str, input_dim: int, seconds: float) -> int:
    """The most candidates (summed over a query's rows) whose walking, fetching and re-ranking fit `seconds`."""
    dense = vectors in ("float32", "float16")
    per_candidate = SECONDS_PER_CANDIDATE + (input_dim * SECONDS_PER_CANDIDATE_VALUE if dense else 0.0)
    return max(1, int(seconds / per_candidate))
SUNION_ROWS = 16                # query rows a pipeline (layouts 1 and 2)
PROJECT_AFTER_ROWS = 32         # rows probed before CandidateBounds extrapolates a level's work to its batch


class ItemNotFound(LookupError):
    def __init__(self, item_id: str):
        super().__init__(item_id)
        self.item_id = item_id


@dataclass(frozen=True)
class QueryResult:
    results: list[list[tuple[str, float]]]  # per query vector: (id, similarity), best first
    candidates: list[int]                   # per query vector: distinct items re-ranked
    # per query vector: the S-curve's probability that an item as similar as the k-th result (as the last
    # result when fewer were found; as min_similarity when none was) became a candidate, at the level probed
    estimated_recall: list[float] = field(default_factory=list)
    rows_probed: list[int] = field(default_factory=list)  # per query vector: the band prefix length used


class _CandidatePool:
    """The records a query batch fetched so far, decoded, sorted by item number."""

    def __init__(self, config: IndexConfig, codec: VectorCodec | None, similarity: RowSimilarity | None):
        self.config, self.codec = config, codec
        self.similarity = similarity  # of the map's code family (featurehash.lsh.similarity), with vectors
        self.fetched = np.empty(0, np.int64)  # every number asked for (records gone included)
        self.walked = 0  # bucket members the query's probes returned (CandidateBounds.total)
        self.numbers = np.empty(0, np.int64)  # those with a record
        self.fingerprints = np.empty((0, config.n_codes), np.uint32)
        self.ids: list[str] = []
        self.vectors = None

    def missing(self, numbers: np.ndarray) -> np.ndarray:
        return np.setdiff1d(numbers, self.fetched, assume_unique=True)

    def add(self, numbers: np.ndarray, records: list[bytes | None]) -> None:
        self.fetched = np.union1d(self.fetched, numbers)
        live = [row for row, record in enumerate(records) if record is not None]
        if live:
            self._merge(numbers[live], *unpack_records_and_vectors([records[row] for row in live],
                                                                   self.config.n_codes, self.codec))

    def _merge(self, numbers: np.ndarray, fingerprints: np.ndarray, ids: list[str], vectors) -> None:
        """Adds the decoded records of numbers (not fetched before), keeping the pool sorted by number."""
        all_numbers = np.concatenate([self.numbers, numbers])
        order = np.argsort(all_numbers, kind="stable")
        self.numbers = all_numbers[order]
        self.fingerprints = np.vstack([self.fingerprints, fingerprints])[order]
        joined = self.ids + ids
        self.ids = [joined[row] for row in order]
        if vectors is not None:
            if self.vectors is not None:
                vectors = sp.vstack([self.vectors, vectors], format="csr") if sp.issparse(vectors) \
                    else np.vstack([self.vectors, vectors])
            self.vectors = vectors[order]

    def similarities(self, X, q: int, rows: np.ndarray) -> np.ndarray:
        """Exact similarities of query q (row q of X) to the candidates at `rows`."""
        query, candidates = _over_shared_columns(X, q, self.vectors[rows])
        return self.similarity.query(query, candidates)

    def results(self, rows: np.ndarray, similarities: np.ndarray) -> list[tuple[str, float]]:
        """(id, similarity) of the candidates at `rows`."""
        return list(zip([self.ids[row] for row in rows.tolist()], similarities.tolist()))

    def rows_of(self, numbers: np.ndarray) -> np.ndarray:
        """Positions of the numbers that have a record."""
        rows = np.searchsorted(self.numbers, numbers)
        inside = rows < self.numbers.size
        rows, numbers = rows[inside], numbers[inside]
        return rows[self.numbers[rows] == numbers]


@dataclass(frozen=True)
class CandidateBounds:
    """The bucket members a query may walk: each row's buckets are taken in band order until they held `per_row`
    (layout 3), and the whole query (every row and level) may find `total` candidates, past which it stops with an
    InputError naming max_total_candidates. None: no bound. Either way every Redis call a query makes does bounded
    work (layout 3: featurehash.store.lsh_compact_scripts.PROBE_FETCH)."""

    per_row: int | None = None
    total: int | None = None

    def __post_init__(self):
        for name, value in (("max_candidates", self.per_row), ("max_total_candidates", self.total)):
            if value is not None:
                check_positive_int(value, name)

    def check(self, walked: int, level_walked: int = 0, rows_done: int = 0, rows: int = 0) -> None:
        """InputError naming max_total_candidates once the query has walked more than `total` members, or once the
        rows a level has probed so far (at least PROJECT_AFTER_ROWS of them, or all), `level_walked` members,
        extrapolated to its `rows`, would: a batch of near-identical rows is refused after its first calls, not
        after the budget's worth of work."""
        if self.total is None:
            return
        projected = walked
        if 0 < rows_done < rows and rows_done >= PROJECT_AFTER_ROWS:
            projected = walked + level_walked * (rows - rows_done) // rows_done
        if projected > self.total:
            would = "hold" if projected == walked else "would hold (extrapolated from its first rows)"
            raise InputError("max_total_candidates", f"the query's buckets {would} more than {self.total} "
                             "candidates in all; query fewer rows at a time")


def _query_options(top_k, min_similarity, target_recall, bounds) -> tuple[int, float, float | None, CandidateBounds]:
    top_k = check_positive_int(top_k, "top_k")
    min_similarity = check_fraction(min_similarity, "min_similarity")
    target_recall = None if target_recall is None else check_fraction(target_recall, "target_recall")
    return top_k, min_similarity, target_recall, bounds


class _QuerySteps:
    """Needs what _IndexSteps sets up (lsh_index.py): config, layout, codec, feature_map and its key helpers."""

    def _query_plan(self, X) -> tuple[Any, np.ndarray, list[list[list[bytes]]]]:
        """The checked vectors, their fingerprints and their bucket keys at every level."""
        X = self.feature_map.check(X, "vectors")
        fingerprints = self._fingerprints(X)
        return X, fingerprints, [self._level_keys(fingerprints, level) for level in range(len(self.config.levels))]

    def _query_steps(self, X, top_k: int, min_similarity: float, target_recall: float | None = None,
                     bounds: CandidateBounds = CandidateBounds()):
        """Probe level 0 (the bands); re-rank; while the S-curve at the k-th result's similarity is
        below `target_recall`, probe the shortest-needed forest level and re-rank the union, within `bounds`."""
        options = _query_options(top_k, min_similarity, target_recall, bounds)
        X, fingerprints, level_keys = yield Compute(self._query_plan, (X,),
                                                    inline=partial(_small_input, X, self.config.n_codes))
        return (yield from self._search_steps(X, fingerprints, level_keys, *options))

    def _query_items_steps(self, ids, top_k: int, min_similarity: float, target_recall: float | None = None,
                           bounds: CandidateBounds = CandidateBounds()):
        """The neighbours of stored items: their records give the fingerprints (the bucket keys are
        recomputed from them) and, with stored vectors, the vectors for exact ranking. Each item is
        left out of its own results (and of its candidate count)."""
        options = _query_options(top_k, min_similarity, target_recall, bounds)
        ids = check_query_ids(ids)
        X, fingerprints, level_keys, numbers = yield from self._stored_plan_steps(ids)
        return (yield from self._search_steps(X, fingerprints, level_keys, *options, exclude=numbers))

    def _stored_plan_steps(self, ids: list[str]):
        """(vectors or None, fingerprints, bucket keys at every level, item numbers) of stored items, read
        from their records (layouts 1 and 2: a record per item under its 63-bit number)."""
        numbers = np.array([item_number(item_id) for item_id in ids], dtype=np.int64)
        records = yield from self._records_steps(numbers)
        for item_id, record in zip(ids, records):
            if record is None:
                raise ItemNotFound(item_id)
        X, fingerprints, level_keys = yield Compute(self._stored_plan, (ids, records), inline=len(ids) <= INLINE_ROWS)
        return X, fingerprints, level_keys, numbers

    def _records_steps(self, numbers: np.ndarray):
        """The records (bytes, None where gone) of items by number: MGETs of READ_BATCH_KEYS keys,
        pipelined in one round trip (layouts 1 and 2; layout 3 reads its packed records instead)."""
        keys = [self.layout.record(int(number)) for number in numbers]
        if not keys:
            return []
        replies = yield RoundTrip([("MGET", *keys[start:start + READ_BATCH_KEYS])
                                   for start in range(0, len(keys), READ_BATCH_KEYS)])
        return [record for reply in replies for record in reply]

    def _stored_plan(self, ids: list[str], records: list[bytes]):
        """_query_plan for stored items: their vectors (None without), fingerprints and bucket keys."""
        fingerprints, stored_ids, X = unpack_records_and_vectors(records, self.config.n_codes, self.codec)
        for item_id, stored_id in zip(ids, stored_ids):
            if stored_id != item_id:  # another id under the same 63-bit number: this one is not stored
                raise ItemNotFound(item_id)
        return X, fingerprints, [self._level_keys(fingerprints, level) for level in range(len(self.config.levels))]

    def _search_steps(self, X, fingerprints, level_keys, top_k, min_similarity, target_recall, bounds,
                      exclude=None):
        """The search itself, for rows whose fingerprints and bucket keys are known; `exclude`: per
        row an item number left out of its candidates (the stored item itself)."""
        n = fingerprints.shape[0]
        pool = self._new_pool()
        found = [np.empty(0, np.int64) for _ in range(n)]
        level = [0] * n
        outcome: list[tuple] = [None] * n
        active = list(range(n))
        while active:
            members, fetched = yield from self._probe_steps(level_keys, active, level, pool, bounds)
            for q, numbers in zip(active, members):
                found[q] = np.union1d(found[q], numbers) if found[q].size else numbers  # numbers: sorted, distinct
                if exclude is not None:
                    found[q] = found[q][found[q] != exclude[q]]
            if fetched is None:  # the records are read after the probe
                wanted = pool.missing(np.unique(np.concatenate([found[q] for q in active])))
                records = yield from self._fetch_steps(wanted)
            else:
                wanted, records = fetched
            total = sum(found[q].size for q in active)
            small = len(active) <= INLINE_ROWS and total * self.config.n_codes <= INLINE_COMPARISONS
            ranked = yield Compute(self._rank, (X, fingerprints, active, found, pool, wanted, records, top_k,
                                                min_similarity), inline=small)
            widen = []
            for q, (best, count, kth) in zip(active, ranked):
                rows = self.config.levels[level[q]]
                recall = float(collision_probability(kth, self.config.bands, rows))
                # fewer than top_k found: the promise is about items as similar as the weakest one found
                weakest = best[-1][1] if 0 < len(best) < top_k else kth
                outcome[q] = (best, count, float(collision_probability(weakest, self.config.bands, rows)), rows)
                if target_recall is not None and recall < target_recall and level[q] + 1 < len(self.config.levels):
                    level[q] = self._next_level(kth, target_recall, level[q])
                    widen.append(q)
            active = widen
        return QueryResult(*(list(column) for column in zip(*outcome))) if n else QueryResult([], [], [], [])

    def _probe_steps(self, level_keys, active: list[int], level: list[int], pool, bounds: CandidateBounds):
        """(item numbers in each active query's buckets (sorted, distinct), None or (numbers fetched, their
        records) when the probe also read the records of the candidates `pool` lacks: layout 3, one round trip).
        Layouts 1 and 2 take every bucket whole (bounds.per_row does not apply: migrate such an index)."""
        return (yield from self._bucket_members_steps(level_keys, active, level, pool, bounds)), None

    def _bucket_members_steps(self, level_keys, active: list[int], level: list[int], pool, bounds: CandidateBounds):
        """The item numbers in the buckets of each active query at its level (sorted): SUNION_ROWS rows a round
        trip, so that Redis serves other clients between them."""
        unions, before = [], pool.walked
        for begin in range(0, len(active), SUNION_ROWS):
            page = yield RoundTrip([("SUNION", *level_keys[level[q]][q]) for q in active[begin:begin + SUNION_ROWS]])
            pool.walked += sum(len(members) for members in page)
            bounds.check(pool.walked, pool.walked - before, begin + len(page), len(active))
            unions += page
        return [np.sort(np.fromiter((int(m) for m in members), np.int64, len(members))) for members in unions]

    def _fetch_steps(self, wanted: np.ndarray):
        """The records of item numbers (None where gone), as _CandidatePool.add takes them."""
        return (yield from self._records_steps(wanted))

    def _new_pool(self) -> _CandidatePool:
        return _CandidatePool(self.config, self.codec, self.similarity)

    def _code_similarities(self, query: np.ndarray, items: np.ndarray) -> np.ndarray:
        return match_fractions(query, items)

    def _next_level(self, similarity: float, target_recall: float, level: int) -> int:
        """The first deeper level whose S-curve reaches the target at `similarity`, else the deepest."""
        for deeper in range(level + 1, len(self.config.levels)):
            if collision_probability(similarity, self.config.bands, self.config.levels[deeper]) >= target_recall:
                return deeper
        return len(self.config.levels) - 1

    def _rank(self, X, fingerprints, active, found, pool, wanted, records, top_k, min_similarity) -> list[tuple]:
        """Per active query: ((id, similarity) best first, candidates ranked, the k-th similarity)."""
        if wanted.size:
            pool.add(wanted, records)
        ranked = []
        for q in active:
            rows = pool.rows_of(found[q])  # drops the candidates whose record is gone
            if self.codec is None or rows.size == 0:
                similarities = self._code_similarities(fingerprints[q], pool.fingerprints[rows])
            else:
                similarities = pool.similarities(X, q, rows)
            best = top_matches(similarities, pool.numbers[rows], top_k, min_similarity)
            kth = float(similarities[best[top_k - 1]]) if best.size >= top_k else min_similarity
            ranked.append((pool.results(rows[best], similarities[best]), int(rows.size), kth))
        return ranked


def _over_shared_columns(X, q: int, candidates):
    """Query q (dense) and the candidates, restricted to the columns either has a nonzero in when both are sparse:
    GMM and the L1 distance sum over those only, and a wide map's row (2^30 columns behind a text stage) is never
    made dense. O(nnz) time and memory."""
    if not sp.issparse(X):
        return np.asarray(X[q], dtype=np.float64), candidates
    row = sp.csr_matrix(X[q])
    if not sp.issparse(candidates):
        return row.toarray().ravel(), candidates
    row, candidates = shared_columns(row, candidates)
    return row.toarray().ravel(), candidates
