"""The row collections a join reads: an array, a sparse matrix, a file, or an iterable of row chunks.

`open_rows` turns each into one matrix with random row access (what exact verification needs):
- a dense ndarray or a scipy sparse matrix: used as given;
- an `.npy` path: memory-mapped (`numpy.load(mmap_mode="r")`), so it may be larger than memory;
- an `.npz` path: a `scipy.sparse.save_npz` matrix as CSR, memory-mapped when it was saved uncompressed
  (`compressed=False`: its members are stored as is in the zip, so their bytes are mapped in place), else
  loaded; or a numpy `.npz` holding exactly one 2-D array (loaded);
- any other iterable of row chunks (2-D arrays or sparse matrices, all with the same width): read once;
  when the rows are not needed afterwards (verify="codes"), its chunks are only passed on to be hashed.
  The chunks are kept in memory while their bytes stay under `keep_bytes` (then stacked); past it they
  are appended to files in `workdir` (dense rows to one raw array, sparse rows to the data / indices /
  indptr of a CSR matrix) and memory-mapped back, so memory stays one chunk whatever the collection's size.
Memory-mapped pages are read on demand and handed back by the kernel under pressure.
"""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..maps.errors import MALFORMED_FILE_ERRORS, InputError
from ..maps.sparse_structure import checked_csr, csr_of_parts, load_npz

_LOCAL_HEADER = struct.Struct("<4s5H3I2H")   # a zip member's local file header (APPNOTE 4.3.7)


def open_rows(X, field: str, *, keep_bytes: float = float("inf"), workdir=None, need_rows: bool = True):
    """X as a 2-D ndarray (maybe memory-mapped) or a CSR matrix (maybe over memory-mapped arrays); an
    iterable of chunks without `need_rows` as a generator of its canonical chunks (nothing kept).
    `workdir` (a callable returning a directory) is asked for only when an iterable must be spilled."""
    if isinstance(X, (str, os.PathLike)):
        return _open_path(os.fspath(X))
    if isinstance(X, np.ndarray) or sp.issparse(X):
        return X
    if hasattr(X, "__array__") or isinstance(X, (list, tuple)) and X and not _is_chunk(X[0]):
        return np.asarray(X)   # rows given as nested lists, or an array-like
    try:
        chunks = iter(X)
    except TypeError:
        raise InputError(field, f"expected an array, a sparse matrix, an .npy/.npz path or an iterable of row "
                                f"chunks, got {type(X).__name__}") from None
    if not need_rows:
        return _checked(chunks, field)
    return _gather(chunks, field, keep_bytes, workdir)


def n_rows(X) -> int:
    return int(X.shape[0])


def _is_chunk(item) -> bool:
    return sp.issparse(item) or (isinstance(item, np.ndarray) and item.ndim == 2)


def _open_path(path: str):
    if not os.path.isfile(path):
        raise InputError(path, "no such file" if not os.path.exists(path) else "not a file")
    if path.endswith(".npy"):
        try:
            X = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, *MALFORMED_FILE_ERRORS) as exc:
            raise InputError(path, f"not a readable .npy array ({type(exc).__name__}: {' '.join(str(exc).split())})") from None
        if X.ndim != 2:
            raise InputError(path, f"expected a 2-D array, got {X.ndim}-D")
        return X
    if path.endswith(".npz"):
        return _open_npz(path)
    raise InputError(path, "expected an .npy or .npz file")


def _open_npz(path: str):
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            stored = all(info.compress_type == zipfile.ZIP_STORED for info in archive.infolist())
        if "format.npy" in names:   # a scipy sparse matrix: checked whole before any row block is sliced
            if not stored or not {"data.npy", "indices.npy", "indptr.npy", "shape.npy"} <= names:
                return load_npz(path)
            with np.load(path, allow_pickle=False) as small:
                shape, kind = small["shape"], small["format"].item()
            kind = kind.decode() if isinstance(kind, bytes) else str(kind)   # scipy saves b"csr"
            if kind != "csr":
                return load_npz(path)
            data, indices, indptr = (mapped_member(path, f"{name}.npy") for name in ("data", "indices", "indptr"))
            return csr_of_parts("csr", shape, path, data=data, indices=indices, indptr=indptr)
        with np.load(path, allow_pickle=False) as arrays:
            if len(arrays.files) != 1:
                raise InputError(path, f"expected a scipy sparse matrix or one array, found {len(arrays.files)} "
                                       "arrays")
            X = arrays[arrays.files[0]]
    except InputError:
        raise
    except (OSError, *MALFORMED_FILE_ERRORS) as exc:
        raise InputError(path, f"not a readable .npz file ({type(exc).__name__}: {exc})") from None
    if X.ndim != 2:
        raise InputError(path, f"expected a 2-D array, got {X.ndim}-D")
    return X


def mapped_member(path: str, name: str) -> np.ndarray:
    """A stored (uncompressed) .npy member of a zip archive, memory-mapped where its bytes lie."""
    with zipfile.ZipFile(path) as archive:
        offset = archive.getinfo(name).header_offset
    with open(path, "rb") as file:
        file.seek(offset)
        header = _LOCAL_HEADER.unpack(file.read(_LOCAL_HEADER.size))
        file.seek(offset + _LOCAL_HEADER.size + header[-2] + header[-1])   # past the name and extra fields
        version = np.lib.format.read_magic(file)
        shape, fortran, dtype = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                 else np.lib.format.read_array_header_2_0)(file)
        start = file.tell()
    if fortran or dtype.hasobject:
        raise ValueError(f"{name}: not a C-ordered numeric array")
    if 0 in shape:
        return np.empty(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=start, shape=shape)


def _checked(chunks, field: str):
    first = None
    for chunk in chunks:
        chunk = _canonical(chunk, field, first)
        first = chunk if first is None else first
        yield chunk
    if first is None:
        raise InputError(field, "empty iterable: no row chunks")


def _gather(chunks, field: str, keep_bytes: float, workdir):
    kept, held, spill, first = [], 0, None, None
    for chunk in chunks:
        chunk = _canonical(chunk, field, first)
        first = chunk if first is None else first
        if spill is None:
            kept.append(chunk)
            held += chunk.data.nbytes + (chunk.indices.nbytes if sp.issparse(chunk) else 0)
            if held > keep_bytes:
                spill = _Spill(Path(workdir()) / f"{field}-rows", first)
                for piece in kept:
                    spill.add(piece)
                kept = []
        else:
            spill.add(chunk)
    if spill is not None:
        return spill.matrix()
    if not kept:
        raise InputError(field, "empty iterable: no row chunks")
    return sp.vstack(kept, format="csr") if sp.issparse(kept[0]) else np.concatenate(kept)


def _canonical(chunk, field: str, first):
    """A chunk as a C-ordered 2-D array or a canonical CSR matrix of the first chunk's kind, width and dtype."""
    if sp.issparse(chunk):
        chunk = checked_csr(chunk, field)   # sound before scipy's compiled code reads it
    else:
        chunk = np.asarray(chunk)
        if chunk.ndim != 2:
            raise InputError(field, f"row chunks must be 2-D, got {chunk.ndim}-D")
    if first is not None and chunk.shape[1] != first.shape[1]:
        raise InputError(field, f"row chunks of different widths ({first.shape[1]} and {chunk.shape[1]})")
    if first is not None and not sp.issparse(first):
        return np.ascontiguousarray(chunk.toarray() if sp.issparse(chunk) else chunk, dtype=first.dtype)
    if not sp.issparse(chunk):
        return np.ascontiguousarray(chunk) if first is None else sp.csr_matrix(chunk, dtype=first.dtype)
    chunk = chunk.astype(chunk.dtype if first is None else first.dtype, copy=False)
    if not chunk.has_canonical_format:   # summed in a copy: the caller's arrays stay as they are
        chunk = chunk.copy()
        chunk.sum_duplicates()
    return chunk


class _Spill:
    """Rows appended to raw files, memory-mapped back as one matrix once complete."""

    def __init__(self, stem: Path, first):
        self.stem, self.sparse, self.dtype = stem, sp.issparse(first), first.dtype
        self.width, self.rows, self.nnz = first.shape[1], 0, 0
        # int32 indices where the width allows: scipy then keeps the mapped array instead of converting it
        self.index_dtype = np.dtype(np.int32 if self.width < 2**31 else np.int64)
        self.indptr = [np.zeros(1, dtype=np.int64)]
        for suffix in ("data", "indices"):
            Path(f"{stem}.{suffix}").touch()

    def add(self, chunk) -> None:
        with open(f"{self.stem}.data", "ab") as file:
            np.ascontiguousarray(chunk.data if self.sparse else chunk, dtype=self.dtype).tofile(file)
        if self.sparse:
            with open(f"{self.stem}.indices", "ab") as file:
                chunk.indices.astype(self.index_dtype).tofile(file)
            self.indptr.append(chunk.indptr[1:].astype(np.int64) + self.nnz)
            self.nnz += chunk.nnz
        self.rows += chunk.shape[0]

    def matrix(self):
        if not self.sparse:
            return _mapped(f"{self.stem}.data", self.dtype, (self.rows, self.width))
        indptr = np.concatenate(self.indptr)
        data = _mapped(f"{self.stem}.data", self.dtype, (self.nnz,))
        indices = _mapped(f"{self.stem}.indices", self.index_dtype, (self.nnz,))
        return sp.csr_matrix((data, indices, indptr), shape=(self.rows, self.width), copy=False)


def _mapped(path: str, dtype, shape) -> np.ndarray:
    if 0 in shape:
        return np.empty(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=shape)
