"""MurmurHash3 x86 32-bit of many tokens at once: the hash of scikit-learn's FeatureHasher and HashingVectorizer
(`sklearn.utils.murmurhash3_32` on the UTF-8 bytes of a token, seed 0, read as a signed 32-bit integer), so that the
compatibility mode of the hashing map gives their indices and signs bit for bit. The hash itself is written once,
in featurehash.maps.numerics._murmur (the set minhash's token pass uses it too). Many tokens are hashed in one
call: their UTF-8 bytes concatenated in `data`, token t being data[starts[t]:starts[t + 1]].
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..numerics._murmur import murmur3_32

__all__ = ["murmur3_32", "murmur3_32_many", "token_bytes"]


@nb.njit(nogil=True, cache=True)
def murmur3_32_many(data: np.ndarray, starts: np.ndarray, seed: np.uint32) -> np.ndarray:
    """uint32 MurmurHash3_x86_32 of each token (data: uint8, starts: int64 of n + 1 offsets)."""
    n = starts.size - 1
    out = np.empty(n, dtype=np.uint32)
    for t in range(n):
        out[t] = murmur3_32(data, starts[t], starts[t + 1], seed)
    return out


def token_bytes(tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, starts int64) of the UTF-8 bytes of `tokens`, concatenated. ASCII text (most tokens) is
    encoded in one call and its offsets are the characters' (one byte each); other text token by token."""
    joined = "".join(tokens)
    if joined.isascii():
        starts = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens)), out=starts[1:])
        return np.frombuffer(joined.encode("ascii"), dtype=np.uint8), starts
    encoded = [token.encode("utf-8") for token in tokens]
    starts = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=starts[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), starts
