"""Spherical random features for polynomial kernels (Pennington, Yu, Kumar, NIPS 2015; the fit and the
paper's claims: docs/methods/fourier.md, "SRF: Pennington, Yu & Kumar 2015").

Kernel, on inputs scaled to unit l2 norm (the map scales them; an all-zero vector has no
direction and is rejected, unless `empty_rows` is "zero": featurehash.maps.base.EMPTY_ROWS):
    K(x, y) = (1 - ||x - y||^2 / a^2)^p = alpha (q + <x, y>)^p,  q = a^2/2 - 1,  alpha = (2/a^2)^p,
with `degree` p >= 1 and `bias` a >= 2 (eq. 2). K(z) is not positive definite on R^d
(Lemma 1, Corollary 1), so SRF targets K^, the Fourier transform of the clipped mixture
    k^(w) = max(0, sum_i c_i N(w; 0, 2 sigma_i^2 I))                 (eq. 4, N = 10)
fitted to minimise L = 1/2 int_0^2 (K(z) - K^(z))^2 dz (eq. 5). The fit depends on (a, p, d)
only; it is made when the spec is resolved (cached per process, ~0.2-0.7 s) and stored in the
spec, so the spec id covers the fitted numbers and a stored spec is rebuilt without refitting.

Since version 0.2 the fit is over spherical shells (`_spherical_shells`): k^ is a nonnegative
mixture of uniform laws on spheres of fixed radii, a convex problem with one optimum, solved with
operations that give the same bits on every machine; its L is at or below the paper's N = 10
mixture fit for every (a, p, d) measured. Params `radii` and `masses` (and `mass` = their sum)
hold it. Specs stored before keep the paper's clipped Gaussian mixture (`weights` c, `scales`
sigma, `mass`; `_spherical_mixture`) and transform exactly as before; a new request without
fitted numbers gets the shells (hence another id than the same request got before).

Features (D = n_components): frequencies w_j = r_j v_j from k^ normalised, the radius r_j by
inverting the radial CDF of the mixture and the direction v_j uniform (a normalised vector of
normals; with `frequencies` "orthogonal" the directions of each block of d are orthonormal, with
"structured" they are the normalised rows of Hadamard-sign products: `_orthogonal_frequencies`), and
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
from pydantic import Field, model_serializer

from .. import kernels
from .. import randomness
from ._orthogonal_frequencies import orthogonal_unit_rows, padded_width, structured_gaussian
from ._spherical_mixture import mixture_kernel, mixture_mass, mixture_radii
from ._structured_projection import structured_row_squares
from ._spherical_shells import fit_shells, shell_radii, shells_kernel, shells_mass
from ..base import EMPTY_ROWS, without_default_empty_rows
from ..errors import SpecError
from .rff import (
    GaussianFrequencyParams,
    RFFMap,
    UnitSphereInputs,
    without_default_frequencies,
)

# The fit resolves kernels of width ~a/sqrt(p) on [0, 2]; the paper goes to p = 20.
MAX_DEGREE = 100
MAX_BIAS = 1e6  # K is within 1e-12 of 1 on the sphere long before this
MAX_MIXTURE_TERMS = 64
MIXTURE_FIELDS = ("weights", "scales", "mass")   # the paper's clipped Gaussian mixture (stored specs)
SHELL_FIELDS = ("radii", "masses", "mass")       # spherical shells (the fit since version 0.2)
MAX_SHELLS = 256
# A stored mass must be the total of its mixture to this relative tolerance (the total is
# recomputed from weights and scales when a spec is resolved; it is stored to 12 digits).
MASS_RTOL = 1e-9

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# Fitted scales lie within about 1e-6..10 (bias 2..1e6, degree 1..100); the radial grids that integrate a
# mixture grow with the scales' range, so a stored spec's scales are bounded well outside it.
MixtureScale = Annotated[float, Field(ge=1e-9, le=1e3, allow_inf_nan=False)]
# Fitted shell radii reach about 3 sqrt(2 d p) / a + 12 (< 1e6 for d <= 2^30, p <= 100); a stored
# spec's are bounded well outside, so frequencies stay finite.
ShellRadius = Annotated[float, Field(gt=0, le=1e8, allow_inf_nan=False)]


class SRFParams(GaussianFrequencyParams):
    degree: int = Field(default=3, ge=1, le=MAX_DEGREE, strict=True)
    bias: float = Field(default=4.0, ge=2.0, le=MAX_BIAS, allow_inf_nan=False)
    variant: Literal["phase", "cos_sin"] = "phase"
    # The fitted mixture: filled in when the spec is resolved, given back by a stored spec.
    weights: list[FiniteFloat] | None = Field(default=None, min_length=1, max_length=MAX_MIXTURE_TERMS)
    scales: list[MixtureScale] | None = Field(default=None, min_length=1, max_length=MAX_MIXTURE_TERMS)
    radii: list[ShellRadius] | None = Field(default=None, min_length=1, max_length=MAX_SHELLS)
    masses: list[PositiveFloat] | None = Field(default=None, min_length=1, max_length=MAX_SHELLS)
    mass: PositiveFloat | None = None
    empty_rows: Literal[EMPTY_ROWS["dense"]] = "error"   # featurehash.maps.base.EMPTY_ROWS

    @model_serializer(mode="wrap")
    def _without_the_other_spectrum(self, handler):
        """A spec holds one spectrum: the keys of the other are left out (not null), so specs stored
        before the shells existed keep their canonical JSON, hence their ids (and `frequencies` at
        "iid", as for rff, and `empty_rows` at "error")."""
        data = without_default_empty_rows(without_default_frequencies(handler(self)))
        for name in ("weights", "scales", "radii", "masses"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @property
    def has_shells(self) -> bool:
        return self.radii is not None


class SRFMap(UnitSphereInputs, RFFMap):
    method = "srf"
    Params = SRFParams

    @property
    def scale_field(self) -> str:
        return "params.radii" if self.params.has_shells else "params.scales"

    @classmethod
    def complete_params(cls, params: SRFParams, *, input_dim: int, n_components: int, seed: int) -> SRFParams:
        """Fit the shells for (bias, degree, input_dim) unless the params carry a spectrum (a stored spec)."""
        given = {name for name in (*MIXTURE_FIELDS, *SHELL_FIELDS) if getattr(params, name) is not None}
        if not given:
            fit = fit_shells(float(params.bias), params.degree, input_dim)
            return cls.Params(**{**params.model_dump(), "radii": list(fit.radii), "masses": list(fit.masses),
                                 "mass": fit.mass})
        fields = SHELL_FIELDS if given & {"radii", "masses"} else MIXTURE_FIELDS
        extra = sorted(given - set(fields))
        if extra:
            raise SpecError(f"params.{extra[0]}", "a spectrum is either shells (radii, masses, mass) or the "
                            "mixture of older specs (weights, scales, mass), not both")
        missing = [name for name in fields if name not in given]
        if missing:
            raise SpecError(f"params.{missing[0]}", f"{', '.join(fields[:-1])} and mass come together (as a "
                            "resolved spec returns them) or not at all (then they are fitted)")
        if fields is SHELL_FIELDS:
            return cls._checked_shells(params)
        return cls._checked_mixture(params, input_dim)

    @staticmethod
    def _checked_shells(params: SRFParams) -> SRFParams:
        if len(params.masses) != len(params.radii):
            raise SpecError("params.masses", f"{len(params.masses)} masses for {len(params.radii)} radii")
        total = shells_mass(params.masses)
        if not math.isclose(params.mass, total, rel_tol=MASS_RTOL):
            raise SpecError("params.mass", f"{params.mass!r} is not the sum of the masses, {total!r}")
        return params

    @staticmethod
    def _checked_mixture(params: SRFParams, input_dim: int) -> SRFParams:
        if len(params.scales) != len(params.weights):
            raise SpecError("params.scales", f"{len(params.scales)} scales for {len(params.weights)} weights")
        if not any(c > 0 for c in params.weights):
            raise SpecError("params.weights", "the mixture needs a positive weight")
        total = mixture_mass(params.weights, params.scales, input_dim)
        if not math.isclose(params.mass, total, rel_tol=MASS_RTOL):
            raise SpecError("params.mass", f"{params.mass!r} is not the total of the mixture, {total!r}")
        return params

    # -- random parameters ---------------------------------------------------------

    def _radii(self, count: int) -> np.ndarray:
        """|w_j|, drawn from the fitted spectrum."""
        uniforms = randomness.uniform_open(randomness.raw_words(self.spec.seed, "srf.radii", count))
        if self.params.has_shells:
            return shell_radii(uniforms, self.params.radii, self.params.masses)
        return mixture_radii(uniforms, self.params.weights, self.params.scales, self.input_dim)

    def _fill_frequencies(self, out: np.ndarray, scale: float) -> None:
        """Frequencies r_j v_j, (count, d): uniform directions (i.i.d. in row blocks, or orthogonal or
        structured), radii drawn from the fitted spectrum."""
        seed, d, count = self.spec.seed, self.input_dim, out.shape[0]
        radii = self._radii(count)
        if self.params.frequencies == "orthogonal":
            out[...] = orthogonal_unit_rows(seed, "srf.directions.orthogonal", count, d) * (radii[:, None] * scale)
            return
        if self.params.frequencies == "structured":
            normals = structured_gaussian(seed, self._structured_tag, count, d)
            out[...] = normals / np.linalg.norm(normals, axis=1, keepdims=True) * (radii[:, None] * scale)
            return
        for rows, words in randomness.row_blocks(seed, "srf.directions", count, d):
            normals = randomness.normal(words).reshape(-1, d)
            out[rows] = normals / np.linalg.norm(normals, axis=1, keepdims=True) * radii[rows, None] * scale

    def _frequency_scale(self) -> float:
        return 1.0

    _structured_tag = "srf.directions"

    def _structured_factors(self) -> tuple[np.ndarray, float]:
        """Row i of W is r_i M_i[:d] / ||M_i[:d]||: c_i = r_i d' / ||M_i[:d]|| (exact integer squares),
        ||W_i|| = r_i."""
        seed, d, count = self.spec.seed, self.input_dim, self._n_frequencies
        radii = self._radii(count)
        squares = structured_row_squares(seed, self._structured_tag, count, d)
        return radii * (padded_width(d) / np.sqrt(squares)), float(radii.max())

    # -- features ------------------------------------------------------------------

    def _feature_weight(self) -> float:
        return float(np.sqrt(2.0 * self.params.mass / self.output_dim))

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        """K = (1 - ||x - y||^2 / a^2)^p = alpha (q + <x, y>)^p on the unit-normalised rows."""
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        return self._on_directions(kernels.spherical_polynomial, X, Y, self.params.degree, self.params.bias)

    def fitted_kernel(self, X, Y=None) -> np.ndarray:
        """K^, the kernel the features are unbiased for: the fitted spectrum's transform at
        z = ||x - y|| of the unit-normalised rows. For checking, not speed."""
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        distances = np.sqrt(np.maximum(2.0 - 2.0 * kernels.cosine_similarity(X, Y), 0.0))
        if self.params.has_shells:
            return shells_kernel(distances, self.params.radii, self.params.masses, self.input_dim)
        return mixture_kernel(distances, self.params.weights, self.params.scales, self.input_dim)
