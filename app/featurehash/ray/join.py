"""The similarity join of featurehash.dedup on Ray Data: the steps of `featurehash.engines.join_steps`
as a plan of map_batches and hash joins.

1. keyed: map_batches over the rows -> (id, keys, row): the map's codes of each batch and their L band
   keys (`dedup.candidates.band_keys`, the in-process banding `choose_bands(k, threshold, target_recall)`);
   materialised once, since three later steps read it;
2. candidates: (band, key, id) rows joined with themselves on (band, key) (Ray Data's hash join), kept
   where id_a < id_b (a bucket of b rows gives b (b - 1) / 2, as in process); with a second Dataset `Y`,
   the rows of ds joined with those of Y, every (x, y) of a bucket a candidate;
3. each candidate joined with both rows and their keys (two hash joins on the ids);
4. verify, per batch of candidates: dedup's first-shared-band rule (each pair kept in the first band its
   rows share, so it is verified once) and the lsh pair kernel (`ExactPairs`, or `CodePairs`).
No step gathers all keys or all pairs in one task; the joins shuffle into `partitions` blocks.
"""

from __future__ import annotations

import numpy as np

try:
    import pyarrow as pa
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("featurehash.ray needs pyarrow: pip install 'featurehash[ray]'") from exc

from ..engines.columns import list_column, rows_of
from ..engines.join_steps import batch_keys, first_band_mask, plan_bands, verify_pairs
from ..engines.worker import ShippedSpec, resolve, worker_map
from ..maps import InputError
from .batches import _tensor_rows


def similarity_join(ds, spec, threshold: float, *, Y=None, column: str = "features", id_col: str = "id",
                    target_recall: float = 0.95, verify: str = "exact", partitions: int = 8):
    """Every pair of rows of the Ray Dataset `ds` whose similarity under the map's kernel is >= `threshold`:
    a lazy Dataset (i, j, similarity) of the ids (i < j) in `id_col` (unique int64; the in-process join's
    row positions when they number the rows 0..n-1), the pairs of `featurehash.dedup.similarity_join`
    on the same rows. `column`: vectors, {indices, values} structs or text, as `FeatureHashBatches` reads
    them. `partitions`: the blocks each hash join shuffles into. Needs polars (Ray Data's joins).
    `Y` (a Dataset with the same `column` and `id_col`): the pairs (i an id of ds, j an id of Y) of the
    in-process join's `Y=` on the same rows; ids of ds and of Y may overlap.
    """
    feature_map, shipped = resolve(spec)
    bands, rows = plan_bands(feature_map, threshold, target_recall, verify)
    require_columns(ds, "ds", column, id_col)
    if Y is not None:
        require_columns(Y, "Y", column, id_col)
    options = {"shipped": shipped, "column": column, "id_col": id_col, "banding": (bands, rows),
               "codes": verify == "codes"}
    keyed_x = ds.map_batches(_keyed, batch_format="pyarrow", fn_kwargs=options).materialize()
    keyed_y = keyed_x if Y is None else Y.map_batches(_keyed, batch_format="pyarrow", fn_kwargs=options).materialize()
    exploded_x = keyed_x.map_batches(_explode, batch_format="pyarrow")
    exploded_y = exploded_x if Y is None else keyed_y.map_batches(_explode, batch_format="pyarrow")
    found = exploded_x.join(exploded_y, "inner", partitions, on=("band", "key"), left_suffix="_a",
                            right_suffix="_b")
    candidates = found.map_batches(_ordered, batch_format="pyarrow", fn_kwargs={"self_join": Y is None})
    sides = [keyed.rename_columns({"id": name, "keys": f"keys_{name}", "row": f"row_{name}"})
             for keyed, name in ((keyed_x, "i"), (keyed_y, "j"))]
    with_rows = (candidates.join(sides[0], "inner", partitions, on=("i",))
                 .join(sides[1], "inner", partitions, on=("j",)))
    return with_rows.map_batches(_verify, batch_format="pyarrow", fn_kwargs={
        "shipped": shipped, "threshold": float(threshold), "verify": verify})


def require_columns(ds, name: str, column: str, id_col: str) -> None:
    """Refuse a Dataset without the named columns here: Ray reports a missing column as a KeyError deep in
    a worker's trace, after the plan has started."""
    schema = ds.schema()
    names = list(schema.names) if schema is not None else []
    for field, wanted in (("column", column), ("id_col", id_col)):
        if wanted not in names:
            hint = " (unique int64 row ids: e.g. add them with ds.add_column)" if field == "id_col" else ""
            raise InputError(field, f"{name} has no column {wanted!r}{hint}; its columns: {', '.join(names)}")


# -- on the workers -------------------------------------------------------------------------

def _keyed(batch: pa.Table, shipped: ShippedSpec, column: str, id_col: str, banding: tuple, codes: bool):
    feature_map = worker_map(shipped)
    given = _tensor_rows(batch.column(column))
    rows = rows_of(given, feature_map, column)
    keys, prints = batch_keys(feature_map, rows, *banding)
    if codes:
        payload = list_column(prints)
    elif isinstance(given, np.ndarray):   # a tensor column: moved as list<double> through the joins
        payload = list_column(np.asarray(given, dtype=np.float64))
    else:
        payload = given.combine_chunks() if isinstance(given, pa.ChunkedArray) else given
    ids = batch.column(id_col).cast(pa.int64())
    return pa.table({"id": ids, "keys": list_column(keys), "row": payload})


def _explode(batch: pa.Table) -> pa.Table:
    keys = batch.column("keys").combine_chunks()
    n = len(keys)
    bands = (len(keys.flatten()) // n) if n else 0
    ids = batch.column("id").to_numpy()
    return pa.table({"band": np.tile(np.arange(bands, dtype=np.int32), n), "key": keys.flatten(),
                     "id": np.repeat(ids, bands)})


def _ordered(batch: pa.Table, self_join: bool) -> pa.Table:
    a, b = batch.column("id_a").to_numpy(), batch.column("id_b").to_numpy()
    keep = a < b if self_join else np.ones(a.size, dtype=bool)
    return pa.table({"i": a[keep], "j": b[keep], "band": batch.column("band").to_numpy()[keep]})


def _verify(batch: pa.Table, shipped: ShippedSpec, threshold: float, verify: str) -> pa.Table:
    i, j = batch.column("i").to_numpy(), batch.column("j").to_numpy()
    similarity = np.empty(0)
    if i.size:
        feature_map = worker_map(shipped)
        keys_i, keys_j = (_matrix(batch.column(name)) for name in ("keys_i", "keys_j"))
        first = first_band_mask(keys_i, keys_j, batch.column("band").to_numpy())
        batch, i, j = batch.filter(pa.array(first)), i[first], j[first]
        if verify == "codes":
            similarity = verify_pairs(feature_map, None, None, "codes", _matrix(batch.column("row_i")),
                                      _matrix(batch.column("row_j")))
        elif i.size:
            similarity = verify_pairs(feature_map, rows_of(batch.column("row_i"), feature_map, "x"),
                                      rows_of(batch.column("row_j"), feature_map, "y"), "exact")
    hit = similarity >= threshold
    return pa.table({"i": pa.array(i[hit], pa.int64()), "j": pa.array(j[hit], pa.int64()),
                     "similarity": pa.array(similarity[hit], pa.float64())})


def _matrix(column) -> np.ndarray:
    """A list column of equal widths (keys, fingerprints) as a 2-D array."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    values = column.flatten().to_numpy(zero_copy_only=False)
    return values.reshape(len(column), -1) if len(column) else values.reshape(0, 0)
