"""What an engine's per-batch transformer gives, shared by the Spark transformer / UDFs and the Ray
batch class: the options checked once on the driver (`plan_output`), and a batch of rows turned into
the output column (`output_column`: features, codes or band keys, as Arrow)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..maps import InputError, UnsupportedOperation
from ..lsh.banding import choose_bands
from .columns import VECTOR_TYPE, features_column, list_column, sparse_features
from .join_steps import batch_keys
from .worker import resolve

WHAT = ("features", "codes", "band_keys")


class OutputPlan(NamedTuple):
    """The map (on the driver), the spec to ship, what to give and the banding (L, r) of band keys."""

    feature_map: object
    shipped: object
    what: str
    banding: tuple[int, int] | None


def plan_output(spec, what: str, threshold: float | None = None, bands: int | None = None,
                target_recall: float = 0.95) -> OutputPlan:
    """Checks `what` and its options; band keys take one of `threshold` (the join's banding,
    `choose_bands(k, threshold, target_recall)`) or `bands` (L bands of k // L codes)."""
    if what not in WHAT:
        raise InputError("what", f"must be one of {', '.join(WHAT)}")
    feature_map, shipped = resolve(spec)
    if what != "features" and not feature_map.has_hash:
        raise UnsupportedOperation("method", f"'{feature_map.method}' maps have no discrete codes")
    banding = None
    if what == "band_keys":
        k = feature_map.spec.n_components
        if (threshold is None) == (bands is None):
            raise InputError("threshold", "give one of threshold (the join's banding) or bands")
        if bands is not None:
            if not 1 <= bands <= k:
                raise InputError("bands", f"must lie in [1, {k}] (the map's codes per row)")
            banding = (int(bands), k // int(bands))
        else:
            if not 0.0 < threshold <= 1.0 or not 0.0 < target_recall < 1.0:
                raise InputError("threshold", "threshold must lie in (0, 1] and target_recall in (0, 1)")
            banding = choose_bands(k, threshold, target_recall)
    return OutputPlan(feature_map, shipped, what, banding)


def output_column(feature_map, rows, what: str, dtype: np.dtype, banding) -> pa.Array:
    """A batch's output: features (list<dtype>, or vectors for sparse features), codes or band keys
    (list<int64>); no rows give an empty column of that type."""
    n = len(rows) if isinstance(rows, list) else rows.shape[0]
    if n == 0:
        if what != "features":
            return pa.array([], pa.list_(pa.int64()))
        if sparse_features(feature_map):
            return pa.array([], VECTOR_TYPE)
        return pa.array([], pa.list_(pa.from_numpy_dtype(dtype)))
    if what == "features":
        return features_column(feature_map.transform(rows, dtype=dtype), dtype)
    if what == "codes":
        return list_column(feature_map.hash(rows))
    return list_column(batch_keys(feature_map, rows, *banding)[0])
