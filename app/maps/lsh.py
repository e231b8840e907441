"""LSH band keys from discrete codes (GCWS, binning).

k codes split into L bands of r = k / L consecutive samples; a band's key is its index
and a 128-bit BLAKE2b digest of its r codes, so two vectors share a band key exactly
when all r codes agree (up to a 2^-128 digest collision). For GCWS,
Pr[band collision] = GMM^r.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .errors import InputError


def band_keys(codes: np.ndarray, bands: int, field: str = "bands") -> list[list[str]]:
    n, k = codes.shape
    if bands < 1 or k % bands:
        raise InputError(field, f"must be a positive divisor of the number of samples ({k})")
    blocks = np.ascontiguousarray(codes, dtype="<i8").reshape(n, bands, k // bands)
    return [[f"{band}:{hashlib.blake2b(row[band].tobytes(), digest_size=16).hexdigest()}"
             for band in range(bands)] for row in blocks]
