"""A new batch checked against a featurehash LSH index in Redis (`--against-index NAME --redis-url URL`), the
index (opened by the caller: the command line opens it by name in Redis) standing for an already clean corpus
that is not on disk: every exact representative of the batch
with features queries the index (top 1 at the run's threshold); a hit is a verified pair to an item of the
index, which like a reference document wins its cluster and is never removed, so the batch keeps only what is
new to the index. What is compared is what the index ranks by: with stored vectors (`vectors` "sparse",
"float32", "float16") the map's exact similarity of the document's input row to the item's stored row; an
index without vectors ranks by the fraction of equal codes, an estimate (the summary says which). The
near stage uses the index's map, so a document and an item are hashed alike. A document with no features
(shorter than one shingle, an empty token list or vector) cannot be queried and is only checked within the
batch. `add_kept` adds the batch's kept documents with features to the index under their ids (an id the
index holds already is replaced, as `LSHIndex.add` does), so the next batch is checked against them too."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow.parquet as pq

from ...maps.errors import InputError
from .near import column_blocks
from .vector_near import payload_rows

QUERY_ROWS = 512   # rows a query sends: one pipelined round trip each, bounded work per Redis call


class IndexCheck:
    """One run's index (an opened `featurehash.store.LSHIndex`, or anything with its `feature_map`, `query`,
    `add` and `describe`; dedup imports no store): `check` before the keep decision, `add` after the write."""

    def __init__(self, index, add_kept: bool = False):
        described = index.describe()
        self.index, self.add_kept, self.name = index, add_kept, described.get("name", described.get("id"))
        self.feature_map = index.feature_map
        self.figures = {"name": self.name, "items_before": int(described["items"]), "index_threshold":
                        described["threshold"], "compared": "exact" if described["vectors"] != "none" else "codes"}

    def map_for(self, feature_map):
        """The index's map; InputError when the run was given another one (the codes would not compare)."""
        if feature_map is not None and feature_map.spec.id != self.feature_map.spec.id:
            raise InputError("spec", f"the index {self.name!r} hashes with {self.feature_map.spec.id}, not "
                                     f"{feature_map.spec.id}: leave --spec out to use the index's map")
        return self.feature_map

    def check(self, parts, column: str, representatives: np.ndarray, threshold: float):
        """(positions, item ids, similarities): each representative's most similar item at >= threshold."""
        where, items, similarity = [], [], []
        for positions, values in column_blocks(parts, column, representatives, QUERY_ROWS):
            rows, nonempty = payload_rows(self.feature_map, values)
            if not nonempty.any():
                continue
            found = self.index.query(rows[nonempty], top_k=1, min_similarity=threshold).results
            for position, result in zip(positions[nonempty].tolist(), found):
                if result:
                    where.append(position)
                    items.append(result[0][0])
                    similarity.append(result[0][1])
        self.figures["queried"] = int(representatives.size)
        return np.asarray(where, dtype=np.int64), items, np.asarray(similarity, dtype=np.float64)

    def add(self, parts, column: str, kept: np.ndarray) -> int:
        """Add the kept positions with features to the index under their ids; how many were added."""
        ids = pq.read_table(parts, columns=["id"])["id"]
        added = 0
        for positions, values in column_blocks(parts, column, kept, QUERY_ROWS):
            rows, nonempty = payload_rows(self.feature_map, values)
            if nonempty.any():
                chosen = positions[nonempty]
                self.index.add([str(i) for i in ids.take(chosen).to_pylist()], rows[nonempty])
                added += int(chosen.size)
        self.figures["added"] = added
        return added


def item_hashes(items: list[str]) -> np.ndarray:
    """(m, 2) uint64 for the index's items as documents of the decision: BLAKE2b-128 personalised apart from
    the texts' hashes, so an item never reads as an exact duplicate of a document."""
    joined = b"".join(hashlib.blake2b(i.encode("utf-8"), digest_size=16, person=b"fh-index-item").digest()
                      for i in items)
    return np.frombuffer(joined, dtype="<u8").reshape(-1, 2)
