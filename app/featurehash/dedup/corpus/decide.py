"""Which documents a corpus keeps: exact groups, near-duplicate clusters and the keep policy, over the documents'
small columns (position order, 128-bit hash, length, key, reference flag) and the verified near pairs. Pure numpy
on positions 0..n-1 in corpus order, so one machine and every engine decide the same from the same columns.

Clusters are the connected components of "same hash" and "verified near pair" (featurehash.lsh.clusters'
union-find). In each cluster the keep policy chooses one document: `first` (lowest position), `longest` /
`shortest` (text length in bytes), `max:<field>` / `min:<field>` (a numeric field; a document without it loses);
ties go to the lowest position. Incremental runs: reference documents (an already clean corpus) win over new
ones and are never removed; a new document in a cluster with one is removed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...lsh.clusters import roots, union_pairs
from ...maps.errors import InputError

POLICIES = ("first", "longest", "shortest", "max:<field>", "min:<field>")


def parse_keep(keep: str) -> tuple[str, str | None]:
    """('first' | 'longest' | 'shortest' | 'max' | 'min', the field or None)."""
    if keep in ("first", "longest", "shortest"):
        return keep, None
    kind, _, field = keep.partition(":")
    if kind in ("max", "min") and field:
        return kind, field
    raise InputError("keep", f"{keep!r}: expected one of {', '.join(POLICIES)}")


def exact_representatives(hashes: np.ndarray) -> np.ndarray:
    """Each position's first position with the same hash ((n, 2) uint64 in position order)."""
    n = hashes.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(n), hashes[:, 1], hashes[:, 0]))
    h = hashes[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = (h[1:] != h[:-1]).any(axis=1)
    group_first = order[np.flatnonzero(starts)]
    rep = np.empty(n, dtype=np.int64)
    rep[order] = np.repeat(group_first, np.diff(np.append(np.flatnonzero(starts), n)))
    return rep


@dataclass
class Decision:
    """`kept` (n,) bool over all documents (reference documents included); for each removed new document, by
    position: `removed`, its `cluster` (numbered 0.. by the clusters' first positions), `kept_of` (the position
    kept in its cluster), `exact` (whether its text hashes as the kept one's) and `similarity` (1.0 for exact,
    the verified pair's where the pair was verified, NaN where the caller must compute it)."""

    kept: np.ndarray
    removed: np.ndarray
    cluster: np.ndarray
    kept_of: np.ndarray
    exact: np.ndarray
    similarity: np.ndarray
    exact_duplicates: int
    near_duplicates: int


def decide(hashes, lengths, keys, reference, pairs_a, pairs_b, pair_similarity, keep: str,
           rep: np.ndarray | None = None) -> Decision:
    """The decision for n documents from their columns (position order) and the verified near pairs (positions
    of exact representatives, any order); `rep`: exact_representatives(hashes), when the caller has it."""
    kind, _ = parse_keep(keep)
    n = hashes.shape[0]
    rep = exact_representatives(hashes) if rep is None else rep
    position = np.arange(n, dtype=np.int64)
    parent = position.copy()
    union_pairs(parent, rep, position)
    pa, pb = np.asarray(pairs_a, dtype=np.int64), np.asarray(pairs_b, dtype=np.int64)
    both_reference = reference[pa] & reference[pb]   # a clean corpus is not re-judged
    union_pairs(parent, pa[~both_reference], pb[~both_reference])
    root = roots(parent)
    del parent
    score = {"first": np.zeros(n), "longest": -np.asarray(lengths, dtype=np.float64),
             "shortest": np.asarray(lengths, dtype=np.float64),
             "max": -np.nan_to_num(np.asarray(keys, dtype=np.float64), nan=-np.inf),
             "min": np.nan_to_num(np.asarray(keys, dtype=np.float64), nan=np.inf)}[kind]
    order = np.lexsort((position, score, ~reference, root))
    del score
    sorted_roots = root[order]
    first_of_root = np.ones(n, dtype=bool)
    first_of_root[1:] = sorted_roots[1:] != sorted_roots[:-1]
    del sorted_roots
    winner_sorted = np.where(first_of_root, position, 0)
    del first_of_root
    np.maximum.accumulate(winner_sorted, out=winner_sorted)
    winner = np.empty(n, dtype=np.int64)
    winner[order] = order[winner_sorted]
    del order, winner_sorted
    kept = (winner == position) | reference
    removed = np.flatnonzero(~kept)
    kept_of = winner[removed]
    exact = rep[removed] == rep[kept_of]
    similarity = np.where(exact, 1.0, _pair_lookup(n, pa, pb, np.asarray(pair_similarity, dtype=np.float64),
                                                   rep[removed], rep[kept_of]))
    cluster_roots = np.unique(root[removed])
    cluster = np.searchsorted(cluster_roots, root[removed]).astype(np.int64)
    removed_exact = int(np.count_nonzero(~reference)) - int(np.count_nonzero(~reference & (rep == position)))
    return Decision(kept=kept, removed=removed, cluster=cluster, kept_of=kept_of, exact=exact,
                    similarity=similarity, exact_duplicates=removed_exact,
                    near_duplicates=int(removed.size) - removed_exact)


def _pair_lookup(n: int, pa, pb, sims, x, y) -> np.ndarray:
    """The verified similarity of each (x, y), NaN where the pair was not verified."""
    out = np.full(x.size, np.nan)
    if pa.size == 0 or x.size == 0:
        return out
    keys = np.minimum(pa, pb) * n + np.maximum(pa, pb)
    order = np.argsort(keys, kind="stable")
    keys, sims = keys[order], sims[order]
    wanted = np.minimum(x, y) * n + np.maximum(x, y)
    at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    hit = keys[at] == wanted
    out[hit] = sims[at[hit]]
    return out
