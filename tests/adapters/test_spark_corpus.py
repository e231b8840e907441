"""featurehash.spark.dedup_corpus on a real local Spark (local[2]) against featurehash.dedup.corpus on one
machine: the same kept records and the same duplicates table (by id) on a small corpus of three files, with a
keep policy that is not the default, a chained cluster and one bad record skipped."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pyspark", reason="pyspark is an optional extra: pip install 'featurehash[spark]'")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java (17), and no java is on PATH", allow_module_level=True)

import featurehash.spark as fhs
from corpus_support import corpus_folder, documents, outcome
from featurehash.dedup.corpus import dedup_corpus
from pyspark.sql import SparkSession

pytestmark = pytest.mark.xdist_group("spark")


@pytest.fixture(scope="module")
def spark():
    session = (SparkSession.builder.master("local[2]").appName("featurehash-corpus-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_spark_equals_one_machine(spark, tmp_path):
    folder = corpus_folder(tmp_path)
    options = {"id_field": "id", "keep": "shortest", "on_error": "skip", "shard_rows": 10}
    one = dedup_corpus(folder, tmp_path / "one", **options)
    many = fhs.dedup_corpus(spark, folder, tmp_path / "spark", **options)
    assert outcome(tmp_path / "spark") == outcome(tmp_path / "one")
    for name in ("documents_in", "exact_duplicates", "near_duplicates", "kept", "bad_records", "bytes_kept"):
        assert many[name] == one[name], name
    assert many["bad_named"] == [f"{folder / 'part1.jsonl'}:{len(documents()[1::3]) + 1}: not JSON"
                                 + one["bad_named"][0].split("not JSON")[1]]


@pytest.mark.parametrize("kind", ["tokens", "vector"])
def test_spark_vectors_and_tokens_equal_one_machine(spark, tmp_path, kind):
    from corpus_support import vector_folder

    folder = vector_folder(tmp_path, kind)
    options = {"id_field": "id", "keep": "min:score", "shard_rows": 10, f"{kind}_field": kind}
    one = dedup_corpus(folder, tmp_path / "one", **options)
    many = fhs.dedup_corpus(spark, folder, tmp_path / "many", **options)
    assert outcome(tmp_path / "many") == outcome(tmp_path / "one")
    assert many["near_duplicates"] == one["near_duplicates"] > 0 and many["kept"] == one["kept"]


def test_each_file_is_its_own_task(spark):
    from featurehash.spark.corpus import _FILES, _one_task_each

    frame = _one_task_each(spark, [(k, f"/in/{k}.jsonl", "jsonl", "none") for k in range(2)], _FILES)
    assert frame.rdd.glom().map(lambda rows: [row.file for row in rows]).collect() == [[0], [1]]
