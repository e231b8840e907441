"""Near-duplicate detection in process: similarity joins and duplicate clusters over the discrete codes
of GCWS (GMM / pGMM kernel) and random binning (Laplacian kernel) maps, with LSH banding planned by the
S-curve 1 - (1 - s^r)^L (Broder's minhash banding; Leskovec, Rajaraman & Ullman, "Mining of Massive
Datasets", ch. 3) and exact verification of every candidate. Numerics and orchestration only: no web
framework, no Redis.

Past memory: rows may come from .npy / .npz files (memory-mapped) or iterables of chunks (`sources`);
under a `memory_budget` the band keys spill to disk as hash partitions grouped one at a time (`spill`);
pairs may be written as found to .npz or Parquet (`output`), and clusters are built from them streamed.
The pipeline: source chunks -> codes -> band keys -> (spill) -> grouped candidates -> verify -> pair sink
-> clusters. `command` is the body of `featurehash dedup`."""

from .clusters import DuplicateClusters, duplicate_clusters
from .join import SimilarPairs, similarity_join

__all__ = ["DuplicateClusters", "SimilarPairs", "duplicate_clusters", "similarity_join"]
