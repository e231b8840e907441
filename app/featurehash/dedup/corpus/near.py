"""The near-duplicate stage over the read stage's parts: the exact representatives' normalised texts, streamed
part by part into the map's input rows (`normalise.document_rows`), joined by `featurehash.dedup.similarity_join`
(LSH bands, exact verification, spilling past the memory budget); and the exact similarity of given pairs of
documents (a removed document to the one kept in its cluster, where no verified pair holds it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp

from ...lsh.similarity import ExactPairs, similarity_of
from .. import output as pair_output
from ..join import similarity_join
from .normalise import document_rows
from .sets import document_columns, jaccard_pairs, set_join, takes_sets


def column_blocks(parts: list[Path], column: str, wanted: np.ndarray | None = None, batch_rows: int = 8192):
    """(positions, Arrow array) blocks of the parts' `column` in position order, only the positions in the
    sorted array `wanted` when given. A row group at a time: iter_batches over a file read ahead up to the
    whole column of a part (~0.6 GB of text a million documents), and a row group without a wanted position is
    not read."""
    base = 0
    for part in parts:
        file = pq.ParquetFile(part)
        for group in range(file.num_row_groups):
            group_rows = file.metadata.row_group(group).num_rows
            first, base = base, base + group_rows
            if wanted is not None:
                low, high = np.searchsorted(wanted, [first, base])
                if low == high:
                    continue
            values = file.read_row_group(group, columns=[column]).column(0)
            for start in range(0, group_rows, batch_rows):
                block = values.slice(start, batch_rows).combine_chunks()
                positions = np.arange(first + start, first + start + len(block))
                if wanted is not None:
                    at = np.searchsorted(wanted, positions)
                    keep = (at < wanted.size) & (wanted[np.minimum(at, wanted.size - 1)] == positions)
                    if not keep.any():
                        continue
                    positions, block = positions[keep], block.filter(keep)
                yield positions, block


def texts_of(parts: list[Path], wanted: np.ndarray | None = None, batch_rows: int = 8192, arrow: bool = False):
    """column_blocks of the normalised texts: a list of str, or with `arrow` the Arrow string array (the set
    path's shingling reads its UTF-8 buffer: building and encoding the strings again cost a fifth of the
    stage)."""
    for positions, texts in column_blocks(parts, "text", wanted, batch_rows):
        yield positions, texts if arrow else texts.to_pylist()


def near_pairs(parts, representatives: np.ndarray, feature_map, threshold: float, *, target_recall: float,
               memory_budget, workdir: Path, progress: bool):
    """(a, b, similarity, join figures): the verified pairs among the representatives, as positions."""
    if takes_sets(feature_map):
        output = workdir / "near-pairs.parquet"
        where, figures = set_join(texts_of(parts, representatives, arrow=True), feature_map, threshold,
                                  target_recall=target_recall, memory_budget=memory_budget, workdir=workdir,
                                  output=output, progress=progress)
        return (*_positions(output, where), figures)
    blocks = ((positions, *document_rows(feature_map, texts))
              for positions, texts in texts_of(parts, representatives))
    return join_blocks(blocks, feature_map, threshold, target_recall=target_recall, memory_budget=memory_budget,
                       workdir=workdir, progress=progress)


def join_blocks(blocks, feature_map, threshold: float, *, target_recall: float, memory_budget, workdir: Path,
                progress: bool):
    """(a, b, similarity, join figures) of the similarity join over `blocks` of (positions, rows, nonempty):
    the rows that are not empty go in, and the pairs come back as the positions they were given."""
    fed: list[np.ndarray] = []

    def rows():
        for positions, matrix, nonempty in blocks:
            if nonempty.any():
                fed.append(positions[nonempty])
                yield matrix[nonempty]

    chunks = rows()
    first = next(chunks, None)
    if first is None:
        return _none()

    def all_chunks():
        yield first
        yield from chunks

    output = workdir / "near-pairs.parquet"
    pairs = similarity_join(all_chunks(), feature_map, threshold, target_recall=target_recall,
                            memory_budget=memory_budget, spill_dir=workdir, output=output, progress=progress)
    where = np.concatenate(fed)
    figures = {"rows": int(where.size), "bands": pairs.bands, "rows_per_band": pairs.rows,
               "candidates": pairs.candidates, "pairs": len(pairs),
               "recall_at_threshold": pairs.recall_at_threshold}
    return (*_positions(output, where), figures)


def _positions(output: Path, where: np.ndarray):
    """(a, b, similarity) of the pair file of join rows, as positions; the file removed."""
    a, b, s = [], [], []
    if output.exists():
        for i, j, sim in pair_output.read_blocks(str(output), 1 << 20):
            a.append(where[i])
            b.append(where[j])
            s.append(sim)
        output.unlink()
    if not a:
        return _none()[:3]
    return np.concatenate(a), np.concatenate(b), np.concatenate(s)


def _none():
    empty = np.zeros(0, dtype=np.int64)
    return empty, empty, np.zeros(0), {"rows": 0, "candidates": 0, "pairs": 0}


def pair_similarities(parts, feature_map, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The exact similarity of each (x, y) pair of positions (the map's kernel on their input rows). The wanted
    documents' rows are made a batch of texts at a time, so their texts are never all held; a set map keeps
    only their shingle columns (4 bytes a shingle) and compares them as the near stage does."""
    if x.size == 0:
        return np.zeros(0)
    wanted = np.unique(np.concatenate([x, y]))
    if takes_sets(feature_map):
        positions, blocks = [], []
        for where, texts in texts_of(parts, wanted, arrow=True):
            positions.append(where)
            blocks.append(document_columns(feature_map, texts))
        at = np.concatenate(positions)
        sizes = np.concatenate([np.diff(offsets) for _, offsets in blocks])
        offsets = np.zeros(sizes.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        elements = np.concatenate([columns for columns, _ in blocks])
        del blocks
        # two empty sets: 1, as the general kernel's GMM(0, 0)
        return jaccard_pairs(elements, offsets, np.searchsorted(at, x), np.searchsorted(at, y))
    blocks = ((where, document_rows(feature_map, texts)[0]) for where, texts in texts_of(parts, wanted))
    return rows_pair_similarities(feature_map, blocks, x, y)


def rows_pair_similarities(feature_map, blocks, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """exact_similarities of the (x, y) pairs of positions, from `blocks` of (positions, CSR rows) that hold
    every position of x and y, each block's rows made as it comes."""
    positions, rows = [], []
    for where, block_rows in blocks:
        positions.append(where)
        rows.append(block_rows)
    at = np.concatenate(positions)
    matrix = rows[0] if len(rows) == 1 else sp.vstack(rows, format="csr")
    del rows
    return exact_similarities(feature_map, matrix, np.searchsorted(at, x), np.searchsorted(at, y))


def exact_similarities(feature_map, rows, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The map's exact similarity of each pair of rows (rows[i_t], rows[j_t]); 0 where the kernel is undefined
    (NaN)."""
    out = ExactPairs(similarity_of(feature_map), rows)(i, j)
    return np.where(np.isnan(out), 0.0, out)
