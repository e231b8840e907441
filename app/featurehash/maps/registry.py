"""Method name -> map class, and the one way to turn a request into a resolved spec."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import ValidationError

from . import cost
from .fourier.additive_chi2 import AdditiveChi2Map
from .base import FeatureMap
from .minhash.binning import BinningMap
from .errors import SpecError
from .minhash.gcws import GCWSMap
from .fourier.nrff import NRFFMap
from .fitted.nystroem import NystroemMap
from .fourier.quadrature import QuadratureMap
from .polynomial.random_maclaurin import RandomMaclaurinMap
from .fourier.rff import RFFMap
from .fourier.skewed_chi2 import SkewedChi2Map
from .spec import DERIVED_KEYS, FORMAT_VERSION, MapSpec
from .fourier.srf import SRFMap
from .text import stage as text_stage
from .text.hashing import HashingMap
from .fourier.ssf import SSFMap
from .polynomial.tensorsketch import TensorSketchMap

METHODS: dict[str, type[FeatureMap]] = {cls.method: cls for cls in (RFFMap, NRFFMap, GCWSMap, SSFMap,
                                                                  SRFMap, RandomMaclaurinMap, TensorSketchMap,
                                                                  QuadratureMap, BinningMap, NystroemMap,
                                                                  AdditiveChi2Map, SkewedChi2Map, HashingMap)}


def _field_name(error: Mapping[str, Any], prefix: str = "") -> str:
    location = ".".join(str(part) for part in error.get("loc", ()))
    return f"{prefix}{location}" if location else prefix.rstrip(".") or "spec"


def _spec_error(exc: ValidationError, prefix: str = "") -> SpecError:
    first = exc.errors()[0]
    return SpecError(_field_name(first, prefix), first["msg"])


def requested_spec(raw: Mapping[str, Any] | MapSpec, *, max_nbytes: int | None = None,
                   max_work_seconds: float | None = None, **options: Any) -> MapSpec:
    """The spec as requested: validated, every default filled in, nothing fitted yet (`resolve_spec`'s first
    half, cheap whatever the sizes). Its id names the request (the service's alias of the map it makes).

    With `max_nbytes`, a map whose parameters would exceed it is refused; with `max_work_seconds`, one whose
    creation or single row would take longer (`cost.check_creation`): both before anything that grows with
    its size is fitted, enumerated or allocated (`options` as for the map class)."""
    return _requested(raw, max_nbytes, max_work_seconds, options)[0]


def _requested(raw, max_nbytes: int | None, max_work_seconds: float | None, options: dict) -> tuple[MapSpec, Any]:
    """`requested_spec`, and its params as the map class's model (for `complete_params`: parsed once)."""
    if isinstance(raw, MapSpec):
        raw = raw.to_dict()
    if not isinstance(raw, Mapping):
        raise SpecError("spec", "expected an object")
    # A resolved spec (as stored and returned: it carries its format version or id) keeps the meaning
    # it was made with; only a new request gets today's values of params that changed meaning.
    is_new_request = not any(key in raw for key in ("id", "format_version"))
    document = {key: value for key, value in raw.items() if key not in DERIVED_KEYS}
    method = document.get("method")
    if method not in METHODS:
        raise SpecError("method", f"unknown method {method!r}; known: {', '.join(sorted(METHODS))}")
    cls = METHODS[method]
    if getattr(cls, "text_input", False):
        document.setdefault("input_dim", 1)   # a row is one document: there is no dimension to choose
    if document.get("input") is not None:
        document["input"] = text_stage.resolve_input(document, cls)
    params = document.get("params") or {}
    if not isinstance(params, Mapping):
        raise SpecError("params", "expected an object")
    try:
        checked_params = cls.Params(**params)
        spec = MapSpec(**{**document, "params": checked_params.model_dump(mode="json")})
    except ValidationError as exc:
        raise _spec_error(exc, "params." if exc.title == cls.Params.__name__ else "") from None
    if is_new_request:
        # Before complete_params, so that a fit made there (reweighted quadrature) uses today's choice.
        current = cls.complete_new_request(checked_params)
        if current is not checked_params:
            checked_params = current
            spec = MapSpec(**{**document, "params": current.model_dump(mode="json")})
    if max_nbytes is not None:
        check_size(cls.planned_nbytes_bound(spec, **options), spec, max_nbytes)
    if max_work_seconds is not None:
        cost.check_creation(spec, max_work_seconds, **options)
    return spec, checked_params


def resolve_spec(raw: Mapping[str, Any] | MapSpec, *, max_nbytes: int | None = None,
                 max_work_seconds: float | None = None, **options: Any) -> MapSpec:
    """Validate a spec and fill in every default; raise SpecError naming the bad field.

    Accepts a resolved spec dict too (as stored or returned): derived keys are checked,
    so a spec whose id no longer matches its content is refused rather than reused.
    With `max_nbytes` or `max_work_seconds`, a map over them is refused first (`requested_spec`).
    A new request (no `id` or `format_version`) also gets `complete_new_request`: params whose
    absent key keeps an older meaning for stored specs are written out with today's value.
    """
    if isinstance(raw, MapSpec):
        raw = raw.to_dict()
    spec, checked_params = _requested(raw, max_nbytes, max_work_seconds, options)
    cls = METHODS[spec.method]
    completed = cls.complete_params(checked_params, input_dim=spec.input_dim, n_components=spec.n_components,
                                    seed=spec.seed)
    if completed is not checked_params:
        # The requested params are left out of the dump: a fit_sample of thousands of rows was walked for nothing.
        spec = MapSpec(**{**spec.model_dump(exclude={"id", "params"}), "params": completed.model_dump(mode="json")})
    cls.check_spec(spec)
    _check_derived(raw, spec, cls)
    return spec


def _check_derived(raw: Mapping[str, Any], spec: MapSpec, cls: type[FeatureMap]) -> None:
    """Echoed derived keys must agree with the spec: a stale spec is refused, not reused."""
    expected = {"id": spec.id, "format_version": FORMAT_VERSION, "output_dim": cls.output_dim_for(spec)}
    for key, value in expected.items():
        claimed = raw.get(key)
        if claimed is not None and claimed != value:
            raise SpecError(key, f"{claimed!r} does not match the spec's content (expected {value!r})")


def check_size(nbytes: int, spec: MapSpec, max_nbytes: int) -> None:
    """Refuse a map of `nbytes` parameter bytes over `max_nbytes`, naming the larger of its two sizes."""
    if nbytes > max_nbytes:
        field = "input_dim" if spec.input_dim > spec.n_components else "n_components"
        raise SpecError(field, f"the map would hold {nbytes} bytes of parameters (input_dim {spec.input_dim}, "
                        f"n_components {spec.n_components}), over the limit of {max_nbytes}")


def create_map(spec: Mapping[str, Any] | MapSpec, *, max_nbytes: int | None = None,
               max_work_seconds: float | None = None, **options: Any) -> FeatureMap:
    """Build the feature map of a spec (dict or MapSpec); options go to the map class.

    With `max_nbytes` (parameter bytes) or `max_work_seconds` (CPU seconds of its creation or of one row,
    `cost`), a spec over them raises SpecError before any work that grows with its size (`resolve_spec`)."""
    resolved = resolve_spec(spec, max_nbytes=max_nbytes, max_work_seconds=max_work_seconds, **options)
    feature_map = METHODS[resolved.method](resolved, **options)
    if resolved.input is not None:
        feature_map.text_stage = text_stage.build(resolved)
    if max_nbytes is not None:
        check_size(feature_map.planned_nbytes, resolved, max_nbytes)
    return feature_map


def output_dim(spec: MapSpec) -> int:
    return METHODS[spec.method].output_dim_for(spec)
