"""Querying an LSH index as step generators (no I/O), written once for every layout: the buckets of each row,
level by level of the forest, the candidates they name, and their ranking by exact similarity. The layout
(featurehash.store.index.state.LayoutSteps, chosen when the index is opened) plans the rows, probes their
buckets, fetches the candidates' records into its pool and estimates similarities from codes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np
import scipy.sparse as sp

from ...lsh.banding import collision_probability
from ...lsh.rerank import top_matches
from ...lsh.similarity import RowSimilarity
from ...maps import InputError
from ...maps.kernels import shared_columns
from ..lsh_layout import IndexConfig, check_fraction, check_positive_int, check_query_ids, unpack_records_and_vectors
from ..lsh_vectors import VectorCodec
from ..redis_steps import Compute
from .inline import INLINE_COMPARISONS, INLINE_ROWS, _small_input

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
PROJECT_AFTER_ROWS = 32         # rows probed before CandidateBounds extrapolates a level's work to its batch


@dataclass(frozen=True)
class QueryResult:
    results: list[list[tuple[str, float]]]  # per query vector: (id, similarity), best first
    candidates: list[int]                   # per query vector: distinct items re-ranked
    # per query vector: the S-curve's probability that an item as similar as the k-th result (as the last
    # result when fewer were found; as min_similarity when none was) became a candidate, at the level probed
    estimated_recall: list[float] = field(default_factory=list)
    rows_probed: list[int] = field(default_factory=list)  # per query vector: the band prefix length used


class CandidatePool:
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


class TooManyCandidates(InputError):
    """A query's buckets hold (or, extrapolated from its first rows, would hold) more than `total` candidates:
    `reason` says which, the message adds what to do (an InputError naming max_total_candidates)."""

    def __init__(self, total: int, extrapolated: bool):
        would = "would hold (extrapolated from its first rows)" if extrapolated else "hold"
        self.total = total
        self.reason = f"the query's buckets {would} more than {total} candidates in all"
        super().__init__("max_total_candidates", f"{self.reason}; query fewer rows at a time")


@dataclass(frozen=True)
class CandidateBounds:
    """The bucket members a query may walk: each row's buckets are taken in band order until they held `per_row`
    (layout 3), and the whole query (every row and level) may find `total` candidates, past which it stops with
    TooManyCandidates (an InputError naming max_total_candidates). None: no bound. Either way every Redis call a query makes does bounded
    work (layout 3: featurehash.store.index.compact.scripts.PROBE_FETCH)."""

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
            raise TooManyCandidates(self.total, extrapolated=projected != walked)


def _query_options(top_k, min_similarity, target_recall, bounds) -> tuple[int, float, float | None, CandidateBounds]:
    top_k = check_positive_int(top_k, "top_k")
    min_similarity = check_fraction(min_similarity, "min_similarity")
    target_recall = None if target_recall is None else check_fraction(target_recall, "target_recall")
    return top_k, min_similarity, target_recall, bounds


def query_steps(index, X, top_k: int, min_similarity: float, target_recall: float | None = None,
                bounds: CandidateBounds = CandidateBounds()):
    """Probe level 0 (the bands); re-rank; while the S-curve at the k-th result's similarity is
    below `target_recall`, probe the shortest-needed forest level and re-rank the union, within `bounds`."""
    options = _query_options(top_k, min_similarity, target_recall, bounds)
    X, fingerprints, level_keys = yield Compute(index.steps.plan, (X,),
                                                inline=partial(_small_input, X, index.config.n_codes))
    return (yield from _search_steps(index, X, fingerprints, level_keys, *options))


def query_items_steps(index, ids, top_k: int, min_similarity: float, target_recall: float | None = None,
                      bounds: CandidateBounds = CandidateBounds()):
    """The neighbours of stored items: their records give the fingerprints (the buckets are
    recomputed from them) and, with stored vectors, the vectors for exact ranking. Each item is
    left out of its own results (and of its candidate count)."""
    options = _query_options(top_k, min_similarity, target_recall, bounds)
    ids = check_query_ids(ids)
    X, fingerprints, level_keys, numbers = yield from index.steps.stored_plan_steps(ids)
    return (yield from _search_steps(index, X, fingerprints, level_keys, *options, exclude=numbers))


def _search_steps(index, X, fingerprints, level_keys, top_k, min_similarity, target_recall, bounds, exclude=None):
    """The search itself, for rows whose fingerprints and buckets are known; `exclude`: per
    row an item number left out of its candidates (the stored item itself)."""
    steps, config = index.steps, index.config
    n = fingerprints.shape[0]
    pool = steps.new_pool()
    found = [np.empty(0, np.int64) for _ in range(n)]
    level = [0] * n
    outcome: list[tuple] = [None] * n
    active = list(range(n))
    while active:
        members, fetched = yield from steps.probe_steps(level_keys, active, level, pool, bounds)
        for q, numbers in zip(active, members):
            found[q] = np.union1d(found[q], numbers) if found[q].size else numbers  # numbers: sorted, distinct
            if exclude is not None:
                found[q] = found[q][found[q] != exclude[q]]
        if fetched is None:  # the records are read after the probe
            wanted = pool.missing(np.unique(np.concatenate([found[q] for q in active])))
            records = yield from steps.fetch_steps(wanted)
        else:
            wanted, records = fetched
        total = sum(found[q].size for q in active)
        small = len(active) <= INLINE_ROWS and total * config.n_codes <= INLINE_COMPARISONS
        ranked = yield Compute(_rank, (index, X, fingerprints, active, found, pool, wanted, records, top_k,
                                       min_similarity), inline=small)
        widen = []
        for q, (best, count, kth) in zip(active, ranked):
            rows = config.levels[level[q]]
            recall = float(collision_probability(kth, config.bands, rows))
            # fewer than top_k found: the promise is about items as similar as the weakest one found
            promised = recall if not 0 < len(best) < top_k else \
                float(collision_probability(best[-1][1], config.bands, rows))
            outcome[q] = (best, count, promised, rows)
            if target_recall is not None and recall < target_recall and level[q] + 1 < len(config.levels):
                level[q] = _next_level(config, kth, target_recall, level[q])
                widen.append(q)
        active = widen
    return QueryResult(*(list(column) for column in zip(*outcome))) if n else QueryResult([], [], [], [])


def _next_level(config: IndexConfig, similarity: float, target_recall: float, level: int) -> int:
    """The first deeper level whose S-curve reaches the target at `similarity`, else the deepest."""
    for deeper in range(level + 1, len(config.levels)):
        if collision_probability(similarity, config.bands, config.levels[deeper]) >= target_recall:
            return deeper
    return len(config.levels) - 1


def _rank(index, X, fingerprints, active, found, pool, wanted, records, top_k, min_similarity) -> list[tuple]:
    """Per active query: ((id, similarity) best first, candidates ranked, the k-th similarity)."""
    if wanted.size:
        pool.add(wanted, records)
    ranked = []
    for q in active:
        rows = pool.rows_of(found[q])  # drops the candidates whose record is gone
        if index.codec is None or rows.size == 0:
            similarities = index.steps.code_similarities(fingerprints[q], pool.fingerprints[rows])
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
