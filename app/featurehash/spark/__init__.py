"""Featurehash on Spark: features, codes and band keys of DataFrame columns, and the near-duplicate join
and clusters of featurehash.dedup as Spark plans, with the spec (never the map's parameters) shipped to
the executors.

    import featurehash.spark as fhs
    df = fhs.transform(df, spec, "x", "z")                     # mapInArrow: features column appended
    df = df.withColumn("codes", fhs.codes_udf(spec)("x"))      # pandas UDF: array<bigint>
    pairs = fhs.similarity_join(df, spec, 0.7, column="x")      # DataFrame (i, j, similarity)
    pairs = fhs.similarity_join(df, spec, 0.7, Y=other, column="x")   # pairs between two DataFrames
    clusters = fhs.duplicate_clusters(df, spec, 0.7, column="x")   # .labels: DataFrame (id, label)
    summary = fhs.dedup_corpus(spark, "corpus/*.jsonl", "clean/", id_field="id")   # files in, clean corpus out

Columns: numeric arrays (array<double|float|...>), Spark ML vectors (sparse or dense VectorUDT) and text
(string documents, array<string> token lists, for a spec that reads text). `features.py` has the
transformers and UDFs, `join.py` the band-key join with exact verification, `clusters.py` the connected
components and greedy representatives in rounds of Spark jobs, `corpus.py` a corpus of files deduplicated
(featurehash.dedup.corpus on Spark). Needs `featurehash[spark]` (pyspark >= 3.5).
"""

from .clusters import SparkDuplicateClusters, duplicate_clusters
from .corpus import dedup_corpus
from .features import band_key_rows, band_keys_udf, codes_udf, features_udf, transform
from .join import similarity_join

__all__ = ["SparkDuplicateClusters", "band_key_rows", "band_keys_udf", "codes_udf", "dedup_corpus", "duplicate_clusters",
           "features_udf", "similarity_join", "transform"]
