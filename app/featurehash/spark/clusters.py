"""Near-duplicate clusters in Spark: rounds of joins over the verified pairs of `join.py`, each round a
Spark job checkpointed locally (lineage cut), until no row's label changes. Nothing is collected to the
driver but one count per round."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import functions as F

from ..maps import InputError
from .join import similarity_join

UNDECIDED = -1


@dataclass(frozen=True)
class SparkDuplicateClusters:
    """`labels`: DataFrame (id, label), label the lowest id of the row's cluster (its representative:
    `c.representatives[c.labels]` of the in-process `featurehash.dedup.duplicate_clusters` when the ids
    are the row positions); `representatives`: DataFrame (id) of the representative rows; `pairs`: the
    verified pairs (i, j, similarity), checkpointed; `rounds`: the rounds of label updates run."""

    labels: object
    representatives: object
    mode: str
    pairs: object
    rounds: int


def duplicate_clusters(df, spec, threshold: float, *, mode: str = "components", column: str = "features",
                       id_col: str = "id", target_recall: float = 0.95, verify: str = "exact") -> SparkDuplicateClusters:
    """Clusters of near-duplicate rows of `df`, equal to `featurehash.dedup.duplicate_clusters` on the same
    rows: the pairs of `featurehash.spark.similarity_join(df, spec, threshold, ...)`, then

    mode="components": connected components by min-label propagation (Hash-Min: Rastogi et al., "Finding
    connected components in map-reduce in logarithmic rounds", ICDE 2013) with pointer jumping: each row
    of a pair starts as its own label; per round, every pair proposes the lower of its two labels to both
    rows, a row takes the lowest proposal, then the label of its label. Labels only fall and stay rows of
    the component, so they end at its lowest id. Rounds: about log2 of the longest shortest path, plus one.
    mode="representatives": the in-process greedy rule (rows in id order; a row joins its lowest earlier
    neighbour that is a representative, else is one), in rounds as featurehash.dask runs it: a row is
    decided once every earlier neighbour below its lowest representative neighbour is decided.

    Each round is one Spark job of a few joins over the pairs and the labels of the rows they name (rows
    with no pair are their own cluster and never enter a round), plus one count.
    """
    if mode not in ("components", "representatives"):
        raise InputError("mode", "must be 'components' or 'representatives'")
    pairs = similarity_join(df, spec, threshold, column=column, id_col=id_col, target_recall=target_recall,
                            verify=verify).localCheckpoint()
    edges = pairs.select("i", "j")
    named = edges.select(F.col("i").alias("id")).union(edges.select(F.col("j").alias("id"))).distinct()
    if mode == "components":
        labels, rounds = _components(edges, named)
    else:
        labels, rounds = _representatives(edges, named)
    ids = df.select(F.col(id_col).cast("long").alias("id"))
    labels = ids.join(labels, "id", "left").select("id", F.coalesce("label", "id").alias("label"))
    representatives = labels.where(F.col("label") == F.col("id")).select("id")
    return SparkDuplicateClusters(labels=labels, representatives=representatives, mode=mode, pairs=pairs,
                                  rounds=rounds)


def _components(edges, named):
    labels = named.select("id", F.col("id").alias("label")).localCheckpoint()
    rounds, changed = 0, 1
    while changed:
        ends = (edges.join(labels.select(F.col("id").alias("i"), F.col("label").alias("li")), "i")
                .join(labels.select(F.col("id").alias("j"), F.col("label").alias("lj")), "j")
                .select("i", "j", F.least("li", "lj").alias("proposal")))
        proposals = (ends.select(F.col("i").alias("id"), "proposal")
                     .union(ends.select(F.col("j").alias("id"), "proposal"))
                     .groupBy("id").agg(F.min("proposal").alias("proposal")))
        lowered = labels.join(proposals, "id").select("id", F.least("label", "proposal").alias("label"))
        jumped = (lowered.join(lowered.select(F.col("id").alias("label"), F.col("label").alias("above")), "label")
                  .select("id", F.least("label", "above").alias("label"))).localCheckpoint()
        changed = (jumped.join(labels.withColumnRenamed("label", "before"), "id")
                   .where(F.col("label") != F.col("before")).count())
        labels, rounds = jumped, rounds + 1
    return labels, rounds


def _representatives(edges, named):
    state = named.select("id", F.lit(UNDECIDED).cast("long").alias("label")).localCheckpoint()
    rounds, undecided = 0, 1
    while undecided:
        earlier = edges.join(state.select(F.col("id").alias("i"), F.col("label").alias("state")), "i")
        votes = earlier.groupBy(F.col("j").alias("id")).agg(
            F.min(F.when(F.col("state") == F.col("i"), F.col("i"))).alias("rep"),
            F.min(F.when(F.col("state") == UNDECIDED, F.col("i"))).alias("open"))
        rep, open_ = F.col("rep"), F.col("open")
        decided = state.join(votes, "id", "left").select("id", (
            F.when(F.col("label") != UNDECIDED, F.col("label"))
            .when(rep.isNotNull() & (open_.isNull() | (rep < open_)), rep)
            .when(rep.isNull() & open_.isNull(), F.col("id"))
            .otherwise(F.lit(UNDECIDED))).alias("label")).localCheckpoint()
        undecided = decided.where(F.col("label") == UNDECIDED).count()
        state, rounds = decided, rounds + 1
    return state, rounds
