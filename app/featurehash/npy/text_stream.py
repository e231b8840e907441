"""Featurise a text file chunk by chunk: JSON Lines (.jsonl) or plain text (.txt), one row per line.

- .jsonl: each line is a JSON string (a document), a list of strings (tokens) or an object {token: weight};
- .txt: each line is a document (its end-of-line removed; an empty line is an empty document).
The file is read twice: once to count its lines (the .npy header holds the shape), then a chunk of lines at a
time through the map (`chunk_rows`, default 4096). Dense features and codes go to an .npy file, written as
computed into `<output>.partial` and renamed once complete (npy.stream's rule); sparse features (the hashing
map) to a scipy CSR .npz, gathered in memory (O(nonzeros): an .npz is a zip, written at once). A bad line
(not UTF-8, not JSON, a value of another kind, a row the map refuses) is one InputError naming the file and
the line number (from 1). Memory: one chunk of text and output, plus the nonzeros of sparse output. The
reading and chunking are featurehash.maps.text.streams', which the near-duplicate join shares.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..maps import FeatureMap, InputError, OneHotFeatures
from ..maps.text.streams import (DEFAULT_CHUNK_LINES, count_lines, file_blocks, is_text_file, lines_named,
                                 text_chunks)
from .stream import StreamResult

__all__ = ["DEFAULT_CHUNK_LINES", "is_text_file", "stream_text", "text_chunks", "text_rows", "writes_sparse"]


def writes_sparse(feature_map: FeatureMap, codes: bool) -> bool:
    """Whether the output is a CSR .npz: the features of a map whose features are sparse (hashing)."""
    return not codes and feature_map.describe()["features"] == "sparse"


def text_rows(feature_map: FeatureMap, path: str, chunk_rows: int = DEFAULT_CHUNK_LINES):
    """The lines of a .jsonl / .txt file as the map's sparse input rows (CSR chunks of `chunk_rows` lines, hashed
    by the spec's text stage); InputError naming the file (and line) otherwise."""
    if feature_map.text_stage is None:
        raise InputError(path, "a text file needs a spec with a text stage (\"input\": {\"hashing\": {...}})")
    return file_blocks(feature_map.text_stage, path, chunk_rows)


def stream_text(feature_map: FeatureMap, input_path: str, output_path: str, *, codes: bool = False, dtype=None,
                chunk_rows: int | None = None, progress: bool | None = None) -> StreamResult:
    """Write `feature_map.transform` (or `.hash` with codes=True) of every line of the text file."""
    if feature_map.text_stage is None and not getattr(feature_map, "text_input", False):
        raise InputError(input_path, f"a '{feature_map.method}' spec reads vectors, not text: give it a front "
                                     "stage, input: {\"hashing\": {...}}, or use method 'hashing'")
    n = count_lines(input_path)
    sparse = writes_sparse(feature_map, codes)
    one_hot = codes or feature_map.one_hot
    width = feature_map.spec.n_components if one_hot else feature_map.output_dim
    out_dtype = np.dtype(np.int64 if one_hot else (dtype or np.float32))
    operation = feature_map.hash if codes else (lambda rows: feature_map.transform(rows, dtype=out_dtype))
    partial, first_one_hot, blocks = Path(f"{output_path}.partial"), None, []
    from tqdm import tqdm

    try:
        with open(partial, "wb") as out, tqdm(total=n, unit="lines", unit_scale=True,
                                              disable=None if progress is None else not progress) as bar:
            if not sparse:
                np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(out_dtype),
                                                           "fortran_order": False, "shape": (n, width)})
            for first, rows in text_chunks(input_path, chunk_rows or DEFAULT_CHUNK_LINES):
                try:
                    result = operation(rows)
                except InputError as exc:
                    raise lines_named(exc, input_path, first) from None
                if isinstance(result, OneHotFeatures):
                    first_one_hot = first_one_hot or result
                    result = result.indices
                if sparse:
                    blocks.append(result)
                else:
                    np.ascontiguousarray(result, dtype=out_dtype).tofile(out)
                bar.update(len(rows))
            if sparse:
                sp.save_npz(out, sp.csr_matrix(sp.vstack(blocks, format="csr")), compressed=False)
        os.replace(partial, output_path)
    finally:
        partial.unlink(missing_ok=True)
    return StreamResult(rows=n, shape=(n, width), dtype=out_dtype.name, one_hot=first_one_hot)
