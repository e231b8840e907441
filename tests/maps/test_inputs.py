"""Bad inputs are refused with an InputError that names the field and says what is wrong;
odd but valid inputs (ints, bools, sparse with unsorted or duplicate indices) are accepted."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash.maps import InputError, create_map
from featurehash.maps.inputs import check_input, csr_parts, float32_copy, zero_rows

D_IN = 5
SPECS = {
    "rff": {"method": "rff", "input_dim": D_IN, "n_components": 16, "seed": 1},
    "rff-phase": {"method": "rff", "input_dim": D_IN, "n_components": 15, "seed": 1, "params": {"variant": "phase"}},
    "nrff": {"method": "nrff", "input_dim": D_IN, "n_components": 16, "seed": 1},
    "gcws": {"method": "gcws", "input_dim": D_IN, "n_components": 16, "seed": 1, "params": {"bits": 4}},
}


@pytest.fixture(params=list(SPECS), scope="module")
def feature_map(request):
    return create_map(SPECS[request.param])


def operations(m):
    """Every entry point that takes vectors."""
    ops = [("transform", m.transform), ("kernel", lambda X: m.kernel(X)), ("exact_kernel", lambda X: m.exact_kernel(X))]
    if m.spec.method == "gcws":
        ops.append(("hash", m.hash))
    return ops


def features(m, X):
    out = m.transform(X, dtype=np.float64)
    return out.indices if m.spec.method == "gcws" else out


BAD_INPUTS = {
    "wrong-dimension": (np.ones((2, D_IN + 1)), "dimension"),
    "too-narrow": (np.ones((2, D_IN - 1)), "dimension"),
    "nan": (np.array([[1.0, np.nan, 0, 0, 1]]), "NaN"),
    "inf": (np.array([[1.0, 2, -np.inf, 0, 1]]), "inf"),
    "nan-second-row": (np.vstack([np.ones(D_IN), np.full(D_IN, np.nan)]), "NaN"),
    "empty-batch": (np.empty((0, D_IN)), "empty"),
    "empty-list": ([], None),
    "1-D": (np.ones(D_IN), "2-D"),
    "3-D": (np.ones((2, 1, D_IN)), "2-D"),
    "scalar": (3.0, "2-D"),
    "strings": (np.array([["a"] * D_IN]), "numbers"),
    "numeric-strings": ([["1", "2", "3", "4", "5"]], "numbers"),
    "mixed-objects": ([[1, "x", 2, 3, 4]], None),
    "ragged": ([[1, 2, 3, 4, 5], [1, 2]], None),
    "none": (None, None),
    "dict": ({"a": 1}, None),
    "complex": (np.ones((1, D_IN), dtype=complex), "numbers"),
    "sparse-wrong-dimension": (sp.csr_matrix(np.ones((2, D_IN + 1))), "dimension"),
    "sparse-nan": (sp.csr_matrix(np.array([[1.0, np.nan, 0, 0, 1]])), "NaN"),
    "sparse-empty": (sp.csr_matrix((0, D_IN)), "empty"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_raises_input_error(feature_map, name):
    X, words = BAD_INPUTS[name]
    for operation, call in operations(feature_map):
        with pytest.raises(InputError) as info:
            call(X)
        error = info.value
        assert error.field in ("vectors", "x"), (operation, error.field)
        assert isinstance(error, ValueError)
        assert len(error.message) > 10
        if words is not None:
            assert words.lower() in error.message.lower(), (operation, error.message)


def test_wrong_dimension_message_gives_both_sizes(feature_map):
    with pytest.raises(InputError) as info:
        feature_map.transform(np.ones((1, 9)))
    assert "9" in info.value.message and str(D_IN) in info.value.message


def test_exact_kernel_names_x_and_y(feature_map):
    good = np.ones((2, D_IN))
    with pytest.raises(InputError) as info:
        feature_map.exact_kernel(np.ones((2, 3)), good)
    assert info.value.field == "x"
    with pytest.raises(InputError) as info:
        feature_map.exact_kernel(good, np.ones((2, 3)))
    assert info.value.field == "y"


def test_kernel_with_bad_y_is_an_input_error(feature_map):
    with pytest.raises(InputError):
        feature_map.kernel(np.ones((2, D_IN)), np.ones((2, 3)))


def test_unsupported_output_dtype_is_refused():
    m = create_map(SPECS["rff"])
    for dtype in (np.int32, np.float16, np.complex128):
        with pytest.raises(InputError) as info:
            m.transform(np.ones((1, D_IN)), dtype=dtype)
        assert info.value.field == "dtype"


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, bool, np.float16, np.float32])
def test_integer_and_other_numeric_inputs_are_accepted(feature_map, dtype):
    values = np.array([[1, 0, 3, 2, 1], [0, 1, 1, 0, 2]])
    X = values.astype(dtype)
    reference = features(feature_map, X.astype(np.float64))  # for bool: the 0/1 values
    np.testing.assert_allclose(features(feature_map, X), reference, rtol=1e-6, atol=1e-6)
    # Plain Python lists work too.
    np.testing.assert_allclose(features(feature_map, X.tolist()), reference, rtol=1e-12, atol=1e-12)
    if dtype != np.float16:  # scipy.sparse has no float16
        np.testing.assert_allclose(features(feature_map, sp.csr_matrix(X)), reference, rtol=1e-6, atol=1e-6)


def test_default_output_is_float32_and_float64_on_request():
    for name in ("rff", "nrff"):
        m = create_map(SPECS[name])
        for X in (np.ones((2, D_IN), dtype=np.float64), np.ones((2, D_IN), dtype=np.int64), sp.csr_matrix(np.ones((2, D_IN)))):
            assert m.transform(X).dtype == np.float32
            assert m.transform(X, dtype=np.float64).dtype == np.float64


@pytest.mark.parametrize("X", [
    np.zeros((1, D_IN)),
    np.array([[1.0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 2, 0, 0]]),
    sp.csr_matrix(np.array([[1.0, 0, 0, 0, 0], [0, 0, 0, 0, 0]])),
    sp.csr_matrix((np.array([0.0, 0.0]), np.array([1, 3]), np.array([0, 2])), shape=(1, D_IN)),  # stored zeros
], ids=["dense-single", "dense-middle-row", "sparse", "sparse-stored-zeros"])
def test_gcws_all_zero_row_is_refused(X):
    m = create_map(SPECS["gcws"])
    for call, field in ((m.hash, "vectors"), (m.transform, "vectors"), (m.kernel, "x")):
        with pytest.raises(InputError) as info:
            call(X)
        assert info.value.field == field
        assert "zero" in info.value.message
    expected_row = 0 if X.shape[0] == 1 else 1
    assert f"row(s) {expected_row}" in info.value.message


def unsorted_sparse_with_duplicates():
    """Rows with unsorted column indices and repeated (row, column) entries, and the dense equivalent."""
    data = np.array([0.5, 2.0, -1.0, 0.25, 3.0, 1.5, -0.5, -0.5, 4.0])
    indices = np.array([3, 0, 3, 1, 4, 2, 2, 0, 1])
    indptr = np.array([0, 4, 6, 9])
    X = sp.csr_matrix((data, indices, indptr), shape=(3, D_IN))
    dense = np.zeros((3, D_IN))
    for row in range(3):
        for p in range(indptr[row], indptr[row + 1]):
            dense[row, indices[p]] += data[p]  # duplicates add up (scipy's convention)
    return X, dense


def test_sparse_with_unsorted_indices_and_duplicates(feature_map):
    X, dense = unsorted_sparse_with_duplicates()
    assert not X.has_sorted_indices
    before = (X.data.copy(), X.indices.copy(), X.indptr.copy())
    got = features(feature_map, X)
    expected = features(feature_map, dense)
    if feature_map.spec.method == "gcws":
        assert np.array_equal(got, expected)
        assert np.array_equal(feature_map.hash(X), feature_map.hash(dense))
        assert np.array_equal(feature_map.hash(X), feature_map.hash(sp.csr_matrix(dense)))
    else:
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(feature_map.exact_kernel(X), feature_map.exact_kernel(dense), rtol=1e-12)
    # The caller's matrix is left as it was.
    for a, b in zip(before, (X.data, X.indices, X.indptr)):
        assert np.array_equal(a, b)


def test_sparse_duplicates_that_cancel_make_a_zero_row():
    """1 + (-1) at the same position is a zero entry: GCWS must see an all-zero row."""
    X = sp.csr_matrix((np.array([1.0, -1.0]), np.array([2, 2]), np.array([0, 2])), shape=(1, D_IN))
    with pytest.raises(InputError):
        create_map(SPECS["gcws"]).hash(X)
    with pytest.raises(InputError):
        create_map(SPECS["nrff"]).transform(X)


@pytest.mark.parametrize("index_type, value_type", [(np.int32, np.float64), (np.int64, np.float32)])
def test_zero_rows_of_sparse_rows_count_stored_zeros_as_zeros(index_type, value_type):
    """An empty row and a row of stored zeros are all-zero; a nonzero anywhere in a row makes it not, in CSR and in
    other layouts (converted), for the index and value types the compiled scan takes."""
    values = np.array([0.0, 1.0, 0.0, 0.0, 2.0], dtype=value_type)
    X = sp.csr_matrix((values, np.array([0, 1, 2, 3, 0], dtype=index_type), np.array([0, 1, 2, 2, 4, 5], dtype=index_type)),
                      shape=(5, 5))
    expected = [True, False, True, True, False]
    assert zero_rows(X).tolist() == expected
    assert zero_rows(X.tocoo()).tolist() == expected
    assert zero_rows(X.toarray()).tolist() == expected


def test_gcws_accepts_negative_entries():
    m = create_map(SPECS["gcws"])
    X = np.array([[-1.0, 0, 0, 0, 0], [1.0, 0, 0, 0, 0]])
    codes = m.hash(X)
    assert codes.shape == (2, 16) and codes.dtype == np.int64 and np.all(codes >= 0)
    # The negative part of coordinate 0 is a different transformed coordinate from its positive part.
    assert not np.any(codes[0] == codes[1])
    assert m.exact_kernel(X)[0, 1] == 0.0


def test_inputs_are_not_modified(feature_map):
    X = np.array([[1.0, -2.0, 0.0, 3.0, 0.5]])
    copy = X.copy()
    feature_map.transform(X)
    feature_map.kernel(X)
    assert np.array_equal(X, copy)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", ["rff", "nrff"])
def test_input_beyond_float32_range_does_not_give_nan_features(name):
    m = create_map(SPECS[name])
    X = np.array([[1e39, 0, 0, 0, 1.0]])
    try:
        Z = m.transform(X)
    except InputError:
        return
    assert np.isfinite(Z).all()


def test_float64_input_beyond_float32_is_refused_for_float32_features_only():
    m = create_map(SPECS["rff"])
    for peak in (1e39, -1e300):
        X = np.array([[0.5, 0, 0, peak, 1.0]])
        with pytest.raises(InputError) as caught:
            m.transform(X)
        assert caught.value.field == "vectors" and "float32 range" in str(caught.value)
        assert np.isfinite(m.transform(X, dtype=np.float64)).all()


def test_float32_copy_rounds_as_numpy_and_finds_overflow():
    largest = float(np.finfo(np.float32).max)
    X = np.array([[largest, -largest, largest * (1 + 2.0**-26), 1e-46, 0.1], [1.0, -2.5, 3.0, 1e-30, np.pi]])
    np.testing.assert_array_equal(float32_copy(X), X.astype(np.float32))
    np.testing.assert_array_equal(float32_copy(X[:, ::2]), X[:, ::2].astype(np.float32))   # strided view
    assert float32_copy(np.array([[0.0, largest * (1 + 2.0**-23)]])) is None   # rounds to infinity


_RNG = np.random.default_rng(0)


@pytest.mark.parametrize("X", [_RNG.standard_normal((1, 64)), _RNG.standard_normal((5, 7)).astype(np.float32),
                               (_RNG.random((40, 30)) < 0.2) * _RNG.random((40, 30)), np.zeros((3, 4)),
                               np.asfortranarray(np.arange(12.0).reshape(3, 4) - 5)])
def test_csr_parts_of_a_dense_input_are_scipys(X):
    parts, expected = csr_parts(X), sp.csr_matrix(X)
    for name in ("indptr", "indices", "data"):
        got, want = getattr(parts, name), getattr(expected, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert parts.shape == expected.shape


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_the_compiled_check_finds_every_nan_infinity_and_zero_row_numpy_finds(dtype, layout):
    """check_input's one compiled pass (C order) and numpy's reduction (other layouts) agree with numpy
    on where NaN, +-inf and all-zero rows are: each placed alone at the first, a middle and the last entry
    of arrays of several shapes, including the largest finite values (whose sum overflows)."""
    rng = np.random.default_rng(5)
    largest = np.finfo(dtype).max
    for shape in ((1, 1), (1, 784), (7, 33), (64, 17)):
        base = rng.standard_normal(shape).astype(dtype)
        base[:, 0] = largest   # finite, but X.sum() overflows
        for position in {0, base.size // 2, base.size - 1}:
            for value in (np.nan, np.inf, -np.inf, 0.0):
                X = base.copy()
                X.flat[position] = value
                if value == 0.0:
                    X[position // shape[1]] = 0
                view = {"C": X, "F": np.asfortranarray(X), "strided": np.repeat(X, 2, axis=1)[:, ::2]}[layout]
                assert np.array_equal(view, X, equal_nan=True)
                nonfinite, zero_rows = not np.isfinite(X).all(), int((X == 0).all(axis=1).sum())
                for refused in (None, "why"):
                    try:
                        check_input(view, shape[1], zero_rows_refused=refused)
                        found = None
                    except InputError as error:
                        found = error.message
                    if nonfinite:
                        row, column = divmod(position, shape[1])
                        assert found == f"contains NaN or infinity at row(s) {row} (row {row}, column {column}: {value})"
                    elif zero_rows and refused:
                        assert found == f"all-zero vector at row(s) {position // shape[1]}: why"
                    else:
                        assert found is None


@pytest.mark.parametrize("layout", ["C", "F", "csr"])
def test_nonfinite_entries_are_named_by_row_and_column(layout):
    """The error names every row holding a NaN or an infinity (the first ten), and the first such entry,
    numbered from `first_row` for a block of a larger input."""
    X = np.ones((30, 5))
    bad_rows = [3, 7, 8, 11, 12, 13, 14, 15, 16, 17, 29]
    for row in bad_rows:
        X[row, row % 5] = np.inf if row % 2 else np.nan
    view = {"C": X, "F": np.asfortranarray(X), "csr": sp.csr_matrix(X)}[layout]
    with pytest.raises(InputError) as caught:
        check_input(view, 5)
    assert caught.value.message == ("contains NaN or infinity at row(s) 3, 7, 8, 11, 12, 13, 14, 15, 16, 17 ... "
                                    "(row 3, column 3: inf)")
    with pytest.raises(InputError, match=r"at row\(s\) 1003, 1007, .* \(row 1003, column 3: inf\)"):
        check_input(view, 5, first_row=1000)
    with pytest.raises(InputError, match=r"all-zero vector at row\(s\) 502: why"):
        check_input(np.vstack([np.ones((2, 5)), np.zeros((1, 5))]), 5, zero_rows_refused="why", first_row=500)


def test_errors_survive_pickling_with_their_field_and_message():
    """As a worker process sends them back (Dask, loky): type, field and message kept."""
    import pickle

    from featurehash.maps import SpecError

    for error in (SpecError("params.gamma", "must be > 0"), InputError("vectors", "contains NaN at row(s) 3")):
        copy = pickle.loads(pickle.dumps(error))
        assert (type(copy), str(copy), copy.field, copy.message) == (type(error), str(error), error.field,
                                                                     error.message)
