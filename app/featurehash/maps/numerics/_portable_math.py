"""Elementary functions and sums that give the same bits on every machine.

Numbers fitted when a spec is created (and stored in it, so covered by its id) must not depend
on the CPU: numpy's exp, log, sin and cos have SIMD variants chosen at run time (AVX2, AVX-512,
SVML) that differ in the last bit, libm has FMA variants, and BLAS products sum in an order that
depends on the kernel, the blocking and the thread count. A fit steered by such last bits can
land elsewhere after its numbers are rounded.

So the fits use only operations that IEEE 754 rounds correctly and identically everywhere:
+, -, *, / and sqrt of float64 (numpy never fuses them), exact scalings (ldexp, frexp, rint),
and sums in a fixed order (`ordered_sum`: numpy's accumulate is sequential by definition). The
functions below are written on those: range reduction with split constants (fdlibm's), then
Taylor polynomials in Horner form. They are within a few ulp of the correctly rounded value,
which is more than a fit needs; what matters is that they are the same everywhere.
"""

from __future__ import annotations

import math

import numpy as np

# ln 2 = LN2_HI + LN2_LO, LN2_HI with 32 significant bits (k * LN2_HI is exact for |k| < 2^21).
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
# pi / 2 = PIO2_1 + PIO2_2 + PIO2_3, the first two with 33 significant bits.
PIO2_1 = 1.57079632673412561417e+00
PIO2_2 = 6.07710050630396597660e-11
PIO2_3 = 2.02226624879595063154e-21
# Beyond this |x| the reduction of sin and cos loses accuracy (it stays deterministic).
TRIG_EXACT_RANGE = 2.0**19 * math.pi / 2

_EXP_TERMS = [1.0 / math.factorial(n) for n in range(14)]  # |r| <= ln2/2: next term < 4e-18
_LOG_TERMS = [1.0 / (2 * n + 1) for n in range(13)]       # |s| <= 0.1716: next term < 1e-19
_SIN_TERMS = [(-1.0) ** n / math.factorial(2 * n + 1) for n in range(10)]  # |r| <= pi/4
_COS_TERMS = [(-1.0) ** n / math.factorial(2 * n) for n in range(11)]


def _horner(coefficients: list[float], x: np.ndarray) -> np.ndarray:
    result = np.full_like(x, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        result *= x
        result += c
    return result


def exp(x) -> np.ndarray:
    """e^x for float64 x (0 below -745, inf above 709.78)."""
    x = np.asarray(x, dtype=np.float64)
    clipped = np.clip(np.where(x == x, x, 0.0), -746.0, 710.0)
    k = np.rint(clipped / LN2_HI)
    r = (clipped - k * LN2_HI) - k * LN2_LO
    # Two ldexp steps, so that e^r 2^k neither overflows early nor loses a subnormal result.
    half = np.floor(k / 2.0)
    with np.errstate(over="ignore"):
        value = np.ldexp(np.ldexp(_horner(_EXP_TERMS, r), half.astype(np.int64)), (k - half).astype(np.int64))
    return np.where(x != x, x, value)


def log(x) -> np.ndarray:
    """Natural log for float64 x > 0 (-inf at 0, nan below)."""
    x = np.asarray(x, dtype=np.float64)
    positive = np.where(x > 0, x, 1.0)
    mantissa, exponent = np.frexp(positive)  # mantissa in [0.5, 1)
    small = mantissa < math.sqrt(0.5)
    mantissa = np.where(small, mantissa * 2.0, mantissa)  # now in [0.707, 1.414)
    e = (exponent - small).astype(np.float64)
    f = mantissa - 1.0  # exact (Sterbenz)
    s = f / (2.0 + f)
    series = 2.0 * s * _horner(_LOG_TERMS, s * s)  # log(1 + f) = 2 atanh(s)
    value = e * LN2_HI + (series + e * LN2_LO)
    return np.where(x > 0, value, np.where(x == 0, -np.inf, np.nan))


def _reduce(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x = k pi/2 + r with |r| <= pi/4 (about), and k mod 4."""
    k = np.rint(x / PIO2_1)
    r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3
    return r, np.mod(k, 4.0).astype(np.int8)


def cos_sin(x) -> tuple[np.ndarray, np.ndarray]:
    """(cos x, sin x) for float64 x."""
    x = np.asarray(x, dtype=np.float64)
    r, quadrant = _reduce(x)
    r2 = r * r
    s = r * _horner(_SIN_TERMS, r2)
    c = _horner(_COS_TERMS, r2)
    cos = np.choose(quadrant, [c, -s, -c, s])
    sin = np.choose(quadrant, [s, c, -s, -c])
    return cos, sin


def cos(x) -> np.ndarray:
    return cos_sin(x)[0]


def integer_power(x, exponent: int) -> np.ndarray:
    """x ** exponent for an integer exponent >= 0, by squaring in a fixed order (np.power calls libm's pow)."""
    result = np.ones_like(np.asarray(x, dtype=np.float64))
    base = np.asarray(x, dtype=np.float64)
    while exponent:
        if exponent & 1:
            result = result * base
        exponent >>= 1
        if exponent:
            base = base * base
    return result


def ordered_sum(a, axis: int = 0) -> np.ndarray:
    """The sum along `axis`, added strictly in index order (no pairwise or SIMD reassociation)."""
    a = np.asarray(a, dtype=np.float64)
    if a.shape[axis] == 0:
        return np.zeros(np.delete(a.shape, axis))
    return np.add.accumulate(a, axis=axis).take(-1, axis=axis)


def ordered_matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """matrix @ vector with each row's terms added in column order."""
    return ordered_sum(np.asarray(matrix, dtype=np.float64) * np.asarray(vector, dtype=np.float64), axis=1)
