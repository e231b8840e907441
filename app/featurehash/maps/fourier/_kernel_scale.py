"""What the Fourier maps share beyond the Gaussian: the Matérn spectrum, per-dimension (ARD)
lengthscales and the data-driven bandwidths ("scale", "median"), resolved into the spec.

Matérn (Rasmussen & Williams, "Gaussian Processes for Machine Learning", 2006, eq. 4.14-4.15): with
l = 1 / sqrt(2 gamma) (scikit-learn's length_scale; `kernels.matern`), the spectral density of
k(r) = 2^(1 - nu) / Gamma(nu) (sqrt(2 nu) r / l)^nu K_nu(sqrt(2 nu) r / l) in angular frequency is
    p(w) proportional to (2 nu / l^2 + ||w||^2)^-(nu + d/2),
the multivariate t distribution with 2 nu degrees of freedom and scale 1 / l: w = g sqrt(2 nu / V) / l,
g ~ N(0, I_d), V ~ chi^2_(2 nu) independent of g (Bochner; Rahimi & Recht 2007 then apply unchanged).
`matern_radius_factors` draws sqrt(2 nu / V), one per frequency (`randomness.chi_square`: sums of squared
normals for integer 2 nu, Marsaglia-Tsang otherwise: the same bits on every machine).
Orthogonal Matérn frequencies multiply the orthogonal Gaussian rows (Haar directions, chi_d lengths) by the
same factors: each row is then exactly multivariate t, so the estimate stays unbiased. Structured (SORF)
rows have a fixed length and not quite uniform directions: refused for Matérn (and for lengthscales, which
that projection, acting on the raw input, does not see).

Lengthscales l_i divide input coordinate i (u = x / l): the frequencies' column i is divided by l_i.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import numpy as np
from pydantic import Field, PlainValidator, TypeAdapter, ValidationError, WithJsonSchema

from .. import kernels
from .. import randomness
from ..errors import SpecError
from ..inputs import SampleRows, rows_of_width, sample_array

# The fit sample behind a data-driven bandwidth: rows, and numbers (rows x input_dim) at most.
MAX_FIT_ROWS = 20_000
MAX_FIT_NUMBERS = 2**22
# Pairs whose median distance sets gamma for "median" (odd: the median is one of them).
MEDIAN_PAIRS = 10_001
DEFAULT_NU = 1.5   # scikit-learn's Matern default
MAX_NU = 100.0

_POSITIVE = TypeAdapter(Annotated[float, Field(gt=0, allow_inf_nan=False)])


def _bandwidth(value: Any) -> float | str:
    if isinstance(value, str) and value in kernels.BANDWIDTH_RULES:
        return value
    try:
        return _POSITIVE.validate_python(value)
    except ValidationError as exc:
        raise ValueError(f"{exc.errors()[0]['msg']} (gamma is a positive number, 'scale' or 'median')") from None


# gamma: a positive finite number, or a rule resolved from params.fit_sample when the spec is made.
Bandwidth = Annotated[Union[float, Literal["scale", "median"]], PlainValidator(_bandwidth),
                      WithJsonSchema({"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                                                {"enum": list(kernels.BANDWIDTH_RULES)}]})]
Lengthscales = list[Annotated[float, Field(gt=0, allow_inf_nan=False)]]
FiniteRows = SampleRows()


def resolve_kernel_scale(params, *, input_dim: int, seed: int, tag: str):
    """params (with kernel, gamma, nu, lengthscales, fit_sample) with nu resolved for Matérn and a gamma
    rule turned into its number (fit_sample then dropped): what the resolved spec stores and its id covers.
    Stored specs come back unchanged."""
    update: dict[str, Any] = {}
    if params.kernel == "matern":
        if params.nu is None:
            update["nu"] = DEFAULT_NU
    elif params.nu is not None:
        raise SpecError("params.nu", f"nu is the Matérn kernel's smoothness; the {params.kernel} kernel has none")
    kernels.check_lengthscales(params.lengthscales, input_dim)
    if isinstance(params.gamma, str):
        sample = fit_sample(params.fit_sample, input_dim, params.gamma)
        sample = kernels.scaled(sample, params.lengthscales)
        pairs = randomness.distinct_pairs(seed, f"{tag}.bandwidth", sample.shape[0], MEDIAN_PAIRS)
        update.update(gamma=kernels.data_bandwidth(params.gamma, params.kernel, sample, pairs), fit_sample=None)
    elif params.fit_sample is not None:
        raise SpecError("params.fit_sample", "fit_sample is read only by gamma 'scale' or 'median'")
    return params.model_copy(update=update) if update else params


def fit_sample(rows, input_dim: int, rule: str) -> np.ndarray:
    """The rows a bandwidth rule reads, checked (named errors) and as float64."""
    if rows is None:
        raise SpecError("params.fit_sample", f"gamma {rule!r} is computed from data: give fit_sample, a list "
                        "of rows of your data (a few hundred is plenty); the spec then stores the number")
    if not rows_of_width(rows, input_dim):
        raise SpecError("params.fit_sample", f"rows of the data: each must have input_dim = {input_dim} entries")
    if len(rows) > MAX_FIT_ROWS or len(rows) * input_dim > MAX_FIT_NUMBERS:
        raise SpecError("params.fit_sample", f"{len(rows)} rows of {input_dim} is over the limit of "
                        f"{MAX_FIT_ROWS} rows and {MAX_FIT_NUMBERS} numbers: send fewer rows")
    return sample_array(rows)


def matern_radius_factors(seed: int, tag: str, count: int, nu: float) -> np.ndarray:
    """sqrt(2 nu / V), V ~ chi^2_(2 nu): what turns N(0, I) rows into multivariate t rows with 2 nu degrees
    of freedom (one factor per frequency)."""
    return np.sqrt(2.0 * nu / randomness.chi_square(seed, tag, count, 2.0 * nu))
