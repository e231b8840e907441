"""Spherical random features for polynomial kernels (Pennington, Yu, Kumar, NIPS 2015; papers/000_*).

Kernel, on inputs scaled to unit l2 norm (the map scales them; an all-zero vector has no
direction and is rejected):
    K(x, y) = (1 - ||x - y||^2 / a^2)^p = alpha (q + <x, y>)^p,  q = a^2/2 - 1,  alpha = (2/a^2)^p,
with `degree` p >= 1 and `bias` a >= 2 (eq. 2). K(z) is not positive definite on R^d
(Lemma 1, Corollary 1), so SRF targets K^, the Fourier transform of the clipped mixture
    k^(w) = max(0, sum_i c_i N(w; 0, 2 sigma_i^2 I))                 (eq. 4, N = 10)
fitted to minimise L = 1/2 int_0^2 (K(z) - K^(z))^2 dz (eq. 5). The fit depends on (a, p, d)
only; it is made when the spec is resolved (cached per process, ~0.1-0.5 s) and stored in the
spec as params `weights` (c), `scales` (sigma) and `mass` (K^(0)), so the spec id covers the
fitted numbers and a stored spec is rebuilt without refitting (its mass is checked against its
weights and scales). The numbers are rounded to 10 digits; a platform whose arithmetic steers
the optimiser differently may still fit other last digits, and so give another id for the same
request: the stored spec is the reference. See `_spherical_mixture`.

Features (D = n_components): frequencies w_j = r_j v_j from k^ normalised, the radius r_j by
inverting the radial CDF of the mixture and the direction v_j uniform (a normalised vector of
normals), and
- "phase" (the paper's Algorithm 1): z(x) = sqrt(2 mass / D) cos(W^T x + b), b ~ U[0, 2 pi);
- "cos_sin": z(x) = sqrt(2 mass / D) [cos(W^T x), sin(W^T x)], D/2 frequencies.
E<z(x), z(y)> = K^(x, y) (`fitted_kernel`), which differs from K (`exact_kernel`) by the fit
error. The transform is the dense product of RFF, so its cost does not depend on p; like RFF
it runs in float32 unless float64 is asked for, in row chunks, O(nnz D) for CSR input.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .. import kernels
from . import randomness
from ._spherical_mixture import fit_mixture, mixture_kernel, mixture_mass, mixture_radii
from .errors import SpecError
from .rff import RFFMap, UnitSphereInputs

# The fit resolves kernels of width ~a/sqrt(p) on [0, 2]; the paper goes to p = 20.
MAX_DEGREE = 100
MAX_BIAS = 1e6  # K is within 1e-12 of 1 on the sphere long before this
MAX_MIXTURE_TERMS = 64
MIXTURE_FIELDS = ("weights", "scales", "mass")
# A stored mass must be the total of its mixture to this relative tolerance (the total is
# recomputed from weights and scales when a spec is resolved; it is stored to 12 digits).
MASS_RTOL = 1e-9

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# Fitted scales lie within about 1e-6..10 (bias 2..1e6, degree 1..100); the radial grids that integrate a
# mixture grow with the scales' range, so a stored spec's scales are bounded well outside it.
MixtureScale = Annotated[float, Field(ge=1e-9, le=1e3, allow_inf_nan=False)]


class SRFParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    degree: int = Field(default=3, ge=1, le=MAX_DEGREE, strict=True)
    bias: float = Field(default=4.0, ge=2.0, le=MAX_BIAS, allow_inf_nan=False)
    variant: Literal["phase", "cos_sin"] = "phase"
    # The fitted mixture: filled in when the spec is resolved, given back by a stored spec.
    weights: list[FiniteFloat] | None = Field(default=None, min_length=1, max_length=MAX_MIXTURE_TERMS)
    scales: list[MixtureScale] | None = Field(default=None, min_length=1, max_length=MAX_MIXTURE_TERMS)
    mass: PositiveFloat | None = None


class SRFMap(UnitSphereInputs, RFFMap):
    method = "srf"
    Params = SRFParams
    scale_field = "params.scales"

    @classmethod
    def complete_params(cls, params: SRFParams, *, input_dim: int, n_components: int, seed: int) -> SRFParams:
        """Fit the mixture for (bias, degree, input_dim) unless the params carry one (a stored spec)."""
        given = [name for name in MIXTURE_FIELDS if getattr(params, name) is not None]
        if not given:
            fit = fit_mixture(float(params.bias), params.degree, input_dim)
            return cls.Params(**{**params.model_dump(), "weights": list(fit.weights), "scales": list(fit.scales),
                                 "mass": fit.mass})
        missing = [name for name in MIXTURE_FIELDS if name not in given]
        if missing:
            raise SpecError(f"params.{missing[0]}", "weights, scales and mass come together (as a resolved spec "
                            "returns them) or not at all (then they are fitted)")
        if len(params.scales) != len(params.weights):
            raise SpecError("params.scales", f"{len(params.scales)} scales for {len(params.weights)} weights")
        if not any(c > 0 for c in params.weights):
            raise SpecError("params.weights", "the mixture needs a positive weight")
        total = mixture_mass(params.weights, params.scales, input_dim)
        if not math.isclose(params.mass, total, rel_tol=MASS_RTOL):
            raise SpecError("params.mass", f"{params.mass!r} is not the total of the mixture, {total!r}")
        return params

    # -- random parameters ---------------------------------------------------------

    def _fill_frequencies(self, out: np.ndarray, scale: float) -> None:
        """Frequencies r_j v_j, (count, d): uniform directions, radii from the mixture (row blocks)."""
        seed, d = self.spec.seed, self.input_dim
        uniforms = randomness.uniform_open(randomness.raw_words(seed, "srf.radii", out.shape[0]))
        radii = mixture_radii(uniforms, self.params.weights, self.params.scales, d)
        for rows, words in randomness.row_blocks(seed, "srf.directions", out.shape[0], d):
            normals = randomness.normal(words).reshape(-1, d)
            out[rows] = normals / np.linalg.norm(normals, axis=1, keepdims=True) * radii[rows, None] * scale

    def _frequency_scale(self) -> float:
        return 1.0

    # -- features ------------------------------------------------------------------

    def _features_into(self, X, out: np.ndarray) -> None:
        self._fourier_into(X, out)
        out *= out.dtype.type(np.sqrt(2.0 * self.params.mass / self.output_dim))

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        """K = (1 - ||x - y||^2 / a^2)^p = alpha (q + <x, y>)^p on the unit-normalised rows."""
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        return kernels.spherical_polynomial(X, Y, self.params.degree, self.params.bias)

    def fitted_kernel(self, X, Y=None) -> np.ndarray:
        """K^, the kernel the features are unbiased for: the fitted mixture's transform at
        z = ||x - y|| of the unit-normalised rows. For checking: O(n m) radial integrals."""
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        distances = np.sqrt(np.maximum(2.0 - 2.0 * kernels.cosine_similarity(X, Y), 0.0))
        return mixture_kernel(distances, self.params.weights, self.params.scales, self.input_dim)
