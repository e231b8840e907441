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
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

import numpy as np
import orjson
import scipy.sparse as sp

try:
    import dask.array as da
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("featurehash.dask needs dask: pip install 'featurehash[dask]'") from exc

from ..maps import FeatureMap, InputError, MapSpec, OneHotFeatures, UnsupportedOperation, create_map
from ..maps.inputs import output_dtype

__all__ = ["hash", "transform"]

# Maps a worker process keeps built (each holds its parameters, e.g. d x D floats for RFF).
WORKER_MAP_CACHE = 8


def transform(X, spec: Mapping[str, Any] | MapSpec, *, dtype=None) -> da.Array:
    """Features of the rows of X, a lazy dask array (CSR blocks for one-hot maps)."""
    feature_map, document = _resolve(spec)
    dtype = output_dtype(dtype)
    X = _row_blocks(X, feature_map)
    meta = sp.csr_matrix((0, 0), dtype=dtype) if feature_map.one_hot else np.empty((0, 0), dtype=dtype)
    return X.map_blocks(_transform_block, document, dtype.name, dtype=dtype, meta=meta,
                        chunks=(X.chunks[0], (feature_map.output_dim,)))


def hash(X, spec: Mapping[str, Any] | MapSpec) -> da.Array:  # noqa: A001 - mirrors FeatureMap.hash
    """Discrete codes (int64, n x n_components) of the rows of X, a lazy dask array."""
    feature_map, document = _resolve(spec)
    if not feature_map.has_hash:
        raise UnsupportedOperation("method", f"'{feature_map.method}' maps have no discrete codes")
    X = _row_blocks(X, feature_map)
    return X.map_blocks(_hash_block, document, dtype=np.int64, meta=np.empty((0, 0), dtype=np.int64),
                        chunks=(X.chunks[0], (feature_map.spec.n_components,)))


def _resolve(spec) -> tuple[FeatureMap, bytes]:
    feature_map = create_map(spec)
    return feature_map, orjson.dumps(feature_map.spec.to_dict(), option=orjson.OPT_SORT_KEYS)


def _row_blocks(X, feature_map: FeatureMap) -> da.Array:
    if hasattr(X, "to_dask_array"):  # a dask DataFrame
        X = X.to_dask_array()
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
