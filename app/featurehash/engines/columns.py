"""An engine's column of rows as the rows a map reads, and a map's results as columns, both vectorised.

Rows come as Arrow arrays (Spark's mapInArrow, Ray's pyarrow batches), pandas Series (Spark's pandas
UDFs, Ray's pandas batches) or numpy arrays (Ray's numpy batches), one of:
- numeric vectors: list / fixed-size list of numbers, or a 2-D numpy array -> an (n, d) ndarray;
- sparse vectors: a struct with `indices` and `values` lists (Spark ML's Vector, whose Arrow form adds
  `type` 0 sparse / 1 dense and `size`; or a plain {indices, values} struct) -> CSR (n, input_dim);
- text: strings (documents) or lists of strings (token lists) -> the Python list the map's text stage reads.
Results go back as Arrow: dense features list<float32|float64>, sparse features (one-hot maps, the
hashing map) the vector struct, codes and band keys list<int64>.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from ..maps import InputError, OneHotFeatures

# The Arrow form of Spark ML's VectorUDT (its sqlType): type 0 sparse, 1 dense.
VECTOR_TYPE = pa.struct([pa.field("type", pa.int8(), nullable=False), pa.field("size", pa.int32()),
                         pa.field("indices", pa.list_(pa.int32())), pa.field("values", pa.list_(pa.float64()))])


def as_arrow(column):
    """An Arrow array, or a 2-D numeric ndarray kept as it is (a Ray tensor column)."""
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    if isinstance(column, pa.Array):
        return column
    if isinstance(column, np.ndarray):
        if column.ndim == 2 and column.dtype.kind in "fiub":
            return column
        column = list(column)
    elif hasattr(column, "columns"):   # a pandas DataFrame: a struct column as Spark's pandas UDFs give it
        return pa.StructArray.from_arrays([as_arrow(column[name]) for name in column.columns],
                                          names=[str(name) for name in column.columns])
    elif hasattr(column, "to_numpy"):   # a pandas Series
        column = column.to_list()
    return pa.array(column)


def rows_of(column, feature_map, field: str = "vectors"):
    """The rows of `column` as `feature_map` reads them (not yet checked: the map's transform checks)."""
    column = as_arrow(column)
    if isinstance(column, np.ndarray):
        return column
    if column.null_count:
        raise InputError(field, f"row {int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])} is null")
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return column.to_pylist()
    if pa.types.is_struct(kind):
        return _sparse_rows(column, feature_map.input_dim, field)
    if _is_list(kind):
        if pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type):
            return column.to_pylist()   # token lists
        return _dense_rows(column, feature_map.input_dim, field)
    raise InputError(field, f"expected vectors, sparse vectors or text, got a column of {kind}")


def _is_list(kind) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def _lengths(column) -> np.ndarray:
    return pc.list_value_length(column).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def _dense_rows(column, input_dim: int, field: str) -> np.ndarray:
    lengths = _lengths(column)
    wrong = np.flatnonzero(lengths != input_dim)
    if wrong.size:
        raise InputError(field, f"wrong dimension: row {int(wrong[0])} has {int(lengths[wrong[0]])} entries, "
                                f"the map expects {input_dim}")
    values = column.flatten().to_numpy(zero_copy_only=False)   # a null entry becomes NaN: the map refuses it
    if values.dtype.kind not in "fiub":
        raise InputError(field, f"expected numbers, got {column.type.value_type}")
    return values.reshape(len(column), input_dim)


def _sparse_rows(column, input_dim: int, field: str) -> sp.csr_matrix:
    names = {column.type.field(i).name for i in range(column.type.num_fields)}
    if not {"indices", "values"} <= names and not {"type", "values"} <= names:
        raise InputError(field, "a struct column of vectors needs fields indices and values "
                                "(or a Spark ML Vector)")
    values = column.field("values")
    lengths = _lengths(values)
    dense = (column.field("type").to_numpy(zero_copy_only=False) == 1 if "type" in names
             else np.zeros(len(column), dtype=bool))
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    data = values.flatten().to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    columns = np.arange(data.size, dtype=np.int64) - np.repeat(indptr[:-1], lengths)   # a dense row's positions
    if not dense.all():
        indices = column.field("indices")
        sparse = ~dense
        if not np.array_equal(_lengths(indices)[sparse], lengths[sparse]):
            raise InputError(field, "a sparse vector has as many indices as values")
        in_sparse_rows = np.repeat(sparse, lengths)
        columns[in_sparse_rows] = indices.filter(pa.array(sparse)).flatten().to_numpy(zero_copy_only=False)
    if "size" in names:
        sizes = column.field("size").fill_null(input_dim).to_numpy(zero_copy_only=False)
        sizes = np.where(dense, lengths, sizes)
        wrong = np.flatnonzero(sizes != input_dim)
        if wrong.size:
            raise InputError(field, f"wrong dimension: row {int(wrong[0])} has size {int(sizes[wrong[0]])}, "
                                    f"the map expects {input_dim}")
    if columns.size and (columns.min() < 0 or columns.max() >= input_dim):
        raise InputError(field, f"an index lies outside [0, {input_dim})")
    matrix = sp.csr_matrix((data, columns, indptr), shape=(len(column), input_dim))
    matrix.sum_duplicates()   # canonical: sorted, no repeats (as the maps' check makes it)
    return matrix


def list_column(matrix: np.ndarray) -> pa.Array:
    """(n, w) -> list<dtype> of n rows of w entries."""
    matrix = np.ascontiguousarray(matrix)
    n, width = matrix.shape
    offsets = pa.array(np.arange(0, n * width + 1, width, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(matrix.ravel()))


def vector_column(matrix: sp.csr_matrix) -> pa.StructArray:
    """CSR rows as Spark ML sparse vectors (the Arrow form of VectorUDT)."""
    matrix = sp.csr_matrix(matrix)
    n = matrix.shape[0]
    offsets = pa.array(matrix.indptr.astype(np.int32))
    return pa.StructArray.from_arrays(
        [pa.array(np.zeros(n, dtype=np.int8)), pa.array(np.full(n, matrix.shape[1], dtype=np.int32)),
         pa.ListArray.from_arrays(offsets, pa.array(matrix.indices.astype(np.int32))),
         pa.ListArray.from_arrays(offsets, pa.array(matrix.data.astype(np.float64)))],
        fields=list(VECTOR_TYPE))


def features_column(features, dtype) -> pa.Array:
    """A transform's result as a column: dense -> list<dtype>, sparse or one-hot -> vectors."""
    if isinstance(features, OneHotFeatures):
        return vector_column(features.to_csr(np.float64))
    if sp.issparse(features):
        return vector_column(features)
    return list_column(np.asarray(features, dtype=dtype))


def sparse_features(feature_map) -> bool:
    """Whether the map's features are sparse (one-hot blocks, or the hashing map's CSR)."""
    return bool(feature_map.one_hot or getattr(feature_map, "text_input", False))
