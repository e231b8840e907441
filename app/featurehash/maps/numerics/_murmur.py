"""MurmurHash3 x86 32-bit (Austin Appleby, public domain reference `MurmurHash3_x86_32`), compiled, written once.

Kernel: h = fmix32(h_blocks(seed, 4-byte little-endian blocks) ^ scramble(tail) ^ length), the reference's
formula (Appleby, smhasher `MurmurHash3.cpp`). It is the hash scikit-learn's FeatureHasher and HashingVectorizer
use (`sklearn.utils.murmurhash3_32`), so the text stage (featurehash.maps.text) gives their indices bit for bit,
and the set minhash's token-list pass (featurehash.maps.minhash) hashes tokens to the stage's own columns.
Both families import it from here: they are siblings in the layer contract and may not import each other.

Invariant: the reference's bits on every CPU. Everything is done in uint64 with explicit masks to 32 bits (a
numba uint32 product may be promoted to a wider type); the masks make the result the reference's.
"""

from __future__ import annotations

import numba as nb
import numpy as np

MASK32 = np.uint64(0xFFFFFFFF)
_C1 = np.uint64(0xCC9E2D51)
_C2 = np.uint64(0x1B873593)


@nb.njit(inline="always")
def _rotl32(value, shift):
    return ((value << np.uint64(shift)) | (value >> np.uint64(32 - shift))) & MASK32


@nb.njit(inline="always")
def _scramble(k1):
    k1 = (k1 * _C1) & MASK32
    k1 = _rotl32(k1, 15)
    return (k1 * _C2) & MASK32


@nb.njit(inline="always")
def block_step(h1, k1):
    """One 4-byte block (k1, as read little-endian) into the running state h1."""
    h1 ^= _scramble(k1)
    h1 = _rotl32(h1, 13)
    return (h1 * np.uint64(5) + np.uint64(0xE6546B64)) & MASK32


@nb.njit(inline="always")
def finish(h1, tail_word, rest, length):
    """The tail (the last `rest` < 4 bytes, the low bytes of tail_word; other bits of tail_word are ignored)
    and the finaliser. A zero tail scrambles to zero, so no test on `rest` is needed (the reference's
    `if rest` skips a no-op): branches on the tail's length mispredicted token after token."""
    k1 = tail_word & ((np.uint64(1) << np.uint64(8 * rest)) - np.uint64(1))
    h1 ^= _scramble(k1)
    h1 ^= np.uint64(length) & MASK32
    h1 ^= h1 >> np.uint64(16)
    h1 = (h1 * np.uint64(0x85EBCA6B)) & MASK32
    h1 ^= h1 >> np.uint64(13)
    h1 = (h1 * np.uint64(0xC2B2AE35)) & MASK32
    return h1 ^ (h1 >> np.uint64(16))


@nb.njit(inline="always")
def load32(buf, at):
    """The little-endian 32-bit word of buf[at:at + 4] (uint8). An unsigned index: numba then adds no
    negative-index wraparound to each byte's read, and LLVM merges the four reads into one."""
    at = np.uint64(at)
    return (np.uint64(buf[at]) | (np.uint64(buf[at + np.uint64(1)]) << np.uint64(8))
            | (np.uint64(buf[at + np.uint64(2)]) << np.uint64(16)) | (np.uint64(buf[at + np.uint64(3)]) << np.uint64(24)))


@nb.njit(inline="always")
def load_tail(buf, tail, last):
    """The (up to) 3 bytes from buf[tail], each read clamped to buf[last] (the token's last byte: the bytes
    read beyond the tail are masked off by `finish`), little-endian."""
    tail, last = np.uint64(tail), np.uint64(last)
    return (np.uint64(buf[min(tail, last)]) | (np.uint64(buf[min(tail + np.uint64(1), last)]) << np.uint64(8))
            | (np.uint64(buf[min(tail + np.uint64(2), last)]) << np.uint64(16)))


@nb.njit(inline="always")
def murmur3_32(buf, begin, end, seed):
    """MurmurHash3_x86_32 of buf[begin:end] (uint8), as uint32."""
    length = end - begin
    h1 = np.uint64(seed) & MASK32
    blocks = length // 4
    for b in range(blocks):
        h1 = block_step(h1, load32(buf, begin + 4 * b))
    tail = begin + 4 * blocks
    rest = length & 3
    # The tail's bytes read clamped to the token's last byte (masked off beyond `rest`); an empty token has
    # no byte to read, and its (zero) tail word is taken as is.
    word = load_tail(buf, tail, end - 1) if length > 0 else np.uint64(0)
    return np.uint32(finish(h1, word, rest, length))
