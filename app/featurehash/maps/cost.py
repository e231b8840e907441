"""What a map costs in CPU time before any of it is spent: creating it from its spec, and transforming rows.

Estimates are seconds of one core of the machine bench/bench_cost_model.py calibrated them on (it prints
predicted against measured time per method over a grid of shapes). Each method has one formula
(`_formulas`), counting the work that dominates in a few unit costs (`Units`: a random number drawn, a
multiply-add of a product, a cosine, a compiled inner-loop step...), each unit priced a little above what it
measured, so that the model errs towards over-estimating. The service refuses, with a 422 naming the field
that drives the cost, a spec whose creation or single row exceeds its budget, and a batch over it (saying how
many rows fit): no request may cost unbounded CPU time.

The creation formula sees the spec as requested, before its derived numbers are fitted (`resolve_spec`
calls it before `complete_params`); a stored spec carries them, and then the fit's term is 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._cost_formulas import FORMULAS
from .errors import InputError, SpecError
from .spec import MapSpec

__all__ = ["WorkEstimate", "creation_cost", "transform_cost", "rows_within", "row_seconds", "check_creation",
           "check_rows"]


@dataclass(frozen=True)
class WorkEstimate:
    """Seconds of one core, and the spec field that drives them (named when they are refused)."""

    seconds: float
    field: str


def creation_cost(spec: MapSpec, **options) -> WorkEstimate:
    """Seconds to resolve and materialise the map of `spec` (fits included where the spec lacks them);
    `options` as for the map class (table_budget_bytes)."""
    estimate = FORMULAS[spec.method].creation(spec, **options)
    return WorkEstimate(estimate.seconds, estimate.field)


def transform_cost(spec: MapSpec, rows: int, nnz: int | None = None, *, sparse: bool = False, **options) -> float:
    """Seconds to transform (or hash) `rows` rows holding `nnz` nonzeros in all (dense rows: rows x input_dim,
    the default; `sparse` for CSR input); one row's kernel estimate transforms it."""
    if rows <= 0:
        return 0.0
    nnz = rows * spec.input_dim if nnz is None else nnz
    fixed, per_row = row_seconds(spec, nnz / rows, sparse=sparse, **options)
    return fixed + rows * per_row


def row_seconds(spec: MapSpec, nnz_per_row: float, *, sparse: bool = False, **options) -> tuple[float, float]:
    """(fixed, per row): `transform_cost` of n such rows is fixed + n * per row, so a caller that sees the same
    rows again (a service's single vectors) can keep the two numbers instead of pricing each request anew."""
    formula = FORMULAS[spec.method]
    return formula.fixed, formula.row(spec, nnz_per_row, sparse, **options).seconds


def rows_within(spec: MapSpec, seconds: float, nnz_per_row: float, *, sparse: bool = False, **options) -> int:
    """The most rows of `nnz_per_row` nonzeros each whose transform fits `seconds`."""
    formula = FORMULAS[spec.method]
    per_row = formula.row(spec, nnz_per_row, sparse, **options).seconds
    return max(0, int((seconds - formula.fixed) // per_row)) if per_row > 0 else 2**62


def check_creation(spec: MapSpec, budget_seconds: float, **options) -> None:
    """SpecError naming the driving field if creating the map, or transforming its cheapest row (one
    nonzero), would exceed `budget_seconds`."""
    created = creation_cost(spec, **options)
    if created.seconds > budget_seconds:
        raise SpecError(created.field, f"creating this map would take about {created.seconds:.3g} s of CPU (driven "
                        f"by {created.field}), over the budget of {budget_seconds:g} s per request")
    formula = FORMULAS[spec.method]
    row = formula.row(spec, 1.0, True, **options)
    if formula.fixed + row.seconds > budget_seconds:
        raise SpecError(row.field, f"one row of this map would take about {formula.fixed + row.seconds:.3g} s of "
                        f"CPU (driven by {row.field}), over the budget of {budget_seconds:g} s per request")


def check_rows(spec: MapSpec, rows: int, nnz: int, budget_seconds: float, *, sparse: bool = False,
               field: str = "vectors", multiplier: float = 1.0, **options) -> None:
    """InputError naming `field` if `rows` rows of `nnz` nonzeros in all (computed `multiplier` times, e.g.
    twice for a kernel's estimate and exact value) would exceed `budget_seconds`; it says how many fit."""
    seconds = multiplier * transform_cost(spec, rows, nnz, sparse=sparse, **options)
    if seconds > budget_seconds:
        fit = rows_within(spec, budget_seconds / multiplier, nnz / rows, sparse=sparse, **options)
        advice = f"send at most {fit} rows like these per request" if fit else "even one row like these exceeds it"
        raise InputError(field, f"{rows} rows would take about {seconds:.3g} s of CPU, over this service's budget of "
                         f"{budget_seconds:g} s per request (FEATUREHASH_REQUEST_WORK_SECONDS); {advice}")
