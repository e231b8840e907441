"""What the Spark and Ray adapters share, below them: the spec shipped as canonical JSON and the map
rebuilt once per worker process (`worker`), an engine's column of rows (Arrow arrays, pandas Series,
numpy arrays) read as the rows a map takes and its results written back as columns (`columns`), a
transformer's options checked once and a batch turned into its output column (`outputs`: features, codes
or band keys, for the Spark transformer and UDFs and the Ray batch class), and
the similarity join's per-batch steps (`join_steps`: band keys of a batch, exact verification of a
batch of candidate pairs), which call `featurehash.dedup`. Library only: no engine, web framework or
Redis is imported here; pyarrow is (both engines move batches as Arrow)."""
