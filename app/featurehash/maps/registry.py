"""Method name -> map class, and the one way to turn a request into a resolved spec."""

from __future__ import annotations

import importlib
import textwrap
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from pydantic import ValidationError

from . import cost
from .errors import SpecError
from .spec import DERIVED_KEYS, FORMAT_VERSION, MapSpec, params_document

if TYPE_CHECKING:  # pragma: no cover
    from .base import FeatureMap

# Method name -> (module under featurehash.maps, class). A family (and numba, scipy) is imported when its
# first method is used: importing every family took ~1.8 s of a process's start (scipy.stats alone 0.4 s),
# and a worker that creates one rff map needs none of the others.
IMPLEMENTATIONS: dict[str, tuple[str, str]] = {
    "rff": ("fourier.rff", "RFFMap"),
    "nrff": ("fourier.nrff", "NRFFMap"),
    "gcws": ("minhash.gcws", "GCWSMap"),
    "ssf": ("fourier.ssf", "SSFMap"),
    "srf": ("fourier.srf", "SRFMap"),
    "random_maclaurin": ("polynomial.random_maclaurin", "RandomMaclaurinMap"),
    "tensorsketch": ("polynomial.tensorsketch", "TensorSketchMap"),
    "quadrature": ("fourier.quadrature", "QuadratureMap"),
    "binning": ("minhash.binning", "BinningMap"),
    "nystroem": ("fitted.nystroem", "NystroemMap"),
    "additive_chi2": ("fourier.additive_chi2", "AdditiveChi2Map"),
    "skewed_chi2": ("fourier.skewed_chi2", "SkewedChi2Map"),
    "hashing": ("text.hashing", "HashingMap"),
    "minhash": ("minhash.minhash", "MinHashMap"),
}


class MethodTable(Mapping):
    """Method name -> map class, importing a method's module when its class is first asked for.

    Names, `in` and `len` need no import; `METHODS[name]`, `.values()` and `.items()` import."""

    def __getitem__(self, method: str) -> type[FeatureMap]:
        module, name = IMPLEMENTATIONS[method]
        return getattr(importlib.import_module(f"{__package__}.{module}"), name)

    def __contains__(self, method: object) -> bool:
        return method in IMPLEMENTATIONS

    def __iter__(self) -> Iterator[str]:
        return iter(IMPLEMENTATIONS)

    def __len__(self) -> int:
        return len(IMPLEMENTATIONS)

    def __repr__(self) -> str:
        return f"MethodTable({', '.join(IMPLEMENTATIONS)})"


METHODS: Mapping[str, type[FeatureMap]] = MethodTable()

# What each method computes, and its params with their defaults, for help(create_map) without importing
# every family: tests/test_package.py checks the params against each method's Params model.
GUIDE: dict[str, tuple[str, str]] = {
    "rff": ("Gaussian exp(-gamma ||x-y||^2), Laplacian exp(-gamma ||x-y||_1) or Matern (nu): random Fourier "
            "features; gamma may be 'scale' or 'median' (from fit_sample)",
            "frequencies='iid', kernel='gaussian', gamma=1.0, variant='cos_sin', nu=None, lengthscales=None, "
            "fit_sample=None"),
    "nrff": ("exp(-gamma (1 - cos(x, y))): normalized random Fourier features",
             "frequencies='iid', gamma=1.0, variant='phase', empty_rows='error'"),
    "gcws": ("GMM / pGMM (generalized min-max): consistent weighted sampling, codes (hash) or one-hot features",
             "power=1.0, bits=8, zero_bit=False, sampler='icws', bit_source=None, empty_rows='error'"),
    "ssf": ("Gaussian or arc-cosine 0/1/2: spherical structured features (FFT)",
            "kernel='gaussian', gamma=None, index_set=None, randomization=None, search=None"),
    "srf": ("(1 - ||x-y||^2 / bias^2)^degree on the unit sphere: spherical random features (a fitted mixture)",
            "frequencies='iid', degree=3, bias=4.0, variant='phase', weights=None, scales=None, radii=None, "
            "masses=None, mass=None, empty_rows='error'"),
    "random_maclaurin": ("(coef0 + <x, y>)^degree: Random Maclaurin features", "degree=3, coef0=1.0"),
    "tensorsketch": ("(coef0 + <x, y>)^degree: TensorSketch", "degree=3, coef0=1.0"),
    "quadrature": ("Gaussian exp(-gamma ||x-y||^2), optionally sparse ANOVA: Gaussian-quadrature features",
                   "grid='subsampled', gamma=1.0, points_per_dim=None, level=None, anova=None, fit_sample=None, "
                   "fit_pairs=None, candidates=None, selection=None, penalty=None, diagonal_weight=None, "
                   "points=None, weights=None, point_subsets=None, lengthscales=None"),
    "binning": ("Laplacian exp(-gamma ||x-y||_1): random binning, codes (hash) or one-hot features",
                "gamma=1.0, bits=8"),
    "nystroem": ("any exact kernel of featurehash.maps.kernels: Nystroem features fitted to fit_sample",
                 "kernel='gaussian', gamma=None, nu=None, lengthscales=None, degree=None, coef0=None, power=None, "
                 "sampling='rpcholesky', fit_sample=None, landmarks=None, normalization=None"),
    "additive_chi2": ("additive chi2 sum 2 x_i y_i / (x_i + y_i): deterministic spectrum samples",
                      "sample_steps=2, sample_interval=None"),
    "skewed_chi2": ("skewed chi2 prod 2 sqrt(x_i + c) sqrt(y_i + c) / (x_i + y_i + 2c): random Fourier features",
                    "skewedness=1.0"),
    "hashing": ("text: tokens hashed into n_components columns (the hashing trick; rows are documents)",
                "analyzer='word', ngram_range=(1, 1), lowercase=True, strip_accents=None, "
                r"token_pattern='(?u)\\b\\w\\w+\\b', hash='murmur3', weighting='count', norm='l2', "
                "alternate_sign=True"),
    "minhash": ("Jaccard |S n T| / |S u T| of plain sets (a row's nonzero columns, a document's tokens through "
                "input, or pre-hashed uint64 tokens): minwise hashing, codes (hash) or b-bit one-hot features",
                "variant='one_permutation', bits=8, code_bits=None, empty_rows='error'"),
}


def params_summary(params_model: type) -> str:
    """A Params model's fields with their defaults, as GUIDE writes them."""
    return ", ".join(f"{name}={field.default!r}" for name, field in params_model.model_fields.items())


def methods_help() -> str:
    """The methods and their params, as help(create_map) shows them (from GUIDE: no family is imported)."""
    lines = ["Methods (the spec's \"method\"; what it approximates; its \"params\" with their defaults,",
             "None where it is derived, fitted or method-specific):", ""]
    for method, (what, params) in GUIDE.items():
        lines.append(f"    {method:17s}{what}")
        lines.extend(textwrap.wrap(params, 100, initial_indent=" " * 21, subsequent_indent=" " * 21))
    return "\n".join(lines)


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
        from .text import stage as text_stage

        document["input"] = text_stage.resolve_input(document, cls)
    params = document.get("params") or {}
    if not isinstance(params, Mapping):
        raise SpecError("params", "expected an object")
    try:
        checked_params = cls.Params(**params)
        if document.get("n_components") is None:
            derived = cls.derived_n_components(document.get("input_dim"), checked_params)
            if derived is not None:
                # written into the spec as if it had been given: the id of a spec that gave it is unchanged
                document["n_components"] = derived
        spec = MapSpec(**{**document, "params": params_document(checked_params)})
    except ValidationError as exc:
        raise _spec_error(exc, "params." if exc.title == cls.Params.__name__ else "") from None
    if is_new_request:
        # Before complete_params, so that a fit made there (reweighted quadrature) uses today's choice.
        current = cls.complete_new_request(checked_params)
        if current is not checked_params:
            checked_params = current
            spec = MapSpec(**{**document, "params": params_document(current)})
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
        spec = MapSpec(**{**spec.model_dump(exclude={"id", "params"}), "params": params_document(completed)})
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

    A spec is {"method", "input_dim", "n_components", "seed", "params"} (`MapSpec`); `m.transform(X)`,
    and `m.hash(X)` for maps with codes. Its method's module (and numba, scipy) is imported on first use.

    With `max_nbytes` (parameter bytes) or `max_work_seconds` (CPU seconds of its creation or of one row,
    `cost`), a spec over them raises SpecError before any work that grows with its size (`resolve_spec`)."""
    resolved = resolve_spec(spec, max_nbytes=max_nbytes, max_work_seconds=max_work_seconds, **options)
    feature_map = METHODS[resolved.method](resolved, **options)
    if resolved.input is not None:
        from .text import stage as text_stage

        feature_map.text_stage = text_stage.build(resolved)
    if max_nbytes is not None:
        check_size(feature_map.planned_nbytes, resolved, max_nbytes)
    return feature_map


def output_dim(spec: MapSpec) -> int:
    return METHODS[spec.method].output_dim_for(spec)


create_map.__doc__ += "\n\n" + textwrap.indent(methods_help(), "    ")
