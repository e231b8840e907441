"""Compiled inner loops of the DartMinHash sampler of GCWS (numba); the math is in `gcws_dart`.

Every variate is a pure function of (key, coordinate c, band a, dart index n, purpose) through
the counter-based mixer of `_counter_random`: the coordinate names the stream, and
counter = (a + 2^28) << 34 | n << 2 | purpose. Group-level variates use the two dart indices
above every real one (darts of a band stay below 2^32 - 2).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..numerics._counter_random import stream_key, uniform, word

GROUP_BANDS = 8  # bands per group: one test skips a group whose first dart lies beyond the rank limit
_GROUP_RATE = float(2**GROUP_BANDS - 1)  # sum of 2^j over a group's bands, in units of its lowest
_BAND_OFFSET = 2**28  # bands lie in (-2^28, 2^28): callers refuse weights whose log2 leaves (-2^26, 2^26)
_GAP, _WEIGHT, _BUCKET, _FINGERPRINT = np.uint64(0), np.uint64(1), np.uint64(2), np.uint64(3)
_GROUP_MIN, _GROUP_ARGMIN = 2**32 - 1, 2**32 - 2
# dart identity in 32 bits: (band + 2048) << 19 | n when exact, else a flagged 31-bit fingerprint
_PACKED_BAND_OFFSET = 2048
_PACKED_INDEX_BITS = 19
_FINGERPRINT_FLAG = np.int64(1) << np.int64(31)
# rank-limit groups start where a first dart cannot reach: a 53-bit uniform gives Exp(1) >= 2^-54
_SMALLEST_EXPONENTIAL_LOG2 = -55
_SLACK = 1.0 + 1e-12  # group tests are conservative: the dart's own rank decides at the boundary
MAX_DOUBLINGS = 64
_POW2 = np.ldexp(1.0, np.arange(-1074, 1024))  # 2^e by table lookup: math.ldexp is a libm call


@nb.njit(inline="always")
def _pow2(exponent):
    """2^exponent (0 below, inf above the float64 range); x * _pow2(e) is exact for normal results."""
    if exponent < -1074:
        return 0.0
    if exponent > 1023:
        return np.inf
    return _POW2[exponent + 1074]


@nb.njit(inline="always")
def _floor_log2(spread):
    """floor(log2(spread)) for spread >= 1: math.frexp(spread)[1] - 1 by exact comparisons (frexp
    is a library call); a few steps for the values here (< 512, or a rank limit's doublings)."""
    j = 0
    bound = 2.0
    while spread >= bound:
        j += 1
        bound *= 2.0
    return j


@nb.njit(inline="always")
def _counter(band, index, purpose):
    return ((np.uint64(band + _BAND_OFFSET) << np.uint64(34)) | (np.uint64(index) << np.uint64(2))) | purpose


@nb.njit(inline="always")
def _exponential(stream, band, index):
    return -math.log(uniform(stream, _counter(band, index, _GAP)))


@nb.njit(inline="always")
def _bucket(stream, band, index, k):
    top = word(stream, _counter(band, index, _BUCKET)) >> np.uint64(32)
    return np.int64((top * np.uint64(k)) >> np.uint64(32))


@nb.njit(inline="always")
def _band_and_mantissa(value, power):
    """(A, m) with |value|^power = m 2^A, m in [1, 2]; exact bit operations when power is 1."""
    magnitude = abs(np.float64(value))
    if power == 1.0:
        fraction, exponent = math.frexp(magnitude)
        return np.int64(exponent - 1), 2.0 * fraction
    log2_weight = power * math.log2(magnitude)
    band = math.floor(log2_weight)
    return np.int64(band), 2.0 ** (log2_weight - band)


@nb.njit(nogil=True)
def _row_elements(start, stop, indices, data, power, key):
    """The row's nonzeros as weights w = m 2^A: signed coordinate, stream, band A, mantissa m, and
    log2 ||w||_1 (which only sizes the rank limit, so rounding there cannot change a code)."""
    size = 0
    for p in range(start, stop):
        size += data[p] != 0
    coordinate = np.empty(size, dtype=np.int64)
    stream = np.empty(size, dtype=np.uint64)
    band = np.empty(size, dtype=np.int64)
    mantissa = np.empty(size)
    e = 0
    for p in range(start, stop):
        value = data[p]
        if value == 0:
            continue
        coordinate[e] = 2 * np.int64(indices[p]) + (0 if value > 0 else 1)
        stream[e] = stream_key(key, coordinate[e])
        band[e], mantissa[e] = _band_and_mantissa(value, power)
        e += 1
    peak = band.max()
    total = 0.0
    for e in range(size):
        total += mantissa[e] * _pow2(band[e] - peak)
    return coordinate, stream, band, mantissa, peak + math.log2(total)


@nb.njit(nogil=True)
def _throw(coordinate, stream, band, mantissa, k, limit_exponent, limit_mantissa, first_group, entered,
           state_gamma, state_index, best_rank, best_coordinate, best_band, best_index, filled):
    """Every dart of the row's region with rank <= limit_mantissa * 2^limit_exponent goes to its
    bucket, which keeps the lowest rank (ranks are scaled by 2^-limit_exponent: exact). Returns
    the number of buckets filled (`filled` before the call).

    Passes resume: a band of a group >= first_group that an earlier pass (of a lower limit, the
    same limit_exponent) entered starts at its first dart beyond that limit, kept in
    state_gamma / state_index (slot (e, g - first_group, j); index -1: start afresh). Throwing a
    dart twice changes nothing (a bucket keeps a strictly lower rank), so a pass that starts a
    band afresh gives the same minima; only the darts of rank in (old limit, limit] are new, and
    each bucket's minimum is the same as one pass at this limit would find."""
    B, m = limit_exponent, limit_mantissa
    G = GROUP_BANDS
    effective_exponent = B + _floor_log2(m)  # m may exceed 2 on later passes (the scale 2^-B stays)
    lowest_group = (_SMALLEST_EXPONENTIAL_LOG2 - effective_exponent - G) // G
    n_groups = max(band.max() // G - lowest_group + 1, 0)
    n_slots = entered.size // max(coordinate.size, 1)
    # E_g <= threshold[g]: group g's first dart lies within the rank limit; V <= chance[g] is the
    # same event on its uniform, a cheap test that skips most groups without a logarithm.
    threshold = np.empty(n_groups)
    chance = np.empty(n_groups)
    for g in range(n_groups):
        threshold[g] = m * _GROUP_RATE * _pow2(B + (lowest_group + g) * G)
        chance[g] = -math.expm1(-threshold[g] * _SLACK) * _SLACK
    for e in range(coordinate.size):
        top_band, own = band[e], stream[e]
        # A weight of exactly 2^A (mantissa 1: every 0/1 row) owns no dart of its own band A, whose darts
        # weigh 2^A (1 + U) with U > 0: its darts, about half the row's, need not be made to be refused.
        clipped_empty = mantissa[e] <= 1.0
        # groups above the element's highest band with darts hold none of its darts: not tested
        last_band = top_band - 1 if clipped_empty else top_band
        for g in range(lowest_group, last_band // G + 1):
            chosen = g - lowest_group
            V = uniform(own, _counter(g * G, _GROUP_MIN, _GAP))
            if V > chance[chosen]:
                continue
            first = -math.log1p(-V)  # the group's first dart at rank first / (255 2^(gG))
            if first > threshold[chosen] * _SLACK:
                continue
            slot = g - first_group
            kept = 0 <= slot < n_slots
            group_slot = e * n_slots + slot
            resumed = kept and entered[group_slot] != 0
            spread = 1.0 + uniform(own, _counter(g * G, _GROUP_ARGMIN, _GAP)) * _GROUP_RATE
            argmin = _floor_log2(spread)  # band gG + j with probability 2^j / 255
            base = first / _GROUP_RATE
            for j in range(G):
                a = g * G + j
                if a > top_band or (a == top_band and clipped_empty):
                    break
                limit = m * _pow2(a + B)  # rank <= m 2^B  <=>  band time <= m 2^(a + B)
                state = group_slot * G + j
                if resumed and state_index[state] >= 0:
                    gamma = state_gamma[state]
                    index = state_index[state]
                else:
                    gamma = base * _pow2(j)
                    if j != argmin:
                        room = limit - gamma
                        if room <= 0.0:
                            if kept:
                                state_index[state] = -1
                            continue
                        U = uniform(own, _counter(a, 0, _GAP))
                        if U < (1.0 - room) * (1.0 - 1e-12):  # then -log U > room: no dart (log spared)
                            if kept:
                                state_index[state] = -1
                            continue
                        gamma += -math.log(U)
                    index = 0
                scale = _pow2(-(a + B))  # exact: the order of ranks is kept
                while gamma <= limit:
                    inside = True
                    if a == top_band:  # the clipped band: the dart's weight 2^A (1 + U) <= w
                        inside = uniform(own, _counter(a, index, _WEIGHT)) <= mantissa[e] - 1.0
                    if inside:
                        rank = gamma * scale
                        bucket = _bucket(own, a, index, k)
                        if rank < best_rank[bucket]:
                            if best_rank[bucket] == np.inf:
                                filled += 1
                            best_rank[bucket] = rank
                            best_coordinate[bucket] = coordinate[e]
                            best_band[bucket] = a
                            best_index[bucket] = index
                    index += 1
                    gamma += _exponential(own, a, index)
                if kept:
                    state_gamma[state] = gamma
                    state_index[state] = index
            if kept:
                entered[group_slot] = 1
    return filled


@nb.njit(inline="always")
def _dart_identity(key, coordinate, band, index):
    if -_PACKED_BAND_OFFSET <= band < _PACKED_BAND_OFFSET and index < (1 << _PACKED_INDEX_BITS):
        return np.int64(((band + _PACKED_BAND_OFFSET) << _PACKED_INDEX_BITS) | index)
    fingerprint = word(stream_key(key, coordinate), _counter(band, index, _FINGERPRINT)) >> np.uint64(33)
    return _FINGERPRINT_FLAG | np.int64(fingerprint)


@nb.njit(nogil=True)
def _hash_row(row, indptr, indices, data, power, key, target, i_star, dart):
    k = i_star.shape[1]
    coordinate, stream, band, mantissa, log2_norm = _row_elements(indptr[row], indptr[row + 1], indices, data,
                                                                  power, key)
    log2_limit = math.log2(target) - log2_norm
    B = np.int64(math.floor(log2_limit))
    m = 2.0 ** (log2_limit - B)
    best_rank = np.full(k, np.inf)
    best_coordinate = np.full(k, -1, dtype=np.int64)
    best_band = np.empty(k, dtype=np.int64)
    best_index = np.empty(k, dtype=np.int64)
    # resumable band states for the groups the first pass can enter and above (lower ones start afresh)
    G = GROUP_BANDS
    first_group = (_SMALLEST_EXPONENTIAL_LOG2 - B - G) // G
    n_slots = max((band.max() if band.size else 0) // G - first_group + 1, 0) if band.size else 0
    entered = np.zeros(coordinate.size * n_slots, dtype=np.uint8)
    state_gamma = np.empty(entered.size * G)
    state_index = np.empty(entered.size * G, dtype=np.int64)
    filled = 0
    for _ in range(MAX_DOUBLINGS):
        filled = _throw(coordinate, stream, band, mantissa, k, B, m, first_group, entered, state_gamma,
                        state_index, best_rank, best_coordinate, best_band, best_index, filled)
        if filled == k:
            break
        m *= 2.0  # a bucket got no dart: double the rank limit; the next pass throws only the new darts
    for j in range(k):
        i_star[row, j] = best_coordinate[j]
        dart[row, j] = -1 if best_coordinate[j] < 0 else _dart_identity(key, best_coordinate[j], best_band[j],
                                                                         best_index[j])


@nb.njit(parallel=True, nogil=True, cache=True)
def hash_csr_parallel(indptr, indices, data, power, key, target, i_star, dart):
    """`_hash_row` for every row, rows spread over numba's threads."""
    for row in nb.prange(indptr.size - 1):
        _hash_row(row, indptr, indices, data, power, key, target, i_star, dart)


@nb.njit(nogil=True, cache=True)
def hash_csr_serial(indptr, indices, data, power, key, target, i_star, dart):
    """`_hash_row` for every row on the calling thread."""
    for row in range(indptr.size - 1):
        _hash_row(row, indptr, indices, data, power, key, target, i_star, dart)
