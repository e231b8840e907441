"""`_portable_math` for compiled loops: the same functions as numba scalars, the same bits.

numba compiles for the CPU it runs on, but without `fastmath` it keeps IEEE semantics: it never
fuses a multiply and an add into an FMA (fp-contract off) and never reassociates a sum (a loop
carrying one accumulator stays sequential; elementwise loops may be vectorised, which does not
change any result). So a kernel written with +, -, *, /, sqrt, rint and ldexp in a fixed order
gives the same bits on every x86/ARM machine, whatever its SIMD width. tests/maps/fourier/test_quadrature.py
checks that `cos` and `exp` here equal `_portable_math.cos` and `_portable_math.exp` bit for bit
and that the compiled code contains no fused multiply-add.

`dot` sums in four interleaved lanes, combined as (l0 + l1) + (l2 + l3): a fixed order, four
times the throughput of one sequential chain.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ._portable_math import (_COS_TERMS, _EXP_TERMS, _SIN_TERMS, LN2_HI, LN2_LO, PIO2_1, PIO2_2,
                             PIO2_3)

_EXP = np.array(_EXP_TERMS)
_SIN = np.array(_SIN_TERMS)
_COS = np.array(_COS_TERMS)


@nb.njit(inline="always")
def _horner(coefficients, x):
    result = coefficients[coefficients.size - 1]
    for i in range(coefficients.size - 2, -1, -1):
        result = result * x
        result = result + coefficients[i]
    return result


@nb.njit(nogil=True, cache=True)
def cos(x):
    """cos x, as `_portable_math.cos` computes it."""
    k = np.rint(x / PIO2_1)
    r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3
    quadrant = int(k) % 4
    r2 = r * r
    if quadrant == 0:
        return _horner(_COS, r2)
    if quadrant == 2:
        return -_horner(_COS, r2)
    s = r * _horner(_SIN, r2)
    return -s if quadrant == 1 else s


@nb.njit(nogil=True, cache=True)
def exp(x):
    """e^x for finite x, as `_portable_math.exp` computes it."""
    clipped = min(max(x, -746.0), 710.0)
    k = np.rint(clipped / LN2_HI)
    r = (clipped - k * LN2_HI) - k * LN2_LO
    half = math.floor(k / 2.0)
    return math.ldexp(math.ldexp(_horner(_EXP, r), int(half)), int(k - half))


@nb.njit(nogil=True, cache=True)
def dot(x, y, n):
    """sum_{i < n} x[i] y[i] in four lanes, (l0 + l1) + (l2 + l3)."""
    l0 = l1 = l2 = l3 = 0.0
    i = 0
    while i + 4 <= n:
        l0 += x[i] * y[i]
        l1 += x[i + 1] * y[i + 1]
        l2 += x[i + 2] * y[i + 2]
        l3 += x[i + 3] * y[i + 3]
        i += 4
    while i < n:
        l0 += x[i] * y[i]
        i += 1
    return (l0 + l1) + (l2 + l3)
