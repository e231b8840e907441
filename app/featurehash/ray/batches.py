"""A callable class for Ray Data's `map_batches`: features, codes or band keys of one column.

    ds.map_batches(FeatureHashBatches, fn_constructor_kwargs={"spec": spec, "column": "x",
                   "what": "codes"}, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=2))

Ray builds one instance per actor: the constructor builds the map (from the spec's canonical JSON,
through the per-process cache of `featurehash.engines.worker`), so each actor builds it once and every
batch reuses it. An instance also runs on Ray tasks (Ray Data's default compute), where it needs no actor
start and fuses with the task stages next to it:

    ds.map_batches(FeatureHashBatches(spec, "x"), batch_format="pyarrow")

it carries the shipped spec, never the map (`feature_map` is this process's map, looked up or built from
the spec), and each task process builds the map once, on its first batch. The spec may be a spec dict, a
MapSpec, or `engines.worker.resolve(spec)[1]` (the id and canonical JSON, what the driver ships).
Batches of any of Ray's formats are read and written back in the same format:
- "numpy" (dict of arrays): a 2-D float array (Ray's tensor column), or an object array of rows;
  dense results come back as a 2-D array, sparse features as an object array of {type, size, indices,
  values} dicts;
- "pandas": a column of arrays, lists, {indices, values} dicts or strings; results a column of arrays;
- "pyarrow": list / fixed-size-list / tensor columns, {indices, values} structs, strings; results
  list<float|double|int64> or the vector struct (`featurehash.engines.columns.VECTOR_TYPE`).
Text columns (documents, token lists) are read by a spec that reads text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    import pyarrow as pa
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("featurehash.ray needs pyarrow: pip install 'featurehash[ray]'") from exc

from ..engines.columns import rows_of
from ..engines.outputs import output_column, plan_output
from ..engines.worker import ShippedSpec, worker_map
from ..maps import InputError
from ..maps.inputs import output_dtype


class FeatureHashBatches:
    """`batch -> batch` with `output_column` (default: `what`) added; see the module docstring."""

    def __init__(self, spec: Mapping[str, Any] | ShippedSpec, column: str, output_column: str | None = None, *,
                 what: str = "features", dtype=None, threshold: float | None = None, bands: int | None = None,
                 target_recall: float = 0.95):
        plan = plan_output(spec, what, threshold, bands, target_recall)
        # the map is not kept: a map that has computed holds compiled closures, which do not pickle, and an
        # instance shipped to tasks needs only the spec
        self.shipped, self.banding = plan.shipped, plan.banding
        self.column, self.output_column, self.what = column, output_column or what, what
        self.dtype = output_dtype(dtype)

    @property
    def feature_map(self):
        """This process's map of the spec: the driver's, or built once per worker process."""
        return worker_map(self.shipped)

    def __call__(self, batch):
        names = batch.column_names if isinstance(batch, pa.Table) else list(batch.keys() if isinstance(batch, dict)
                                                                             else batch.columns)
        if self.output_column in names:
            # appending would give the batch two columns of one name (pyarrow allows it), which fails later
            # and far from here, e.g. when a second map_batches of the same spec runs on its output
            raise InputError("output_column", f"the batch already has a column {self.output_column!r}: pass "
                             f"output_column= another name (columns: {', '.join(map(str, names))})")
        if self.column not in names:
            raise InputError("column", f"the batch has no column {self.column!r} (columns: "
                             f"{', '.join(map(str, names))})")
        if isinstance(batch, pa.Table):
            return batch.append_column(self.output_column, self._compute(batch.column(self.column)))
        if isinstance(batch, dict):   # numpy format
            out = dict(batch)
            out[self.output_column] = _to_numpy(self._compute(batch[self.column]))
            return out
        out = batch.copy()   # pandas
        out[self.output_column] = list(_to_numpy(self._compute(batch[self.column])))
        return out

    def _compute(self, column) -> pa.Array:
        feature_map = self.feature_map
        rows = rows_of(_tensor_rows(column), feature_map, self.column) if len(column) else []
        return output_column(feature_map, rows, self.what, self.dtype, self.banding)


def _tensor_rows(column):
    """Ray's tensor columns (an Arrow extension type) as 2-D arrays; anything else as it is."""
    if isinstance(getattr(column, "type", None), pa.ExtensionType):
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        return np.asarray(column.to_numpy(zero_copy_only=False))
    return column


def _to_numpy(column: pa.Array):
    """A result column for the numpy and pandas formats: 2-D when every row has one width."""
    if pa.types.is_list(column.type):
        values = column.flatten().to_numpy(zero_copy_only=False)
        n = len(column)
        if n and values.size % n == 0:
            return values.reshape(n, values.size // n)
    return np.array(column.to_pylist() + [None], dtype=object)[:-1]
