"""Near-duplicate clusters on Dask: rounds of tasks over the verified pairs of `join.py`, per row block,
until no row's label changes. No task holds more than one row block's pairs and labels."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import dask
import numpy as np
from dask import delayed
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ..maps import InputError
from .join import join_graph, pairs_frame, split_by_block

NONE = np.iinfo(np.int64).max   # "no such row" in the minima below
UNDECIDED = -1


@dataclass(frozen=True)
class DaskDuplicateClusters:
    """`labels`: dask array (n,) int64, the lowest row index of each row's cluster (its representative;
    `c.representatives[c.labels]` of the in-process `featurehash.dedup.duplicate_clusters`);
    `representatives`: dask array of the representative rows, ascending (the in-process
    `representatives`); `pairs`: the verified pairs, a dask DataFrame (i, j, similarity); `rounds`:
    the rounds of label updates run. The pairs and labels are persisted (held by the workers)."""

    labels: object
    representatives: object
    mode: str
    pairs: object
    rounds: int


def duplicate_clusters(X, spec, threshold: float, *, mode: str = "components", target_recall: float = 0.95,
                       verify: str = "exact", partitions: int | None = None) -> DaskDuplicateClusters:
    """Clusters of near-duplicate rows of a dask array X, equal to `featurehash.dedup.duplicate_clusters`
    on the same rows: the pairs of `featurehash.dask.similarity_join(X, spec, threshold, ...)`, then

    mode="components": connected components, by min-label propagation (Hash-Min: Rastogi et al.,
    "Finding connected components in map-reduce in logarithmic rounds", ICDE 2013), with each
    block's pairs solved locally per round: every row starts as its own label; in each round the
    task of row block b takes its pairs (i in b, j > i), the current labels of their rows, and finds
    the connected components of those pairs alone (scipy), proposing to each of their rows the lowest
    label in its local component; a row's new label is the lowest proposal. Labels only fall and are
    always rows of the row's component, so they end at its lowest row, when a round changes nothing.
    Rounds: about the number of block hops along the longest path of a component, plus one.
    mode="representatives": the in-process greedy rule (rows in index order; a row joins its lowest
    earlier neighbour that is a representative, else is one). That rule is sequential by nature (it
    is the lexicographically first maximal independent set, a P-complete problem: Cook 1985), so it
    runs in rounds instead: a row is decided once every earlier neighbour below its lowest
    representative neighbour is decided. Rounds: the longest chain of rows each waiting for an
    earlier one (a handful for near-duplicate groups; n for a path 0-1-2-... of similar rows).

    Each round is one Dask computation of B block tasks and about B^2 / 2 small exchanges (the
    labels of the rows a block's pairs name, and the proposals sent back), and a sum of changes.
    """
    if mode not in ("components", "representatives"):
        raise InputError("mode", "must be 'components' or 'representatives'")
    graph = join_graph(X, spec, threshold, target_recall=target_recall, verify=verify, partitions=partitions)
    frames = list(dask.persist(*graph.frames))
    bounds = graph.bounds
    pairs = list(dask.persist(*[delayed(_pair_rows)(frame) for frame in frames]))
    if mode == "components":
        labels, rounds = _components(pairs, bounds)
    else:
        labels, rounds = _representatives(pairs, bounds)
    import dask.array as da

    labels = da.concatenate([da.from_delayed(block, shape=(int(stop - start),), dtype=np.int64)
                             for block, start, stop in zip(labels, bounds[:-1], bounds[1:])])
    representatives = labels[labels == da.arange(int(bounds[-1]), chunks=labels.chunks)]
    return DaskDuplicateClusters(labels=labels, representatives=representatives, mode=mode,
                                 pairs=pairs_frame(frames), rounds=rounds)


def _components(pairs: list, bounds: np.ndarray) -> tuple[list, int]:
    n_blocks = len(pairs)
    named = dask.persist(*[delayed(_named_rows, nout=n_blocks)(block_pairs, bounds) for block_pairs in pairs])
    labels = [delayed(np.arange)(start, stop, dtype=np.int64) for start, stop in pairwise(bounds)]
    rounds, changed = 0, 1
    while changed:
        proposals = []
        for bi in range(n_blocks):
            remote = [delayed(_labels_of)(labels[bj], named[bi][bj], int(bounds[bj]))
                      for bj in range(bi, n_blocks)]
            proposals.append(delayed(_propose_minima, nout=n_blocks)(pairs[bi], labels[bi], int(bounds[bi]),
                                                                      remote, bounds))
        labels, changed = _lower(labels, proposals, bounds, _lowest_proposal)
        rounds += 1
    return labels, rounds


def _representatives(pairs: list, bounds: np.ndarray) -> tuple[list, int]:
    n_blocks = len(pairs)
    state = [delayed(np.full)(int(stop - start), UNDECIDED, dtype=np.int64)
             for start, stop in pairwise(bounds)]
    rounds, undecided = 0, 1
    while undecided:
        votes = [delayed(_votes, nout=n_blocks)(pairs[bi], state[bi], int(bounds[bi]), bounds)
                 for bi in range(n_blocks)]
        state, undecided = _lower(state, votes, bounds, _decide)
        rounds += 1
    return state, rounds


def _lower(labels: list, messages: list, bounds: np.ndarray, update) -> tuple[list, int]:
    """Run one round: each block's labels updated from the messages of the blocks at or before it
    (pairs have j > i), persisted; returns them and the total that `update` counts."""
    updated = [delayed(update, nout=2)(labels[b], int(bounds[b]), [messages[bi][b] for bi in range(b + 1)])
               for b in range(len(labels))]
    persisted = dask.persist(*[u[0] for u in updated], *[u[1] for u in updated])
    counts = dask.compute(*persisted[len(labels):])
    return list(persisted[:len(labels)]), int(sum(counts))


# -- on the workers -------------------------------------------------------------------------

def _pair_rows(frame) -> tuple[np.ndarray, np.ndarray]:
    return frame["i"].to_numpy(np.int64), frame["j"].to_numpy(np.int64)


def _named_rows(pairs: tuple, bounds: np.ndarray) -> tuple:
    """The rows j of a block's pairs, unique, one array per row block."""
    return tuple(rows for rows, in split_by_block(np.unique(pairs[1]), bounds))


def _labels_of(labels: np.ndarray, rows: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
    return rows, labels[rows - start]


def _propose_minima(pairs: tuple, labels: np.ndarray, start: int, remote: list, bounds: np.ndarray) -> tuple:
    """Per block, (rows, proposed labels): the lowest label of each row's component among these pairs."""
    i, j = pairs
    rows, inverse = np.unique(np.concatenate([i, j]), return_inverse=True)
    if rows.size == 0:
        return tuple(split_by_block(rows, bounds, rows))
    local = rows < start + labels.size   # rows of this block; the others are the j of later blocks
    current = np.empty(rows.size, dtype=np.int64)
    current[local] = labels[rows[local] - start]
    named = np.concatenate([rows_named for rows_named, _ in remote])
    current[~local] = np.concatenate([held for _, held in remote])[np.searchsorted(named, rows[~local])]
    graph = coo_matrix((np.ones(i.size, dtype=np.int8), (inverse[:i.size], inverse[i.size:])),
                       shape=(rows.size, rows.size))
    _, component = connected_components(graph, directed=False)
    lowest = np.full(component.max() + 1, NONE, dtype=np.int64)
    np.minimum.at(lowest, component, current)
    return tuple(split_by_block(rows, bounds, lowest[component]))


def _lowest_proposal(labels: np.ndarray, start: int, proposals: list) -> tuple[np.ndarray, int]:
    """The block's labels lowered to the proposals it received, and how many changed."""
    lowered = labels.copy()
    for rows, proposed in proposals:
        np.minimum.at(lowered, rows - start, proposed)
    return lowered, int(np.count_nonzero(lowered != labels))


def _votes(pairs: tuple, state: np.ndarray, start: int, bounds: np.ndarray) -> tuple:
    """Per block, (rows j, lowest representative i, lowest undecided i) over this block's pairs (i, j)."""
    i, j = pairs
    rows, inverse = np.unique(j, return_inverse=True)
    status = state[i - start]
    lowest_rep = np.full(rows.size, NONE, dtype=np.int64)
    lowest_undecided = np.full(rows.size, NONE, dtype=np.int64)
    is_rep, undecided = status == i, status == UNDECIDED
    np.minimum.at(lowest_rep, inverse[is_rep], i[is_rep])
    np.minimum.at(lowest_undecided, inverse[undecided], i[undecided])
    return tuple(split_by_block(rows, bounds, lowest_rep, lowest_undecided))


def _decide(state: np.ndarray, start: int, votes: list) -> tuple[np.ndarray, int]:
    """Undecided rows decided where they can be: joined to their lowest representative neighbour when
    no undecided neighbour lies below it, a representative when no earlier neighbour is either."""
    lowest_rep = np.full(state.size, NONE, dtype=np.int64)
    lowest_undecided = np.full(state.size, NONE, dtype=np.int64)
    for rows, rep, undecided in votes:
        np.minimum.at(lowest_rep, rows - start, rep)
        np.minimum.at(lowest_undecided, rows - start, undecided)
    decided = state.copy()
    open_rows = state == UNDECIDED
    joins = open_rows & (lowest_rep < lowest_undecided)
    decided[joins] = lowest_rep[joins]
    leads = open_rows & (lowest_rep == NONE) & (lowest_undecided == NONE)
    decided[leads] = start + np.flatnonzero(leads)
    return decided, int(np.count_nonzero(decided == UNDECIDED))
