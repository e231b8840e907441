"""Band keys of discrete codes: the strings of POST /hash (featurehash.lsh.banding re-exports them).

Kept at this path only because featurehash.service.api.routes_compute imports `band_keys` from here; the rest of
LSH (fingerprints, digests, the S-curve, similarities, re-ranking, clusters) lives in featurehash.lsh. Once that
import reads featurehash.lsh.banding, these two functions move there and this module goes.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .errors import InputError


def band_keys(codes: np.ndarray, bands: int, field: str = "bands") -> np.ndarray:
    """The (n, bands) array of band keys of int64 codes (n, k): strings "<band>:<32 hex digits>" (numpy's
    fixed-width str dtype), the same strings a JSON answer lists. A 128-bit digest does not fit a uint64,
    and the strings are what POST /hash has always answered."""
    n, k = codes.shape
    if bands < 1 or k % bands:
        raise InputError(field, f"must be a positive divisor of the number of samples ({k})")
    blocks = np.ascontiguousarray(codes, dtype="<i8").reshape(n, bands, k // bands)
    keys = [f"{band}:{hashlib.blake2b(row[band].tobytes(), digest_size=16).hexdigest()}"
            for row in blocks for band in range(bands)]
    return np.array(keys, dtype=band_key_dtype(bands)).reshape(n, bands)


def band_key_dtype(bands: int) -> np.dtype:
    """The str dtype that holds a band key of `bands` bands: the band's digits, ':' and 32 hex digits."""
    return np.dtype(f"<U{len(str(bands - 1)) + 33}")
