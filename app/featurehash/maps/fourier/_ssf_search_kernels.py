"""Compiled loops of the SSF index-set search (`ssf.optimised_index_set`), bit for bit the numpy
formulas they replace (same operations in the same order, `_portable_numba`'s rules: no contraction,
no reassociation), so the search picks the same set as before, on every machine, ~50x faster.

- `exponentials`: h_p = sum_s exp(2 pi i k_s p / n), terms added in the order of the set (as
  `_portable_math.ordered_sum` adds them), phases k p mod n by exact integer steps.
- `ranking_inputs`: the first and second derivatives of the per-p energy terms at the current h
  (the inputs of the two FFTs that rank candidates).
- `exact_objectives`: Q with each candidate in place of the removed index, through `_portable_math.log`
  computed the same way (frexp by exponent bits, which is exact for the positive normal numbers the
  energy's factors are) and summed in p order.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..numerics._portable_math import _LOG_TERMS, LN2_HI, LN2_LO

(_L0, _L1, _L2, _L3, _L4, _L5, _L6, _L7, _L8, _L9, _L10, _L11, _L12) = _LOG_TERMS
# 2^52 + e for 0 <= e < 2^11: the bits 0x4330000000000000 | e (exact).
_TWO_52 = 2.0**52
_TWO_52_BITS = np.int64(0x4330000000000000)
_SQRT_HALF = math.sqrt(0.5)
_MANTISSA = np.int64((1 << 52) - 1)
_HALF_EXPONENT = np.int64(1022 << 52)  # the biased exponent of [0.5, 1)


@nb.njit(inline="always")
def _log_series(x):
    """_portable_math._horner(_LOG_TERMS, x): the same multiplies and adds in the same order."""
    r = _L12 * x + _L11
    r = r * x + _L10
    r = r * x + _L9
    r = r * x + _L8
    r = r * x + _L7
    r = r * x + _L6
    r = r * x + _L5
    r = r * x + _L4
    r = r * x + _L3
    r = r * x + _L2
    r = r * x + _L1
    return r * x + _L0


@nb.njit(nogil=True, cache=True, error_model="numpy")
def exponentials(indices, cos_table, sin_table, out_real, out_imag):
    """out = h_p for p = 0..n-1, each sum in the order of `indices`."""
    n = cos_table.size
    phases = np.empty(n, dtype=np.int64)
    power_of_two = n & (n - 1) == 0
    for s in range(indices.size):
        k, phase = indices[s], 0
        if power_of_two:  # k p mod n as a mask: the same phases, in a loop without a carried dependency
            for p in range(n):
                phases[p] = (k * p) & (n - 1)
        else:
            for p in range(n):
                phases[p] = phase
                phase += k
                if phase >= n:
                    phase -= n
        if s == 0:
            for p in range(n):
                out_real[p] = cos_table[phases[p]]
                out_imag[p] = sin_table[phases[p]]
        else:
            for p in range(n):
                out_real[p] += cos_table[phases[p]]
                out_imag[p] += sin_table[phases[p]]


@nb.njit(nogil=True, cache=True, error_model="numpy")
def add_column(real, imag, k, sign, cos_table, sin_table, out_real, out_imag):
    """out = (real, imag) + sign exp(2 pi i k p / n), sign +1 or -1 (an add or a subtract)."""
    n, phase = cos_table.size, 0
    for p in range(n):
        if sign > 0:
            out_real[p] = real[p] + cos_table[phase]
            out_imag[p] = imag[p] + sin_table[phase]
        else:
            out_real[p] = real[p] - cos_table[phase]
            out_imag[p] = imag[p] - sin_table[phase]
        phase += k
        if phase >= n:
            phase -= n


@nb.njit(nogil=True, cache=True, error_model="numpy")
def ranking_inputs(base_real, base_imag, m, antipodal, gradient, curvature):
    """gradient = f_a - i f_b and curvature = f_aa - f_bb at (a, b) = h / m clipped inside (-1, 1)."""
    low, high = -1.0 + 1e-6, 1.0 - 1e-6
    for p in range(base_real.size):
        a = min(max(base_real[p] / m, low), high)
        b = min(max(base_imag[p] / m, low), high)
        one_minus_b2 = 1.0 - b * b
        if antipodal:
            one_minus_a2 = 1.0 - a * a
            f_a = -2.0 * a / one_minus_a2
            f_aa = -2.0 * (1.0 + a * a) / (one_minus_a2 * one_minus_a2)
        else:
            one_minus_a = 1.0 - a
            f_a = -1.0 / one_minus_a
            f_aa = -1.0 / (one_minus_a * one_minus_a)
        if antipodal:
            f_b = -2.0 * b / one_minus_b2
            f_bb = -2.0 * (1.0 + b * b) / (one_minus_b2 * one_minus_b2)
        else:
            f_b = -b / one_minus_b2
            f_bb = -(1.0 + b * b) / (one_minus_b2 * one_minus_b2)
        gradient[p] = complex(f_a, -f_b)
        curvature[p] = f_aa - f_bb
    gradient[0] = 0.0
    curvature[0] = 0.0


@nb.njit(nogil=True, cache=True, error_model="numpy")
def exact_objectives(base_real, base_imag, candidates, cos_table, sin_table, weights, m, antipodal, floor,
                     out):
    """out[c] = sum_{p=1..P} weights[p-1] term_p with candidates[c] added to base (half range, p = 1..P)."""
    n, count = cos_table.size, weights.size
    product = np.empty(count)
    terms = np.empty(count)
    bits = product.view(np.int64)
    mantissa_bits = np.empty(count, dtype=np.int64)
    mantissa = mantissa_bits.view(np.float64)
    exponent_bits = np.empty(count, dtype=np.int64)
    exponent = exponent_bits.view(np.float64)
    column_real, column_imag = np.empty(count), np.empty(count)
    power_of_two = m & (m - 1) == 0
    inverse_m = 1.0 / m
    for c in range(candidates.size):
        k, phase = candidates[c], candidates[c]
        for j in range(count):  # exp(2 pi i k p / n) for p = 1..count, k p mod n by exact steps
            column_real[j] = cos_table[phase]
            column_imag[j] = sin_table[phase]
            phase += k
            if phase >= n:
                phase -= n
        for j in range(count):
            real, imag = base_real[j] + column_real[j], base_imag[j] + column_imag[j]
            # x / m, or the same correctly rounded quotient as x * 2^-k when m = 2^k (no division).
            real = real * inverse_m if power_of_two else real / m
            imag = imag * inverse_m if power_of_two else imag / m
            imag_factor = 1.0 - imag * imag
            imag_factor = imag_factor if imag_factor > floor else floor
            if antipodal:
                real_factor = 1.0 - real * real
                real_factor = real_factor if real_factor > floor else floor
                product[j] = real_factor * imag_factor
            else:
                real_factor = 1.0 - real
                real_factor = real_factor if real_factor > floor else floor
                product[j] = real_factor * real_factor * imag_factor
        for j in range(count):
            mantissa_bits[j] = (bits[j] & _MANTISSA) | _HALF_EXPONENT
            exponent_bits[j] = ((bits[j] >> 52) & 0x7FF) | _TWO_52_BITS
        # log of each product as `_portable_math.log` computes it, in a loop without a carried sum or
        # integer-to-float conversion (so it is vectorised), then the terms summed in p order.
        for j in range(count):
            value = mantissa[j]
            e = (exponent[j] - _TWO_52) - 1022.0  # the unbiased exponent of frexp, exactly
            small = value < _SQRT_HALF
            value = value * 2.0 if small else value
            e = e - 1.0 if small else e
            f = value - 1.0
            s = f / (2.0 + f)
            log = e * LN2_HI + (2.0 * s * _log_series(s * s) + e * LN2_LO)
            terms[j] = (log if antipodal else 0.5 * log) * weights[j]
        total = terms[0] if count else 0.0
        for j in range(1, count):
            total += terms[j]
        out[c] = total


@nb.njit(nogil=True, cache=True, error_model="numpy")
def shortlist_scores(linear, quadratic, free, m, score):
    """score[i] = Re linear[k] / m + Re quadratic[2k mod n] / (4 m^2), k = free[i]: the ranking's
    second-order estimate (linear and quadratic the two inverse DFTs, unnormalised)."""
    n = linear.size
    square_scale = 4.0 * m * m
    for i in range(free.size):
        k = free[i]
        double = 2 * k - n if 2 * k >= n else 2 * k
        score[i] = linear[k].real / m + quadratic[double].real / square_scale


@nb.njit(nogil=True, cache=True, error_model="numpy")
def choose(values, relative_gain):
    """(position among values[1:] of the best candidate, whether it beats values[0]): the lowest
    position within the noise of the best wins (ties are common: symmetries)."""
    top = values[1]
    for i in range(2, values.size):
        top = max(top, values[i])
    threshold = top - relative_gain * max(1.0, abs(top))
    best = 0
    while not values[best + 1] >= threshold:
        best += 1
    current = values[0]
    return best, top > current + relative_gain * max(1.0, abs(current))


@nb.njit(nogil=True, cache=True, error_model="numpy")
def prepare_coordinate(h_real, h_imag, removed, used, cos_table, sin_table, m, antipodal, rank, base_real,
                       base_imag, gradient, curvature, free):
    """base = h - exp(2 pi i removed p / n); free[:count] = the unused indices, ascending; with `rank`,
    the ranking FFTs' inputs (`ranking_inputs`). Returns count."""
    # np.int64(-1), not the literal: numba compiled `add_column` again for Literal[int](-1) (~0.2 s, measured)
    add_column(h_real, h_imag, removed, np.int64(-1), cos_table, sin_table, base_real, base_imag)
    count = 0
    for k in range(used.size):
        if not used[k]:
            free[count] = k
            count += 1
    if rank:
        ranking_inputs(base_real, base_imag, m, antipodal, gradient, curvature)
    return count


@nb.njit(nogil=True, cache=True, error_model="numpy")
def shortlist(linear, quadratic, free, m, size, removed, candidates):
    """candidates = [removed, the `size` free indices of highest score (`shortlist_scores`), ascending]
    and True; or False when the choice is not unique (a tie at the edge, or a nan), for the caller to
    decide as numpy's argpartition does."""
    score = np.empty(free.size)
    shortlist_scores(linear, quadratic, free, m, score)
    # The size + 1 highest scores, in decreasing order, by insertion.
    top = np.full(size + 1, -np.inf)
    for i in range(free.size):
        value = score[i]
        if value != value:
            return False
        if value > top[size]:
            j = size
            while j > 0 and top[j - 1] < value:
                top[j] = top[j - 1]
                j -= 1
            top[j] = value
    edge = top[size - 1]
    if not edge > top[size]:
        return False
    candidates[0] = removed
    taken = 1
    for i in range(free.size):
        if score[i] >= edge:
            candidates[taken] = free[i]
            taken += 1
    return True



@nb.njit(nogil=True, cache=True, error_model="numpy")
def packed_ranking_input(gradient, curvature, out):
    """out = g_H + i c_E, g_H[p] = (g_p + conj(g_{-p})) / 2 and c_E[p] = (c_p + c_{-p}) / 2 (indices mod n):
    both have real inverse DFTs, Re ifft(g) and Re ifft(c), so ifft(out) gives the two ranking transforms'
    real parts (all `shortlist_scores` reads) in one FFT instead of two."""
    n = gradient.size
    for p in range(n):
        mirror = n - p if p else 0
        g, g_mirror = gradient[p], gradient[mirror]
        linear_real = 0.5 * (g.real + g_mirror.real)
        linear_imag = 0.5 * (g.imag - g_mirror.imag)
        even = 0.5 * (curvature[p] + curvature[mirror])
        # g_H + i c_E: real part Re g_H, imaginary part Im g_H + c_E.
        out[p] = complex(linear_real, linear_imag + even)
