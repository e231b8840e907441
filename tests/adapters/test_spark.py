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
from featurehash.maps.lsh import choose_bands
from pyspark.ml.linalg import SparseVector
from pyspark.sql import SparkSession

CASES = cases()
# One worker runs this module (pyproject's --dist loadgroup), so one Spark session is started, not one per worker.
pytestmark = pytest.mark.xdist_group("spark")


@pytest.fixture(scope="module")
def spark():
    session = (SparkSession.builder.master("local[2]").appName("featurehash-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
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
    """Each case's rows as a DataFrame (id, x), ids the row positions, in 3 partitions."""
    return {name: spark.createDataFrame(list(enumerate(_column(rows))), ["id", "x"]).repartition(3)
            for name, (rows, *_) in CASES.items()}


def _sorted(frame, *columns):
    return frame.toPandas().sort_values(list(columns)).reset_index(drop=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_codes_keys_and_features_equal_in_process(frames, name):
    rows, gcws, threshold, feature_spec = CASES[name]
    df = fhs.transform(frames[name], gcws, "x", "codes", what="codes")   # mapInArrow
    df = fhs.transform(df, feature_spec, "x", "z32")
    df = df.withColumn("keys", fhs.band_keys_udf(gcws, threshold=threshold)("x"))   # pandas UDFs
    df = df.withColumn("z64", fhs.features_udf(feature_spec, dtype=np.float64)("x"))
    got = _sorted(df.select("id", "codes", "keys", "z32", "z64"), "id")
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


def test_one_hot_features_are_sparse_vectors(frames):
    rows, gcws, *_ = CASES["dense"]
    got = _sorted(fhs.transform(frames["dense"], gcws, "x", "z"), "id")
    expected = create_map(gcws).transform(rows).to_csr(np.float64)
    assert isinstance(got["z"][0], SparseVector) and got["z"][0].size == expected.shape[1]
    np.testing.assert_array_equal(np.stack([v.indices for v in got["z"]]),
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


def test_code_verification_equals_in_process(frames):
    from featurehash.dedup import similarity_join

    rows, gcws, threshold, _ = CASES["sparse"]
    pairs = _sorted(fhs.similarity_join(frames["sparse"], gcws, threshold, column="x", verify="codes"), "i", "j")
    expected = similarity_join(rows, create_map(gcws), threshold, verify="codes")
    assert_same_pairs(pairs["i"].to_numpy(), pairs["j"].to_numpy(), pairs["similarity"].to_numpy(), expected)


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
