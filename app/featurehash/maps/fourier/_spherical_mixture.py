"""The spectral mixture of SRF specs stored before 0.2 (Pennington et al., NIPS 2015, section 3.2;
docs/methods/fourier.md, "SRF"): evaluate, sample, fit.

Since 0.2 new SRF specs use spherical shells (`_spherical_shells`), whose fit is convex and the same
on every machine. This module keeps what stored mixture specs need (`mixture_kernel`, `mixture_mass`,
`mixture_radii`), the radial machinery the shell fit reuses (`sphere_cosine_mean`), and the paper's
fit (`fit_mixture`), whose optimum moves with the BLAS kernel's last bits, as the reference the shell
fit is measured against (tests/maps/fourier/test_srf.py, bench/bench_srf.py).

On the unit sphere S^{d-1} the polynomial kernel is a radial function of z = ||x - y||,
K(z) = (1 - z^2/a^2)^p on [0, 2]. SRF approximates it by K^, the Fourier transform of

    k^(w) = max(0, sum_i c_i N(w; 0, 2 sigma_i^2 I)),          (paper, eq. 4)

with (c, sigma) minimising L = 1/2 int_0^2 (K(z) - K^(z))^2 dz (eq. 5). Without the max,
K^(z) = sum_i c_i exp(-sigma_i^2 z^2); the max (needed because some c_i are negative) is
what makes a numerical fit necessary.

Everything is computed in radial form, which stays finite for any d:
- the radius of component i is sigma_i sqrt(2) chi_d; its density is evaluated in log space,
  and the clipped mixture density rho(r) = max(0, sum_i c_i f_i(r)) (the surface factor of
  the d-dimensional density is positive, so clipping commutes with going radial);
- K^(z) = int_0^inf rho(r) Omega_d(r z) dr, where Omega_d(s) = E_v[cos(s v_1)] over uniform
  unit vectors v is hyp0f1(d/2, -s^2/4). scipy's hyp0f1 returns NaN from d = 176 on (at
  s ~ 0.02 first, everywhere past d ~ 340), so above d = 48 the same mean is taken by
  quadrature over the law of v_1 (see `sphere_cosine_mean`).
- The radial integrals use the trapezoid rule on a grid uniform in xi = log(r)/delta + kappa r
  (see `RadialGrid`): a few nodes per width of the log-radius bump of a chi_d law (whose
  relative width 1/sqrt(2d) shrinks with d) and, where Omega_d oscillates with appreciable
  amplitude (d <= 200), enough nodes per period in r. The integrands are smooth and vanish
  at both ends, so the rule converges fast, except at the kinks of the max: there a grid
  interval where the mixture changes sign is integrated only up to the (linearly
  interpolated) zero, with an end correction (see `clipped_masses`). On a strongly
  cancelling test mixture (d = 1..300) plain clipping at the nodes erred by up to 3e-4 in
  K^(0) on the fit's grid, this rule by up to 4.4e-5, and by up to 1e-5 on the twice finer
  grid used for the stored mass and for evaluating K^.

The objective on a fixed grid of radii and z nodes is a matrix product,
L = 1/2 sum_k wz_k (Omega (max(0, F c)) - K)_k^2 with F[j, i] the mass of component i at
radius node j, so its gradients in c and log sigma are analytic; L-BFGS-B minimises it from
the single-Gaussian bound of the paper's section 4 (N = 1, c = 1, sigma = sqrt(p)/a), with the
weights bounded and the scales kept within a factor 4 of sqrt(p)/a. The fit depends on
(a, p, d) only and is cached per process.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import gammainccinv, gammaincinv, gammaln, hyp0f1

# scipy.optimize is imported where the fit uses it, and chi's quantiles are scipy.stats.chi's own formula
# (bit-identical, checked by a test): importing scipy.stats and scipy.optimize took ~0.9 s of CPU.

N_COMPONENTS = 10  # the paper's N; "the specific number had negligible effect"
Z_MAX = 2.0  # the largest distance between two unit vectors
# Scales are kept within this factor of the single-Gaussian scale sqrt(p)/a: fitted ones
# that carry weight stay well inside (measured over d = 1..4096, p = 1..20, a = 2, 4), and
# the bound keeps the radial grid (whose extent follows the scales) of a known size.
SCALE_FACTOR = 4.0
# |c_i| <= WEIGHT_BOUND. Unbounded signed weights drift to large cancelling pairs that buy
# almost nothing (a prototype's fit did); a small ridge penalty (relative to the single-Gaussian L)
# settles ties toward small weights.
WEIGHT_BOUND = 4.0
WEIGHT_PENALTY = 1e-9
# Radial laws are cut where less than this mass lies beyond.
TAIL_MASS = 1e-16
# Up to this dimension Omega_d oscillates with amplitude above ~1e-12 somewhere in the
# range that matters (|Omega_d(s)| there is about (2/e)^(d/2)), so the radial grid
# resolves its period.
OSCILLATING_DIM = 200
# Up to this dimension Omega_d is scipy's hyp0f1 (within 3e-13 of mpmath for d <= 44 over
# s in [0, 300]); above, the quadrature of `sphere_cosine_mean` (within 5e-15 of hyp0f1
# for d = 50..175, where both apply; 6e-8 at d = 20, where its weight is not smooth enough).
HYP0F1_DIM = 48
NODES_PER_WIDTH = 4  # radial grid nodes per standard deviation of a log-radius bump
NODES_PER_PERIOD = 8  # radial grid nodes per period 2 pi / z_max of Omega_d(r z) in r
# The inverse-CDF grid is this much finer than the fit's (in log r; the oscillation of Omega_d
# plays no part in sampling). The law within a cell is taken uniform in log r, which biases the
# induced kernel by O(cell^2): measured 5e-5 at d = 1 with refinement 4, 6e-6 with 16.
SAMPLING_REFINEMENT = 16
EVALUATION_REFINEMENT = 2  # the grid for the stored mass and for K^(z), relative to the fit's
# Digits kept of the fitted numbers stored in a spec: significant digits of the scales and
# the mass, decimals of the weights (so that the many weights a fit leaves at +-1e-300 become
# 0 and are dropped). Far beyond the accuracy that matters (L moves in the 6th digit), and
# round numbers make equal fits on two machines more likely to give equal spec ids.
STORED_DIGITS = 10
# The fit's radial grid has O(sqrt(d)) nodes (0.5-1.7 s at d = 2^20). Above this dimension
# the mixture is fitted at d = FIT_DIM_LIMIT: from d = 2^14 to 2^20 the fitted L agreed to 3
# digits (the large-d limit, where K^ is a positive Gaussian mixture in z), and the map
# still samples and scales the mixture at its own d.
FIT_DIM_LIMIT = 2**20


# ---------------------------------------------------------------------------------------
# Omega_d: the mean of cos(s v_1) over uniform directions v in R^d
# ---------------------------------------------------------------------------------------

def sphere_cosine_mean(s: np.ndarray, dim: int) -> np.ndarray:
    """Omega_d(s) = E_v[cos(s v_1)] = hyp0f1(d/2, -s^2/4), for s >= 0.

    For d > HYP0F1_DIM the expectation is taken directly: v_1 has density
    proportional to (1 - t^2)^((d-3)/2) on [-1, 1], a bell of width ~1/sqrt(d) that vanishes
    to high order at +-1. The trapezoid rule on it is accurate to ~1e-15 once the node
    spacing h satisfies (2 pi / h - s) / sqrt(d) >= 9 (the aliased frequencies of the
    near-Gaussian weight are then below e^-40), with the bell cut at 9 standard deviations.
    """
    s = np.asarray(s, dtype=np.float64)
    if dim <= HYP0F1_DIM:
        return hyp0f1(dim / 2.0, -0.25 * s * s)
    width = 1.0 / np.sqrt(dim - 3.0)
    half_range = min(1.0, 9.0 * width)
    step = 2.0 * np.pi / (float(s.max(initial=0.0)) + 9.0 * np.sqrt(dim))
    t = np.linspace(0.0, half_range, int(np.ceil(half_range / step)) + 1)
    with np.errstate(divide="ignore"):  # t = 1 when the bell spans [-1, 1]: weight 0
        log_weight = 0.5 * (dim - 3.0) * np.log1p(-t * t)
    weight = np.exp(log_weight - log_weight.max())
    weight[1:] *= 2.0  # the law of v_1 is symmetric and cos is even: fold [-T, 0) onto (0, T]
    weight /= weight.sum()
    flat = s.ravel()
    out = np.empty(flat.shape)
    rows = max(1, 2**21 // t.size)  # bound the temporary cos table
    for start in range(0, flat.size, rows):
        out[start:start + rows] = np.cos(np.multiply.outer(flat[start:start + rows], t)) @ weight
    return out.reshape(s.shape)


# ---------------------------------------------------------------------------------------
# Radial grid and component masses
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RadialGrid:
    """Radii r_j and trapezoid weights w_j with int_0^inf f(r) dr ~ sum_j f(r_j) w_j.

    Nodes are uniform in xi = log(r) / delta + kappa r: spacing delta in log r where r is small
    (a chi_d bump has width ~1/sqrt(2d) in log r for every d) and at most 1/kappa in r where r
    is large (the period of Omega_d(r z) in r is 2 pi / z).
    """

    radii: np.ndarray
    weights: np.ndarray
    dim: int

    @classmethod
    def covering(cls, scale_low: float, scale_high: float, dim: int, *, refinement: int = 1,
                 resolve_oscillation: bool = True) -> "RadialGrid":
        """A grid for mixtures whose components have scales in [scale_low, scale_high]."""
        r_low = scale_low * np.sqrt(2.0) * np.sqrt(2 * gammaincinv(0.5 * dim, TAIL_MASS))
        r_high = scale_high * np.sqrt(2.0) * np.sqrt(2 * gammainccinv(0.5 * dim, TAIL_MASS))
        delta = 1.0 / (np.sqrt(2.0 * dim) * NODES_PER_WIDTH * refinement)
        oscillates = resolve_oscillation and dim <= OSCILLATING_DIM
        kappa = NODES_PER_PERIOD * refinement * Z_MAX / (2.0 * np.pi) if oscillates else 0.0
        xi_low = np.log(r_low) / delta + kappa * r_low
        xi_high = np.log(r_high) / delta + kappa * r_high
        count = int(np.ceil(xi_high - xi_low)) + 1
        xi, h = np.linspace(xi_low, xi_high, count, retstep=True)
        log_r = _invert_xi(xi, delta, kappa, np.log(r_low), np.log(r_high))
        radii = np.exp(log_r)
        # h * dr/dxi: each node's share of its two neighbouring intervals (`clipped_masses`
        # takes half of each, which makes the end nodes' weights the trapezoid halves).
        weights = h * radii * delta / (1.0 + kappa * delta * radii)
        return cls(radii=radii, weights=weights, dim=dim)

    @classmethod
    def for_mixture(cls, weights, scales, dim: int, *, refinement: int = 1,
                    resolve_oscillation: bool = True) -> "RadialGrid":
        """A grid covering the components that carry positive mass (only they can)."""
        scales = np.asarray(scales, dtype=np.float64)
        positive = scales[np.asarray(weights, dtype=np.float64) > 0]
        return cls.covering(positive.min(), positive.max(), dim, refinement=refinement,
                            resolve_oscillation=resolve_oscillation)

    def component_masses(self, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """F[j, i] = f_i(r_j) w_j, the mass of component i at node j, and u^2 = (r_j / (sigma_i sqrt 2))^2.

        f_i is the density of sigma_i sqrt(2) chi_d, evaluated in log space: with
        u = r / (sigma_i sqrt 2), f_i(r) r = exp(d log u - u^2/2 - log(2^(d/2-1) Gamma(d/2))).
        """
        d = self.dim
        log_norm = (0.5 * d - 1.0) * np.log(2.0) + gammaln(0.5 * d)
        log_u = np.log(self.radii)[:, None] - np.log(np.sqrt(2.0) * np.asarray(scales, dtype=np.float64))[None, :]
        u_squared = np.exp(2.0 * log_u)
        log_mass = d * log_u - 0.5 * u_squared - log_norm + np.log(self.weights / self.radii)[:, None]
        return np.exp(log_mass), u_squared

    def density_masses(self, weights, scales) -> np.ndarray:
        """The clipped mixture's quadrature mass at each node (`clipped_masses` of F c)."""
        F, _ = self.component_masses(np.asarray(scales, dtype=np.float64))
        return clipped_masses(F @ np.asarray(weights, dtype=np.float64))

    def cosine_table(self, z: np.ndarray) -> np.ndarray:
        """Omega_d(r_j z_k) for every z node k and radius node j: K^(z) = table @ masses."""
        return sphere_cosine_mean(np.multiply.outer(np.asarray(z, dtype=np.float64), self.radii), self.dim)


def clipped_masses(signed: np.ndarray, *, with_partials: bool = False):
    """Quadrature masses of max(0, g) from the unclipped node masses M_j = g_j w_j.

    Where g keeps its sign this is the trapezoid rule (each interval gives half its mass to
    each end). An interval (a, b) where g falls from g_a > 0 to g_b <= 0 (or rises) gives its
    positive end the trapezoid up to the linearly interpolated zero, M_a theta / 2 with
    theta = M_a / (M_a - M_b), plus the Euler-Maclaurin end correction of the positive
    stretch, h^2 |g'| / 12 = (M_a - M_b) / 12. Sampling max(0, g) at the nodes errs O(h^2)
    per sign change, and a fit on it learnt to place steep sign changes between nodes
    (a cancelling pair of weights -4 and +3 at d = 4096 whose true L was 25% above the grid's);
    this rule errs O(h^3). It jumps by O(h^3 g'') when a node changes sign.

    With `with_partials`, also returns the partial derivatives for `clipped_masses_vjp`.
    """
    M_a, M_b = signed[:-1], signed[1:]
    positive_a, positive_b = M_a > 0, M_b > 0
    both = positive_a & positive_b
    falls = positive_a & ~positive_b
    rises = positive_b & ~positive_a
    gap = np.where(falls | rises, M_a - M_b, 1.0)  # nonzero wherever it is used
    # The zero's position within the interval, from the positive end: in (0, 1]. Written
    # with theta, not M^2 / gap, so that masses of 1e-200 in the far tails cannot underflow
    # into 0 / 0.
    theta_a = np.where(falls, M_a / gap, 0.0)
    theta_b = np.where(rises, -M_b / gap, 0.0)
    to_a = np.where(both, 0.5 * M_a, np.where(falls, 0.5 * M_a * theta_a + gap / 12.0, 0.0))
    to_b = np.where(both, 0.5 * M_b, np.where(rises, 0.5 * M_b * theta_b - gap / 12.0, 0.0))
    masses = np.zeros_like(signed)
    masses[:-1] += to_a
    masses[1:] += to_b
    if not with_partials:
        return masses
    partials = (  # d to_a / d M_a, d to_a / d M_b, d to_b / d M_a, d to_b / d M_b
        np.where(both, 0.5, np.where(falls, theta_a * (1.0 - 0.5 * theta_a) + 1.0 / 12.0, 0.0)),
        np.where(falls, 0.5 * theta_a**2 - 1.0 / 12.0, 0.0),
        np.where(rises, 0.5 * theta_b**2 - 1.0 / 12.0, 0.0),
        np.where(both, 0.5, np.where(rises, theta_b * (1.0 - 0.5 * theta_b) + 1.0 / 12.0, 0.0)),
    )
    return masses, partials


def clipped_masses_vjp(upstream: np.ndarray, partials: tuple[np.ndarray, ...]) -> np.ndarray:
    """The gradient of upstream . masses with respect to M, for the masses of `clipped_masses`."""
    da_da, da_db, db_da, db_db = partials
    up_a, up_b = upstream[:-1], upstream[1:]
    gradient = np.zeros_like(upstream)
    gradient[:-1] += up_a * da_da + up_b * db_da
    gradient[1:] += up_a * da_db + up_b * db_db
    return gradient


def _invert_xi(xi: np.ndarray, delta: float, kappa: float, log_r_low: float, log_r_high: float) -> np.ndarray:
    """log r with log(r) / delta + kappa r = xi, by safeguarded Newton steps (the map is increasing and convex)."""
    if kappa == 0.0:
        return xi * delta
    t = np.minimum(xi * delta, log_r_high)  # at or right of the root: Newton then descends monotonically
    for _ in range(100):
        excess = t / delta + kappa * np.exp(t) - xi
        step = excess / (1.0 / delta + kappa * np.exp(t))
        t = np.maximum(t - step, log_r_low - 1.0)
        if np.max(np.abs(step)) < 1e-13 * max(1.0, abs(log_r_high)):
            break
    return t


# ---------------------------------------------------------------------------------------
# The fit
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FittedMixture:
    """The fitted spectral mixture of SRF for (bias a, degree p, dimension d).

    `weights` c_i and `scales` sigma_i define k^ (eq. 4); `mass` = K^(0) = int k^ is the
    feature scale; `loss` is L (eq. 5) of the stored (rounded) numbers and `single_loss` the
    L of the single-Gaussian bound exp(-p z^2 / a^2) (section 4, N = 1), both on the fit's grid.
    """

    weights: tuple[float, ...]
    scales: tuple[float, ...]
    mass: float
    loss: float
    single_loss: float


def target_kernel(z: np.ndarray, bias: float, degree: int) -> np.ndarray:
    """K(z) = (1 - z^2/a^2)^p, the polynomial kernel as a function of the distance on the sphere."""
    return (1.0 - (np.asarray(z, dtype=np.float64) / bias) ** 2) ** degree


def _z_nodes(scale_high: float) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [0, Z_MAX], enough to resolve exp(-scale_high^2 z^2)."""
    count = 64 + 8 * int(np.ceil(scale_high))
    nodes, weights = np.polynomial.legendre.leggauss(count)
    half = 0.5 * Z_MAX
    return half * (nodes + 1.0), half * weights


def _single_blas_thread():
    """Limit BLAS to one thread while fitting, when threadpoolctl is installed.

    The fit makes ~1000 small products and L-BFGS-B steps, which OpenBLAS's threads slow down on
    cores shared with other work (docs/benchmarks.md, "Compiled passes and threads"). The numbers
    do not change.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - an optional speed-up
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _round(value: float, digits: int = STORED_DIGITS) -> float:
    return float(f"{value:.{digits}g}")


@lru_cache(maxsize=256)
def fit_mixture(bias: float, degree: int, dim: int) -> FittedMixture:
    """Fit (c, sigma) of eq. (4) minimising eq. (5) for the kernel (1 - z^2/a^2)^p on S^{dim-1}."""
    mass_dim, dim = dim, min(dim, FIT_DIM_LIMIT)
    single_scale = np.sqrt(degree) / bias
    scale_low, scale_high = single_scale / SCALE_FACTOR, single_scale * SCALE_FACTOR
    grid = RadialGrid.covering(scale_low, scale_high, dim)
    z, z_weights = _z_nodes(scale_high)
    cosines = grid.cosine_table(z)
    target = target_kernel(z, bias, degree)
    half_weights = 0.5 * z_weights
    n = N_COMPONENTS

    def loss_of(weights: np.ndarray, scales: np.ndarray) -> float:
        residual = cosines @ grid.density_masses(weights, scales) - target
        return float(half_weights @ residual**2)

    # Start from the single-Gaussian bound: component 0 at sqrt(p)/a with weight 1, the others
    # spread over the allowed scales with weight 0 (they enter once the gradient asks for them).
    start_weights = np.zeros(n)
    start_weights[0] = 1.0
    spread = np.linspace(-0.8, 0.8, n - 1) * np.log(SCALE_FACTOR)
    start_scales = np.array([_round(s) for s in single_scale * np.exp(np.concatenate([[0.0], spread]))])
    start_log_scales = np.log(start_scales)
    single_loss = loss_of(start_weights, start_scales)
    # The objective is scaled to be ~1 at the start, so tolerances are relative to the bound.
    unit = single_loss if single_loss > 0 else 1.0

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        weights, log_scales = theta[:n], theta[n:]
        F, u_squared = grid.component_masses(np.exp(log_scales))
        masses, partials = clipped_masses(F @ weights, with_partials=True)
        residual = cosines @ masses - target
        value = half_weights @ residual**2 / unit + WEIGHT_PENALTY * weights @ weights
        # d value / d (unclipped masses F c), through the clipping.
        d_mixed = clipped_masses_vjp(cosines.T @ (z_weights * residual) / unit, partials)
        d_weights = F.T @ d_mixed + 2.0 * WEIGHT_PENALTY * weights
        # d F[j, i] / d log sigma_i = F[j, i] (u_ji^2 - d)
        d_log_scales = weights * ((F * (u_squared - dim)).T @ d_mixed)
        return float(value), np.concatenate([d_weights, d_log_scales])

    bounds = [(-WEIGHT_BOUND, WEIGHT_BOUND)] * n + [(np.log(scale_low), np.log(scale_high))] * n
    with _single_blas_thread():
        from scipy.optimize import minimize

        result = minimize(objective, np.concatenate([start_weights, start_log_scales]), jac=True,
                          method="L-BFGS-B", bounds=bounds,
                          options={"maxiter": 400, "ftol": 1e-11, "gtol": 1e-9})
    weights = np.array([round(float(c), STORED_DIGITS) for c in result.x[:n]])
    scales = np.array([_round(s) for s in np.exp(result.x[n:])])
    loss = loss_of(weights, scales) if np.any(weights > 0) else np.inf
    if not loss < single_loss:  # never worse than where it started
        weights, scales, loss = start_weights, start_scales, single_loss
    # Drop components that carry nothing, then order by scale: the stored numbers read well.
    keep = weights != 0.0
    order = np.argsort(scales[keep], kind="stable")
    weights, scales = weights[keep][order], scales[keep][order]
    return FittedMixture(weights=tuple(float(c) for c in weights), scales=tuple(float(s) for s in scales),
                         mass=mixture_mass(weights, scales, mass_dim), loss=loss, single_loss=single_loss)


def mixture_mass(weights, scales, dim: int) -> float:
    """K^(0) = int k^(w) dw: the total of the clipped mixture, rounded as stored."""
    grid = RadialGrid.for_mixture(weights, scales, dim, refinement=EVALUATION_REFINEMENT)
    return _round(float(grid.density_masses(weights, scales).sum()), STORED_DIGITS + 2)


# ---------------------------------------------------------------------------------------
# Using a fitted mixture: its kernel and its radii
# ---------------------------------------------------------------------------------------

def mixture_kernel(z: np.ndarray, weights, scales, dim: int) -> np.ndarray:
    """K^(z) = int rho(r) Omega_d(r z) dr: the kernel the SRF features are unbiased for."""
    z = np.asarray(z, dtype=np.float64)
    grid = RadialGrid.for_mixture(weights, scales, dim, refinement=EVALUATION_REFINEMENT)
    masses = grid.density_masses(weights, scales)
    flat = z.ravel()
    out = np.empty(flat.shape)
    rows = max(1, 2**20 // grid.radii.size)
    for start in range(0, flat.size, rows):
        out[start:start + rows] = grid.cosine_table(flat[start:start + rows]) @ masses
    return out.reshape(z.shape)


def mixture_radii(uniforms: np.ndarray, weights, scales, dim: int) -> np.ndarray:
    """Radii ||w|| of frequencies drawn from k^ normalised, by inverting its radial CDF.

    The CDF is tabulated on a radial grid SAMPLING_REFINEMENT times finer than the fit's and
    interpolated linearly in log r (so within one cell the law is uniform in log r).
    """
    grid = RadialGrid.for_mixture(weights, scales, dim, refinement=SAMPLING_REFINEMENT, resolve_oscillation=False)
    masses = grid.density_masses(weights, scales)
    # Node j carries the mass of the cell around it; the CDF rises across each cell.
    edges = np.concatenate([[0.0], np.cumsum(masses)])
    log_r = np.log(grid.radii)
    log_edges = np.concatenate([[log_r[0]], 0.5 * (log_r[1:] + log_r[:-1]), [log_r[-1]]])
    return np.exp(np.interp(np.asarray(uniforms) * edges[-1], edges, log_edges))
