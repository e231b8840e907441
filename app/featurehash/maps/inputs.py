"""Validation of the vectors handed to a map: one place, one set of messages.

Dense inputs stay dense and keep float32/float64 (other numeric types become float64);
sparse inputs (any scipy format) become CSR with sorted indices, touching only their nonzeros, once their
structure is proven sound (`sparse_structure.checked_csr`: no compiled kernel reads unchecked indices).
A spec's `fit_sample` (rows of data a fit reads) is a list of lists or a numpy array (`SampleRows`).
"""

from __future__ import annotations

import math
from typing import Annotated, NamedTuple

import numba as nb
import numpy as np
import scipy.sparse as sp
from pydantic import Field, WrapValidator
from pydantic_core import PydanticCustomError

from .errors import InputError
from .sparse_structure import checked_csr

FLOAT_TYPES = (np.float32, np.float64)
_NATIVE_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _float_dtype(dtype: np.dtype) -> np.dtype:
    """float32 or float64 in native byte order (compiled kernels read native numbers only)."""
    return np.dtype(dtype.type) if dtype.type in FLOAT_TYPES else np.dtype(np.float64)


def check_input(X, input_dim: int, *, field: str = "vectors", zero_rows_refused: str | None = None,
                first_row: int = 0):
    """Return X as a 2-D float ndarray or a canonical CSR matrix, or raise InputError naming the rows at fault
    (numbered from `first_row`); with `zero_rows_refused` (why), an all-zero row is refused too."""
    if sp.issparse(X):
        X = _check_sparse(X, input_dim, field, first_row)
        if zero_rows_refused is not None:
            reject_zero_rows(X, field, zero_rows_refused, first_row)
        return X
    try:
        X = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise InputError(field, f"not a numeric array ({exc})") from None
    if X.dtype.kind not in "fiub":
        raise InputError(field, f"expected numbers, got dtype {X.dtype}")
    if X.ndim != 2:
        hint = "wrap a single vector as [vector]" if X.ndim < 2 else f"reshape it to (n, {input_dim})"
        raise InputError(field, f"expected a 2-D array (n, {input_dim}), got {X.ndim}-D; {hint}")
    _check_shape(X.shape, input_dim, field)
    if X.dtype not in _NATIVE_FLOATS:
        X = X.astype(_float_dtype(X.dtype))
    if X.flags.c_contiguous:   # one compiled pass, which also counts the all-zero rows when they are refused
        nonfinite, zero = (_nonfinite_and_zero_rows(X) if zero_rows_refused is not None
                           else (_has_nonfinite(X), 0))
    else:   # a finite sum proves every entry finite (an overflowing one is told apart by the full check)
        with np.errstate(over="ignore", invalid="ignore"):   # the sum's overflow is no news to the caller
            nonfinite = not math.isfinite(X.sum()) and not np.isfinite(X).all()
        zero = -1 if zero_rows_refused is not None else 0   # not counted yet
    if nonfinite:
        raise InputError(field, _nonfinite_message(X, first_row))
    if zero:
        reject_zero_rows(X, field, zero_rows_refused, first_row)
    return X


def _rows_shown(rows: np.ndarray, first_row: int) -> str:
    return ", ".join(str(first_row + int(i)) for i in rows[:10]) + (" ..." if rows.size > 10 else "")


def _nonfinite_message(X, first_row: int) -> str:
    """Which rows hold a NaN or an infinity, and the first such entry (looked for only after the fast check
    found one: the usual batch pays nothing for it)."""
    if sp.issparse(X):
        positions = np.flatnonzero(~np.isfinite(X.data))
        rows = np.unique(np.searchsorted(X.indptr, positions, side="right") - 1)
        row, column, value = rows[0], X.indices[positions[0]], X.data[positions[0]]
    else:
        bad = ~np.isfinite(X)
        rows = np.flatnonzero(bad.any(axis=1))
        row = rows[0]
        column = int(np.argmax(bad[row]))
        value = X[row, column]
    return (f"contains NaN or infinity at row(s) {_rows_shown(rows, first_row)} (row {first_row + int(row)}, "
            f"column {int(column)}: {float(value)})")


# A finite x has x - x == 0; NaN and infinities give NaN. Written without branches, so the loops
# vectorise: for C-ordered rows both passes are faster than numpy's X.sum() at every size, and a compiled
# call costs less than numpy's reduction cache-cold (docs/benchmarks.md, "Compiled passes and threads").
@nb.njit(nogil=True, cache=True)
def _has_nonfinite(X):
    """Whether the C-ordered X holds a NaN or an infinity."""
    flat = X.reshape(-1)
    bad = False
    for i in range(flat.size):
        bad |= (flat[i] - flat[i]) != 0
    return bad


@nb.njit(nogil=True, cache=True)
def _nonfinite_and_zero_rows(X):
    """(whether X holds a NaN or an infinity, how many rows are all zero), in one pass over the C-ordered X."""
    bad = False
    zero = 0
    for i in range(X.shape[0]):
        nonzero = False
        for j in range(X.shape[1]):
            bad |= (X[i, j] - X[i, j]) != 0
            nonzero |= X[i, j] != 0
        zero += 0 if nonzero else 1
    return bad, zero


@nb.njit(nogil=True, cache=True, fastmath={"reassoc"})
def largest_row_l1(X):
    """(the largest row l1 norm of the C-ordered X in float64, how many rows are all zero), in one pass: inf
    when an entry is NaN or infinite (or a norm overflows). The short paths' one check (`DenseFeatureMap.
    _short_features`): with the map's frequency bound it proves that nothing can overflow. Each row's sum is
    reassociated so it vectorises: its last bits may follow the SIMD width, and they only choose between two
    paths that give the same features."""
    largest = 0.0
    finite = True
    zero = 0
    for i in range(X.shape[0]):
        total = 0.0
        for j in range(X.shape[1]):
            total += abs(np.float64(X[i, j]))
        finite &= total < np.inf
        zero += 1 if total == 0.0 else 0
        largest = max(largest, total)
    return (largest if finite else np.inf), zero


def _check_sparse(X, input_dim: int, field: str, first_row: int = 0) -> sp.csr_matrix:
    if X.ndim != 2:
        raise InputError(field, "expected a 2-D sparse matrix")
    _check_shape(X.shape, input_dim, field)
    X = checked_csr(X, field, first_row=first_row)   # before anything compiled reads its indices
    X = X.astype(_float_dtype(X.dtype), copy=False)
    if not np.isfinite(X.data).all():
        raise InputError(field, _nonfinite_message(X, first_row))
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()  # also sorts the indices of each row
    return X


def _check_shape(shape: tuple[int, ...], input_dim: int, field: str) -> None:
    n, d = shape
    if n == 0:
        raise InputError(field, "empty batch: send at least one vector")
    if d != input_dim:
        raise InputError(field, f"wrong dimension: vectors have {d} entries, the map expects {input_dim}")


def unit_rows(X):
    """Rows scaled to unit l2 norm, in float64, without overflow or underflow.

    Each row is first divided by its largest magnitude, so squaring cannot leave the
    float64 range whatever the scale of the data. Rows must be nonzero. O(nnz) for CSR.
    """
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
        peaks = abs(X).max(axis=1).toarray().ravel()
        scaled = sp.diags(1.0 / peaks) @ X
        norms = np.sqrt(np.asarray(scaled.multiply(scaled).sum(axis=1)).ravel())
        return sp.diags(1.0 / norms) @ scaled
    X = np.asarray(X, dtype=np.float64)
    scaled = X / np.abs(X).max(axis=1, keepdims=True)
    return scaled / np.sqrt(np.einsum("ij,ij->i", scaled, scaled))[:, None]


class CSRParts(NamedTuple):
    """The arrays of a CSR matrix (what the compiled row kernels read) and its shape."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]


_INT32_MAX = int(np.iinfo(np.int32).max)   # np.iinfo builds an object on each call (~1 us)


def csr_parts(X) -> CSRParts:
    """X's CSR arrays: a sparse X's own, or for a dense X exactly those `sp.csr_matrix(X)` holds (its
    nonzeros in row-major order, int32 indices while they fit), made by one compiled pass: scipy's
    constructor takes ~30 us and numpy's nonzero, count and gather ~10 us, longer than hashing a vector."""
    if sp.issparse(X):
        return CSRParts(X.indptr, X.indices, X.data, X.shape)
    indptr, indices, data = _dense_csr(X)
    if max(indices.size, *X.shape) <= _INT32_MAX:
        indptr, indices = indptr.astype(np.int32), indices.astype(np.int32)
    return CSRParts(indptr, indices, data, X.shape)


@nb.njit(nogil=True, cache=True)
def _dense_csr(X):
    """(indptr, indices, data) of a dense X's nonzeros in row-major order (int64 indices)."""
    rows, columns = X.shape
    indptr = np.zeros(rows + 1, dtype=np.int64)
    for i in range(rows):
        count = 0
        for j in range(columns):
            if X[i, j] != 0:
                count += 1
        indptr[i + 1] = indptr[i] + count
    indices = np.empty(indptr[rows], dtype=np.int64)
    data = np.empty(indptr[rows], dtype=X.dtype)
    at = 0
    for i in range(rows):
        for j in range(columns):
            if X[i, j] != 0:
                indices[at] = j
                data[at] = X[i, j]
                at += 1
    return indptr, indices, data


def float32_copy(X: np.ndarray) -> np.ndarray | None:
    """A dense float64 X rounded to float32, or None when an entry leaves the float32 range: one compiled
    pass (numpy's cast under errstate plus its finiteness check took ~3.5 us for one vector)."""
    out = np.empty(X.shape, dtype=np.float32)
    return None if _rounded_into(X, out) else out


@nb.njit(nogil=True, cache=True)
def _rounded_into(X, out):
    """out = X rounded to out's precision; how many entries became infinite (X is finite)."""
    overflowed = 0
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            out[i, j] = X[i, j]
            overflowed += 1 if np.isinf(out[i, j]) else 0
    return overflowed


def zero_rows(X) -> np.ndarray:
    """A boolean per row: True where the row has no nonzero entry."""
    if sp.issparse(X):
        X = X.tocsr()
        return _sparse_zero_rows(X.indptr, X.data)
    return _dense_zero_rows(X)


@nb.njit(nogil=True, cache=True)
def _sparse_zero_rows(indptr, data):
    """A CSR row's scan stops at its first nonzero entry (explicit zeros are not nonzeros); one pass, no
    temporary (numpy's repeat and bincount took ~9 µs for one row of 50 entries)."""
    flags = np.ones(indptr.size - 1, dtype=np.bool_)
    for i in range(indptr.size - 1):
        for p in range(indptr[i], indptr[i + 1]):
            if data[p] != 0:
                flags[i] = False
                break
    return flags


@nb.njit(nogil=True, cache=True)
def _dense_zero_rows(X):
    """A row's scan stops at its first nonzero (count_nonzero(X, axis=1) reads every entry into a
    temporary: 9 ms at 100000 x 64, measured)."""
    flags = np.ones(X.shape[0], dtype=np.bool_)
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            if X[i, j] != 0:
                flags[i] = False
                break
    return flags


def reject_zero_rows(X, field: str, why: str, first_row: int = 0) -> None:
    """Raise InputError naming the all-zero rows (if any), numbered from `first_row`."""
    flags = zero_rows(X)
    if not flags.any():   # the usual case, without flatnonzero's ~3 us for one vector
        return
    raise InputError(field, f"all-zero vector at row(s) {_rows_shown(np.flatnonzero(flags), first_row)}: {why}")


def reject_negative(X, field: str, what: str) -> None:
    """Raise InputError if X (dense or CSR) has a negative entry (scikit-learn's wording)."""
    values = X.data if sp.issparse(X) else X
    if values.size and values.min() < 0:
        raise InputError(field, f"Negative values in data passed to {what}: the chi-squared kernels are "
                         "defined on nonnegative entries (histograms)")


def to_dense(X) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else X


_OUTPUT_DTYPES = {None: np.dtype(np.float32), np.float32: np.dtype(np.float32), np.float64: np.dtype(np.float64),
                  np.dtype(np.float32): np.dtype(np.float32), np.dtype(np.float64): np.dtype(np.float64),
                  "float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}


def output_dtype(dtype) -> np.dtype:
    """float32 unless float64 is asked for: features are computed in that type."""
    try:   # the usual values by one look-up: np.dtype(None) and its check took ~0.8 us of a single row's 5
        known = _OUTPUT_DTYPES.get(dtype)
    except TypeError:   # unhashable: np.dtype decides
        known = None
    if known is not None:
        return known
    dtype = np.dtype(np.float32 if dtype is None else dtype)
    if dtype.type not in FLOAT_TYPES:
        raise InputError("dtype", f"features come as float32 or float64, not {dtype}")
    return dtype


FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


def SampleRows(*, min_rows: int | None = None, max_rows: int | None = None):
    """The type of a spec's `fit_sample`: rows of the user's data, a list of lists of finite numbers (as JSON
    brings them) or a numpy array (the library and scikit-learn's `fit`), at least `min_rows` and at most
    `max_rows` of them. A list is validated number by number as it always was; an array whole (2-D, a
    numeric dtype, finite) and kept as a read-only float64 C-ordered copy, without the round trip through
    Python lists (a 2,000 x 64 sample: ~15 ms of validation, dumps and conversions per fit).

    The spec's canonical JSON (hence its id) is the same for both: an array's bool, integer, float16 and
    float32 entries become the float64 numbers pydantic makes of them in a list (exactly, or rounded to
    nearest like Python's float() for integers past 2^53), and orjson writes a float64 array's numbers
    as it writes Python floats (tests/maps/test_sample_rows.py checks edge values and random bit patterns).
    A params model holding one is dumped by `spec.params_document`; `sample_array` reads either form.
    Complex arrays are refused; arrays of other types or classes (object, strings, longdouble, subclasses)
    take the list path."""
    def validate(value, handler):
        if type(value) is np.ndarray and value.dtype.kind == "c":   # the list path would drop imaginary parts
            raise PydanticCustomError("rows", "rows of real numbers, got dtype {dtype}", {"dtype": str(value.dtype)})
        if type(value) is not np.ndarray or value.dtype.kind not in "fiub" or value.dtype.itemsize > 8:
            return handler(value)
        return _sample_array_rows(value, min_rows, max_rows)

    return Annotated[list[list[FiniteFloat]], Field(min_length=min_rows, max_length=max_rows),
                     WrapValidator(validate)]


def _sample_array_rows(value: np.ndarray, min_rows: int | None, max_rows: int | None) -> np.ndarray:
    if value.ndim != 2:
        raise PydanticCustomError("rows", "rows of data: a 2-D array (rows, input_dim), got {ndim}-D",
                                  {"ndim": value.ndim})
    if min_rows is not None and value.shape[0] < min_rows:
        raise PydanticCustomError("too_short", "at least {min_rows} rows, got {rows}",
                                  {"min_rows": min_rows, "rows": value.shape[0]})
    if max_rows is not None and value.shape[0] > max_rows:
        raise PydanticCustomError("too_long", "at most {max_rows} rows, got {rows}",
                                  {"max_rows": max_rows, "rows": value.shape[0]})
    rows = np.array(value, dtype=np.float64, order="C")   # a copy: the caller's array may change later
    if not np.isfinite(rows).all():
        row, column = np.argwhere(~np.isfinite(rows))[0]
        raise PydanticCustomError("finite_number", "Input should be a finite number (row {row}, column {column}: "
                                  "{value})", {"row": int(row), "column": int(column), "value": float(rows[row, column])})
    rows.flags.writeable = False   # the spec holds it, and computes its id from it when asked
    return rows


def sample_array(rows) -> np.ndarray:
    """A validated fit_sample (list of lists or array, `SampleRows`) as a float64 array (raises ValueError
    for ragged lists)."""
    return rows if isinstance(rows, np.ndarray) else np.asarray(rows, dtype=np.float64)


def rows_of_width(rows, width: int) -> bool:
    """Whether a validated fit_sample holds at least one row and every row has `width` entries."""
    if isinstance(rows, np.ndarray):
        return rows.shape[0] > 0 and rows.shape[1] == width
    return len(rows) > 0 and all(len(row) == width for row in rows)
