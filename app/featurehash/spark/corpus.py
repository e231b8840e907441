"""A corpus deduplicated on Spark: the files scanned in parallel (one task per file, mapInArrow), the near
duplicates joined by `featurehash.spark.similarity_join` on the normalised texts, each file's kept records
written by a task of its own; the driver decides clusters and keep policy from the small columns and the pairs
(`featurehash.engines.corpus`), so the kept set and duplicates table equal `featurehash.dedup.corpus`'s."""

from __future__ import annotations

import json

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..dedup.corpus import CorpusFile
from ..dedup.corpus.distributed import scan_file, write_file
from ..engines.corpus import CorpusRun
from .join import similarity_join

# the `text` column: a document's normalised text, or a token list, or a vector (featurehash.dedup.corpus.vectors)
_PAYLOAD = {"text": T.StringType(), "tokens": T.ArrayType(T.StringType()),
            "vector": T.StructType([T.StructField("indices", T.ArrayType(T.LongType())),
                                    T.StructField("values", T.ArrayType(T.DoubleType()))])}


def _scanned(kind: str) -> T.StructType:
    return T.StructType([T.StructField(name, of) for name, of in (
        ("number", T.LongType()), ("id", T.StringType()), ("length", T.LongType()), ("key", T.DoubleType()),
        ("h0", T.DecimalType(20, 0)), ("h1", T.DecimalType(20, 0)), ("text", _PAYLOAD[kind]),
        ("file", T.LongType()), ("index", T.LongType()), ("features", T.BooleanType()))])
_FILES = "file long, path string, format string, compression string"


def dedup_corpus(spark, inputs, output, **options) -> dict:
    """Deduplicate the corpus at `inputs` into the folder `output` on `spark` (a SparkSession); the options and
    the outputs (shards `part-<file>-NNNNN`, duplicates.parquet, summary.json) are `dedup_corpus`'s (no
    memory_budget: Spark spills its own shuffles; no resume: Spark retries failed tasks)."""
    run = CorpusRun(inputs, output, **options)
    listing = _one_task_each(spark, [(k, f.path, f.format, f.compression) for k, f in enumerate(run.files)], _FILES)
    scanned = listing.mapInArrow(_scanner(run), _scanned(run.kind)).localCheckpoint()
    counts = [json.loads(r.id) for r in scanned.where(F.col("number") < 0).select("id").collect()]
    docs = scanned.where(F.col("number") >= 0)
    small = docs.drop("text").toArrow()
    small = small.set_column(small.schema.get_field_index("h0"), "h0", _u64(small["h0"]))
    small = small.set_column(small.schema.get_field_index("h1"), "h1", _u64(small["h1"]))
    plan = run.planned(small, counts)
    run.lap("read")
    offsets = F.element_at(F.array(*[F.lit(int(o)) for o in plan.offsets]), F.col("file").cast("int") + 1)
    positioned = docs.select((offsets + F.col("index")).alias("position"), "text")
    wanted = spark.createDataFrame(pa.table({"position": plan.near_rows}).to_pandas())
    rows = positioned.join(F.broadcast(wanted), "position")
    pairs = similarity_join(rows, run.spec, run.threshold, column="text", id_col="position",
                            target_recall=run.target_recall).toArrow()
    run.lap("near")
    needed = run.decided(pairs["i"].to_numpy(), pairs["j"].to_numpy(), pairs["similarity"].to_numpy())
    if needed.size:
        texts = positioned.join(spark.createDataFrame(pa.table({"position": needed}).to_pandas()), "position")
        got = texts.toArrow()
        run.similarities(got["position"].to_numpy(), got["text"].to_pylist())
    run.lap("clusters")
    plan_rows = [(k, f.path, f.format, f.compression, json.dumps(kept)) for k, f, kept in run.write_plan()]
    todo = _one_task_each(spark, plan_rows, f"{_FILES}, kept string")
    written = todo.mapInArrow(_writer(run), "shard string").collect()
    run.lap("write")
    return run.finished([r.shard for r in written], "spark")


def _one_task_each(spark, rows: list[tuple], schema: str):
    """A frame of `rows` with one row a partition, so each file is its own task: hash partitioning by file put
    two of two files in one partition half the time, and that stage then ran on one core."""
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, max(1, len(rows))), schema)


def _u64(column) -> pa.Array:
    """Spark has no unsigned 64-bit type: the hash words travel as decimal(20, 0)."""
    return pa.array([int(v) for v in column.to_pylist()], pa.uint64())


def _scanner(run: CorpusRun):
    fields, on_error, spec = run.fields, run.on_error, run.spec

    def scan(batches):
        for batch in batches:
            for k, path, fmt, compression in zip(*(batch.column(n).to_pylist() for n in batch.schema.names)):
                table, counts = scan_file(k, CorpusFile(path, fmt, compression), fields, on_error, spec)
                table = table.set_column(4, "h0", pa.array([int(v) for v in table["h0"].to_pylist()],
                                                           pa.decimal128(20, 0)))
                table = table.set_column(5, "h1", pa.array([int(v) for v in table["h1"].to_pylist()],
                                                           pa.decimal128(20, 0)))
                yield from table.to_batches()
                yield pa.RecordBatch.from_pylist([{"number": -1, "id": json.dumps(counts), "file": k}],
                                                 schema=table.schema)

    return scan


def _writer(run: CorpusRun):
    fields, output, shard_rows, output_format = run.fields, run.output, run.shard_rows, run.output_format

    def write(batches):
        for batch in batches:
            for k, path, fmt, compression, kept in zip(*(batch.column(n).to_pylist() for n in batch.schema.names)):
                shards = write_file(k, CorpusFile(path, fmt, compression), fields, json.loads(kept), output,
                                    shard_rows, output_format)
                yield pa.RecordBatch.from_pydict({"shard": pa.array(shards, pa.string())})

    return write


__all__ = ["dedup_corpus"]
