"""Featurehash past one machine, on Dask: features and codes of dask arrays and dataframes, and the
near-duplicate join and clusters of featurehash.dedup, with the spec (never the map's parameters)
travelling to the workers.

    import featurehash.dask as fhd
    Z = fhd.transform(X, spec)       # X: dask array (n, d) or dask DataFrame -> dask array (n, output_dim)
    codes = fhd.hash(X, spec)        # GCWS, binning: int64 dask array (n, n_components)
    pairs = fhd.similarity_join(X, spec, 0.7)          # dask DataFrame (i, j, similarity)
    clusters = fhd.duplicate_clusters(X, spec, 0.7)    # labels: dask array of each row's lowest cluster row
    summary = fhd.dedup_corpus("corpus/*.jsonl", "clean/", id_field="id")   # files in, clean corpus out

`features.py` has transform / hash, `join.py` the band-key shuffle and the verification of the join,
`clusters.py` the connected components and greedy representatives over the verified pairs.
Needs `featurehash[dask]`; the join and clusters also need dask.dataframe (pandas, pyarrow).
"""

from .clusters import DaskDuplicateClusters, duplicate_clusters
from .corpus import dedup_corpus
from .features import hash, transform  # noqa: A004 - mirrors FeatureMap.hash
from .join import similarity_join

__all__ = ["DaskDuplicateClusters", "dedup_corpus", "duplicate_clusters", "hash", "similarity_join", "transform"]
