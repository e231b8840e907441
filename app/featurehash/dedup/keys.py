"""Band keys (and code fingerprints) of a collection, hashed chunk by chunk, in memory or on disk.

Each chunk's codes become L uint64 band keys per row (`candidates.band_keys`) and, with verify="codes", k
uint32 fingerprints. They are held in memory while the collection's keys and fingerprints take at most
`limit` bytes (twice that for a moment, when the chunks are joined); past it, everything so far and every later chunk is appended to raw files in the work
directory, row-major ((n, L) keys, (n, k) fingerprints), and memory-mapped back once the collection ends.
So the number of rows need not be known in advance (an iterable of chunks is hashed as it arrives and
its rows need not be kept), and a pair's keys for the first-shared-band rule are one contiguous row each.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..maps.mapped_pages import mapped_buffers, release
from . import candidates


@dataclass(frozen=True)
class HashedKeys:
    keys: np.ndarray            # (L, n) uint64: an array, or the transposed view of an (n, L) memory map
    prints: np.ndarray | None   # (n, k) uint32 fingerprints (verify="codes"), else None
    n: int
    spilled: bool


def hash_collection(feature_map, chunks, name: str, bands: int, rows: int, keep_prints: bool, limit: float,
                    workdir, keys_of=None) -> HashedKeys:
    """Keys of the rows of `chunks` (an iterable of row blocks, in order); `workdir()` gives the directory
    for the files once `limit` bytes are passed. `keys_of(chunk)` -> (keys (L, c), prints or None) replaces
    the map's hashing when a caller's chunks are not rows (featurehash.dedup.corpus.sets: already codes)."""
    k = feature_map.spec.n_components
    row_bytes = 8 * bands + (4 * k if keep_prints else 0)
    kept_keys, kept_prints, files, n = [], [], None, 0
    for chunk in chunks:
        chunk_keys, chunk_prints = (candidates.band_keys(feature_map.hash(chunk), bands, rows) if keys_of is None
                                    else keys_of(chunk))
        kept_keys.append(chunk_keys)
        if keep_prints:
            kept_prints.append(chunk_prints)
        n += chunk_keys.shape[1]
        if files is None and n * row_bytes > limit:
            directory = Path(workdir())
            files = {"keys": open(directory / f"keys-{name}.u8", "wb"),  # noqa: SIM115 (closed below)
                     "prints": open(directory / f"prints-{name}.u4", "wb") if keep_prints else None}  # noqa: SIM115
        if files is not None:   # append and forget what was kept
            for block in kept_keys:
                np.ascontiguousarray(block.T).tofile(files["keys"])
            for block in kept_prints:
                np.ascontiguousarray(block).tofile(files["prints"])
            kept_keys, kept_prints = [], []
    if files is None:
        keys = np.concatenate(kept_keys, axis=1) if kept_keys else np.empty((bands, 0), dtype=np.uint64)
        prints = (np.concatenate(kept_prints) if kept_prints else np.empty((0, k), dtype=np.uint32)) if keep_prints else None
        return HashedKeys(keys, prints, n, False)
    for file in files.values():
        if file is not None:
            file.close()
    keys = np.memmap(files["keys"].name, dtype=np.uint64, mode="r", shape=(n, bands)).T
    prints = np.memmap(files["prints"].name, dtype=np.uint32, mode="r", shape=(n, k)) if keep_prints else None
    return HashedKeys(keys, prints, n, True)


def row_chunks(X, chunk_rows: int):
    """Blocks of at most `chunk_rows` rows of a matrix, or of each chunk of an iterable. A memory-mapped matrix's
    pages are handed back after each block (`maps.mapped_pages`): one pass would otherwise leave the whole file
    resident."""
    if hasattr(X, "shape"):
        buffers = mapped_buffers(X)
        for start in range(0, X.shape[0], chunk_rows):
            yield X[start:start + chunk_rows]
            release(buffers)
        return
    for chunk in X:
        for start in range(0, chunk.shape[0], chunk_rows):
            yield chunk[start:start + chunk_rows]
