"""Compiled elementwise kernels of the dense Fourier maps (driven by `_fourier_pass`): cos and sin of
a projection, weighted, and nrff's row normalisation fused in (while the row is in L1).

float64: numpy's cos and sin are scalar libm calls, and a cos_sin map
needs both of the same argument; so a compiled pass (numba) computes both from one range
reduction, with a formula we own that LLVM vectorises:
    k = rint(x * 2/pi),  r = x - k pi/2  (Cody-Waite: pi/2 = P1 + P2 + P3, P1 and P2 of 33 bits,
    so k P1 and k P2 are exact for |k| < 2^20),  |r| <= pi/4,
    sin r, cos r by their Taylor series to r^17 and r^18 (truncation < 5e-17 on |r| <= pi/4),
    then sin x, cos x = (+-sin r or +-cos r) by k mod 4
(within 1 ulp of numpy's cos and sin).
float32 output: the same formulas in float32 arithmetic with shorter polynomials and 8-bit parts of
pi/2 and pi (16 SIMD lanes of AVX-512 where float64 has 8), within 2^-22 of the weight; an argument
beyond their reduction (|x| > 1e5 or 2e5: heavy-tailed Laplacian frequencies) goes through a float64
formula, element by element. Speeds: docs/benchmarks.md, "Compiled passes and threads".
Plain IEEE operations without contraction, so a given projection gives the same bits on every CPU
and SIMD width; the one exception is the normalisation's float64 sum of squares, reassociated so it
vectorises (its last bit, ~1e-16 of the norm, may follow the SIMD width).
The kernels are single-threaded and release the GIL: a batch's row chunks share the cores through
`_row_threads` (not numba's OpenMP pool, whose threads spin between BLAS products).
Arguments beyond REDUCTION_LIMIT (|x| > 8e5 or 1.6e6), inf or nan are counted, not reduced: the caller
recomputes that block with numpy's cos and sin, which reduce any argument.
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
def cos_sin_into(projection, weights, out, unit_rows):
    """out[:, j] = weights[j] cos(p_j), out[:, m + j] = weights[j] sin(p_j), m = projection width; then
    rows scaled to unit norm if `unit_rows`. Returns how many arguments were not reduced (then `out` must
    be recomputed)."""
    rows, m = projection.shape
    unreduced = 0
    for i in range(rows):
        values, cosines, sines = projection[i], out[i, :m], out[i, m:]
        for j in range(m):
            sin_x, cos_x, bad = _sincos(np.float64(values[j]))
            cosines[j] = weights[j] * cos_x
            sines[j] = weights[j] * sin_x
            unreduced += bad
        if unit_rows:
            _unit_row(out[i])
    return unreduced


@nb.njit(nogil=True, cache=True)
def shifted_cos_inplace(out, offsets, weight, unit_rows):
    """out[:, j] = weight cos(out[:, j] + offsets[j]); the sum is rounded to out's precision first,
    as numpy's `out += offsets; cos(out)` does; then rows scaled to unit norm if `unit_rows`. Returns
    how many arguments were not reduced."""
    rows, m = out.shape
    unreduced = 0
    for i in range(rows):
        row = out[i]
        for j in range(m):
            _, cos_x, bad = _sincos(np.float64(row[j] + offsets[j]))
            row[j] = weight * cos_x
            unreduced += bad
        if unit_rows:
            _unit_row(row)
    return unreduced


# float32 cos_sin arguments beyond the float32 reduction below need ~1e-9, not 1e-16: the same float64
# reduction by pi/2 with sin r to r^11 and cos r to r^12 (truncation < 7e-12 on |r| <= pi/4).
_S11 = _S[:5]
_C12 = _C[:6]


@nb.njit(inline="always")
def _sincos_short(x):
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


# float32 phase features are rounded to float32: the float64 formula of `shifted_cos_inplace` is ~1e-16
# accurate where ~1e-7 is enough, at half the SIMD lanes. So the phase pass computes in float32 (16 lanes
# of AVX-512 against 8), still with plain IEEE operations only (the same bits on every CPU and width):
#     k = rint(x / pi),  r = ((x - k A) - k B) - k C,  A + B + C = pi (A, B of 8 bits: k A, k B exact
#     for |k| < 2^16, and x - k A exact by Sterbenz's lemma),  |r| <= pi/2,
#     cos x = (-1)^k cos r,  cos r by its Taylor series to r^14 (truncation < 7e-11 on |r| <= pi/2),
# within 2^-22 of weight cos(x) for the float32 x = p + b (measured: 1.4 float32 ulps of 1). Arguments with
# |k| >= 2^16 (|x| > 2e5: only heavy-tailed Laplacian frequencies reach them) go through the float64
# formula (by pi, to r^16, exact reduction for |k| < 2^19), element by element.
_ONE_OVER_PI = float(1 / (2 * _HALF_PI))
_C16 = tuple((-1.0) ** j / math.factorial(2 * j) for j in range(1, 9))      # r^2 .. r^16
_PI_A = _leading_bits(2 * _HALF_PI, 8)
_PI_B = _leading_bits(2 * _HALF_PI - Decimal(_PI_A), 8)
_PI_A32, _PI_B32 = np.float32(_PI_A), np.float32(_PI_B)
_PI_C32 = np.float32(float(2 * _HALF_PI - Decimal(_PI_A) - Decimal(_PI_B)))
_ONE_OVER_PI32 = np.float32(_ONE_OVER_PI)
REDUCTION_LIMIT32 = np.float32(2.0**16)
_C14_32 = tuple(np.float32(c) for c in _C16[:7])                             # r^2 .. r^14
_ONE32 = np.float32(1.0)


@nb.njit(inline="always")
def _beyond_float32(k):
    """1 where k = rint(x / P) is too large for k a and k b to be exact in float32 (|k| >= 2^16), or not
    finite, else 0."""
    return 1 if not (abs(k) < REDUCTION_LIMIT32) else 0


@nb.njit(inline="always")
def _reduced_float32(x, inverse, a, b, c):
    """(k, r, bad) with x = k P + r, P = a + b + c (pi or pi/2; a and b of 8 bits), in float32 arithmetic;
    bad = 1 where |k| >= 2^16 or x is not finite (then k = 0 and r must not be used)."""
    k = np.rint(x * inverse)
    bad = _beyond_float32(k)
    k = k if bad == 0 else np.float32(0.0)
    return k, ((x - k * a) - k * b) - k * c, bad


@nb.njit(inline="always")
def _cos_float32(x, weight):
    """(weight cos x, 1 if x is beyond the float32 reduction or not finite else 0) in float32 arithmetic."""
    k, r, bad = _reduced_float32(x, _ONE_OVER_PI32, _PI_A32, _PI_B32, _PI_C32)
    r2 = r * r
    c = _C14_32[6]
    c = c * r2 + _C14_32[5]
    c = c * r2 + _C14_32[4]
    c = c * r2 + _C14_32[3]
    c = c * r2 + _C14_32[2]
    c = c * r2 + _C14_32[1]
    c = c * r2 + _C14_32[0]
    c = _ONE32 + r2 * c
    return (weight if (np.int32(k) & 1) == 0 else -weight) * c, bad


@nb.njit(inline="always")
def _cos_by_pi(x, weight):
    """(weight cos x, 1 if x could not be reduced else 0) for a float64 x: reduction by pi, cos r to r^16."""
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
    return (weight if (np.int64(k) & 1) == 0 else -weight) * c, bad


# |x| below these (float32, with room for the roundings of x / P and of the bound itself) has |rint(x / P)| <=
# 2^16 - 1, which the float32 reductions take: a row whose arguments are all below goes by the vectorised loop.
# A comparison and an AND a element, where counting `_beyond_float32` of each (rint and an int64 sum) was a
# third of the phase pass's time (measured: the pass 1.25x faster, same bits; a NaN or infinity fails it).
_REDUCIBLE_BY_PI32 = np.float32((2.0**16 - 1) * math.pi)
_REDUCIBLE_BY_HALF_PI32 = np.float32((2.0**16 - 1) * math.pi / 2)


@nb.njit(inline="always")
def _all_shifted_below(row, offsets, bound):
    """Whether every |row[j] + offsets[j]| is below `bound` (False if one is NaN)."""
    below = True
    for j in range(row.size):
        below &= abs(row[j] + offsets[j]) < bound
    return below


@nb.njit(inline="always")
def _all_below(values, bound):
    """Whether every |values[j]| is below `bound` (False if one is NaN)."""
    below = True
    for j in range(values.size):
        below &= abs(values[j]) < bound
    return below


@nb.njit(nogil=True, cache=True)
def shifted_cos_float32(out, offsets, weight, unit_rows):
    """out[:, j] = weight cos(out[:, j] + offsets[j]) for float32 `out` and `offsets` (the sum rounded to
    float32, as numpy's `out += offsets` does), then each row scaled to unit norm if `unit_rows`. A row
    whose arguments `_cos_float32` all reduces goes through it (vectorised); in any other row each argument
    beyond it goes through the float64 `_cos_by_pi` and the rest through `_cos_float32`, so an element's
    bits never depend on its neighbours. Returns how many arguments neither could reduce (then numpy must)."""
    rows, m = out.shape
    w = np.float32(weight)
    unreduced = 0
    for i in range(rows):
        row = out[i]
        if _all_shifted_below(row, offsets, _REDUCIBLE_BY_PI32):
            for j in range(m):
                row[j], _ = _cos_float32(row[j] + offsets[j], w)
        else:
            for j in range(m):
                x = row[j] + offsets[j]
                value, bad = _cos_float32(x, w)
                if bad:
                    wide, bad = _cos_by_pi(np.float64(x), weight)
                    value = np.float32(wide)
                    unreduced += bad
                row[j] = value
        if unit_rows:
            _unit_row(row)
    return unreduced


@nb.njit(nogil=True, cache=True, fastmath={"reassoc"})
def _squared_norm(row, scale):
    """sum of (scale row)^2 in float64; reassociated, so it vectorises: its order (hence its last bit,
    ~1e-16) follows the SIMD width, far below a float32 feature's rounding and float64's promised 1e-11."""
    total = 0.0
    for j in range(row.size):
        value = np.float64(row[j]) * scale
        total += value * value
    return total


@nb.njit(inline="always")
def _unit_row(row):
    """row divided by its l2 norm (one multiplication by the inverse, in row's precision)."""
    inverse = row.dtype.type(1.0 / math.sqrt(_squared_norm(row, 1.0)))
    for j in range(row.size):
        row[j] = row[j] * inverse


@nb.njit(nogil=True, cache=True, fastmath={"reassoc", "nnan", "ninf"})
def _peak(row):
    """max |row| in float64 (rows are checked finite: no NaN or inf can reach it), vectorised."""
    peak = 0.0
    for j in range(row.size):
        peak = max(peak, abs(np.float64(row[j])))
    return peak


@nb.njit(nogil=True, cache=True)
def unit_rows_into(X, out):
    """out = each row of X scaled to unit l2 norm, in float64 and without over/underflow (scaled first by
    the power of two that brings its largest magnitude into [1/2, 1): exact), rounded once to out's dtype: one pass
    and no temporaries, for the unit-sphere maps' inputs. Multiplications only and vectorised reductions
    (`_peak`, `_squared_norm`): three divisions and a serial sum an element made nrff and srf 1.4x slower
    than rff at d = 64 (measured). Returns how many rows are all zero (left as zeros; the caller refuses
    them)."""
    rows, width = X.shape
    zero_rows = 0
    for i in range(rows):
        row, target = X[i], out[i]
        peak = _peak(row)
        if peak == 0.0:
            zero_rows += 1
            target[:] = 0
            continue
        scale = math.ldexp(1.0, min(-math.frexp(peak)[1], 1022))   # 2^1023 and above overflow
        inverse = 1.0 / math.sqrt(_squared_norm(row, scale))
        for j in range(width):
            target[j] = (np.float64(row[j]) * scale) * inverse
    return zero_rows


@nb.njit(nogil=True, cache=True)
def normalize_rows(out):
    """Each row divided by its l2 norm (`_unit_row`): for blocks computed by numpy's cos."""
    for i in range(out.shape[0]):
        _unit_row(out[i])


# float32 cos_sin features in float32 arithmetic, as the phase pass below:
#     k = rint(x 2/pi),  r = ((x - k A) - k B) - k C,  A + B + C = pi/2 (A, B of 8 bits),  |r| <= pi/4,
#     sin r to r^9 and cos r to r^10 (truncation < 2e-9 and 1.2e-10 on |r| <= pi/4), then by k mod 4;
# within 2^-22 of the weight (measured: 1.1 float32 ulps of 1); arguments with |k| >= 2^16 (|x| > 1e5)
# go through `_sincos_short` element by element.
_HALF_PI_A = _leading_bits(_HALF_PI, 8)
_HALF_PI_B = _leading_bits(_HALF_PI - Decimal(_HALF_PI_A), 8)
_HALF_PI_A32, _HALF_PI_B32 = np.float32(_HALF_PI_A), np.float32(_HALF_PI_B)
_HALF_PI_C32 = np.float32(float(_HALF_PI - Decimal(_HALF_PI_A) - Decimal(_HALF_PI_B)))
_TWO_OVER_PI32 = np.float32(_TWO_OVER_PI)
_S9_32 = tuple(np.float32(c) for c in _S[:4])     # r^3 .. r^9
_C10_32 = tuple(np.float32(c) for c in _C[:5])    # r^2 .. r^10


@nb.njit(inline="always")
def _sincos_in_float32(x):
    """(sin x, cos x, 1 if x is beyond the float32 reduction or not finite else 0) in float32 arithmetic."""
    k, r, bad = _reduced_float32(x, _TWO_OVER_PI32, _HALF_PI_A32, _HALF_PI_B32, _HALF_PI_C32)
    r2 = r * r
    s = _S9_32[3]
    s = s * r2 + _S9_32[2]
    s = s * r2 + _S9_32[1]
    s = s * r2 + _S9_32[0]
    s = r + r * (r2 * s)
    c = _C10_32[4]
    c = c * r2 + _C10_32[3]
    c = c * r2 + _C10_32[2]
    c = c * r2 + _C10_32[1]
    c = c * r2 + _C10_32[0]
    c = _ONE32 + r2 * c
    # `_by_quadrant` multiplies by float64 +-1.0 (half the lanes); its negation form made this pass 1.2x slower
    quadrant = np.int32(k) & 3
    odd = (quadrant & 1) == 1
    sin_x = c if odd else s
    cos_x = s if odd else c
    sin_x = -sin_x if quadrant >= 2 else sin_x
    cos_x = -cos_x if quadrant == 1 or quadrant == 2 else cos_x
    return sin_x, cos_x, bad


@nb.njit(nogil=True, cache=True)
def cos_sin_into_float32(projection, weights, out, unit_rows):
    """`cos_sin_into` for float32 `projection`, `weights` and `out`, in float32 arithmetic
    (`_sincos_in_float32`); in a row with an argument beyond its reduction, each such argument goes
    through the float64 `_sincos_short` (an element's bits never depend on its neighbours). Returns how
    many arguments neither could reduce (then numpy must)."""
    rows, m = projection.shape
    unreduced = 0
    for i in range(rows):
        values, cosines, sines = projection[i], out[i, :m], out[i, m:]
        for j in range(m):   # branch-free, so it vectorises
            sin_x, cos_x, _ = _sincos_in_float32(values[j])
            cosines[j] = weights[j] * cos_x
            sines[j] = weights[j] * sin_x
        # The arguments beyond the float32 reduction (rare) are written again. One loop with a branch per
        # element inlined the float32 formula a second time: ~0.3 s more of numba's compilation.
        if not _all_below(values, _REDUCIBLE_BY_HALF_PI32):
            for j in range(m):
                if _beyond_float32(np.rint(values[j] * _TWO_OVER_PI32)):
                    wide_sin, wide_cos, bad = _sincos_short(np.float64(values[j]))
                    cosines[j] = weights[j] * np.float32(wide_cos)
                    sines[j] = weights[j] * np.float32(wide_sin)
                    unreduced += bad
        if unit_rows:
            _unit_row(out[i])
    return unreduced


# Additive chi2 features (`additive_chi2`) of float64 entries, in one pass without temporaries: for x > 0,
# sqrt(x L) and, for j >= 1, sqrt(2 x L / cosh(pi j L)) [cos, sin](j L log x), by `_sincos` (numpy's float64
# cos and sin were most of the map's time); a zero gives zeros. The dense and the CSR kernels share
# `_additive_step`, so the two inputs give the same bits.
@nb.njit(inline="always")
def _additive_step(x, log_step, j, two_interval, cosh):
    """(factor cos, factor sin, unreduced) of step j for one entry x > 0, log_step = log(x) L."""
    factor = math.sqrt(x * two_interval / cosh)
    sin_x, cos_x, bad = _sincos(log_step * j)
    return factor * cos_x, factor * sin_x, bad


@nb.njit(nogil=True, cache=True)
def additive_chi2_rows(X, out, interval, coshes):
    """out = [sqrt(x L) | cos block of step 1 | sin block of step 1 | ...] for the rows of X (float64),
    coshes[j] = cosh(pi j L). Returns how many arguments could not be reduced (then recompute)."""
    rows, d = X.shape
    unreduced = 0
    two_interval = 2.0 * interval
    for i in range(rows):
        values, target = X[i], out[i]
        for c in range(d):
            x = values[c]
            if x > 0:
                target[c] = math.sqrt(x * interval)
                log_step = math.log(x) * interval
                for j in range(1, coshes.size):
                    cos_x, sin_x, bad = _additive_step(x, log_step, j, two_interval, coshes[j])
                    target[(2 * j - 1) * d + c] = cos_x
                    target[2 * j * d + c] = sin_x
                    unreduced += bad
            else:
                for block in range(2 * coshes.size - 1):
                    target[block * d + c] = 0.0
    return unreduced


@nb.njit(nogil=True, cache=True)
def additive_chi2_values(values, blocks, interval, coshes):
    """blocks[b, t] = feature block b of the entry values[t] > 0 (CSR data), as `additive_chi2_rows`."""
    unreduced = 0
    two_interval = 2.0 * interval
    for t in range(values.size):
        x = values[t]
        blocks[0, t] = math.sqrt(x * interval)
        log_step = math.log(x) * interval
        for j in range(1, coshes.size):
            cos_x, sin_x, bad = _additive_step(x, log_step, j, two_interval, coshes[j])
            blocks[2 * j - 1, t] = cos_x
            blocks[2 * j, t] = sin_x
            unreduced += bad
    return unreduced
