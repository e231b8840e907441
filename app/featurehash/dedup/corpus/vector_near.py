"""The near-duplicate stage of a vector or token corpus (`vectors`): the exact representatives' canonical
vectors or token lists, read back from the read stage's parts a block at a time, as the map's input rows
(`payload_rows`: CSR built from the Arrow lists, or the token lists through the map's text stage), joined by
`featurehash.dedup.similarity_join` (LSH bands, exact verification of every candidate by the map's kernel,
spilling past the memory budget), as the text corpus's general path joins its documents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from ...lsh.similarity import ExactPairs, similarity_of
from .near import column_blocks, join_blocks


def payload_rows(feature_map, values) -> tuple[sp.csr_matrix, np.ndarray]:
    """A block's rows as the map's join reads them (CSR float64) and a mask of the nonzero ones: token lists
    through the map's text stage; {indices, values} structs straight to CSR, no loop over rows."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_struct(values.type):
        indices, weights = values.field("indices"), values.field("values")
        indptr = np.asarray(indices.offsets, dtype=np.int64)
        indptr = indptr - indptr[0]
        rows = sp.csr_matrix((weights.flatten().to_numpy(zero_copy_only=False).astype(np.float64),
                              indices.flatten().to_numpy(zero_copy_only=False), indptr),
                             shape=(len(values), feature_map.spec.input_dim))
    else:
        rows = feature_map.text_stage.transform(values.to_pylist(), dtype=np.float64)
    return rows, np.diff(rows.indptr) > 0


def vector_near_pairs(parts, representatives: np.ndarray, feature_map, column: str, threshold: float, *,
                      target_recall: float, memory_budget, workdir: Path, progress: bool):
    """(a, b, similarity, join figures): the verified pairs among the representatives, as positions."""
    blocks = ((positions, *payload_rows(feature_map, values))
              for positions, values in column_blocks(parts, column, representatives))
    return join_blocks(blocks, feature_map, threshold, target_recall=target_recall, memory_budget=memory_budget,
                       workdir=workdir, progress=progress)


def vector_similarities(feature_map, rows_x: sp.csr_matrix, rows_y: sp.csr_matrix) -> np.ndarray:
    """The map's exact similarity of each pair of rows (x[k], y[k])."""
    if rows_x.shape[0] == 0:
        return np.zeros(0)
    n = rows_x.shape[0]
    out = ExactPairs(similarity_of(feature_map), sp.vstack([rows_x, rows_y]).tocsr())(np.arange(n),
                                                                                      np.arange(n, 2 * n))
    return np.where(np.isnan(out), 0.0, out)


def vector_pair_similarities(parts, feature_map, column: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The exact similarity of each (x, y) pair of positions."""
    if x.size == 0:
        return np.zeros(0)
    wanted = np.unique(np.concatenate([x, y]))
    blocks = list(column_blocks(parts, column, wanted))
    at = np.concatenate([p for p, _ in blocks])
    matrix = sp.vstack([payload_rows(feature_map, v)[0] for _, v in blocks]).tocsr()
    return vector_similarities(feature_map, matrix[np.searchsorted(at, x)], matrix[np.searchsorted(at, y)])
