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

from .near import column_blocks, join_blocks, rows_pair_similarities


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


def vector_pair_similarities(parts, feature_map, column: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The exact similarity of each (x, y) pair of positions."""
    if x.size == 0:
        return np.zeros(0)
    wanted = np.unique(np.concatenate([x, y]))
    blocks = ((where, payload_rows(feature_map, values)[0])
              for where, values in column_blocks(parts, column, wanted))
    return rows_pair_similarities(feature_map, blocks, x, y)
