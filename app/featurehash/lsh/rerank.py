"""Exact re-ranking of LSH candidates straight from their packed vectors (compiled; no scipy.sparse), and the
choice of the best matches.

An LSH index that keeps its items' vectors ranks a query's candidates by the exact similarity the codes
estimate: GMM / pGMM for GCWS, exp(-gamma ||x - y||_1) for random binning. featurehash.lsh.similarity's
`RowSimilarity.query` is the reference (numpy and scipy.sparse; its module docstring has the formulas:
pGMM = (S - D) / (S + D), S = ||t(x)||_1 + ||t(y)||_1, D = ||t(x) - t(y)||_1, t(x) = sign(x) |x / peak|^p).
This module computes the same numbers, bit for bit, from the bytes the index stores
(featurehash.store.lsh_vectors: "sparse" = uint32 nnz, uint32 columns, float32 values; "float32";
"float16" = a float32 scale then float16 values), so a query never builds a CSR matrix:

- the order of every floating-point sum is numpy's and scipy's (a dense row sum is numpy's pairwise
  sum, `_pairwise`; a CSR row sum is np.add.reduceat's: the first entry plus the pairwise sum of the
  rest; the sparse L1 change is sequential, as np.bincount adds); a sparse query is densified over the union of its and the candidates'
  columns, as the reference's caller does with featurehash.maps.kernels.shared_columns, so its
  |t(x)|_1 is summed over the same array;
- the power t(x) and the binning exp are computed by numpy, as in the reference (numpy's SIMD power
  and exp differ from libm's in the last bit; elementwise results do not depend on the array's shape);
  p = 1 needs no power (numpy's x ** 1.0 is x).

Entry points: `packed_similarities(similarity, query, kind, words, starts, d)`, where `similarity` is the map's
entry of featurehash.lsh.similarity's table and `words` the packed blob as little-endian uint32 words, each vector
starting at a word (`starts`, in words); one function per code family (`PACKED`); GMM (p = 1) of a dense query is
one compiled call. `best_matches` (numpy) and `top_matches` (the same, compiled): the best candidates.
"""

from __future__ import annotations

from collections.abc import Callable

import numba as nb
import numpy as np
import scipy.sparse as sp

from ..maps.base import CodeFamily
from .similarity import GMM, Laplacian, RowSimilarity

_BLOCK = 128  # numpy's PW_BLOCKSIZE


@nb.njit(cache=True, nogil=True)
def _block(a, start, n):
    """numpy's pairwise sum of n <= 128 values: 8 accumulators, combined as a tree, then the rest."""
    if n < 8:
        res = 0.0
        for i in range(start, start + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[start], a[start + 1], a[start + 2], a[start + 3]
    r4, r5, r6, r7 = a[start + 4], a[start + 5], a[start + 6], a[start + 7]
    i = 8
    while i < n - (n % 8):
        at = start + i
        r0 += a[at]
        r1 += a[at + 1]
        r2 += a[at + 2]
        r3 += a[at + 3]
        r4 += a[at + 4]
        r5 += a[at + 5]
        r6 += a[at + 6]
        r7 += a[at + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[start + i]
        i += 1
    return res


@nb.njit(cache=True, nogil=True)
def _pairwise(a, start, n):
    """numpy's pairwise sum (umath loops_utils pairwise_sum) of a[start:start + n]: what x.sum() and
    x.sum(axis=-1) of a contiguous float64 array give. Past 128 values numpy halves the range (the first half
    a multiple of 8) and adds the halves' sums; walked here with an explicit stack, since numba's cache
    mishandles a recursive function (a cached one crashed when loaded)."""
    if n <= _BLOCK:
        return _block(a, start, n)
    starts, sizes = np.empty(64, np.int64), np.empty(64, np.int64)
    phases, lefts = np.zeros(64, np.int64), np.empty(64)
    top, value = 0, 0.0
    starts[0], sizes[0] = start, n
    while top >= 0:
        size = sizes[top]
        half = size // 2
        half -= half % 8
        if size <= _BLOCK:
            value = _block(a, starts[top], size)
            top -= 1
        elif phases[top] == 0:  # the first half next
            phases[top] = 1
            starts[top + 1], sizes[top + 1], phases[top + 1] = starts[top], half, 0
            top += 1
        elif phases[top] == 1:  # the first half's sum is `value`: the second half next
            lefts[top], phases[top] = value, 2
            starts[top + 1], sizes[top + 1], phases[top + 1] = starts[top] + half, size - half, 0
            top += 1
        else:
            value = lefts[top] + value
            top -= 1
    return value


_HALF_SCALES = np.array([2.0 ** -24] + [2.0 ** (exponent - 25) for exponent in range(1, 32)])  # exact powers of 2


@nb.njit(cache=True, nogil=True, inline="always")
def _half(h):
    """The float64 value of float16 bits (exact): the significand (with its implicit 1 for normal numbers) times
    a power of 2 from a table (a pow call per value cost more than the rest of the decoding)."""
    exponent = (h >> 10) & 0x1F
    mantissa = h & 0x3FF
    if exponent == 31:
        value = np.inf if mantissa == 0 else np.nan
    elif exponent == 0:
        value = mantissa * _HALF_SCALES[0]  # subnormal: mantissa 2^-24
    else:
        value = (1024 + mantissa) * _HALF_SCALES[exponent]
    return -value if h >> 15 else value


@nb.njit(cache=True, nogil=True)
def _dense_rows(words, starts, d, half):
    """(m, d) float64 of packed float32 rows, or float16 rows times their float32 scale."""
    floats = words.view(np.float32)
    out = np.empty((starts.size, d))
    for row in range(starts.size):
        at = starts[row]
        if half:
            scale = np.float64(floats[at])
            for pair in range(d // 2):  # a word holds two values, the first in its low half
                word = np.int64(words[at + 1 + pair])  # int64: uint32 and int mixed would type as float
                out[row, 2 * pair] = _half(word & 0xFFFF) * scale
                out[row, 2 * pair + 1] = _half(word >> 16) * scale
            if d % 2:
                out[row, d - 1] = _half(np.int64(words[at + 1 + d // 2]) & 0xFFFF) * scale
        else:
            for j in range(d):
                out[row, j] = floats[at + j]
    return out


@nb.njit(cache=True, nogil=True)
def _sparse_rows(words, starts):
    """CSR arrays (indptr, columns, float64 values) of packed sparse rows."""
    floats = words.view(np.float32)
    indptr = np.zeros(starts.size + 1, np.int64)
    for row in range(starts.size):
        indptr[row + 1] = indptr[row] + words[starts[row]]
    columns = np.empty(indptr[-1], np.int64)
    values = np.empty(indptr[-1])
    for row in range(starts.size):
        at, nnz, out = starts[row], indptr[row + 1] - indptr[row], indptr[row]
        for j in range(nnz):
            columns[out + j] = words[at + 1 + j]
            values[out + j] = floats[at + 1 + nnz + j]
    return indptr, columns, values


@nb.njit(cache=True, nogil=True)
def _dense_distances(q, V):
    """(sum_j |V_ij|, sum_j |V_ij - q_j|) per row, numpy's pairwise order."""
    m, d = V.shape
    sums, distances, scratch = np.empty(m), np.empty(m), np.empty(d)
    for i in range(m):
        for j in range(d):
            scratch[j] = abs(V[i, j])
        sums[i] = _pairwise(scratch, 0, d)
        for j in range(d):
            scratch[j] = abs(V[i, j] - q[j])
        distances[i] = _pairwise(scratch, 0, d)
    return sums, distances


@nb.njit(cache=True, nogil=True)
def _sparse_distances(q, indptr, columns, values):
    """(sum over the row's entries of |v|, sum of |q_j - v| - |q_j|) per row: the first as scipy's CSR row
    sum (np.add.reduceat: the first entry plus numpy's pairwise sum of the rest), the second sequential,
    as np.bincount adds."""
    m = indptr.size - 1
    sums, changes, magnitudes = np.zeros(m), np.zeros(m), np.abs(values)
    for i in range(m):
        start, end = indptr[i], indptr[i + 1]
        if end > start:
            sums[i] = magnitudes[start] + _pairwise(magnitudes, start + 1, end - start - 1)
        c = 0.0
        for e in range(start, end):
            at = q[columns[e]]
            c += abs(at - values[e]) - abs(at)
        changes[i] = c
    return sums, changes


@nb.njit(cache=True, nogil=True)
def _on_shared_columns(query_columns, query_values, columns):
    """The query densified over the sorted union of its columns and the candidates' (the reference's
    shared_columns), and the candidates' columns as positions in that union: O(nnz), whatever d."""
    union = np.unique(np.concatenate((query_columns, columns)))
    dense = np.zeros(max(1, union.size))
    dense[np.searchsorted(union, query_columns)] = query_values
    return dense, np.searchsorted(union, columns)


@nb.njit(cache=True, nogil=True)
def _ratios(total, distances):
    out = np.empty(total.size)
    for i in range(total.size):
        both = total[i] + distances[i]
        out[i] = (total[i] - distances[i]) / both if both > 0 else 1.0
    return out


@nb.njit(cache=True, nogil=True)
def _gmm_dense(words, starts, d, half, q):
    """GMM (power 1) of a dense query to packed dense rows, in one call. With p = 1, t(x) = sign(x) |x s| is
    x s (the sign is symmetric under rounding; a zero's sign vanishes in every |.| it enters)."""
    V = _dense_rows(words, starts, d, half)
    peak = 0.0
    for j in range(d):
        peak = max(peak, abs(q[j]))
    for i in range(V.shape[0]):
        for j in range(d):
            peak = max(peak, abs(V[i, j]))
    scale = 1.0 / peak if peak > 0 else 1.0
    tq, magnitudes = q * scale, np.empty(d)
    for j in range(d):
        magnitudes[j] = abs(tq[j])
    absolute = _pairwise(magnitudes, 0, d)
    for i in range(V.shape[0]):
        for j in range(d):
            V[i, j] = V[i, j] * scale
    sums, distances = _dense_distances(tq, V)
    return _ratios(absolute + sums, distances)


@nb.njit(cache=True, nogil=True)
def _gmm_sparse(words, starts, q):
    """GMM (power 1) of a dense query to packed sparse rows, in one call (as _gmm_dense)."""
    indptr, columns, values = _sparse_rows(words, starts)
    peak = 0.0
    for j in range(q.size):
        peak = max(peak, abs(q[j]))
    for e in range(values.size):
        peak = max(peak, abs(values[e]))
    scale = 1.0 / peak if peak > 0 else 1.0
    tq, magnitudes = q * scale, np.empty(q.size)
    for j in range(q.size):
        magnitudes[j] = abs(tq[j])
    absolute = _pairwise(magnitudes, 0, q.size)
    sums, changes = _sparse_distances(tq, indptr, columns, values * scale)
    return _ratios(absolute + sums, absolute + changes)


def best_matches(similarities: np.ndarray, tie_breaks: np.ndarray, top_k: int,
                 min_similarity: float) -> np.ndarray:
    """Positions of the `top_k` highest similarities >= min_similarity, best first; equal
    similarities in `tie_breaks` order (so results do not depend on storage order)."""
    eligible = np.flatnonzero(similarities >= min_similarity)
    if eligible.size > top_k:  # keep every tie of the k-th value before the exact sort
        kth = np.partition(similarities[eligible], eligible.size - top_k)[eligible.size - top_k]
        eligible = eligible[similarities[eligible] >= kth]
    order = np.lexsort((tie_breaks[eligible], -similarities[eligible]))
    return eligible[order[:top_k]]


@nb.njit(cache=True, nogil=True)
def top_matches(similarities, tie_breaks, top_k, min_similarity):
    """best_matches compiled: positions of the top_k highest similarities >=
    min_similarity, best first, equal similarities in tie_breaks order."""
    eligible = np.flatnonzero(similarities >= min_similarity)
    by_tie = eligible[np.argsort(tie_breaks[eligible], kind="mergesort")]
    order = by_tie[np.argsort(-similarities[by_tie], kind="mergesort")]  # stable: ties stay in tie order
    return order[:top_k]


def _ratio(total: np.ndarray, distance: np.ndarray) -> np.ndarray:
    return _ratios(np.ascontiguousarray(total, np.float64), np.ascontiguousarray(distance, np.float64))


def _sparse_query(query):
    """(columns int64 or None, values float64) of a query: a 1 x d CSR row's canonical entries, or a dense row."""
    if sp.issparse(query):
        row = sp.csr_matrix(query)
        if not row.has_canonical_format:  # repeated columns add up first, as the reference's toarray() does
            row = row.copy()
            row.sum_duplicates()
        return row.indices.astype(np.int64), row.data.astype(np.float64)
    return None, np.asarray(query, dtype=np.float64)


def _dense_query(query) -> np.ndarray:
    return query.toarray().ravel() if sp.issparse(query) else np.asarray(query, dtype=np.float64)


def _packed_gmm(similarity: GMM, query, kind: str, words: np.ndarray, starts: np.ndarray, d: int) -> np.ndarray:
    power = similarity.power
    if kind != "sparse":
        q = _dense_query(query)
        if power == 1.0:
            return _gmm_dense(words, starts, d, kind == "float16", q)
        V = _dense_rows(words, starts, d, kind == "float16")
        scale = similarity.scale(max(float(np.abs(q).max(initial=0.0)), float(np.abs(V).max())))
        q, V = similarity.signed_power(q, scale), similarity.signed_power(V, scale)
        sums, distances = _dense_distances(q, V)
        absolute = np.abs(q).sum()
        return _ratio(absolute + sums, distances)
    if power == 1.0 and not sp.issparse(query):
        return _gmm_sparse(words, starts, np.asarray(query, dtype=np.float64))
    indptr, columns, values = _sparse_rows(words, starts)
    q_columns, q_values = _sparse_query(query)
    scale = similarity.scale(max(float(np.abs(q_values).max(initial=0.0)), float(np.abs(values).max(initial=0.0))))
    q_values, values = similarity.signed_power(q_values, scale), similarity.signed_power(values, scale)
    if q_columns is None:
        q = q_values
    else:
        q, columns = _on_shared_columns(q_columns, q_values, columns)
    absolute = np.abs(q).sum()
    sums, changes = _sparse_distances(q, indptr, columns, values)
    return _ratio(absolute + sums, absolute + changes)


def _packed_laplacian(similarity: Laplacian, query, kind: str, words: np.ndarray, starts: np.ndarray,
                      d: int) -> np.ndarray:
    if kind != "sparse":
        V = _dense_rows(words, starts, d, kind == "float16")
        return similarity.combine(None, _dense_distances(_dense_query(query), V)[1])
    indptr, columns, values = _sparse_rows(words, starts)
    q_columns, q = _sparse_query(query)
    if q_columns is not None:
        q, columns = _on_shared_columns(q_columns, q, columns)
    absolute = np.abs(q).sum()
    _, changes = _sparse_distances(q, indptr, columns, values)
    return similarity.combine(None, absolute + changes)


# Code family -> its similarity from packed vectors (featurehash.lsh.similarity.SIMILARITIES's entries, compiled).
# Jaccard is GMM of indicator rows: `_packed_gmm`'s general path with the similarity's indicator as its power.
PACKED: dict[CodeFamily, Callable[..., np.ndarray]] = {CodeFamily.GMM: _packed_gmm,
                                                       CodeFamily.LAPLACIAN: _packed_laplacian,
                                                       CodeFamily.JACCARD: _packed_gmm}


def packed_similarities(similarity: RowSimilarity, query, kind: str, words: np.ndarray, starts: np.ndarray,
                        d: int) -> np.ndarray:
    """similarity.query(query, candidates) of the candidates packed in `words` (uint32) at `starts`; `query` a
    dense (d,) float64 row or a 1 x d CSR row (then, for "sparse" rows, the reference's shared-columns
    restriction applies)."""
    if similarity.family not in PACKED:
        raise ValueError(f"no exact re-ranking for code family {similarity.family}")
    starts = np.ascontiguousarray(starts, np.int64)
    if starts.size == 0:
        return np.empty(0)
    return PACKED[similarity.family](similarity, query, kind, words, starts, d)
