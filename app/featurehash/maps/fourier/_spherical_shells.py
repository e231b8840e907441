"""The spectrum of SRF as spherical shells: a convex fit with a unique optimum, the same on every machine.

On the unit sphere S^{d-1} the polynomial kernel is a radial function of z = ||x - y||,
K(z) = (1 - z^2/a^2)^p on [0, 2] (Pennington et al., NIPS 2015, eq. 2; docs/methods/fourier.md, "SRF").
SRF approximates it by K^, the Fourier transform of a nonnegative spectral density k^ (then E<z(x), z(y)> = K^
by Bochner). The paper parametrises k^ as the clipped Gaussian mixture max(0, sum_i c_i N(0, 2 sigma_i^2 I)) and fits
(c, sigma) to L = 1/2 int_0^2 (K - K^)^2 dz (eq. 5): a nonconvex fit whose optimum moved with the
last bits of the BLAS kernels (`_spherical_mixture`, kept for stored specs).

Every isotropic k^ >= 0 is a mixture of uniform laws on spheres ("shells") of radius r, and a shell
contributes Omega_d(r z) = E_v[cos(r z v_1)] = hyp0f1(d/2, -(r z)^2/4) to K^. So with shells at the
fixed radii r_j = j * delta (j = 1..RADIAL_NODES) and masses m_j >= 0,
    K^(z) = sum_j m_j Omega_d(r_j z),          mass = K^(0) = sum_j m_j,
and eq. 5 becomes a nonnegative least-squares problem in m: convex, and with a small ridge strictly
convex, so it has exactly one optimum, which `_active_set_nnls` finds with the same operations in the
same order everywhere. Its feasible set contains (up to the radial grid) every clipped mixture, so
its L is at or below the paper's N = 10 fit (measured in bench/bench_srf.py and tests/maps/fourier/test_srf.py).
The optimum puts the mass on a few shells (two adjacent radii in every case measured).

Determinism: the radii are decimal-rounded formulas of (a, p, d); Omega_d on the fit's grid is
computed with `_portable_math` (a trapezoid rule over the law of v_1, see `_portable_sphere_cosine_mean`),
the objective by ordered sums, the masses by the ordered active-set solver; then masses are rounded
to STORED_DIGITS. No step depends on BLAS, SIMD paths or thread counts.

Using the fit: frequencies are r_J v with J drawn with probability m_J / mass and v uniform
(`shell_radii`); `shells_kernel` evaluates K^ with scipy (accurate, not needed bit for bit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..numerics import _portable_math as pm
from ..numerics._active_set_nnls import nonnegative_least_squares
from ._spherical_mixture import Z_MAX, sphere_cosine_mean

RADIAL_NODES = 256
Z_INTERVALS = 128          # Simpson's rule on [0, 2]: h = 1/64
STORED_DIGITS = 10
# Relative ridge: strict convexity (one optimum) at no visible cost to L (changes it < 1e-6 relative).
RIDGE = 1e-10
# Below this dimension Omega_d is integrated over the angle (the law of v_1 = cos(phi) has density
# sin(phi)^(d-2)); from it on over v_1 itself, whose bell of width 1/sqrt(d) is smooth.
BELL_DIM = 32
# The fit is made at min(d, FIT_DIM_LIMIT) and its radii scaled by sqrt(d / FIT_DIM_LIMIT): past
# a few thousand dimensions Omega_d(s) is exp(-s^2 / 2d) to many digits (the Gaussian limit).
FIT_DIM_LIMIT = 2**16


def _round(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}")


def radial_step(bias: float, degree: int, dim: int) -> float:
    """delta: the shells cover r up to ~3x the radius where Omega_d(r z) matches K's curvature at z = 0,
    sqrt(2 d p) / a (K ~ 1 - p z^2/a^2, Omega_d(s) ~ 1 - s^2/(2d)), plus room for small d."""
    reach = 3.0 * math.sqrt(2.0 * (dim + 2) * degree) / bias + 12.0
    return _round(reach / RADIAL_NODES, 6)


def _portable_sphere_cosine_mean(s: np.ndarray, dim: int) -> np.ndarray:
    """Omega_d(s) for s >= 0, from `_portable_math` only (within ~1e-9 of hyp0f1 for the s of the fit)."""
    s = np.asarray(s, dtype=np.float64)
    if dim == 1:
        return pm.cos(s)
    if dim == 3:  # the law of v_1 is uniform on [-1, 1]
        cosines, sines = pm.cos_sin(s)
        return np.where(s > 0, sines / np.where(s > 0, s, 1.0), 1.0)
    s_max = float(s.max(initial=0.0))
    if dim < BELL_DIM:
        # Omega_d(s) = int_0^pi cos(s cos phi) sin^(d-2) phi dphi / int_0^pi sin^(d-2) phi dphi: the
        # integrand has period pi and is symmetric about pi/2, so the midpoint rule on [0, pi/2]
        # converges fast once it resolves the bandwidth ~s of cos(s cos phi).
        count = int(math.ceil((s_max + 64.0) / 2.0)) * 2
        phi = (np.arange(count // 2) + 0.5) * (math.pi / count)
        cosines, sines = pm.cos_sin(phi)
        weight = np.ones_like(phi)
        for _ in range(dim - 2):
            weight = weight * sines
        nodes = cosines
    else:
        # Over v_1 = t in [0, T], T = 9 standard deviations of its law (or 1), density (1 - t^2)^((d-3)/2).
        width = 1.0 / math.sqrt(dim - 3.0)
        half_range = min(1.0, 9.0 * width)
        step = 2.0 * math.pi / (s_max + 9.0 * math.sqrt(dim))
        count = int(math.ceil(half_range / step)) + 1
        nodes = np.arange(count) * (half_range / (count - 1))
        weight = pm.exp(0.5 * (dim - 3.0) * pm.log((1.0 - nodes) * (1.0 + nodes)))
        weight[1:] *= 2.0  # fold [-T, 0) onto (0, T]
    weight = weight / pm.ordered_sum(weight)
    flat = s.ravel()
    out = np.empty(flat.shape)
    rows = max(1, 2**20 // nodes.size)
    for start in range(0, flat.size, rows):
        table = pm.cos(np.multiply.outer(flat[start:start + rows], nodes))
        out[start:start + rows] = pm.ordered_sum(table * weight, axis=1)
    return out.reshape(s.shape)


def _simpson(count_intervals: int, length: float) -> tuple[np.ndarray, np.ndarray]:
    h = length / count_intervals
    nodes = np.arange(count_intervals + 1) * h
    weights = np.full(count_intervals + 1, 2.0)
    weights[1::2] = 4.0
    weights[0] = weights[-1] = 1.0
    return nodes, weights * (h / 3.0)


@dataclass(frozen=True)
class FittedShells:
    """Radii r_j and masses m_j > 0 of the shells (as stored), mass = sum m_j (as stored), and the
    fit's L (eq. 5 on its Simpson grid) of the stored numbers."""

    radii: tuple[float, ...]
    masses: tuple[float, ...]
    mass: float
    loss: float


@lru_cache(maxsize=256)
def fit_shells(bias: float, degree: int, dim: int) -> FittedShells:
    """The unique minimiser of eq. 5 (plus a tiny ridge) over shells at fixed radii, for (a, p, d)."""
    fit_dim = min(dim, FIT_DIM_LIMIT)
    step = radial_step(bias, degree, fit_dim)
    radii = np.arange(1, RADIAL_NODES + 1) * step
    z, z_weights = _simpson(Z_INTERVALS, Z_MAX)
    products = np.multiply.outer(z, radii)
    # Omega_d at each distinct product r_j z_k (many repeat: both grids are uniform).
    distinct, where = np.unique(products, return_inverse=True)
    omega = _portable_sphere_cosine_mean(distinct, fit_dim)[where].reshape(products.shape)
    target = pm.integer_power(1.0 - (z / bias) * (z / bias), degree)  # K(z), with no libm pow
    weighted = omega * z_weights[:, None]
    # Gram G = Omega^T W Omega and moment Omega^T W K, summed over the z nodes in order.
    gram = pm.ordered_sum(weighted[:, :, None] * omega[:, None, :], axis=0)
    moment = pm.ordered_sum(weighted * target[:, None], axis=0)
    ridge = RIDGE * float(np.max(np.diag(gram)))
    masses = nonnegative_least_squares(gram + ridge * np.eye(gram.shape[0]), moment, additions_per_variable=40)
    keep = np.flatnonzero(masses > 0)
    stored_masses = [_round(float(m), STORED_DIGITS) for m in masses[keep]]
    scale = math.sqrt(dim / fit_dim)
    stored_radii = [_round(float(r) * scale, STORED_DIGITS) for r in radii[keep]]
    residual = pm.ordered_matvec(omega[:, keep], np.array(stored_masses)) - target
    loss = 0.5 * float(pm.ordered_sum(z_weights * residual * residual))
    return FittedShells(radii=tuple(stored_radii), masses=tuple(stored_masses),
                        mass=shells_mass(stored_masses), loss=loss)


def shells_mass(masses) -> float:
    """K^(0) = sum of the masses, added in order and rounded as stored."""
    return _round(math.fsum(float(m) for m in masses), STORED_DIGITS + 2)


def shells_kernel(z: np.ndarray, radii, masses, dim: int) -> np.ndarray:
    """K^(z) = sum_j m_j Omega_d(r_j z): the kernel the features are unbiased for."""
    z = np.asarray(z, dtype=np.float64)
    table = sphere_cosine_mean(np.multiply.outer(z.ravel(), np.asarray(radii, dtype=np.float64)), dim)
    return (table @ np.asarray(masses, dtype=np.float64)).reshape(z.shape)


def shell_radii(uniforms: np.ndarray, radii, masses) -> np.ndarray:
    """Radii drawn with probability m_j / mass, by inverting the cumulative masses (ordered sums)."""
    cumulative = np.cumsum(np.asarray(masses, dtype=np.float64))
    index = np.searchsorted(cumulative, np.asarray(uniforms) * cumulative[-1], side="right")
    return np.asarray(radii, dtype=np.float64)[np.minimum(index, len(cumulative) - 1)]
