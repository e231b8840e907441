"""MurmurHash3 x86 32-bit (Austin Appleby, public domain reference `MurmurHash3_x86_32`), compiled.

The hash scikit-learn's FeatureHasher and HashingVectorizer use (`sklearn.utils.murmurhash3_32` on the
UTF-8 bytes of a token, seed 0, read as a signed 32-bit integer), so that the compatibility mode of
the hashing map gives their indices and signs bit for bit. Many tokens are hashed in one call: their
UTF-8 bytes concatenated in `data`, token t being data[starts[t]:starts[t + 1]].

Everything is done in uint64 with explicit masks to 32 bits: a numba uint32 product may be promoted to
a wider type, and the masks make the result the reference's on every CPU.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_MASK = np.uint64(0xFFFFFFFF)
_C1 = np.uint64(0xCC9E2D51)
_C2 = np.uint64(0x1B873593)


@nb.njit(inline="always")
def _rotl32(value, shift):
    return ((value << np.uint64(shift)) | (value >> np.uint64(32 - shift))) & _MASK


@nb.njit(inline="always")
def _scramble(k1):
    k1 = (k1 * _C1) & _MASK
    k1 = _rotl32(k1, 15)
    return (k1 * _C2) & _MASK


@nb.njit(inline="always")
def murmur3_32(buf, begin, end, seed):
    """MurmurHash3_x86_32 of buf[begin:end] (uint8), as uint32."""
    length = end - begin
    h1 = np.uint64(seed) & _MASK
    blocks = length // 4
    for b in range(blocks):
        at = begin + 4 * b
        k1 = (np.uint64(buf[at]) | (np.uint64(buf[at + 1]) << np.uint64(8))
              | (np.uint64(buf[at + 2]) << np.uint64(16)) | (np.uint64(buf[at + 3]) << np.uint64(24)))
        h1 ^= _scramble(k1)
        h1 = _rotl32(h1, 13)
        h1 = (h1 * np.uint64(5) + np.uint64(0xE6546B64)) & _MASK
    tail = begin + 4 * blocks
    rest = length & 3
    k1 = np.uint64(0)
    if rest == 3:
        k1 ^= np.uint64(buf[tail + 2]) << np.uint64(16)
    if rest >= 2:
        k1 ^= np.uint64(buf[tail + 1]) << np.uint64(8)
    if rest >= 1:
        k1 ^= np.uint64(buf[tail])
        h1 ^= _scramble(k1)
    h1 ^= np.uint64(length) & _MASK
    h1 ^= h1 >> np.uint64(16)
    h1 = (h1 * np.uint64(0x85EBCA6B)) & _MASK
    h1 ^= h1 >> np.uint64(13)
    h1 = (h1 * np.uint64(0xC2B2AE35)) & _MASK
    h1 ^= h1 >> np.uint64(16)
    return np.uint32(h1)


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
