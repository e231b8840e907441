"""The similarity join of featurehash.dedup on Dask: band keys hashed on the workers, shuffled by key
between tasks, candidate pairs emitted per bucket, routed to the rows they need and verified there.

The task graph, for B row blocks of X (By of Y; By = B for a self join) and P key partitions:
1. hash, per row block: the map's codes (the map rebuilt from the spec on the worker), the L band
   keys of every row (`dedup.candidates.band_keys`), split by key into P pieces of (band, key, row).
2. bucket, per key partition: the pieces of every block for that partition (the shuffle: B x P
   edges, no task holds more than one partition of the keys); per band, the pairs of each bucket
   (`candidates.self_pairs` / `cross_pairs`), split by the row block of i.
3. gather, per row block of X: its candidates from the P partitions, sorted by (i, j), and the rows
   of each block of Y they name.
4. take, per (block of X, block of Y): those rows of Y, their band keys (and fingerprints).
5. verify, per row block of X: each candidate is kept in the first band it shares only (so a pair
   found in several bands, or partitions, is verified and returned once), scored exactly by the
   pair kernel of `featurehash.lsh.similarity` (`ExactPairs`) or from the codes (`lsh.matches.CodePairs`), and the
   pairs >= threshold returned as a pandas frame (i, j, similarity), sorted.
No step gathers all keys or all pairs: a task holds one row block, one key partition, or the
candidates of one row block with the rows they name. The graph has O(B P + B By) tasks (the
shuffle's pieces and the takes), so row blocks of 10^4-10^5 rows keep it small.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from dask import delayed

from ..dedup import candidates
from ..dedup.join import DEFAULT_BLOCK_PAIRS, plan_bands
from ..lsh.matches import CodePairs
from ..lsh.similarity import ExactPairs, similarity_of
from ..maps import InputError
from .features import _resolve, _row_blocks, _worker_map

PAIR_COLUMNS = ("i", "j", "similarity")


class Collection(NamedTuple):
    """One collection's row blocks on the graph: `blocks` (Delayed rows), `bounds` (B + 1,) the first
    row of each block then n, and per block the Delayed outputs of its hash task."""

    blocks: list
    bounds: np.ndarray
    hashed: list


class JoinGraph(NamedTuple):
    """`frames`: one Delayed pandas frame of verified pairs per row block of X; `bounds` of X."""

    frames: list
    bounds: np.ndarray
    bands: int
    rows: int


def similarity_join(X, spec, threshold: float, *, Y=None, target_recall: float = 0.95,
                    verify: str = "exact", partitions: int | None = None):
    """Every pair of rows whose similarity under the map's kernel is >= `threshold`, as a lazy dask
    DataFrame with columns i, j (int64) and similarity (float64), one partition per row block of X,
    sorted by (i, j) across partitions: the pairs and similarities of
    `featurehash.dedup.similarity_join(X, create_map(spec), threshold, Y=Y, ...)` on the same rows.

    X (and Y): dask arrays of rows, dense or blocks of scipy sparse matrices, with known row chunks,
    or dask DataFrames (their numeric columns; the partitions' lengths are counted first).
    The kernel (GMM / pGMM for gcws, Laplacian for binning), the banding (L x r from `choose_bands`,
    S-curve 1 - (1 - s^r)^L, recall `target_recall` at the threshold) and `verify` ("exact" or "codes")
    are those of the in-process join; see its docstring for recall and the codes' bias. With gcws
    power != 1 the exact kernel is computed on rows scaled per block rather than once, so similarities
    agree to float rounding (~1e-15 relative) instead of bit for bit.

    `partitions` (default: the number of row blocks) is P, the number of key partitions of the
    shuffle. Memory per task: a row block with its L 8-byte keys per row (plus k 4-byte
    fingerprints with verify="codes"), or 1/P of all (band, key, row) triples, 20 bytes each, or
    the candidates of one row block (24 bytes each, a bucket of b rows giving b (b - 1) / 2).
    Time: the hashing (as in process) spread over the workers, plus moving each (band, key, row)
    triple once and each candidate twice; the rows move only where a pair names them.
    """
    return pairs_frame(join_graph(X, spec, threshold, Y=Y, target_recall=target_recall, verify=verify,
                                  partitions=partitions).frames)


def join_graph(X, spec, threshold: float, *, Y=None, target_recall: float = 0.95, verify: str = "exact",
               partitions: int | None = None) -> JoinGraph:
    """The tasks of `similarity_join`, before they become a DataFrame."""
    feature_map, document = _resolve(spec)
    bands, rows = plan_bands(feature_map, threshold, target_recall, verify)
    if partitions is not None and partitions < 1:
        raise InputError("partitions", "must be positive")
    blocks_x, bounds_x = _blocks(X, feature_map, "X")
    blocks_y, bounds_y = (blocks_x, bounds_x) if Y is None else _blocks(Y, feature_map, "Y")
    n_parts = partitions or max(len(blocks_x), len(blocks_y))
    keep_prints = verify == "codes"

    def hashed(blocks, bounds):
        return [delayed(_hash_block, nout=n_parts + 2)(block, document, bands, rows, n_parts, int(start),
                                                        keep_prints) for block, start in zip(blocks, bounds)]

    x = Collection(blocks_x, bounds_x, hashed(blocks_x, bounds_x))
    y = x if Y is None else Collection(blocks_y, bounds_y, hashed(blocks_y, bounds_y))
    buckets = [delayed(_bucket, nout=len(x.blocks))([h[p] for h in x.hashed],
                                                    None if Y is None else [h[p] for h in y.hashed],
                                                    x.bounds) for p in range(n_parts)]
    frames = []
    for bi in range(len(x.blocks)):
        gathered = delayed(_gather, nout=len(y.blocks) + 1)([bucket[bi] for bucket in buckets], y.bounds)
        first = bi if Y is None else 0   # a self join's pairs have j > i: no earlier block of Y
        taken = [delayed(_take)(y.blocks[bj], y.hashed[bj][n_parts], y.hashed[bj][n_parts + 1],
                                gathered[1 + bj], int(y.bounds[bj]), document)
                 for bj in range(first, len(y.blocks))]
        frames.append(delayed(_verify)(gathered[0], x.blocks[bi], x.hashed[bi][n_parts],
                                       x.hashed[bi][n_parts + 1], int(x.bounds[bi]), taken, document,
                                       float(threshold), verify))
    return JoinGraph(frames=frames, bounds=x.bounds, bands=bands, rows=rows)


def pairs_frame(frames: list):
    """A dask DataFrame (i int64, j int64, similarity float64) of Delayed pandas frames."""
    try:
        import dask.dataframe as dd
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the Dask join returns a dask DataFrame: pip install 'dask[dataframe]'") from exc
    meta = pd.DataFrame({"i": np.empty(0, np.int64), "j": np.empty(0, np.int64),
                         "similarity": np.empty(0, np.float64)}, columns=list(PAIR_COLUMNS))
    return dd.from_delayed(frames, meta=meta, verify_meta=False)


def _blocks(X, feature_map, name: str) -> tuple[list, np.ndarray]:
    if hasattr(X, "to_dask_array"):   # a dask DataFrame: its partitions' lengths are counted first
        X = X.to_dask_array(lengths=True)
    X = _row_blocks(X, feature_map)
    sizes = np.asarray(X.chunks[0], dtype=float)
    if np.isnan(sizes).any():
        raise InputError(name, "row chunk sizes must be known (call compute_chunk_sizes() first)")
    bounds = np.concatenate(([0], np.cumsum(sizes.astype(np.int64))))
    return list(X.to_delayed().ravel()), bounds


def split_by_block(rows: np.ndarray, bounds: np.ndarray, *columns: np.ndarray) -> list[tuple]:
    """(rows, *columns) cut into one tuple per block of `bounds`, for `rows` sorted ascending."""
    cuts = np.searchsorted(rows, bounds[1:-1], side="left")
    return [tuple(part) for part in zip(*(np.split(c, cuts) for c in (rows, *columns)))]


# -- on the workers -------------------------------------------------------------------------

def _hash_block(block, document: bytes, bands: int, rows: int, n_parts: int, start: int, keep_prints: bool):
    """P pieces (band int32, key uint64, row int64) by key % P (each sorted by band, then row), the
    block's keys (L, n) and fingerprints (n, k) or None."""
    feature_map = _worker_map(document)
    X = _checked(feature_map, block, "x")
    codes = (feature_map.hash(X) if X.shape[0] else
             np.empty((0, feature_map.spec.n_components), dtype=np.int64))
    keys, prints = candidates.band_keys(codes, bands, rows)
    n = keys.shape[1]
    part = (keys % np.uint64(n_parts)).ravel()
    order = np.argsort(part, kind="stable")   # stable: band-major, rows ascending within a band
    cuts = np.searchsorted(part[order], np.arange(1, n_parts))
    band = (order // max(n, 1)).astype(np.int32)
    row = (order % max(n, 1)).astype(np.int64) + start
    pieces = [(b, k, r) for b, k, r in zip(np.split(band, cuts), np.split(keys.ravel()[order], cuts),
                                           np.split(row, cuts))]
    return (*pieces, keys, prints if keep_prints else None)


def _bucket(pieces_x: list, pieces_y: list | None, bounds_x: np.ndarray) -> tuple:
    """Candidate pairs (i, j, band) of one key partition, split by the row block of i."""
    band_x, key_x, row_x = (np.concatenate(c) for c in zip(*pieces_x))   # rows ascending per band
    if pieces_y is not None:
        band_y, key_y, row_y = (np.concatenate(c) for c in zip(*pieces_y))
    found_i, found_j, found_band = [], [], []
    for band in np.unique(band_x):   # a loop over bands; each band's buckets are emitted vectorised
        in_x = band_x == band
        left_rows = row_x[in_x]
        if pieces_y is None:
            pairs = candidates.self_pairs(key_x[in_x], DEFAULT_BLOCK_PAIRS)
            right_rows = left_rows
        else:
            in_y = band_y == band
            pairs = candidates.cross_pairs(key_x[in_x], key_y[in_y], DEFAULT_BLOCK_PAIRS)
            right_rows = row_y[in_y]
        for left, right in pairs:
            found_i.append(left_rows[left])
            found_j.append(right_rows[right])
            found_band.append(np.full(left.size, band, dtype=np.int32))
    i, j, band = _concatenate(found_i, found_j, found_band)
    order = np.argsort(i, kind="stable")
    return tuple(split_by_block(i[order], bounds_x, j[order], band[order]))


def _gather(parts: list, bounds_y: np.ndarray) -> tuple:
    """One row block's candidates (i, j, band) sorted by (i, j), and the rows of each block of Y they name."""
    i, j, band = (np.concatenate(c) for c in zip(*parts))
    order = np.lexsort((band, j, i))
    i, j, band = i[order], j[order], band[order]
    named = np.unique(j)
    return ((i, j, band), *(rows for rows, in split_by_block(named, bounds_y)))


def _take(block, keys: np.ndarray, prints, rows: np.ndarray, start: int, document: bytes):
    """The named rows of a block of Y (checked as the in-process join checks them), with their keys."""
    local = rows - start
    taken = _checked(_worker_map(document), block[local], "y")
    return rows, taken, keys[:, local], None if prints is None else prints[local]


def _verify(candidates_i, block, keys, prints, start: int, taken: list, document: bytes, threshold: float,
            verify: str):
    import pandas as pd

    i, j, band = candidates_i
    named = np.concatenate([t[0] for t in taken]) if taken else np.empty(0, dtype=np.int64)
    if i.size:
        feature_map = _worker_map(document)
        local_i, local_j = i - start, np.searchsorted(named, j)
        keys_y = np.concatenate([t[2] for t in taken], axis=1)
        first = _first_shared_band(keys, keys_y, local_i, local_j)
        keep = first == band
        i, j, local_i, local_j = i[keep], j[keep], local_i[keep], local_j[keep]
        if verify == "exact":
            rows_y = [t[1] for t in taken]
            Y = sp.vstack(rows_y, format="csr") if sp.issparse(rows_y[0]) else np.concatenate(rows_y)
            score = ExactPairs(similarity_of(feature_map), _checked(feature_map, block, "x"), Y)
        else:
            score = CodePairs(prints, np.concatenate([t[3] for t in taken]))
        similarity = score(local_i, local_j)
        hit = similarity >= threshold
        i, j, similarity = i[hit], j[hit], similarity[hit]
    else:
        similarity = np.empty(0)
    return pd.DataFrame({"i": i.astype(np.int64), "j": j.astype(np.int64), "similarity": similarity})


def _checked(feature_map, rows, field: str):
    """Rows as the in-process join checks them; no rows (an empty block, or none named) as they are,
    where the map's check refuses an empty batch."""
    return feature_map.check(rows, field) if rows.shape[0] else rows


def _first_shared_band(keys_x: np.ndarray, keys_y: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The first band in which each pair's keys agree (every candidate shares one)."""
    first = np.full(i.size, keys_x.shape[0], dtype=np.int32)
    for band in range(keys_x.shape[0] - 1, -1, -1):   # a loop over bands, vectorised over the pairs
        first[keys_x[band, i] == keys_y[band, j]] = band
    return first


def _concatenate(*lists: list) -> list[np.ndarray]:
    dtypes = (np.int64, np.int64, np.int32)
    return [np.concatenate(items) if items else np.empty(0, dtype=dtype) for items, dtype in zip(lists, dtypes)]
