"""featurehash.spark on a real local Spark (local[2], one session for the module) against the library in
process on the same rows: codes and band keys bit for bit, dense features to the README's float promise
(tests/feature_promises.py), join pairs (the same candidates, verified by the same pair kernel) and
cluster labels identical, for dense arrays, Spark ML sparse vectors and text."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("pyspark", reason="pyspark is an optional extra: pip install 'featurehash[spark]'")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java (17), and no java is on PATH", allow_module_level=True)

import featurehash.spark as fhs
import scipy.sparse as sp
from engine_support import assert_same_pairs, cases
from feature_promises import assert_dense_features_match
from featurehash import create_map
from featurehash.dedup import candidates, duplicate_clusters
from featurehash.maps import InputError, UnsupportedOperation
from featurehash.lsh.banding import choose_bands
from pyspark.ml.linalg import SparseVector
from pyspark.sql import SparkSession

CASES = cases()
# One worker runs this module (pyproject's --dist loadgroup), so one Spark session is started, not one per worker.
pytestmark = pytest.mark.xdist_group("spark")


@pytest.fixture(scope="module")
def spark():
    session = (SparkSession.builder.master("local[2]").appName("featurehash-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               # two partitions for two cores: more only adds tasks (each a Python worker's round trip)
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _column(rows) -> list:
    if sp.issparse(rows):
        rows = sp.csr_matrix(rows)
        return [SparseVector(rows.shape[1], rows.indices[a:b].tolist(), rows.data[a:b].tolist())
                for a, b in zip(rows.indptr[:-1], rows.indptr[1:])]
    return rows if isinstance(rows, list) else [row.tolist() for row in rows]


@pytest.fixture(scope="module")
def frames(spark):
    """Each case's rows as a DataFrame (id, x), ids the row positions, in one partition: every Python
    worker Spark starts pays the import of featurehash and its kernels (seconds on a loaded machine), and
    each plan node that runs Python (mapInArrow, a pandas UDF) starts its own per partition. The joins
    still shuffle into two partitions (spark.sql.shuffle.partitions)."""
    return {name: _frame(spark, rows) for name, (rows, *_) in CASES.items()}


def _frame(spark, rows, first_id: int = 0):
    return spark.createDataFrame(list(enumerate(_column(rows), first_id)), ["id", "x"]).coalesce(1)


def _sorted(frame, *columns):
    return frame.toPandas().sort_values(list(columns)).reset_index(drop=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_codes_keys_and_features_equal_in_process(frames, name):
    """One job per case: codes and float32 features by mapInArrow, band keys and float64 features by
    pandas UDFs, and (dense) the GCWS map's one-hot features as sparse vectors."""
    rows, gcws, threshold, feature_spec = CASES[name]
    df = fhs.transform(frames[name], gcws, "x", "codes", what="codes")   # mapInArrow
    df = fhs.transform(df, feature_spec, "x", "z32")
    if name == "dense":
        df = fhs.transform(df, gcws, "x", "one_hot")
    df = df.withColumn("keys", fhs.band_keys_udf(gcws, threshold=threshold)("x"))   # pandas UDFs
    df = df.withColumn("z64", fhs.features_udf(feature_spec, dtype=np.float64)("x"))
    got = _sorted(df.drop("x"), "id")
    gcws_map, feature_map = create_map(gcws), create_map(feature_spec)
    codes = gcws_map.hash(rows)
    np.testing.assert_array_equal(np.stack(got["codes"]), codes)
    keys, _ = candidates.band_keys(codes, *choose_bands(128, threshold, 0.95))
    np.testing.assert_array_equal(np.stack(got["keys"]), keys.T.view(np.int64))
    if name == "text":   # the hashing map's features: sparse vectors, equal to its CSR rows
        expected = feature_map.transform(rows, dtype=np.float64)
        for column in ("z32", "z64"):
            np.testing.assert_allclose(sp.vstack([sp.csr_matrix(v.toArray()) for v in got[column]]).toarray(),
                                       expected.toarray(), rtol=1e-6)
        return
    Z32 = np.stack(got["z32"])
    assert Z32.dtype == np.float32
    assert_dense_features_match(Z32, np.stack(got["z64"]), feature_map.transform(rows, dtype=np.float32),
                                feature_map.transform(rows, dtype=np.float64))
    if name == "dense":
        expected = gcws_map.transform(rows).to_csr(np.float64)
        assert isinstance(got["one_hot"][0], SparseVector) and got["one_hot"][0].size == expected.shape[1]
        np.testing.assert_array_equal(np.stack([v.indices for v in got["one_hot"]]),
                                      expected.indices.reshape(rows.shape[0], -1))


@pytest.mark.parametrize(("name", "mode"), [("dense", "components"), ("sparse", "components"),
                                            ("text", "components"), ("dense", "representatives")])
def test_join_and_clusters_equal_in_process(frames, name, mode):
    rows, gcws, threshold, _ = CASES[name]
    expected = duplicate_clusters(rows, create_map(gcws), threshold, mode=mode)
    clusters = fhs.duplicate_clusters(frames[name], gcws, threshold, mode=mode, column="x")
    pairs = _sorted(clusters.pairs, "i", "j")
    assert_same_pairs(pairs["i"].to_numpy(), pairs["j"].to_numpy(), pairs["similarity"].to_numpy(),
                      expected.pairs)
    labels = _sorted(clusters.labels, "id")
    assert expected.n_clusters < len(labels) == (rows.shape[0] if hasattr(rows, "shape") else len(rows))
    np.testing.assert_array_equal(labels["label"].to_numpy(), expected.representatives[expected.labels])
    np.testing.assert_array_equal(np.sort(clusters.representatives.toPandas()["id"]), expected.representatives)


def test_the_map_is_built_once_per_python_worker(spark, frames):
    """Many small Arrow batches over a spec no other test uses: the codes UDF and one reading the worker's
    build count run chained in one Python worker, so every batch sees its process's count: 1."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    spec = {**CASES["dense"][1], "seed": 12345}
    spec_id = create_map(spec).spec.id

    def builds(codes):
        import os

        from featurehash.engines import worker
        return pd.Series([f"{os.getpid()}:{worker.builds[spec_id]}"] * len(codes))

    builds.__annotations__ = {"codes": pd.Series, "return": pd.Series}   # real classes: a scalar pandas UDF
    builds = pandas_udf(builds, "string")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "8")
    try:
        df = frames["dense"].repartition(6).select(builds(fhs.codes_udf(spec)("x")).alias("seen"))
        seen = {row[0] for row in df.distinct().collect()}
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert seen and {entry.split(":")[1] for entry in seen} == {"1"}, seen


@pytest.mark.parametrize(("name", "verify"), [("dense", "exact"), ("sparse", "codes"), ("text", "exact")])
def test_join_of_two_frames_equals_in_process(spark, name, verify):
    """Y=: the pairs between two DataFrames (the rows cut in two, Y's ids starting at 1000) are the
    in-process cross join's (`dedup.similarity_join(X, map, t, Y=Y)`); sparse rows verified by codes."""
    from featurehash.dedup import similarity_join

    rows, gcws, threshold, _ = CASES[name]
    half = (rows.shape[0] if hasattr(rows, "shape") else len(rows)) // 2
    X, Y = rows[:half], rows[half:]
    pairs = fhs.similarity_join(_frame(spark, X), gcws, threshold, Y=_frame(spark, Y, 1000), column="x",
                                verify=verify)
    pairs = _sorted(pairs, "i", "j")
    expected = similarity_join(X, create_map(gcws), threshold, Y=Y, verify=verify)
    assert_same_pairs(pairs["i"].to_numpy(), pairs["j"].to_numpy() - 1000, pairs["similarity"].to_numpy(),
                      expected)


def test_bad_input_is_refused_on_the_driver(frames):
    df = frames["dense"]
    with pytest.raises(InputError, match="discrete codes"):
        fhs.similarity_join(df, CASES["dense"][3], 0.5, column="x")
    with pytest.raises(UnsupportedOperation):
        fhs.codes_udf(CASES["dense"][3])
    for bad, field in (({"threshold": 0.0}, "threshold"), ({"threshold": 0.5, "verify": "fast"}, "verify"),
                       ({"threshold": 0.5, "column": "nope"}, "column")):
        with pytest.raises(InputError) as info:
            fhs.similarity_join(df, CASES["dense"][1], **{"column": "x", **bad})
        assert info.value.field == field
    with pytest.raises(InputError) as info:
        fhs.band_keys_udf(CASES["dense"][1])
    assert info.value.field == "threshold"
