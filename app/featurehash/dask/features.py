"""Featurise dask arrays and dataframes past one machine: the spec travels, each worker rebuilds the map.

    import featurehash.dask as fhd
    Z = fhd.transform(X, spec)       # X: dask array (n, d) or dask DataFrame -> dask array (n, output_dim)
    codes = fhd.hash(X, spec)        # GCWS, binning: int64 dask array (n, n_components)

`spec` is a spec dict (a resolved one, e.g. a fitted estimator's `spec_` or a service map's, or a
request) or a MapSpec. It is resolved once, here (fitted numbers included: workers never refit), and
goes into the task graph as its canonical JSON, hundreds of bytes to a few KB, never the map's
parameter arrays; each worker process builds the map on first use and keeps the last few. Blocks of
rows are featurised by the library's own transform, so the results are those of `create_map(spec)`
on the same rows: codes bit for bit, dense features to float32 rounding (bit for bit on one machine).

Row blocks stay as they are; columns are gathered into one block. Dense features come as float32
unless `dtype=np.float64`; one-hot maps (GCWS, binning) give blocks of scipy CSR matrices. A dask
DataFrame is read as its numeric columns in order (`to_dask_array()`). Needs `featurehash[dask]`.

Text: X may also be a dask.bag of documents (token lists, weighted tokens) or a dask Series of str (a
DataFrame's text column), for a spec that reads text (method "hashing", or any map with `input: {"hashing":
...}`). Each partition becomes one row block: the result's row chunks are unknown (nan) until computed
(`compute_chunk_sizes()`), as dask's own bag-to-array conversions. The hashing map gives CSR blocks.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Mapping

import numpy as np
import orjson
import scipy.sparse as sp

try:
    import dask.array as da
    import dask.bag as db
    from dask import delayed
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("featurehash.dask needs dask: pip install 'featurehash[dask]'") from exc

from ..maps import FeatureMap, InputError, MapSpec, OneHotFeatures, UnsupportedOperation, create_map
from ..maps.inputs import output_dtype
from ..maps.sparse_structure import checked_csr

__all__ = ["hash", "transform"]

# Maps a worker process keeps built (each holds its parameters, e.g. d x D floats for RFF).
WORKER_MAP_CACHE = 8


def transform(X, spec: Mapping[str, Any] | MapSpec, *, dtype=None) -> da.Array:
    """Features of the rows of X, a lazy dask array (CSR blocks for one-hot and hashing maps)."""
    feature_map, document = _resolve(spec)
    dtype = output_dtype(dtype)
    if _is_text(X):
        sparse = feature_map.one_hot or feature_map.describe()["features"] == "sparse"
        meta = sp.csr_matrix((0, 0), dtype=dtype) if sparse else np.empty((0, 0), dtype=dtype)
        return _text_blocks(X, feature_map, _transform_text_block, (document, dtype.name), meta,
                            feature_map.output_dim)
    X = _row_blocks(X, feature_map)
    meta = sp.csr_matrix((0, 0), dtype=dtype) if feature_map.one_hot else np.empty((0, 0), dtype=dtype)
    return X.map_blocks(_transform_block, document, dtype.name, dtype=dtype, meta=meta,
                        chunks=(X.chunks[0], (feature_map.output_dim,)))


def hash(X, spec: Mapping[str, Any] | MapSpec) -> da.Array:  # noqa: A001 - mirrors FeatureMap.hash
    """Discrete codes (int64, n x n_components) of the rows of X, a lazy dask array."""
    feature_map, document = _resolve(spec)
    if not feature_map.has_hash:
        raise UnsupportedOperation("method", f"'{feature_map.method}' maps have no discrete codes")
    if _is_text(X):
        return _text_blocks(X, feature_map, _hash_text_block, (document,), np.empty((0, 0), dtype=np.int64),
                            feature_map.spec.n_components)
    X = _row_blocks(X, feature_map)
    return X.map_blocks(_hash_block, document, dtype=np.int64, meta=np.empty((0, 0), dtype=np.int64),
                        chunks=(X.chunks[0], (feature_map.spec.n_components,)))


def _resolve(spec) -> tuple[FeatureMap, bytes]:
    feature_map = create_map(spec)
    return feature_map, orjson.dumps(feature_map.spec.to_dict(), option=orjson.OPT_SORT_KEYS)


def _is_text(X) -> bool:
    """A dask.bag, or a dask Series of text (object or string dtype): rows of text, not of numbers."""
    if isinstance(X, db.Bag):
        return True
    dtype = getattr(X, "dtype", None) if getattr(X, "ndim", None) == 1 and hasattr(X, "to_delayed") else None
    return dtype is not None and (dtype == object or getattr(dtype, "kind", None) in ("O", "U", "T")
                                  or str(dtype).startswith("string"))


def _text_blocks(X, feature_map: FeatureMap, block_function, arguments: tuple, meta, width: int) -> da.Array:
    if feature_map.text_stage is None and not getattr(feature_map, "text_input", False):
        raise InputError("documents", f"this '{feature_map.method}' spec reads vectors, not text: give it a "
                         "front stage, input: {\"hashing\": {...}}, or use method 'hashing'")
    compute = delayed(block_function, pure=True)
    blocks = [da.from_delayed(compute(partition, index, *arguments), shape=(np.nan, width), dtype=meta.dtype,
                              meta=meta) for index, partition in enumerate(X.to_delayed())]
    return da.concatenate(blocks, axis=0)


def _row_blocks(X, feature_map: FeatureMap) -> da.Array:
    if hasattr(X, "to_dask_array"):  # a dask DataFrame
        X = X.to_dask_array()
    if sp.issparse(X):   # checked before dask slices it into blocks (scipy's slicing drops or reads bad indices)
        X = checked_csr(X, "vectors")
    X = X if isinstance(X, da.Array) else da.asarray(X)
    if X.ndim != 2:
        raise InputError("vectors", f"expected a 2-D array (n, {feature_map.input_dim}), got {X.ndim}-D")
    if X.shape[1] != feature_map.input_dim:
        raise InputError("vectors", f"wrong dimension: vectors have {X.shape[1]} entries, the map expects "
                         f"{feature_map.input_dim}")
    return X.rechunk({1: -1}) if len(X.chunks[1]) > 1 else X


# -- on the workers -------------------------------------------------------------------------

@lru_cache(maxsize=WORKER_MAP_CACHE)
def _worker_map(document: bytes) -> FeatureMap:
    return create_map(orjson.loads(document))


def _transform_block(block, document: bytes, dtype_name: str):
    feature_map, dtype = _worker_map(document), np.dtype(dtype_name)
    if block.shape[0] == 0:  # an empty partition
        empty = np.empty((0, feature_map.output_dim), dtype=dtype)
        return sp.csr_matrix(empty) if feature_map.one_hot else empty
    features = feature_map.transform(block, dtype=dtype)
    return features.to_csr(dtype) if isinstance(features, OneHotFeatures) else features


def _hash_block(block, document: bytes) -> np.ndarray:
    feature_map = _worker_map(document)
    if block.shape[0] == 0:
        return np.empty((0, feature_map.spec.n_components), dtype=np.int64)
    return feature_map.hash(block)


def _rows_of(partition) -> list:
    """A partition's rows as the list the maps read (a bag's partition is a list or an iterator; a Series'
    a pandas Series)."""
    return partition.tolist() if hasattr(partition, "tolist") else list(partition)


@contextmanager
def _in_partition(index: int):
    """The map's error about row r of a partition, naming the partition too (rows are numbered within it)."""
    try:
        yield
    except InputError as exc:
        raise InputError(exc.field, f"partition {index}, {exc.message}") from None


def _transform_text_block(partition, index: int, document: bytes, dtype_name: str):
    feature_map, dtype, rows = _worker_map(document), np.dtype(dtype_name), _rows_of(partition)
    sparse = feature_map.one_hot or feature_map.describe()["features"] == "sparse"
    if not rows:
        empty = np.empty((0, feature_map.output_dim), dtype=dtype)
        return sp.csr_matrix(empty) if sparse else empty
    with _in_partition(index):
        features = feature_map.transform(rows, dtype=dtype)
    return features.to_csr(dtype) if isinstance(features, OneHotFeatures) else features


def _hash_text_block(partition, index: int, document: bytes) -> np.ndarray:
    feature_map, rows = _worker_map(document), _rows_of(partition)
    if not rows:
        return np.empty((0, feature_map.spec.n_components), dtype=np.int64)
    with _in_partition(index):
        return feature_map.hash(rows)
