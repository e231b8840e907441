"""Near-duplicate clusters on Ray Data: the verified pairs of `join.py` (hashed, joined and verified on
the cluster, materialised in the object store), streamed to the driver in blocks into the in-process
union-find (or greedy representatives) of `featurehash.dedup.clusters`.

What the driver holds is what `featurehash.dedup.duplicate_clusters` holds in process: the n row ids
(sorted, to number the rows in id order) and n int64 labels, plus one block of pairs at a time; with
mode="representatives" also one int64 per pair (each row's earlier neighbours), as in process. Never all
pairs at once for mode="components". The alternative, label propagation in rounds of Ray Data joins (as
`featurehash.spark.clusters` runs it in Spark), costs four hash joins per round and about log2 of the
longest path rounds; streaming costs one pass over the pairs, and the pairs are far fewer than the
rows' band keys the join already shuffled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

try:
    import pyarrow as pa
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("featurehash.ray needs pyarrow: pip install 'featurehash[ray]'") from exc

from ..dedup.clusters import row_representatives
from ..dedup.join import DEFAULT_BLOCK_PAIRS
from ..maps import InputError
from .join import similarity_join


@dataclass(frozen=True)
class RayDuplicateClusters:
    """`labels`: Dataset (id, label), label the lowest id of the row's cluster (its representative:
    `c.representatives[c.labels]` of the in-process `featurehash.dedup.duplicate_clusters` when the ids
    are the row positions); `representatives`: Dataset (id) of the representative rows; `pairs`: the
    verified pairs (i, j, similarity), materialised; `n_clusters`."""

    labels: object
    representatives: object
    mode: str
    pairs: object
    n_clusters: int


def duplicate_clusters(ds, spec, threshold: float, *, mode: str = "components", column: str = "features",
                       id_col: str = "id", target_recall: float = 0.95, verify: str = "exact",
                       partitions: int = 8, block_pairs: int = DEFAULT_BLOCK_PAIRS) -> RayDuplicateClusters:
    """Clusters of near-duplicate rows of the Ray Dataset `ds`, equal to the in-process
    `featurehash.dedup.duplicate_clusters` on the same rows: the pairs of
    `featurehash.ray.similarity_join(ds, spec, threshold, ...)`, then mode="components" (connected
    components: union-find by the lower root) or "representatives" (rows in id order join their lowest
    earlier neighbour that is a representative, else are one), each row labelled by its representative's
    id (the lowest id of its cluster). `block_pairs`: pairs per block streamed to the driver.
    """
    if mode not in ("components", "representatives"):
        raise InputError("mode", "must be 'components' or 'representatives'")
    pairs = similarity_join(ds, spec, threshold, column=column, id_col=id_col, target_recall=target_recall,
                            verify=verify, partitions=partitions).materialize()
    ids = _ids(ds, id_col)
    representative = ids[row_representatives(_Positions(pairs, ids), ids.size, mode, block_pairs)]
    labels = pa.table({"id": pa.array(ids, pa.int64()), "label": pa.array(representative, pa.int64())})
    kept = ids[representative == ids]
    import ray.data

    return RayDuplicateClusters(labels=ray.data.from_arrow(labels),
                                representatives=ray.data.from_arrow(pa.table({"id": pa.array(kept, pa.int64())})),
                                mode=mode, pairs=pairs, n_clusters=int(kept.size))


def _ids(ds, id_col: str) -> np.ndarray:
    """The rows' ids, sorted: row r of the in-process collection is the r-th lowest id."""
    parts = [np.asarray(batch[id_col], dtype=np.int64)
             for batch in ds.select_columns([id_col]).iter_batches(batch_format="numpy", batch_size=None)]
    ids = np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
    if ids.size > 1 and (ids[1:] == ids[:-1]).any():
        raise InputError("id_col", f"ids must be unique: {int(ids[1:][ids[1:] == ids[:-1]][0])} repeats")
    return ids


class _Positions:
    """The materialised pairs as blocks of row positions (ranks of their ids), read as `SimilarPairs.blocks`."""

    def __init__(self, pairs, ids: np.ndarray):
        self.pairs, self.ids = pairs, ids

    def blocks(self, block_pairs: int):
        for batch in self.pairs.iter_batches(batch_format="numpy", batch_size=block_pairs):
            yield (np.searchsorted(self.ids, batch["i"]), np.searchsorted(self.ids, batch["j"]),
                   batch["similarity"])
