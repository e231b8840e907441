"""The similarity join of featurehash.dedup as a Spark plan: band keys on the executors, candidates by
a join on (band, key), the first-shared-band rule, exact verification by dedup's pair kernel.

The plan (no step collects to the driver; every arrow is a Spark shuffle or a narrow step):
1. keyed: mapInArrow over the rows -> (id, row, keys): the map's codes of each batch and their L band
   keys (`featurehash.engines.join_steps.batch_keys` -> `dedup.candidates.band_keys`), the banding
   (L bands of r codes) that of the in-process join (`choose_bands(k, threshold, target_recall)`);
2. candidates: keyed exploded to (id, band, key) and joined with itself on (band, key) with a.id < b.id
   (a bucket of b rows gives b (b - 1) / 2 candidates, as in process); with a second DataFrame `Y`, the
   rows of df joined with those of Y on (band, key), every (x, y) of a bucket a candidate;
3. each candidate joined with both rows and their keys (two joins on id), and kept only in the first
   band its rows share (dedup's `first_shared_band` rule, as a SQL filter before any row reaches Python:
   array_position(zip_with(keys_i, keys_j, =), true) - 1 = band), so each pair is verified once;
4. verify: mapInArrow over batches of candidates -> the exact kernel (`lsh.similarity.ExactPairs`: GMM /
   pGMM for gcws, Laplacian for binning) or the codes' estimate -> (i, j, similarity) >= threshold.
The pairs are those of `featurehash.dedup.similarity_join` on the same rows in id order (i < j), or of
its cross join (`Y=`: i an id of df, j an id of Y).
"""

from __future__ import annotations

import numpy as np

try:
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("featurehash.spark needs pyspark and pyarrow: pip install 'featurehash[spark]'") from exc

from ..engines.columns import list_column, rows_of
from ..engines.join_steps import batch_keys, plan_bands, verify_pairs
from ..engines.worker import ShippedSpec, resolve, worker_map
from ..maps import InputError

PAIR_SCHEMA = T.StructType([T.StructField("i", T.LongType(), False), T.StructField("j", T.LongType(), False),
                            T.StructField("similarity", T.DoubleType(), False)])
FIRST_SHARED_BAND = "array_position(zip_with(keys_i, keys_j, (x, y) -> x = y), true) - 1 = band"


def similarity_join(df, spec, threshold: float, *, Y=None, column: str = "features", id_col: str = "id",
                    target_recall: float = 0.95, verify: str = "exact"):
    """Every pair of rows of `df` whose similarity under the map's kernel is >= `threshold`: a lazy
    DataFrame (i, j, similarity) of the ids (i < j) in `id_col` (unique bigint; the in-process join's
    row positions when they number the rows 0..n-1). `column` holds the rows: numeric arrays, Spark ML
    vectors or text (see `featurehash.spark.features`). Kernel, banding, recall and `verify` ("exact",
    or "codes": the fraction of equal codes) are those of `featurehash.dedup.similarity_join`.
    `Y` (a DataFrame with the same `column` and `id_col`): the pairs (i an id of df, j an id of Y) of
    the in-process join's `Y=` on the same rows; ids of df and of Y may overlap.

    Cost: the hashing of every row, once (its (id, row, keys) are locally checkpointed on first use, so
    executors hold them while the plan runs: a lost executor fails the job rather than rehashing), one
    shuffle of n L (id, band, key) triples, two of the candidates with their rows; the verification reads
    each candidate's two rows in batches of spark.sql.execution.arrow.maxRecordsPerBatch.
    """
    feature_map, shipped = resolve(spec)
    bands, rows = plan_bands(feature_map, threshold, target_recall, verify)
    for frame, side in ((df, "df"), (Y, "Y")):
        for name, field in ((column, "column"), (id_col, "id_col")):
            if frame is not None and name not in frame.columns:
                raise InputError(field, f"no column '{name}' in {side} (columns: {', '.join(frame.columns)})")
    # read four times below (both sides of the key join, both rows of a candidate): checkpointed on first
    # use, so each row is hashed once; the blocks go when the plan does (a lazy local checkpoint)
    keyed_x = _keyed(df, shipped, column, id_col, bands, rows, verify).localCheckpoint(eager=False)
    keyed_y = keyed_x if Y is None else \
        _keyed(Y, shipped, column, id_col, bands, rows, verify).localCheckpoint(eager=False)
    a = keyed_x.select("id", F.posexplode("keys").alias("band", "key")).alias("a")
    b = keyed_y.select("id", F.posexplode("keys").alias("band", "key")).alias("b")
    on = (F.col("a.band") == F.col("b.band")) & (F.col("a.key") == F.col("b.key"))
    found = a.join(b, on & (F.col("a.id") < F.col("b.id")) if Y is None else on)
    candidates = found.select(F.col("a.id").alias("i"), F.col("b.id").alias("j"), F.col("a.band").alias("band"))
    payload = "row" if verify == "exact" else "prints"
    left = keyed_x.select(F.col("id").alias("i"), F.col("keys").alias("keys_i"), F.col(payload).alias("row_i"))
    right = keyed_y.select(F.col("id").alias("j"), F.col("keys").alias("keys_j"), F.col(payload).alias("row_j"))
    first = candidates.join(left, "i").join(right, "j").where(F.expr(FIRST_SHARED_BAND))
    verifying = first.select("i", "j", "row_i", "row_j")
    return verifying.mapInArrow(_verifier(shipped, float(threshold), verify), PAIR_SCHEMA)


def _keyed(df, shipped: ShippedSpec, column: str, id_col: str, bands: int, rows: int, verify: str):
    """(id, row, keys array<bigint>) or, with verify="codes", (id, keys, prints array<int>)."""
    source = df.select(F.col(id_col).cast("long").alias("id"), F.col(column).alias("row"))
    codes = verify == "codes"
    fields = [T.StructField("id", T.LongType()), T.StructField("keys", T.ArrayType(T.LongType()))]
    fields.append(T.StructField("prints", T.ArrayType(T.IntegerType())) if codes else source.schema["row"])

    def keys(iterator):
        for batch in iterator:
            feature_map = worker_map(shipped)
            if batch.num_rows:
                band_keys, prints = batch_keys(feature_map, rows_of(batch.column("row"), feature_map, "x"), bands, rows)
                key_column, print_column = list_column(band_keys), list_column(prints)
            else:   # an empty partition
                key_column, print_column = pa.array([], pa.list_(pa.int64())), pa.array([], pa.list_(pa.int32()))
            payload = print_column if codes else batch.column("row")
            yield pa.RecordBatch.from_arrays([batch.column("id"), key_column, payload],
                                             names=["id", "keys", "prints" if codes else "row"])

    return source.mapInArrow(keys, T.StructType(fields))


def _verifier(shipped: ShippedSpec, threshold: float, verify: str):
    def pairs(iterator):
        for batch in iterator:
            i = batch.column("i").to_numpy(zero_copy_only=False)
            j = batch.column("j").to_numpy(zero_copy_only=False)
            similarity = np.empty(0)
            if i.size:
                feature_map = worker_map(shipped)
                if verify == "codes":
                    prints = [rows_of(batch.column(name), _Width(feature_map.spec.n_components))
                              for name in ("row_i", "row_j")]
                    similarity = verify_pairs(feature_map, None, None, "codes", *prints)
                else:
                    similarity = verify_pairs(feature_map, rows_of(batch.column("row_i"), feature_map, "x"),
                                              rows_of(batch.column("row_j"), feature_map, "y"), "exact")
            hit = similarity >= threshold
            yield pa.RecordBatch.from_arrays([pa.array(i[hit], pa.int64()), pa.array(j[hit], pa.int64()),
                                              pa.array(similarity[hit], pa.float64())],
                                             names=["i", "j", "similarity"])

    return pairs


class _Width:
    """Stands for a map where only the row width is read (fingerprint lists: k per row)."""

    def __init__(self, width: int):
        self.input_dim = width
