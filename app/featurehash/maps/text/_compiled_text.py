"""Documents to the hashes of their tokens or n-grams in one compiled pass, and those hashes to CSR rows.

Input: a batch of documents as UTF-8 bytes in one buffer, document d being data[starts[d]:starts[d + 1]]. For
each document, in one pass and without a Python string per token: decode, map every code point through the
preprocessing table (featurehash.maps.text._unicode_tables: `str.lower`, then accents stripped as scikit-learn),
cut into the built-in analyzers' tokens (featurehash.maps.text.analyzers: "word" with the default pattern
(?u)\\b\\w\\w+\\b, i.e. the maximal runs of two or more word characters; "char"; "char_wb"), re-encode each token
or n-gram as UTF-8 and hash those bytes with MurmurHash3 x86 32-bit (featurehash.maps.numerics._murmur).

Invariant: for a document with no CONTEXT code point, the hashes come out in the order and with the values of
murmur3_32_many over the UTF-8 bytes of `Analyzer(...)(document)` (the Python path), n-grams of smaller n first;
a document with a CONTEXT code point is flagged, gets no hashes, and is the caller's to take through Python.

The row kernels then turn a batch's hashes into CSR rows exactly as featurehash.maps.text.hashing's numpy code
does (scikit-learn's columns and signs, or the seeded mode's multiply-shift columns with count or binary
weights): every value is an integer count summed exactly, so the order of the sums cannot change a bit, and the
row norms are summed left to right in float64 as featurehash.maps.text._sparse_rows does.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..numerics._murmur import murmur3_32 as _murmur
from ._sparse_rows import _normalize_l1, _normalize_l2

WORD_ANALYZER, CHAR_ANALYZER, CHAR_WB_ANALYZER = 0, 1, 2
NORM_NONE, NORM_L2, NORM_L1 = 0, 1, 2
_INT32_MIN = -(2**31)


@nb.njit(inline="always")
def _put_utf8(buf, at, code):
    """Write code point `code` as UTF-8 at buf[at:]; the position after it."""
    if code < 0x80:
        buf[at] = code
        return at + 1
    if code < 0x800:
        buf[at] = 0xC0 | (code >> 6)
        buf[at + 1] = 0x80 | (code & 0x3F)
        return at + 2
    if code < 0x10000:
        buf[at] = 0xE0 | (code >> 12)
        buf[at + 1] = 0x80 | ((code >> 6) & 0x3F)
        buf[at + 2] = 0x80 | (code & 0x3F)
        return at + 3
    buf[at] = 0xF0 | (code >> 18)
    buf[at + 1] = 0x80 | ((code >> 12) & 0x3F)
    buf[at + 2] = 0x80 | ((code >> 6) & 0x3F)
    buf[at + 3] = 0x80 | (code & 0x3F)
    return at + 4


@nb.njit(inline="always")
def _grown(array, needed):
    if needed <= array.size:
        return array
    bigger = np.empty(max(needed, 2 * array.size), dtype=array.dtype)
    bigger[:array.size] = array
    return bigger


@nb.njit(nogil=True, cache=True)
def _decoded(data, begin, end, flags, context_bit, mapped, start, pool, longest, codes):
    """The document data[begin:end] (valid UTF-8) as preprocessed code points: (codes, count, context) where
    codes[:count] holds them (a larger buffer when needed) and context says a CONTEXT code point was met."""
    codes = _grown(codes, (end - begin) * longest + 1)
    count = 0
    at = begin
    while at < end:
        lead = np.int64(data[at])
        if lead < 0x80:
            code = lead
            at += 1
        elif lead < 0xE0:
            code = ((lead & 0x1F) << 6) | (np.int64(data[at + 1]) & 0x3F)
            at += 2
        elif lead < 0xF0:
            code = ((lead & 0x0F) << 12) | ((np.int64(data[at + 1]) & 0x3F) << 6) | (np.int64(data[at + 2]) & 0x3F)
            at += 3
        else:
            code = (((lead & 0x07) << 18) | ((np.int64(data[at + 1]) & 0x3F) << 12)
                    | ((np.int64(data[at + 2]) & 0x3F) << 6) | (np.int64(data[at + 3]) & 0x3F))
            at += 4
        if not mapped:
            codes[count] = code
            count += 1
            continue
        if flags[code] & context_bit:
            return codes, 0, True
        for index in range(start[code], start[code + 1]):
            codes[count] = pool[index]
            count += 1
    return codes, count, False


@nb.njit(nogil=True, cache=True)
def gram_hashes(data, starts, flags, context_bit, mapped, start, pool, longest, analyzer, low, high, seed):
    """(hashes uint32, per-document counts int64, context uint8 per document) of documents
    data[starts[d]:starts[d + 1]], d < starts.size - 1 (see the module docstring). `context_bit`: CONTEXT when
    lower-casing (a document with such a code point is left to Python), else 0."""
    n_docs = starts.size - 1
    counts = np.zeros(n_docs, dtype=np.int64)
    context = np.zeros(n_docs, dtype=np.uint8)
    out = np.empty(max(16, (starts[n_docs] - starts[0]) * (high - low + 1) // 2), dtype=np.uint32)
    codes = np.empty(256, dtype=np.int32)
    buf = np.empty(1024, dtype=np.uint8)
    offsets = np.empty(256, dtype=np.int64)   # byte position of each code point (char) or token end (word)
    firsts = np.empty(256, dtype=np.int64)    # byte position of each token's start (word)
    total = 0
    span = high - low + 1
    for d in range(n_docs):
        codes, m, met = _decoded(data, starts[d], starts[d + 1], flags, context_bit, mapped, start, pool,
                                  longest, codes)
        if met:
            context[d] = 1
            continue
        buf = _grown(buf, 8 * m + 16)
        before = total
        if analyzer == 0:
            # word tokens (runs of >= 2 word characters), written one space apart so that the n-gram of
            # tokens i..i+n-1 is the contiguous bytes firsts[i]:offsets[i+n-1]
            offsets = _grown(offsets, m // 2 + 1)
            firsts = _grown(firsts, m // 2 + 1)
            n_tokens = 0
            at = 0
            i = 0
            while i < m:
                if not flags[codes[i]] & 1:
                    i += 1
                    continue
                j = i + 1
                while j < m and flags[codes[j]] & 1:
                    j += 1
                if j - i >= 2:
                    if n_tokens:
                        buf[at] = 32
                        at += 1
                    firsts[n_tokens] = at
                    for q in range(i, j):
                        at = _put_utf8(buf, at, codes[q])
                    offsets[n_tokens] = at
                    n_tokens += 1
                i = j
            out = _grown(out, total + n_tokens * span)
            if high == 1 or low == 1:
                for t in range(n_tokens):
                    out[total] = _murmur(buf, firsts[t], offsets[t], seed)
                    total += 1
            if high > 1:
                for n in range(max(low, 2), min(high, n_tokens) + 1):
                    for t in range(n_tokens - n + 1):
                        out[total] = _murmur(buf, firsts[t], offsets[t + n - 1], seed)
                        total += 1
        elif analyzer == 1:
            # runs of two or more whitespace characters become one space (a lone one stays as it is)
            offsets = _grown(offsets, m + 1)
            length = 0
            at = 0
            i = 0
            while i < m:
                code = codes[i]
                if flags[code] & 2 and i + 1 < m and flags[codes[i + 1]] & 2:
                    while i < m and flags[codes[i]] & 2:
                        i += 1
                    code = 32
                else:
                    i += 1
                offsets[length] = at
                at = _put_utf8(buf, at, code)
                length += 1
            offsets[length] = at
            out = _grown(out, total + length * span)
            if low == 1:
                for q in range(length):
                    out[total] = _murmur(buf, offsets[q], offsets[q + 1], seed)
                    total += 1
            for n in range(max(low, 2), min(high, length) + 1):
                for q in range(length - n + 1):
                    out[total] = _murmur(buf, offsets[q], offsets[q + n], seed)
                    total += 1
        else:
            # each whitespace-separated word padded with a space each side, n-grams inside it
            offsets = _grown(offsets, m + 3)
            i = 0
            while i < m:
                if flags[codes[i]] & 2:
                    i += 1
                    continue
                j = i + 1
                while j < m and not flags[codes[j]] & 2:
                    j += 1
                offsets[0] = 0
                buf[0] = 32
                at = 1
                for q in range(i, j):
                    offsets[q - i + 1] = at
                    at = _put_utf8(buf, at, codes[q])
                length = j - i + 2
                offsets[length - 1] = at
                buf[at] = 32
                offsets[length] = at + 1
                out = _grown(out, total + length * span)
                for n in range(low, high + 1):
                    if length <= n:   # shorter than n: the whole padded word, once
                        out[total] = _murmur(buf, 0, offsets[length], seed)
                        total += 1
                        break
                    for q in range(length - n + 1):
                        out[total] = _murmur(buf, offsets[q], offsets[q + n], seed)
                        total += 1
                i = j
        counts[d] = total - before
    return out[:total], counts, context


@nb.njit(nogil=True, cache=True)
def sklearn_rows(hashes, counts, n_columns, alternate_sign, binary, indices, data):
    """scikit-learn's rows of a batch's token hashes (counts[r] hashes for row r, in order): column |h| mod n
    (h the hash read as int32; -2^31 goes to (2^31 - n) mod n), value -1 for h < 0 when `alternate_sign`,
    summed per column in column order with the zeros of cancelling signs kept, then 1 everywhere if `binary`
    (the row norm is `normalize`'s, after). Fills indices / data (at least hashes.size long); the number of entries of each row."""
    n_rows = counts.size
    nnz = np.zeros(n_rows, dtype=np.int64)
    special = (np.int64(2**31) - n_columns) % n_columns
    begin = 0
    written = 0
    for r in range(n_rows):
        size = counts[r]
        keys = np.empty(size, dtype=np.int64)
        for t in range(size):
            signed = np.int64(np.int32(hashes[begin + t]))
            column = special if signed == _INT32_MIN else abs(signed) % n_columns
            keys[t] = (column << 1) | (1 if alternate_sign and signed < 0 else 0)
        keys.sort()
        row_start = written
        t = 0
        while t < size:
            column = keys[t] >> 1
            total = 0
            while t < size and keys[t] >> 1 == column:
                total += -1 if keys[t] & 1 else 1
                t += 1
            indices[written] = column
            data[written] = 1 if binary else total
            written += 1
        nnz[r] = written - row_start
        begin += size
    return nnz


@nb.njit(nogil=True, cache=True)
def seeded_rows(hashes, counts, n_columns, alternate_sign, binary, indices, data):
    """The seeded mode's rows (featurehash.maps.text.hashing `_features`, weighting "count" or "binary"): per
    distinct hash h of a row its count (1 if `binary`), column floor(h n / 2^32), negated when h is even and
    `alternate_sign`; summed per column in column order, zero sums dropped. Fills indices / data; the number
    of entries of each row."""
    n_rows = counts.size
    nnz = np.zeros(n_rows, dtype=np.int64)
    begin = 0
    written = 0
    for r in range(n_rows):
        size = counts[r]
        row = np.sort(hashes[begin:begin + size])
        keys = np.empty(size, dtype=np.int64)
        weights = np.empty(size, dtype=np.int64)
        distinct = 0
        t = 0
        while t < size:
            value = row[t]
            run = 0
            while t < size and row[t] == value:
                run += 1
                t += 1
            column = np.int64((np.uint64(value) * np.uint64(n_columns)) >> np.uint64(32))
            weight = 1 if binary else run
            if alternate_sign and not value & 1:
                weight = -weight
            keys[distinct] = column
            weights[distinct] = weight
            distinct += 1
        order = np.argsort(keys[:distinct])
        row_start = written
        t = 0
        while t < distinct:
            column = keys[order[t]]
            total = 0
            while t < distinct and keys[order[t]] == column:
                total += weights[order[t]]
                t += 1
            if total != 0:
                indices[written] = column
                data[written] = total
                written += 1
        nnz[r] = written - row_start
        begin += size
    return nnz


@nb.njit(nogil=True, cache=True)
def normalize(data, indptr, norm):
    if norm == 1:
        _normalize_l2(data, indptr)
    elif norm == 2:
        _normalize_l1(data, indptr)
