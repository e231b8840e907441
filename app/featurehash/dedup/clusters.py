"""Near-duplicate clusters from the verified pairs of a similarity join, streamed in blocks through the cluster
kernels of featurehash.lsh.clusters."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..lsh.clusters import CLUSTER_MODES, greedy_representatives, roots, scatter_earlier, union_pairs
from ..maps.errors import InputError
from .join import DEFAULT_BLOCK_PAIRS, DEFAULT_CHUNK_ROWS, SimilarPairs, similarity_join


@dataclass(frozen=True)
class DuplicateClusters:
    """`labels` (n,) int64: the cluster of each row, numbered by their representatives' order;
    `representatives` (n_clusters,) int64: the row kept for each cluster (the lowest index of its
    members in both modes); `pairs`: the verified pairs the clusters were built from (with a
    memory_budget and no `output`, they went through a temporary file: only their count is kept, with
    `i`, `j`, `similarity` None)."""

    labels: np.ndarray
    representatives: np.ndarray
    mode: str
    pairs: SimilarPairs

    @property
    def n_clusters(self) -> int:
        return int(self.representatives.size)

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=self.n_clusters)


def duplicate_clusters(X, feature_map, threshold: float, *, mode: str = "components",
                       target_recall: float = 0.95, verify: str = "exact", memory_budget: float | None = None,
                       spill_dir=None, output=None, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                       block_pairs: int = DEFAULT_BLOCK_PAIRS, progress: bool = False) -> DuplicateClusters:
    """Group the rows of X into near-duplicate clusters (deterministic for a given map and X).

    The pairs are those of `similarity_join(X, feature_map, threshold, ...)` (kernel: GMM / pGMM for
    gcws, Laplacian for binning; candidates from LSH bands with the S-curve 1 - (1 - s^r)^L, Broder /
    "Mining of Massive Datasets" ch. 3; see there for the recall, the cost, the inputs, `memory_budget` and
    `output`). With a memory_budget and no output, the pairs are written to a temporary .npz in
    `tempfile.mkdtemp(dir=spill_dir)`; the clusters are built from the pairs streamed in blocks, so memory
    is O(n) (a few int64 per row) plus one block, never all pairs.

    mode="components": the connected components of the graph of verified pairs, by union-find over the
    streamed pairs (union by the lower root, with path compression: each root is its component's lowest
    row). Transitive: a chain of similar rows becomes one cluster even if its ends are not similar.
    Representative: the lowest row index.
    mode="representatives": no chaining. Rows are taken in index order; a row joins the earliest
    (lowest-index) representative it is similar to (a verified pair >= threshold), else it becomes a
    representative itself. Every member is then similar to its representative, and the representative
    is the lowest index of its cluster. Two passes over the pairs group each row's earlier neighbours
    (int64 per pair, in memory, or memory-mapped in the temporary directory with a budget), then one
    compiled pass. Clusters are numbered by their representatives' order; a row with no pair is its own
    cluster.
    """
    if mode not in CLUSTER_MODES:
        raise InputError("mode", "must be 'components' or 'representatives'")
    workdir = None
    try:
        if memory_budget is not None:
            workdir = Path(tempfile.mkdtemp(prefix="featurehash-clusters-", dir=spill_dir))
        pairs = similarity_join(X, feature_map, threshold, target_recall=target_recall, verify=verify,
                                memory_budget=memory_budget, spill_dir=spill_dir,
                                output=output if output is not None or workdir is None else workdir / "pairs.npz",
                                chunk_rows=chunk_rows, block_pairs=block_pairs, progress=progress)
        row_representative = row_representatives(pairs, pairs.shape[0], mode, block_pairs, workdir)
        if workdir is not None and output is None:
            pairs = dataclasses.replace(pairs, i=None, j=None, similarity=None, path=None)
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    representatives, labels = np.unique(row_representative, return_inverse=True)
    return DuplicateClusters(labels=labels.astype(np.int64).ravel(), representatives=representatives.astype(np.int64),
                             mode=mode, pairs=pairs)


def row_representatives(pairs, n: int, mode: str, block_pairs: int = DEFAULT_BLOCK_PAIRS,
                        workdir: Path | None = None) -> np.ndarray:
    """Each of n rows' representative (its cluster's lowest row) from verified pairs of row positions,
    `pairs.blocks(block_pairs)` giving (i, j, similarity) blocks: read once for mode="components"
    (union-find, n int64), twice for "representatives" (plus one int64 per pair, memory-mapped in
    `workdir` when given). Used by `duplicate_clusters` and by the engines that stream their pairs."""
    if mode == "components":
        parent = np.arange(n, dtype=np.int64)
        for i, j, _ in pairs.blocks(block_pairs):
            union_pairs(parent, np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64))
        return roots(parent)
    return _representatives(pairs, n, block_pairs, workdir)


def _representatives(pairs: SimilarPairs, n: int, block_pairs: int, workdir: Path | None) -> np.ndarray:
    counts = np.zeros(n, dtype=np.int64)
    for _, j, _ in pairs.blocks(block_pairs):
        counts += np.bincount(np.asarray(j, dtype=np.int64), minlength=n)
    starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    total = int(starts[-1])
    earlier = (np.empty(total, dtype=np.int64) if workdir is None or total == 0 else
               np.asarray(np.memmap(workdir / "earlier.i8", dtype=np.int64, mode="w+", shape=(total,))))
    cursor = starts[:-1].copy()
    for i, j, _ in pairs.blocks(block_pairs):
        scatter_earlier(cursor, earlier, np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64))
    return greedy_representatives(starts, earlier)
