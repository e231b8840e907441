"""The structure of a user's sparse matrix, proven sound before any compiled code reads it.

scipy's constructors, `load_npz` and attribute assignment check little of a matrix's structure (the CSR
constructor tests lengths, not index values or the order of indptr), and its conversions (`tocsr`,
`sum_duplicates`, row slicing) and this package's kernels index memory with those numbers: a column index past
the row's width made `transform` read or write outside the arrays. `checked_csr` is the one check, used by
every map's `check` (`inputs.check_input`) and by the readers of .npz files and row chunks (`npy.stream`,
`dedup.sources`), before any of them converts or slices the matrix.

Invariant of its result (a `scipy.sparse.csr_matrix`): `indptr` has n_rows + 1 entries, starts at 0, never
decreases and ends at nnz; `indices` and `data` are 1-D, C-contiguous and nnz long; every index lies in
[0, n_cols); indices are native int32 or int64; data is numeric (bool, integers, float32 or float64, native
order). Values are not checked for finiteness and rows may hold unsorted or repeated indices (the map's
check does both). The check is O(nnz + n_rows) reductions and copies nothing that was already sound.
"""

from __future__ import annotations

import operator

import numpy as np
import scipy.sparse as sp

from .errors import MALFORMED_FILE_ERRORS, InputError

_INDEX_TYPES = frozenset((np.dtype(np.int32), np.dtype(np.int64)))
_UNSIGNED = {np.dtype(np.int32): np.dtype(np.uint32), np.dtype(np.int64): np.dtype(np.uint64)}
# Data types scipy's compiled routines take as they are; others (float16, longdouble, byte-swapped) are cast.
_DATA_TYPES = frozenset(np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                          np.int64, np.uint64, np.float32, np.float64))
# Rows a CSC, COO or other matrix may have to be converted to CSR (scipy's int32 index range: 16 GiB of row
# pointers at this size).
MAX_CONVERTED_ROWS = 2**31 - 1
# Read by scipy's conversion from formats other than CSR, CSC and COO (numpy code, given any attributes).
_CONVERSION_ERRORS = (ValueError, TypeError, IndexError, OverflowError, AttributeError)


def checked_csr(X, field: str, *, first_row: int = 0) -> sp.csr_matrix:
    """The sparse matrix X (any scipy format, matrix or array) as a CSR matrix of sound structure (see the
    module's invariant), or InputError naming `field` and the row (numbered from `first_row`) and column at
    fault. CSC and COO are checked in their own layout, then converted; other formats through COO."""
    if X.ndim != 2:
        raise InputError(field, f"expected a 2-D sparse matrix, got {X.ndim}-D")
    kind = X.format
    if kind != "csr":
        _check_convertible(int(X.shape[0]), field)
    if kind not in ("csr", "csc", "coo"):
        try:
            X, kind = X.tocoo(), "coo"
        except _CONVERSION_ERRORS as exc:
            raise InputError(field, f"not a readable {kind} matrix ({type(exc).__name__}: {exc})") from None
    if kind == "coo":
        return csr_of_parts("coo", X.shape, field, first_row=first_row, data=X.data, row=X.row, col=X.col)
    return csr_of_parts(kind, X.shape, field, first_row=first_row, data=X.data, indices=X.indices,
                        indptr=X.indptr, given=X)


def csr_of_parts(kind: str, shape, field: str, *, first_row: int = 0, given=None, **parts) -> sp.csr_matrix:
    """`checked_csr` of a matrix given by its arrays: `kind` "csr" or "csc" with data, indices and indptr, or
    "coo" with data, row and col; `shape` (rows, columns). `given`, a matrix holding these very arrays, is
    reused when they need no conversion (no copy, and none of its cached facts, such as sorted indices, which
    assignments to its arrays leave stale)."""
    n_rows, n_cols = _shape(shape, field)
    data = _data(parts["data"], field)
    if kind == "coo":
        row, col = (_index_array(parts[name], f"{name} indices", field) for name in ("row", "col"))
        _check_lengths(field, data=data, row=row, col=col)
        _check_coordinates(row, col, (n_rows, n_cols), field, first_row)
        return _converted(lambda: sp.csr_matrix((data, (row, col)), shape=(n_rows, n_cols)), n_rows, field)
    indptr, indices = _index_array(parts["indptr"], "indptr", field), _index_array(parts["indices"], "indices", field)
    _check_lengths(field, data=data, indices=indices)
    by_row = kind == "csr"
    n_major, n_minor = (n_rows, n_cols) if by_row else (n_cols, n_rows)
    _check_compressed(indptr, indices, n_major, n_minor, field, first_row, by_row=by_row)
    indptr, indices = _native_indices(indptr, indices)
    if not by_row:
        return _converted(lambda: sp.csc_matrix((data, indices, indptr), shape=(n_rows, n_cols), copy=False).tocsr(),
                          n_rows, field)
    if given is not None and indptr is given.indptr and indices is given.indices and data is given.data:
        return sp.csr_matrix(given)   # the tuple constructor would narrow int64 indices that fit in int32: a copy
    return sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_cols), copy=False)


def _shape(shape, field: str) -> tuple[int, int]:
    try:
        n_rows, n_cols = (operator.index(size) for size in shape)
    except (TypeError, ValueError):
        raise InputError(field, f"a malformed sparse matrix: shape {shape!r} is not two integers") from None
    if n_rows < 0 or n_cols < 0:
        raise InputError(field, f"a malformed sparse matrix: negative shape {(n_rows, n_cols)}")
    return n_rows, n_cols


def _array(values) -> np.ndarray:
    """values as an ndarray: the same object when it is one (a memory map stays one)."""
    return values if isinstance(values, np.ndarray) else np.asarray(values)


def _contiguous(values: np.ndarray) -> np.ndarray:
    return values if values.flags.c_contiguous else np.ascontiguousarray(values)


def _data(values, field: str) -> np.ndarray:
    values = _array(values)
    if values.ndim != 1:
        raise InputError(field, f"a sparse matrix's data must be 1-D, got {values.ndim}-D")
    if values.dtype.kind not in "fiub":
        raise InputError(field, f"expected numbers, got dtype {values.dtype}")
    if values.dtype not in _DATA_TYPES:
        values = values.astype(np.float64)   # as a dense array of these types becomes (inputs.check_input)
    return _contiguous(values)


def _index_array(values, name: str, field: str) -> np.ndarray:
    values = _array(values)
    if values.ndim != 1:
        raise InputError(field, f"a sparse matrix's {name} must be 1-D, got {values.ndim}-D")
    if values.dtype.kind not in "iu":
        raise InputError(field, f"a sparse matrix's {name} must be integers, got dtype {values.dtype}")
    return values


def _check_lengths(field: str, **arrays: np.ndarray) -> None:
    (first, reference), *others = arrays.items()
    for name, values in others:
        if values.size != reference.size:
            raise InputError(field, f"a malformed sparse matrix: {name} has {values.size} entries, {first} "
                                    f"{reference.size} (they must be as long)")


def _past(values: np.ndarray, bound: int) -> bool:
    """Whether an integer array holds a value outside [0, bound), by one reduction and no copy."""
    if values.size == 0:
        return False
    if values.dtype.kind == "i":   # as unsigned numbers of the same width, negative values are the largest
        unsigned = _UNSIGNED.get(values.dtype)
        values = values.view(values.dtype.str.replace("i", "u") if unsigned is None else unsigned)
    return int(values.max()) >= bound


def _check_compressed(indptr, indices, n_major: int, n_minor: int, field: str, first_row: int, *, by_row: bool):
    """CSR (by_row) or CSC arrays: indptr's length, ends and order, and every index in [0, n_minor)."""
    major = "row" if by_row else "column"
    if indptr.size != n_major + 1:
        raise InputError(field, f"a malformed sparse matrix: indptr has {indptr.size} entries, its {n_major} "
                                f"{major}s need {n_major + 1}")
    start, end = int(indptr[0]), int(indptr[-1])
    if start != 0 or end != indices.size:
        raise InputError(field, f"a malformed sparse matrix: indptr runs from {start} to {end}, it must run from 0 "
                                f"to the {indices.size} stored entries")
    decreasing = indptr[1:] < indptr[:-1] if n_major > 1 else None   # one row: proven by its two ends
    if decreasing is not None and decreasing.any():
        at = int(np.argmax(decreasing))
        name = f"row {first_row + at}" if by_row else f"column {at}"
        raise InputError(field, f"a malformed sparse matrix: indptr decreases at {name} (indptr[{at}] = "
                                f"{int(indptr[at])} > indptr[{at + 1}] = {int(indptr[at + 1])})")
    if not _past(indices, n_minor):
        return
    position = int(np.argmax((indices < 0) | (indices >= n_minor)))
    owner = int(np.searchsorted(indptr, position, side="right")) - 1
    index = int(indices[position])
    if by_row:
        where = f"row {first_row + owner}: column index {index} lies outside [0, {n_minor})"
    else:
        where = f"column {owner}: row index {index} lies outside [0, {n_minor})"
    raise InputError(field, f"{where}: a malformed sparse matrix")


def _check_coordinates(row, col, shape: tuple[int, int], field: str, first_row: int) -> None:
    if not (_past(row, shape[0]) or _past(col, shape[1])):
        return
    at = int(np.argmax((row < 0) | (row >= shape[0]) | (col < 0) | (col >= shape[1])))
    raise InputError(field, f"entry {at} (row {first_row + int(row[at])}, column {int(col[at])}) lies outside the "
                            f"shape {shape}: a malformed sparse matrix")


def _native_indices(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int32 or int64 in native order, C-contiguous (checked values fit: they are below a dimension)."""
    def native(values):
        return _contiguous(values) if values.dtype in _INDEX_TYPES else np.ascontiguousarray(values, dtype=np.int64)
    return native(indptr), native(indices)


def _check_convertible(n_rows: int, field: str) -> None:
    """A conversion to CSR allocates n_rows + 1 row pointers: past MAX_CONVERTED_ROWS the matrix is refused
    rather than risk memory the machine may promise (overcommit) and not have (CSR is taken as it is)."""
    if n_rows > MAX_CONVERTED_ROWS:
        raise InputError(field, f"{n_rows} rows: over {MAX_CONVERTED_ROWS} rows are read as a CSR matrix only "
                                "(converting this one would allocate its row pointers, 8 bytes a row)")


def _converted(convert, n_rows: int, field: str) -> sp.csr_matrix:
    """CSR from checked CSC or COO arrays (`convert`), within `_check_convertible`'s bound."""
    _check_convertible(n_rows, field)
    try:
        return convert()
    except MemoryError:
        raise InputError(field, f"{n_rows} rows: their CSR form does not fit in memory") from None


def load_npz(path: str) -> sp.csr_matrix:
    """The matrix a `scipy.sparse.save_npz` file holds, as `checked_csr` (errors name `path`). Its members are
    checked as stored, before scipy builds anything from them: scipy's `load_npz` casts float indices to
    integers and its conversions read unchecked indices. BSR and DIA files are read by scipy, then checked."""
    try:
        with np.load(path, allow_pickle=False) as members:
            if "format" not in members.files:
                raise InputError(path, "holds no scipy sparse matrix (a numpy archive of arrays?); save one with "
                                       "scipy.sparse.save_npz, or a dense array with numpy.save as .npy")
            kind = members["format"].item()
            kind = kind.decode("ascii") if isinstance(kind, bytes) else str(kind)
            if kind in ("csr", "csc"):
                return csr_of_parts(kind, members["shape"], path, data=members["data"], indices=members["indices"],
                                    indptr=members["indptr"])
            if kind == "coo":
                row, col = members["coords"] if "coords" in members.files else (members["row"], members["col"])
                return csr_of_parts(kind, members["shape"], path, data=members["data"], row=row, col=col)
        return checked_csr(sp.load_npz(path), path)
    except InputError:
        raise
    except MALFORMED_FILE_ERRORS as exc:
        raise InputError(path, f"not a readable sparse .npz file ({type(exc).__name__}: {exc})") from None
