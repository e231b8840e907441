"""The read stage's compiled pass over an Arrow string column (one UTF-8 buffer and its offsets): `normalise`'s
result and the BLAKE2b-128 digest of it (`hash128`), bit for bit, with no Python per document except for the
documents holding a character NFKC may change or combine, or whose lower case needs context (those go through
`normalise`).

A document of other characters is normalised in the pass: NFKC leaves it unchanged, so `str.lower` is a table
of the BMP (`unicode_table`, built from this Python's unicodedata) and `str.split()` splits on the characters
`str.isspace` accepts (in ASCII also the separators 0x1c-0x1f). BLAKE2b is RFC 7693 with a 16-byte digest, no key: the two little-endian words of the digest are the
first two words of its state."""

from __future__ import annotations

import unicodedata

import numba as nb
import numpy as np
import pyarrow as pa

from .normalise import normalise

_IV = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
                0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179], dtype=np.uint64)
_SIGMA = np.array([
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4], [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13], [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11], [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5], [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0]],
    dtype=np.int64)


@nb.njit(inline="always")
def _rotr(x, n):
    return (x >> np.uint64(n)) | (x << np.uint64(64 - n))


@nb.njit(inline="always")
def _g(a, b, c, d, x, y):
    a = a + b + x
    d = _rotr(d ^ a, 32)
    c = c + d
    b = _rotr(b ^ c, 24)
    a = a + b + y
    d = _rotr(d ^ a, 16)
    c = c + d
    b = _rotr(b ^ c, 63)
    return a, b, c, d


@nb.njit(nogil=True, cache=True)
def _compress(h, block, counter, last):
    # the state in sixteen locals, not an array, so that it can live in registers
    m = block.view(np.uint64)   # little-endian words, as on every CPU this runs on (x86-64, ARM64)
    v0, v1, v2, v3, v4, v5, v6, v7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
    v8, v9, v10, v11, v12, v13, v14, v15 = _IV[0], _IV[1], _IV[2], _IV[3], _IV[4], _IV[5], _IV[6], _IV[7]
    v12 ^= np.uint64(counter)
    if last:
        v14 = ~v14
    for r in range(12):
        s = _SIGMA[r % 10]
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m[s[0]], m[s[1]])
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m[s[2]], m[s[3]])
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m[s[4]], m[s[5]])
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m[s[6]], m[s[7]])
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m[s[8]], m[s[9]])
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m[s[10]], m[s[11]])
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m[s[12]], m[s[13]])
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m[s[14]], m[s[15]])
    h[0] ^= v0 ^ v8
    h[1] ^= v1 ^ v9
    h[2] ^= v2 ^ v10
    h[3] ^= v3 ^ v11
    h[4] ^= v4 ^ v12
    h[5] ^= v5 ^ v13
    h[6] ^= v6 ^ v14
    h[7] ^= v7 ^ v15


@nb.njit(nogil=True, cache=True)
def blake2b_128(data, offsets):
    """(n, 2) uint64: BLAKE2b-128 of data[offsets[r]:offsets[r + 1]], as hashlib's digest read as two '<u8'."""
    n = offsets.size - 1
    out = np.empty((n, 2), dtype=np.uint64)
    h = np.empty(8, dtype=np.uint64)
    tail = np.zeros(128, dtype=np.uint8)
    for r in range(n):
        start, end = offsets[r], offsets[r + 1]
        h[:] = _IV
        h[0] ^= np.uint64(0x01010010)   # digest length 16, no key, fanout 1, depth 1
        pos = start
        while end - pos > 128:
            _compress(h, data[pos:pos + 128], pos + 128 - start, False)
            pos += 128
        tail[:] = 0
        tail[:end - pos] = data[pos:end]
        _compress(h, tail, end - start, True)
        out[r, 0] = h[0]
        out[r, 1] = h[1]
    return out


def _unicode_table() -> np.ndarray:
    """int32 over the BMP: a character's `str.lower` where `normalise` may treat it alone, SPACE for white
    space, UNSAFE for the rest. A character is alone when NFKC leaves it as it is in every context: NFKC
    leaves it alone, its combining class is 0 and neither it nor the first of its canonical decomposition is the
    second of a canonical pair (NFC would compose it with the one before: Indic vowel signs and the like, Hangul
    medial and final jamo), so a run of such characters decomposes and composes back to itself; not a
    surrogate; and its lower case is one character no longer in UTF-8 and needs no context (not the final-sigma
    rule of capital sigma)."""
    seconds = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for code in range(0x20000):
        mapping = unicodedata.decomposition(chr(code))
        if mapping and not mapping.startswith("<") and " " in mapping:
            seconds.add(int(mapping.split()[1], 16))
    table = np.full(0x10000, UNSAFE, dtype=np.int32)
    for code in range(0x10000):
        ch = chr(code)
        if ch.isspace():
            if unicodedata.normalize("NFKC", ch) == ch:
                table[code] = SPACE
            continue
        lower = ch.lower()
        if (code in seconds or 0xD800 <= code < 0xE000 or code == 0x3A3 or unicodedata.combining(ch)
                or unicodedata.normalize("NFKC", ch) != ch or ord(unicodedata.normalize("NFD", ch)[0]) in seconds
                or len(lower) != 1
                or len(lower.encode("utf-8", "surrogatepass")) > len(ch.encode("utf-8", "surrogatepass"))):
            continue
        table[code] = ord(lower)
    return table


UNSAFE, SPACE = -1, -2
_TABLE = []


def unicode_table() -> np.ndarray:
    if not _TABLE:
        _TABLE.append(_unicode_table())
    return _TABLE[0]


@nb.njit(nogil=True, cache=True)
def _normalise_utf8(data, offsets, table):
    """(buffer, offsets, done mask): each row normalised where all its characters are in `table`; a row with
    one that is not (or past the BMP) is left empty and not done."""
    n = offsets.size - 1
    out = np.empty(max(offsets[n] - offsets[0], 1), dtype=np.uint8)
    out_offsets = np.empty(n + 1, dtype=np.int64)
    done = np.ones(n, dtype=np.bool_)
    size = 0
    out_offsets[0] = 0
    for r in range(n):
        start = size
        pending = False   # a space is written only before the next word, so none trails
        p, end = offsets[r], offsets[r + 1]
        while p < end:
            c = np.int32(data[p])
            if c < 0x80:
                p += 1
            elif c < 0xE0:
                c = ((c & 0x1F) << 6) | (np.int32(data[p + 1]) & 0x3F)
                p += 2
            elif c < 0xF0:
                c = ((c & 0x0F) << 12) | ((np.int32(data[p + 1]) & 0x3F) << 6) | (np.int32(data[p + 2]) & 0x3F)
                p += 3
            else:
                c = -1
            lower = table[c] if c >= 0 else -1
            if lower == -1:
                done[r] = False
                size = start
                break
            if lower == -2:
                pending = size > start
                continue
            if pending:
                out[size] = 32
                size += 1
                pending = False
            if lower < 0x80:
                out[size] = lower
                size += 1
            elif lower < 0x800:
                out[size] = 0xC0 | (lower >> 6)
                out[size + 1] = 0x80 | (lower & 0x3F)
                size += 2
            else:
                out[size] = 0xE0 | (lower >> 12)
                out[size + 1] = 0x80 | ((lower >> 6) & 0x3F)
                out[size + 2] = 0x80 | (lower & 0x3F)
                size += 3
        out_offsets[r + 1] = size
    return out[:size], out_offsets, done


@nb.njit(nogil=True, cache=True)
def _splice(out, out_offsets, rows, others, other_offsets):
    """The buffer with rows[k]'s (empty) text replaced by others[other_offsets[k]:other_offsets[k + 1]]."""
    n = out_offsets.size - 1
    merged = np.empty(out.size + others.size, dtype=np.uint8)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    size, k = 0, 0
    for r in range(n):
        if k < rows.size and rows[k] == r:
            a, b = other_offsets[k], other_offsets[k + 1]
            merged[size:size + b - a] = others[a:b]
            size += b - a
            k += 1
        else:
            a, b = out_offsets[r], out_offsets[r + 1]
            merged[size:size + b - a] = out[a:b]
            size += b - a
        offsets[r + 1] = size
    return merged, offsets


def utf8_column(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, offsets int64 of n + 1, from 0) of a string array without nulls."""
    texts = texts.cast(pa.large_string()) if texts.type != pa.large_string() else texts
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)[texts.offset:texts.offset + len(texts) + 1]
    buffer = texts.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, dtype=np.uint8)
    return data[offsets[0]:offsets[-1]], offsets - offsets[0]


def normalise_column(texts: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """(normalised texts as a string array, (n, 2) uint64 BLAKE2b-128 of each, UTF-8 byte length of each input
    text): `normalise` and `hash128` of every text of `texts` (a string array without nulls)."""
    data, offsets = utf8_column(texts)
    out, out_offsets, done = _normalise_utf8(data, offsets, unicode_table())
    if not done.all():
        rows = np.flatnonzero(~done)
        wide = texts.take(pa.array(rows)).to_pylist()
        others = [normalise(t).encode("utf-8") for t in wide]
        other_offsets = np.zeros(len(others) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in others], out=other_offsets[1:])
        out, out_offsets = _splice(out, out_offsets, rows, np.frombuffer(b"".join(others), dtype=np.uint8),
                                   other_offsets)
    hashes = blake2b_128(out, out_offsets)
    column = pa.LargeStringArray.from_buffers(len(out_offsets) - 1, pa.py_buffer(out_offsets),
                                              pa.py_buffer(out)).cast(pa.string())
    return column, hashes, np.diff(offsets)
