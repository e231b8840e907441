"""Features, codes and band keys of a Spark DataFrame column: a mapInArrow transformer and pandas UDFs.

    df = fhs.transform(df, spec, "x", "z")                    # what="features" | "codes" | "band_keys"
    df.withColumn("z", fhs.features_udf(spec)("x"))            # array<float> (dense maps) or vector
    df.withColumn("codes", fhs.codes_udf(spec)("x"))           # GCWS, binning: array<bigint> (k codes)
    df.withColumn("keys", fhs.band_keys_udf(spec, threshold=0.8)("x"))   # array<bigint> (L band keys)
    fhs.band_key_rows(df, spec, "x", threshold=0.8)            # exploded: (id, band, key) rows

The spec is resolved once on the driver and shipped in the closure as its id and canonical JSON; each
Python worker (reused by Spark across tasks, spark.python.worker.reuse) builds the map on its first batch
and keeps it by spec id (`featurehash.engines.worker`), so no batch rebuilds it. Batches are Arrow record
batches (mapInArrow) or pandas Series (pandas UDFs), read by `featurehash.engines.columns` without a loop
over rows; the result is the library's own transform / hash of those rows, so codes equal
`create_map(spec).hash` bit for bit and dense features agree to the README's float promise.

Dense features are array<float> (float32, the default) or array<double>; sparse features (GCWS and
binning one-hot blocks, the hashing map) are Spark ML sparse vectors. Band keys are the uint64 digests of
`featurehash.dedup.candidates.band_keys` read as bigint: the keys the join groups by, L of them per row
(`threshold` -> the join's banding `choose_bands(k, threshold, target_recall)`, or `bands` of k // bands
codes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    import pyarrow as pa
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T
    from pyspark.sql.functions import pandas_udf
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("featurehash.spark needs pyspark and pyarrow: pip install 'featurehash[spark]'") from exc

from ..engines.columns import VECTOR_TYPE, as_arrow, rows_of, sparse_features
from ..engines.outputs import output_column, plan_output
from ..engines.worker import ShippedSpec, worker_map
from ..maps import InputError
from ..maps.inputs import output_dtype


def transform(df, spec: Mapping[str, Any] | ShippedSpec, input_col: str, output_col: str | None = None, *,
              what: str = "features", dtype=None, threshold: float | None = None, bands: int | None = None,
              target_recall: float = 0.95):
    """`df` with one more column, `output_col` (default: `what`), computed by mapInArrow."""
    feature_map, shipped, banding = _plan(spec, what, threshold, bands, target_recall)
    if input_col not in df.columns:
        raise InputError("input_col", f"no column '{input_col}' (columns: {', '.join(df.columns)})")
    dtype = output_dtype(dtype)
    output_col = output_col or what
    spark_type, arrow_type = _types(feature_map, what, dtype)
    schema = T.StructType([field for field in df.schema.fields if field.name != output_col]
                          + [T.StructField(output_col, spark_type)])

    def batches(iterator):
        for batch in iterator:
            if batch.num_rows == 0:
                column = pa.array([], type=arrow_type)
            else:
                column = _compute(shipped, batch.column(input_col), what, dtype.name, banding)
            kept = [name for name in batch.schema.names if name != output_col]
            yield pa.RecordBatch.from_arrays([batch.column(name) for name in kept] + [column],
                                             names=[*kept, output_col])

    return df.mapInArrow(batches, schema)


def features_udf(spec, *, dtype=None):
    """A pandas UDF giving each row's features (array<float|double>, or a vector for sparse features)."""
    return _udf(spec, "features", output_dtype(dtype), None, None, 0.95)


def codes_udf(spec):
    """A pandas UDF giving each row's k discrete codes (array<bigint>), for GCWS and binning maps."""
    return _udf(spec, "codes", np.dtype(np.int64), None, None, 0.95)


def band_keys_udf(spec, *, threshold: float | None = None, bands: int | None = None, target_recall: float = 0.95):
    """A pandas UDF giving each row's L band keys (array<bigint>)."""
    return _udf(spec, "band_keys", np.dtype(np.int64), threshold, bands, target_recall)


def band_key_rows(df, spec, input_col: str, *, id_col: str = "id", threshold: float | None = None,
                  bands: int | None = None, target_recall: float = 0.95):
    """One row (id, band, key) per row of `df` and band: the band keys exploded, ready to join or group on."""
    from pyspark.sql import functions as F

    keyed = transform(df.select(F.col(id_col).alias("id"), F.col(input_col).alias("row")), spec, "row", "keys",
                      what="band_keys", threshold=threshold, bands=bands, target_recall=target_recall)
    return keyed.select("id", F.posexplode("keys").alias("band", "key"))


# -- on the driver ---------------------------------------------------------------------------

def _plan(spec, what: str, threshold, bands, target_recall):
    plan = plan_output(spec, what, threshold, bands, target_recall)
    return plan.feature_map, plan.shipped, plan.banding


def _types(feature_map, what: str, dtype: np.dtype):
    if what != "features":
        return T.ArrayType(T.LongType()), pa.list_(pa.int64())
    if sparse_features(feature_map):
        return VectorUDT(), VECTOR_TYPE
    if dtype == np.float32:
        return T.ArrayType(T.FloatType()), pa.list_(pa.float32())
    return T.ArrayType(T.DoubleType()), pa.list_(pa.float64())


def _udf(spec, what: str, dtype: np.dtype, threshold, bands, target_recall):
    import pandas as pd

    feature_map, shipped, banding = _plan(spec, what, threshold, bands, target_recall)
    spark_type, _ = _types(feature_map, what, dtype)
    vectors = isinstance(spark_type, VectorUDT)

    def compute(column):
        if len(column) == 0:
            return pd.Series([], dtype=object)
        result = _compute(shipped, column, what, dtype.name, banding)
        return pd.Series(_as_vectors(result) if vectors else result.to_pandas(), index=column.index)

    compute.__name__ = what
    compute.__annotations__ = {"column": pd.Series, "return": pd.Series}   # the scalar pandas UDF kind
    return pandas_udf(compute, spark_type)


def _as_vectors(column: pa.StructArray) -> list:
    """Sparse vectors as pyspark.ml objects: a pandas UDF returns VectorUDT values one by one."""
    from pyspark.ml.linalg import SparseVector

    sizes = column.field("size").to_numpy(zero_copy_only=False)
    indices, values = column.field("indices").to_pylist(), column.field("values").to_pylist()
    return [SparseVector(int(size), index, value) for size, index, value in zip(sizes, indices, values)]


# -- on the workers -------------------------------------------------------------------------

def _compute(shipped: ShippedSpec, column, what: str, dtype_name: str, banding) -> pa.Array:
    feature_map, column = worker_map(shipped), as_arrow(column)
    rows = rows_of(column, feature_map, "documents" if _is_text(column) else "vectors")
    return output_column(feature_map, rows, what, np.dtype(dtype_name), banding)


def _is_text(column) -> bool:
    kind = getattr(column, "type", None)
    return kind is not None and (pa.types.is_string(kind) or pa.types.is_large_string(kind))
