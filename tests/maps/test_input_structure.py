"""Malformed and odd inputs, for every method of the registry: each ends in an InputError naming a field, or in
the result of a well-formed equivalent, never in a crash or another exception (issue 42).

Cases (hypothesis, derandomised, a bounded number per method): sparse matrices in every scipy format, well
formed (unsorted or repeated indices, CSC, COO, BSR, DIA, LIL, DOK) or with a corrupted structure (column
indices past the width or negative, a bad indptr, arrays of the wrong length or type), .npz files written by
scipy.sparse.save_npz and then corrupted, read by the CLI's reader (`featurehash.npy.stream`) and dedup's
(`featurehash.dedup.sources`), and dense arrays of every numeric type and odd strides, shapes and values. On
the old code a corrupted index crashed the process (a segfault or heap corruption) or returned features read
from beyond the arrays.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from featurehash.dedup.sources import open_rows as dedup_open_rows
from featurehash.maps import InputError, OneHotFeatures, create_map
from featurehash.maps.registry import IMPLEMENTATIONS
from featurehash.npy.stream import stream

D = 5
# Examples of each kind of case (hypothesis stops earlier for kinds with fewer distinct cases); files cost more.
EXAMPLES_PER_KIND = 3
EXAMPLES_PER_FILE_KIND = 2
FIT_SAMPLE = np.random.default_rng(42).random((12, D)).round(3).tolist()
SPECS = {method: {"method": method, "input_dim": D, "n_components": 8, "seed": 3} for method in IMPLEMENTATIONS}
SPECS["ssf"]["n_components"] = 12
SPECS["additive_chi2"]["n_components"] = 15
SPECS["nystroem"]["params"] = {"fit_sample": FIT_SAMPLE}
SPECS["hashing"]["input_dim"] = 1   # a text map: numbers are refused, whatever their layout


class Case(NamedTuple):
    kind: str
    given: object            # what the map is handed, or ("npz", matrix, member, damaged member) for a file
    reference: object        # a well-formed equivalent (C-ordered array or canonical CSR), or None: refused

    def __repr__(self) -> str:   # what hypothesis prints of a failing case
        return f"Case({self.kind!r}, given={self.given!r})"


# -- the cases ------------------------------------------------------------------------------------------------

VALUES = st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 3.0])


@st.composite
def values(draw) -> np.ndarray:
    n = draw(st.integers(1, 4))
    return np.array(draw(st.lists(st.lists(VALUES, min_size=D, max_size=D), min_size=n, max_size=n)))


def _raw_csr(data, indices, indptr, shape, cls=sp.csr_matrix):
    """A matrix holding exactly these arrays, as one made by scipy and then assigned to (nothing checked)."""
    X = cls((np.ones(1), np.zeros(1, np.int32), np.array([0, 1, *[1] * (shape[0 if cls is sp.csr_matrix else 1] - 1)],
                                                          np.int32)), shape=shape)
    X.data, X.indices, X.indptr = data, indices, indptr
    return X


COMPRESSED_DAMAGE = ["index past", "index negative", "index huge", "indptr decreasing", "indptr start", "indptr end",
                     "indptr length", "lengths", "float indices", "float indptr", "2-D data", "complex data",
                     "object data"]
COO_DAMAGE = ["row past", "col past", "col negative", "lengths", "float coordinates"]


def _corrupted_compressed(draw, dense: np.ndarray, cls, how: str) -> tuple[str, object]:
    X = cls(dense)
    data, indices, indptr = X.data.copy(), X.indices.copy(), X.indptr.copy()
    n_minor = dense.shape[1] if cls is sp.csr_matrix else dense.shape[0]
    if how.startswith("index") and not indices.size:
        how = "indptr length"
    if how.startswith("indptr decreasing") and indptr.size < 3:
        how = "indptr start"
    if how == "index past":
        indices[draw(st.integers(0, indices.size - 1))] = n_minor + draw(st.integers(0, 40))
    elif how == "index negative":
        indices[draw(st.integers(0, indices.size - 1))] = -draw(st.integers(1, 40))
    elif how == "index huge":
        indices = indices.astype(np.int64)
        indices[draw(st.integers(0, indices.size - 1))] = draw(st.sampled_from([2**31 - 1, 2**40, -2**62]))
    elif how == "indptr decreasing":
        at = draw(st.integers(1, indptr.size - 2))
        indptr[at] = indptr[at + 1] + draw(st.integers(1, 5))
    elif how == "indptr start":
        indptr[0] = draw(st.sampled_from([-1, 1, 7]))
    elif how == "indptr end":
        indptr[-1] += draw(st.sampled_from([-1, 1, 100]))   # scipy would drop the entries past a smaller end
    elif how == "indptr length":
        indptr = np.concatenate([indptr, indptr[-1:]]) if draw(st.booleans()) else indptr[:-1]
    elif how == "lengths":
        data = np.concatenate([data, [1.0]]) if draw(st.booleans()) or not data.size else data[:-1]
    elif how == "float indices":
        indices = indices.astype(np.float64) + 0.5
    elif how == "float indptr":
        indptr = indptr.astype(np.float64)
    elif how == "2-D data":
        data = data.reshape(1, -1)
    elif how == "complex data":
        data = data.astype(np.complex128)
    elif how == "object data":
        data = data.astype(object)
    return how, _raw_csr(data, indices, indptr, dense.shape, cls)


def _corrupted_coo(draw, dense: np.ndarray, how: str) -> tuple[str, object]:
    X = sp.coo_matrix(dense)
    row, col, data = X.row.copy(), X.col.copy(), X.data.copy()
    if not data.size:
        how = "lengths"
    if how == "row past":
        row[draw(st.integers(0, row.size - 1))] = dense.shape[0] + draw(st.integers(0, 9))
    elif how == "col past":
        col[draw(st.integers(0, col.size - 1))] = dense.shape[1] + draw(st.integers(0, 9))
    elif how == "col negative":
        col[draw(st.integers(0, col.size - 1))] = -1
    elif how == "lengths":
        data = np.concatenate([data, [1.0]])
    else:
        col = col.astype(np.float64)
    X = sp.coo_matrix((np.ones(1), (np.zeros(1, int), np.zeros(1, int))), shape=dense.shape)
    X.data = data
    X.coords = (row, col)
    return how, X


def _unsorted_with_duplicates(dense: np.ndarray) -> sp.csr_matrix:
    """The same matrix with each row's entries reversed and its first entry split in two halves."""
    indices, data, indptr = [], [], [0]
    for row in dense:
        columns = np.flatnonzero(row)[::-1]
        values = list(row[columns])
        columns = list(columns)
        if columns:
            columns.append(columns[0])
            values[0] /= 2
            values.append(values[0])
        indices += columns
        data += values
        indptr.append(len(indices))
    return sp.csr_matrix((np.array(data, float), np.array(indices, np.int32), np.array(indptr, np.int32)),
                         shape=dense.shape)


ODD_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
              ">f8", "<f8", ">i4", "longdouble"]


SPARSE_KINDS = ["csr", "csr array", "csc", "coo", "unsorted", "bsr", "dia", "lil", "dok", "int64 indices", "int data"]


@st.composite
def sparse_cases(draw, kind: str, how: str | None = None) -> Case:
    dense = draw(values())
    reference = sp.csr_matrix(dense)
    if kind in ("csr", "csc", "coo", "bsr", "dia", "lil", "dok"):
        return Case(kind, getattr(sp, f"{kind}_matrix")(dense), reference)
    if kind == "csr array":
        return Case(kind, sp.csr_array(dense), reference)
    if kind == "unsorted":
        return Case(kind, _unsorted_with_duplicates(dense), reference)
    if kind == "int64 indices":
        X = sp.csr_matrix(dense)
        return Case(kind, _raw_csr(X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64), X.shape), reference)
    if kind == "int data":
        return Case(kind, sp.csr_matrix(dense.astype(np.int16)), sp.csr_matrix(dense.astype(np.int16).astype(float)))
    if kind == "bad coo":
        how, X = _corrupted_coo(draw, dense, how)
    else:
        how, X = _corrupted_compressed(draw, dense, sp.csr_matrix if kind == "bad csr" else sp.csc_matrix, how)
    return Case(f"{kind}: {how}", X, None)


HUGE_KINDS = ["wide csr", "tall coo", "tall csr shape", "wide npz"]


def huge_case(which: str) -> Case:
    if which == "wide csr":   # a valid matrix of the wrong width (its indices need int64)
        X = sp.csr_matrix((np.ones(2), np.array([3, 2**40 - 1]), np.array([0, 2])), shape=(1, 2**40))
    elif which == "tall coo":   # valid coordinates, but a CSR of 2^40 rows (indptr alone: 8 TiB)
        X = sp.coo_matrix((np.ones(1), (np.array([2**40 - 1]), np.array([0]))), shape=(2**40, D))
    elif which == "tall csr shape":
        X = _raw_csr(np.ones(1), np.zeros(1, np.int64), np.array([0, 1]), (1, D))
        X._shape = (2**40, D)
    else:
        X = sp.csr_matrix((np.ones(1), np.array([2**40 - 1]), np.array([0, 1])), shape=(1, 2**40))
        return Case("npz wide", ("npz", X), None)
    return Case(f"huge: {which}", X, None)


def _save_corrupted(path, X, member: str | None, array) -> None:
    """save_npz(X), then one member replaced (as if the file were edited or damaged)."""
    sp.save_npz(path, X, compressed=False)
    if member is None:
        return
    with np.load(path, allow_pickle=False) as members:
        arrays = {name: members[name] for name in members.files}
    arrays[member] = array
    np.savez(path, **arrays)


NPZ_DAMAGE = ["intact", "index past", "index negative", "float indices", "wrong length", "shape", "data dtype",
              "pointer"]


@st.composite
def npz_cases(draw, kind: str, how: str) -> Case:
    dense = draw(values())
    reference = sp.csr_matrix(dense)
    X = getattr(sp, f"{kind}_matrix")(dense)
    members = {"csr": ("indices", "indptr"), "csc": ("indices", "indptr"), "coo": ("row", "col")}[kind]
    if how == "intact":
        return Case(f"npz {kind}", ("npz", X, None, None), reference)
    if how == "pointer" and kind == "coo":
        how = "index past"
    if how in ("index past", "index negative") and X.nnz == 0:
        how = "wrong length"
    member, array = members[0], getattr(X, members[0]).copy()
    if how == "index past":
        array[draw(st.integers(0, array.size - 1))] = max(dense.shape) + draw(st.integers(0, 2**20))
    elif how == "index negative":
        array[draw(st.integers(0, array.size - 1))] = -draw(st.integers(1, 2**20))
    elif how == "float indices":
        array = array.astype(np.float64) + 0.25
    elif how == "wrong length":
        array = np.concatenate([array, array[:1], [0]])
    elif how == "shape":
        shape = draw(st.sampled_from([[2**40, D], [dense.shape[0] + 1, D], [-1, D], [dense.shape[0], D, 1]]))
        if shape[0] == dense.shape[0] + 1 and kind != "csr":   # still well formed: one more (empty) row
            taller = sp.csr_matrix(np.vstack([dense, np.zeros((1, D))]))
            return Case(f"npz {kind}: taller", ("npz", X, "shape", np.array(shape)), taller)
        member, array = "shape", np.array(shape)
    elif how == "data dtype":
        member, array = "data", X.data.astype(draw(st.sampled_from([np.complex128, "U3"])))
    else:   # pointer: indptr decreasing or not ending at nnz
        member, array = "indptr", X.indptr.copy()
        array[-1] += 1
    return Case(f"npz {kind}: {how}", ("npz", X, member, array), None)


DENSE_KINDS = ["strided", "fortran", "broadcast", "nan", "inf", "complex", "object", "object numbers", "0-d", "1-d",
               "3-d", "empty rows", "no columns", "strings"]


@st.composite
def dense_cases(draw, kind: str, dtype: str | None = None) -> Case:
    dense = draw(values())
    if kind == "dtype":
        dtype = np.dtype(dtype)
        given = dense.astype(dtype)
        reference = given.astype(np.float32 if dtype == np.float32 else np.float64)
        return Case(f"dense {dtype.str}", given, reference)
    if kind == "strided":
        wide = np.zeros((dense.shape[0] * 2, D * 3))
        wide[::2, ::3] = dense
        return Case(kind, wide[::2, ::3], dense)
    if kind == "fortran":
        return Case(kind, np.asfortranarray(dense), dense)
    if kind == "broadcast":   # zero strides: one row seen n times
        return Case(kind, np.broadcast_to(dense[:1], (3, D)), np.repeat(dense[:1], 3, axis=0))
    if kind in ("nan", "inf"):
        given = dense.copy()
        given[draw(st.integers(0, dense.shape[0] - 1)), draw(st.integers(0, D - 1))] = np.nan if kind == "nan" else -np.inf
        return Case(kind, given, None)
    if kind == "complex":
        return Case(kind, dense.astype(np.complex64), None)
    if kind == "object":
        return Case(kind, np.array([[{}] * D], dtype=object), None)
    if kind == "object numbers":
        return Case(kind, dense.astype(object), None)
    if kind == "0-d":
        return Case(kind, np.float64(2.0), None)
    if kind == "1-d":
        return Case(kind, dense[0], None)
    if kind == "3-d":
        return Case(kind, dense[None], None)
    if kind == "empty rows":
        return Case(kind, np.empty((0, D)), None)
    if kind == "no columns":
        return Case(kind, np.empty((2, 0)), None)
    return Case(kind, dense.astype(str), None)


# Every kind of case, each with its details (values, positions, sizes) drawn by hypothesis.
FAMILIES = {
    "sparse": [sparse_cases(kind) for kind in SPARSE_KINDS],
    "damaged sparse": ([sparse_cases("bad csr", how) for how in COMPRESSED_DAMAGE]
                       + [sparse_cases("bad csc", how) for how in COMPRESSED_DAMAGE]
                       + [sparse_cases("bad coo", how) for how in COO_DAMAGE]),
    "npz": [npz_cases(kind, how) for kind in ("csr", "csc", "coo") for how in NPZ_DAMAGE],
    "dense": [dense_cases("dtype", dtype) for dtype in ODD_DTYPES] + [dense_cases(kind) for kind in DENSE_KINDS],
    "huge": [st.builds(huge_case, st.just(which)) for which in HUGE_KINDS],
}


# -- running a case -------------------------------------------------------------------------------------------

def _operations(feature_map):
    ops = [("transform", lambda X: _comparable(feature_map.transform(X, dtype=np.float64))),
           ("exact_kernel", feature_map.exact_kernel)]
    if feature_map.has_hash:
        ops.append(("hash", feature_map.hash))
    return ops


def _comparable(result):
    if isinstance(result, OneHotFeatures):
        return result.indices
    return result.toarray() if sp.issparse(result) else result


def _outcome(call, X):
    """The result, or the InputError (any other exception fails the test)."""
    try:
        return call(X)
    except InputError as error:
        assert error.field and error.message, error
        return error


def _same(result, expected, what: str) -> None:
    assert not isinstance(result, InputError) or isinstance(expected, InputError), (
        f"{what}: refused ({result}) while its well-formed equivalent is not")
    if isinstance(expected, InputError):
        assert isinstance(result, InputError), f"{what}: accepted while its well-formed equivalent is refused"
        return
    np.testing.assert_allclose(result, expected, rtol=1e-9, atol=1e-12, err_msg=what)


def _check_map_case(feature_map, case: Case) -> None:
    for name, call in _operations(feature_map):
        result = _outcome(call, case.given)
        what = f"{feature_map.method} {name} of {case.kind}"
        if case.reference is None:
            assert isinstance(result, InputError), f"{what}: accepted a malformed input"
        else:
            _same(result, _outcome(call, case.reference), what)


def _check_npz_case(feature_maps, case: Case, directory) -> None:
    """The CLI's path, stream(map, file) (`featurehash transform` / `hash`), for every map; dedup's reader."""
    _, X, member, array = (*case.given, None, None)[:4]
    source, target = directory / "rows.npz", directory / "out.npy"
    try:
        _save_corrupted(source, X, member, array)
    except (ValueError, OverflowError):   # numpy refuses to write this member: no file to read
        return
    for feature_map in feature_maps:
        result = _outcome(lambda path, m=feature_map: _streamed(m, path, target), str(source))
        what = f"{feature_map.method} stream of {case.kind}"
        if case.reference is None:
            assert isinstance(result, InputError), f"{what}: accepted a malformed file"
        else:
            expected = _outcome(feature_map.hash if feature_map.has_hash else
                                (lambda R, m=feature_map: _comparable(m.transform(R))), case.reference)
            _same(result, expected, what)
    rows = _outcome(lambda path: dedup_open_rows(path, "x"), str(source))
    if case.reference is not None:
        np.testing.assert_array_equal(rows.toarray(), case.reference.toarray())
    elif not isinstance(rows, InputError):   # a matrix it could read: every map's check refuses it
        for feature_map in feature_maps:
            assert isinstance(_outcome(feature_map.check, rows), InputError), f"dedup reader: {case.kind}"


def _streamed(feature_map, path: str, target):
    """What `featurehash transform` (features) or `featurehash hash` (codes, for maps with them) writes."""
    stream(feature_map, path, str(target), codes=feature_map.has_hash, progress=False)
    return np.load(target)


@pytest.fixture(scope="module")
def feature_maps():
    return [create_map(spec) for spec in SPECS.values()]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_malformed_and_odd_inputs_are_refused_or_answered_right(family, feature_maps, tmp_path):
    """Every case of the family, for every method (`transform`, `exact_kernel`, `hash`; files: `stream`)."""
    seen = Counter()

    def check(case: Case) -> None:
        seen[case.kind] += 1
        if isinstance(case.given, tuple):
            _check_npz_case(feature_maps, case, tmp_path)
        else:
            for feature_map in feature_maps:
                _check_map_case(feature_map, case)

    for cases in FAMILIES[family]:
        before = sum(seen.values())
        examples = EXAMPLES_PER_FILE_KIND if family == "npz" else EXAMPLES_PER_KIND
        settings(derandomize=True, max_examples=examples, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))(given(case=cases)(check))()
        assert sum(seen.values()) > before, cases
    print(f"\n{family}: {sum(seen.values())} cases of {len(seen)} kinds, each for the {len(feature_maps)} methods "
          f"({', '.join(m.method for m in feature_maps)})")
