"""Compiled elementwise kernels of the dense Fourier maps (driven block by block by `_fourier_pass`):
cos and sin of a projection, weighted, and row normalisation.

float64: numpy's cos and sin are scalar libm calls (~17 ns an element, measured), and a cos_sin map
needs both of the same argument; so a compiled pass (numba) computes both from one range
reduction, with a formula we own that LLVM vectorises:
    k = rint(x * 2/pi),  r = x - k pi/2  (Cody-Waite: pi/2 = P1 + P2 + P3, P1 and P2 of 33 bits,
    so k P1 and k P2 are exact for |k| < 2^20),  |r| <= pi/4,
    sin r, cos r by their Taylor series to r^17 and r^18 (truncation < 5e-17 on |r| <= pi/4),
    then sin x, cos x = (+-sin r or +-cos r) by k mod 4.
All arithmetic is float64, plain IEEE operations without contraction, so the bits are the same
on every CPU and SIMD width (within 1 ulp of numpy's cos and sin, measured).
The kernels are single-threaded and release the GIL: a batch's row chunks share the cores through
`_row_threads` (numba's OpenMP pool, spinning between BLAS products, made transforms 2-13x slower on
2 loaded cores, measured).
Arguments beyond REDUCTION_LIMIT (or inf/nan) are counted, not reduced: the caller recomputes
that block with numpy's cos and sin, which reduce any argument.
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numba as nb
import numpy as np

getcontext().prec = 60
_HALF_PI = Decimal("1.57079632679489661923132169163975144209858469968755291048747")


def _leading_bits(value: Decimal, bits: int) -> float:
    """`value` truncated to `bits` significant bits (exact in float64)."""
    exponent = math.frexp(float(value))[1]
    step = Decimal(2) ** (exponent - bits)
    return float((value / step).to_integral_value(rounding="ROUND_DOWN") * step)


_P1 = _leading_bits(_HALF_PI, 33)
_P2 = _leading_bits(_HALF_PI - Decimal(_P1), 33)
_P3 = float(_HALF_PI - Decimal(_P1) - Decimal(_P2))
_TWO_OVER_PI = float(1 / _HALF_PI)
# |k| below 2^19 keeps k P1 and k P2 exact with room to spare: |x| up to ~8.2e5.
REDUCTION_LIMIT = 2.0**19
_S = tuple((-1.0) ** j / math.factorial(2 * j + 1) for j in range(1, 9))   # r^3 .. r^17
_C = tuple((-1.0) ** j / math.factorial(2 * j) for j in range(1, 10))      # r^2 .. r^18


@nb.njit(inline="always")
def _reduced_by_half_pi(x):
    """(k, r, unreduced): x = k pi/2 + r, |r| <= pi/4, by a three-part Cody-Waite reduction; unreduced is 1
    where |k| is too large for k P1 and k P2 to be exact (then the result must not be used)."""
    k = np.rint(x * _TWO_OVER_PI)
    unreduced = 1 if not (abs(k) < REDUCTION_LIMIT) else 0
    return k, ((x - k * _P1) - k * _P2) - k * _P3, unreduced


@nb.njit(inline="always")
def _by_quadrant(s, c, k, unreduced):
    """(sin x, cos x, unreduced) from s = sin r, c = cos r and the quadrant k mod 4 of x = k pi/2 + r."""
    quadrant = np.int64(k) & 3 if unreduced == 0 else 0
    odd = (quadrant & 1) == 1
    sin_x = (c if odd else s) * (-1.0 if quadrant >= 2 else 1.0)
    cos_x = (s if odd else c) * (-1.0 if quadrant == 1 or quadrant == 2 else 1.0)
    return sin_x, cos_x, unreduced


@nb.njit(inline="always")
def _sincos(x):
    """(sin x, cos x, 1 if x could not be reduced else 0) for a float64 x."""
    k, r, unreduced = _reduced_by_half_pi(x)
    r2 = r * r
    s = _S[7]
    s = s * r2 + _S[6]
    s = s * r2 + _S[5]
    s = s * r2 + _S[4]
    s = s * r2 + _S[3]
    s = s * r2 + _S[2]
    s = s * r2 + _S[1]
    s = s * r2 + _S[0]
    s = r + r * (r2 * s)
    c = _C[8]
    c = c * r2 + _C[7]
    c = c * r2 + _C[6]
    c = c * r2 + _C[5]
    c = c * r2 + _C[4]
    c = c * r2 + _C[3]
    c = c * r2 + _C[2]
    c = c * r2 + _C[1]
    c = c * r2 + _C[0]
    c = 1.0 + r2 * c
    return _by_quadrant(s, c, k, unreduced)


@nb.njit(nogil=True, cache=True)
def cos_sin_into(projection, weights, out):
    """out[:, j] = weights[j] cos(p_j), out[:, m + j] = weights[j] sin(p_j), m = projection width.
    Returns how many arguments were not reduced (then `out` must be recomputed)."""
    rows, m = projection.shape
    unreduced = 0
    for i in range(rows):
        values, cosines, sines = projection[i], out[i, :m], out[i, m:]
        for j in range(m):
            sin_x, cos_x, bad = _sincos(np.float64(values[j]))
            cosines[j] = weights[j] * cos_x
            sines[j] = weights[j] * sin_x
            unreduced += bad
    return unreduced


@nb.njit(nogil=True, cache=True)
def shifted_cos_inplace(out, offsets, weight):
    """out[:, j] = weight cos(out[:, j] + offsets[j]); the sum is rounded to out's precision first,
    as numpy's `out += offsets; cos(out)` does. Returns how many arguments were not reduced."""
    rows, m = out.shape
    unreduced = 0
    for i in range(rows):
        row = out[i]
        for j in range(m):
            _, cos_x, bad = _sincos(np.float64(row[j] + offsets[j]))
            row[j] = weight * cos_x
            unreduced += bad
    return unreduced


# float32 cos_sin features need ~1e-9, not 1e-16: the same reduction by pi/2 with sin r to r^11 and
# cos r to r^12 (truncation < 7e-12 on |r| <= pi/4), 11 terms instead of 17.
_S11 = _S[:5]
_C12 = _C[:6]


@nb.njit(inline="always")
def _sincos_float32(x):
    """(sin x, cos x, unreduced) as `_sincos`, to ~1e-11: enough for features rounded to float32."""
    k, r, unreduced = _reduced_by_half_pi(x)
    r2 = r * r
    s = _S11[4]
    s = s * r2 + _S11[3]
    s = s * r2 + _S11[2]
    s = s * r2 + _S11[1]
    s = s * r2 + _S11[0]
    s = r + r * (r2 * s)
    c = _C12[5]
    c = c * r2 + _C12[4]
    c = c * r2 + _C12[3]
    c = c * r2 + _C12[2]
    c = c * r2 + _C12[1]
    c = c * r2 + _C12[0]
    c = 1.0 + r2 * c
    return _by_quadrant(s, c, k, unreduced)


@nb.njit(nogil=True, cache=True)
def cos_sin_into_float32(projection, weights, out):
    """`cos_sin_into` for float32 `out`, with `_sincos_float32`."""
    rows, m = projection.shape
    unreduced = 0
    for i in range(rows):
        values, cosines, sines = projection[i], out[i, :m], out[i, m:]
        for j in range(m):
            sin_x, cos_x, bad = _sincos_float32(np.float64(values[j]))
            cosines[j] = weights[j] * cos_x
            sines[j] = weights[j] * sin_x
            unreduced += bad
    return unreduced


# float32 phase features need ~1e-9, not float64's 1e-16: cos alone after a reduction by pi,
#     k = rint(x / pi),  r = x - k pi  (|r| <= pi/2, Cody-Waite with 2 P1, 2 P2, 2 P3),
#     cos x = (-1)^k cos r,  cos r by its Taylor series to r^16 (truncation < 6e-13 on |r| <= pi/2),
# one polynomial instead of two and no quadrant selection; float64 arithmetic, so the same bits everywhere.
_ONE_OVER_PI = float(1 / (2 * _HALF_PI))
_C16 = tuple((-1.0) ** j / math.factorial(2 * j) for j in range(1, 9))      # r^2 .. r^16


@nb.njit(nogil=True, cache=True)
def shifted_cos_float32(out, offsets, weight):
    """out[:, j] = weight cos(out[:, j] + offsets[j]) for float32 `out` and `offsets`, the sum rounded to
    float32 first (as numpy's `out += offsets` does). Returns how many arguments were not reduced."""
    rows, m = out.shape
    unreduced = 0
    for i in range(rows):
        row = out[i]
        for j in range(m):
            x = np.float64(row[j] + offsets[j])
            k = np.rint(x * _ONE_OVER_PI)
            bad = 1 if not (abs(k) < REDUCTION_LIMIT) else 0
            k = k if bad == 0 else 0.0
            r = ((x - k * (2.0 * _P1)) - k * (2.0 * _P2)) - k * (2.0 * _P3)
            r2 = r * r
            c = _C16[7]
            c = c * r2 + _C16[6]
            c = c * r2 + _C16[5]
            c = c * r2 + _C16[4]
            c = c * r2 + _C16[3]
            c = c * r2 + _C16[2]
            c = c * r2 + _C16[1]
            c = c * r2 + _C16[0]
            c = 1.0 + r2 * c
            row[j] = (weight if (np.int64(k) & 1) == 0 else -weight) * c
            unreduced += bad
    return unreduced


@nb.njit(nogil=True, cache=True)
def unit_rows_into(X, out):
    """out = each row of X scaled to unit l2 norm, in float64 and without over/underflow (divided by its
    largest magnitude first), rounded once to out's dtype: one pass and no temporaries, for the unit-sphere
    maps' inputs. Returns how many rows are all zero (left as zeros; the caller refuses them)."""
    rows, width = X.shape
    zero_rows = 0
    for i in range(rows):
        peak = 0.0
        for j in range(width):
            peak = max(peak, abs(np.float64(X[i, j])))
        if peak == 0.0:
            zero_rows += 1
            out[i, :] = 0
            continue
        total = 0.0
        for j in range(width):
            value = np.float64(X[i, j]) / peak
            total += value * value
        norm = math.sqrt(total)
        for j in range(width):
            out[i, j] = (np.float64(X[i, j]) / peak) / norm
    return zero_rows


@nb.njit(nogil=True, cache=True)
def normalize_rows(out):
    """Each row divided by its l2 norm, summed in float64 in 8 interleaved partial sums (a fixed order, so
    the same bits everywhere; one running sum waits on each addition, ~4x slower, measured)."""
    rows, width = out.shape
    whole = width - width % 8
    for i in range(rows):
        row = out[i]
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
        for j in range(0, whole, 8):
            v0, v1, v2, v3 = np.float64(row[j]), np.float64(row[j + 1]), np.float64(row[j + 2]), np.float64(row[j + 3])
            v4, v5, v6, v7 = np.float64(row[j + 4]), np.float64(row[j + 5]), np.float64(row[j + 6]), np.float64(row[j + 7])
            s0 += v0 * v0
            s1 += v1 * v1
            s2 += v2 * v2
            s3 += v3 * v3
            s4 += v4 * v4
            s5 += v5 * v5
            s6 += v6 * v6
            s7 += v7 * v7
        for j in range(whole, width):
            value = np.float64(row[j])
            s0 += value * value
        total = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
        inverse = 1.0 / math.sqrt(total)
        for j in range(width):
            row[j] = row[j] * inverse
