"""Featurehash on Ray Data: a callable class for `Dataset.map_batches` (numpy, pandas and pyarrow batch
formats) that builds the map once per actor, and the near-duplicate join of featurehash.dedup as a Ray
Data plan.

    import featurehash.ray as fhr
    ds = ds.map_batches(fhr.FeatureHashBatches, fn_constructor_kwargs={"spec": spec, "column": "x"},
                        batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=2))   # "features" appended
    ds = ds.map_batches(fhr.FeatureHashBatches(spec, "x"), batch_format="pyarrow")   # the same on Ray tasks
    pairs = fhr.similarity_join(ds, spec, 0.7, column="x")            # Dataset (i, j, similarity)
    pairs = fhr.similarity_join(ds, spec, 0.7, Y=other, column="x")   # pairs between two Datasets
    clusters = fhr.duplicate_clusters(ds, spec, 0.7, column="x")      # .labels: Dataset (id, label)
    summary = fhr.dedup_corpus("corpus/*.jsonl", "clean/", id_field="id")   # files in, clean corpus out

Needs `featurehash[ray]` (ray[data]; the join also needs polars, which Ray Data's joins use).
"""

from .batches import FeatureHashBatches
from .clusters import RayDuplicateClusters, duplicate_clusters
from .corpus import dedup_corpus
from .join import similarity_join

__all__ = ["FeatureHashBatches", "RayDuplicateClusters", "dedup_corpus", "duplicate_clusters", "similarity_join"]
