"""Featurise an .npy file larger than memory: read it memory-mapped, write the output chunk by chunk.

The output .npy gets its header first (the shape is known from the input's), then each chunk's rows
as they are computed, into `<output>.partial`, renamed to `<output>` once complete (so a failure,
e.g. a NaN in row 10^7, never leaves a truncated file under the requested name). Memory is one chunk
of input and output plus the map: input pages already read are handed back to the kernel
(madvise(MADV_DONTNEED)), as a memory-mapped file's pages would otherwise count in the process's
resident memory until the end. A scipy .npz (sparse) input is loaded whole, then streamed the same way.
"""

from __future__ import annotations

import math
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..maps import FeatureMap, InputError, OneHotFeatures
from ..maps.errors import MALFORMED_FILE_ERRORS
from ..maps.sparse_structure import load_npz

# Input and output bytes of one chunk when --chunk-rows is not given.
DEFAULT_CHUNK_BYTES = 32 * 2**20


@dataclass(frozen=True)
class StreamResult:
    rows: int
    shape: tuple[int, int]
    dtype: str
    one_hot: OneHotFeatures | None  # the first chunk's (dim and scale), for one-hot transforms


def open_rows(path: str):
    """A memory-mapped 2-D .npy array, or a scipy sparse .npz matrix as CSR; InputError (naming the file)
    for a missing file and for anything else (text, pickled objects, a numpy .npz of arrays)."""
    if not os.path.isfile(path):
        raise InputError(path, "no such file" if not os.path.exists(path) else "not a file")
    with open(path, "rb") as file:
        magic = file.read(6)
    if not magic:
        raise InputError(path, "empty file")
    if path.endswith(".npz"):
        if not magic.startswith(b"PK"):
            raise InputError(path, "not an .npz file (not a zip archive); save a sparse matrix with "
                             "scipy.sparse.save_npz")
        return _open_sparse(path)
    if magic != b"\x93NUMPY":
        what = "a zip archive (.npz?)" if magic.startswith(b"PK") else "no NPY header: text such as CSV?"
        raise InputError(path, f"not an .npy file ({what}); save a 2-D numeric array with numpy.save")
    try:
        _check_data_size(path)
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except EOFError:
        raise InputError(path, "truncated .npy file (no data after the header)") from None
    except MALFORMED_FILE_ERRORS as exc:
        if isinstance(exc, ValueError) and "object" in str(exc).lower():
            raise InputError(path, "holds Python objects (dtype object), not numbers; save a numeric array "
                             "(e.g. X.astype(numpy.float32))") from None
        raise InputError(path, f"not a readable .npy array ({_one_line(exc)})") from None


def _one_line(exc: BaseException) -> str:
    """What is wrong, on one line: a garbled header's parser errors quote it, newlines included."""
    text = " ".join(str(exc).split())
    return text if isinstance(exc, ValueError) else f"{type(exc).__name__}: {text}"


def _check_data_size(path: str) -> None:
    """The header's shape and dtype against the bytes after it, in Python integers: numpy.load maps a
    file with bytes left over (and computes the size of huge shapes in int64, which wraps)."""
    with open(path, "rb") as file:
        version = np.lib.format.read_magic(file)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(file)
        data_start = file.tell()
    if any(size < 0 for size in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    needed, held = math.prod(shape) * dtype.itemsize, os.path.getsize(path) - data_start
    if not dtype.hasobject and needed != held:
        raise ValueError(f"the header's shape {shape} and dtype {dtype} need {needed} bytes of data, the file "
                         f"holds {held}: truncated, or not written by numpy.save")


def _open_sparse(path: str) -> sp.csr_matrix:
    try:
        return load_npz(path)   # checked whole before any chunk is sliced from it
    except OSError as exc:
        raise InputError(path, f"not a readable .npz file ({type(exc).__name__})") from None


def stream(feature_map: FeatureMap, input_path: str, output_path: str, *, codes: bool = False, dtype=None,
           chunk_rows: int | None = None, progress: bool | None = None) -> StreamResult:
    """Write `feature_map.transform` (or `.hash` with codes=True) of every row of the input file."""
    X = open_rows(input_path)
    feature_map.check(X[:1])  # dimension and dtype now, not after the header is written
    one_hot = codes or feature_map.one_hot
    width = feature_map.spec.n_components if one_hot else feature_map.output_dim
    out_dtype = np.dtype(np.int64 if one_hot else (dtype or np.float32))
    if chunk_rows is None:
        row_bytes = X.shape[1] * X.dtype.itemsize + width * out_dtype.itemsize
        chunk_rows = max(1, DEFAULT_CHUNK_BYTES // row_bytes)
    operation = feature_map.hash if codes else (lambda rows: feature_map.transform(rows, dtype=dtype))
    partial, first, release = Path(f"{output_path}.partial"), None, _PageRelease(X)
    from tqdm import tqdm

    try:
        with open(partial, "wb") as out, tqdm(total=X.shape[0], unit="rows", unit_scale=True,
                                              disable=None if progress is None else not progress) as bar:
            np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(out_dtype),
                                                       "fortran_order": False, "shape": (X.shape[0], width)})
            for start in range(0, X.shape[0], chunk_rows):
                # Checked first with the rows numbered in the file (a bad row is named as the user sees it;
                # the operation's own check of the checked rows is one more pass over them).
                result = operation(feature_map.check(X[start:start + chunk_rows], first_row=start))
                if isinstance(result, OneHotFeatures):
                    first = first or result
                    result = result.indices
                np.ascontiguousarray(result, dtype=out_dtype).tofile(out)
                release.up_to_row(start + chunk_rows)
                bar.update(result.shape[0])
        os.replace(partial, output_path)
    finally:
        partial.unlink(missing_ok=True)
    return StreamResult(rows=X.shape[0], shape=(X.shape[0], width), dtype=out_dtype.name, one_hot=first)


class _PageRelease:
    """Hands the pages of rows already read back to the kernel (C-ordered memory-mapped input only)."""

    def __init__(self, X):
        # numpy keeps the mapping of a memmap in `_mmap`; without it pages are simply kept (still correct).
        self._map = getattr(X, "_mmap", None)
        usable = (isinstance(X, np.memmap) and X.flags.c_contiguous and self._map is not None
                  and hasattr(mmap, "MADV_DONTNEED"))
        if not usable:
            self._map = None
            return
        # The mapping starts at the allocation boundary below the array's offset in the file.
        self._base = X.offset % mmap.ALLOCATIONGRANULARITY
        self._row_bytes = X.strides[0]
        self._released = 0

    def up_to_row(self, row: int) -> None:
        if self._map is None:
            return
        end = min(self._base + row * self._row_bytes, len(self._map)) // mmap.PAGESIZE * mmap.PAGESIZE
        if end > self._released:
            self._map.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
            self._released = end
