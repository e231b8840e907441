"""The FeatureMap interface every method implements, and the one-hot feature type."""

from __future__ import annotations

import enum
import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel

from .numerics import _row_threads as row_threads
from .errors import InputError, SpecError, UnsupportedOperation
from .inputs import check_input, float32_copy, output_dtype
from .spec import MapSpec

# Rows per chunk are chosen so a chunk of features holds about this many numbers: the only
# temporaries of a transform are one chunk wide (per thread), whatever the batch.
CHUNK_ELEMENTS = 2**21
# Batches of at least this many features of a map that `shares_rows` are cut into at least
# SHARED_CHUNKS_PER_THREAD chunks per thread (of at least half this), computed by several threads
# (`_row_threads`): a smaller batch costs less than handing work to another thread.
SHARED_MIN_ELEMENTS = 2**18
SHARED_CHUNKS_PER_THREAD = 3
# A batch of fewer features than this (one chunk, one thread) may take the map's short path
# (`DenseFeatureMap.short_path`).
SHORT_PATH_ELEMENTS = SHARED_MIN_ELEMENTS

# `params.empty_rows` of the maps that refuse an all-zero row by default (nrff and srf: no direction; gcws: no
# entry to sample). A choice other than "error" is written into the spec (so it has its own id); "error" is
# left out of the stored params, so every spec made before the parameter keeps its id. The results:
# - "zero" (dense maps): the zero feature vector, so the kernel estimate of an empty row with any row,
#   another empty row included, is 0; `exact_kernel` says 0 for those pairs too;
# - "code" (discrete codes): EMPTY_CODE in every sample, which no sampled code takes, so an empty row's
#   code never matches a nonempty row's; two empty rows have equal codes (equal samples: the estimate is 1,
#   as GMM(0, 0) = 1 by the exact kernel's convention) and LSH reports them as duplicates of each other.
EMPTY_ROWS = {"dense": ("error", "zero"), "codes": ("error", "code")}
# Dart codes are < 2^62, 0-bit codes (i*) < 2^31; a full ICWS code i* << 32 | zigzag(t*) reaches 2^63 - 1 only
# with i* = 2^31 - 1, the negative part of coordinate 2^30 - 1 (input_dim = 2^30, MAX_INPUT_DIM, and a negative
# entry there), and zigzag(t*)'s low 32 bits all ones: 2^-32 a sample at most, on such data only.
EMPTY_CODE = 2**63 - 1


def without_default_empty_rows(params: dict) -> dict:
    """Stored params leave `empty_rows` out at "error" (a params serializer's step)."""
    if params.get("empty_rows") == "error":
        del params["empty_rows"]
    return params


class CodeFamily(enum.Enum):
    """What a match of two discrete codes estimates: the key of featurehash.lsh.similarity's table, so the layers
    above look a map's exact similarity up by its family (`FeatureMap.code_family`), never by method name."""

    GMM = "gmm"              # (p)GMM of the split vectors raised to params.power (gcws, either sampler)
    LAPLACIAN = "laplacian"  # exp(-params.gamma ||x - y||_1) (binning)
    JACCARD = "jaccard"      # |S n T| / |S u T| of the rows' supports, their nonzero columns (minhash)


@dataclass(frozen=True)
class OneHotFeatures:
    """Features that are one-hot blocks: row r has value `scale` at `indices[r]`, else 0.

    The inner product of two rows is (number of equal indices) * scale**2. `dim` is the
    width of the (never materialised) dense feature matrix.
    """

    indices: np.ndarray
    scale: float
    dim: int

    def to_csr(self, dtype=np.float32) -> sp.csr_matrix:
        n, k = self.indices.shape
        data = np.full(n * k, self.scale, dtype=dtype)
        indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
        return sp.csr_matrix((data, self.indices.ravel(), indptr), shape=(n, self.dim))


class FeatureMap(ABC):
    """A seeded feature map rebuilt from its spec.

    Subclasses set `method`, `Params` (a pydantic model of their parameters, defaults
    included) and implement `transform` and `exact_kernel`.
    """

    method: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    has_hash: ClassVar[bool] = False
    code_family: ClassVar[CodeFamily | None] = None  # set by the maps whose codes estimate an exact similarity
    # the map caches per-(sample, coordinate) randomness in a table up to `table_budget_bytes` (a constructor option)
    randomness_table: ClassVar[bool] = False
    one_hot: ClassVar[bool] = False  # transform returns OneHotFeatures
    # The spec's text front stage (`spec.input`), set by `create_map`: it turns documents, token lists or
    # weighted tokens into the sparse rows `check` validates (featurehash.maps.text.stage).
    text_stage = None

    def __init__(self, spec: MapSpec):
        self.spec = spec
        self.params = self.Params(**spec.params)

    @classmethod
    def complete_params(cls, params: BaseModel, *, input_dim: int, n_components: int, seed: int) -> BaseModel:
        """Fill in numbers derived from the spec (a fitted mixture, an optimised index set),
        so they are stored in the spec and covered by its id. Called by `resolve_spec`;
        params already holding them (a stored spec) must come back unchanged."""
        return params

    @classmethod
    def derived_n_components(cls, input_dim: Any, params: BaseModel) -> int | None:
        """`n_components` when a method's width follows from the rest of the spec (a request may then omit
        it); None: the request must give it."""
        return None

    @classmethod
    def complete_new_request(cls, params: BaseModel) -> BaseModel:
        """Write today's value of a param whose absent key means an older behaviour (so every stored
        spec, and its id, keeps its features). Called by `resolve_spec` for new requests only, i.e.
        documents without `id` or `format_version`, before `complete_params` (which sees today's value, e.g.
        when it fits the reweighted quadrature rule); a new request therefore gets a new id."""
        return params

    @classmethod
    def check_spec(cls, spec: MapSpec) -> None:
        """Cross-field checks beyond the params model; raise SpecError."""

    @classmethod
    def output_dim_for(cls, spec: MapSpec) -> int:
        return spec.n_components

    @functools.cached_property
    def output_dim(self) -> int:
        """Computed once: the spec is frozen, and a single vector's transform asks three times."""
        return self.output_dim_for(self.spec)

    def describe(self) -> dict:
        """The resolved spec as returned to clients: spec fields, id, format version and the
        derived facts output_dim, features ("dense" or "one_hot") and has_hash."""
        return {**self.spec.to_dict(), "output_dim": self.output_dim,
                "features": "one_hot" if self.one_hot else "dense", "has_hash": self.has_hash}

    @property
    def input_dim(self) -> int:
        return self.spec.input_dim

    def materialize(self) -> "FeatureMap":
        """Compute the random parameters now (they are otherwise made on first use)."""
        return self

    @property
    @abstractmethod
    def nbytes(self) -> int:
        """Bytes held by the materialised random parameters."""

    @property
    @abstractmethod
    def planned_nbytes(self) -> int:
        """Bytes `materialize` will hold (float32 parameters), known before computing them."""

    @classmethod
    def planned_nbytes_bound(cls, spec: MapSpec, **options) -> int:
        """An upper bound of `planned_nbytes` for a spec whose derived params (fits, index sets)
        are not filled in yet: `resolve_spec` checks it before fitting or allocating anything.
        Maps whose constructor grows with the spec's sizes override it with arithmetic."""
        return cls(spec, **options).planned_nbytes

    def check(self, X, field: str = "vectors", *, first_row: int = 0):
        """X as the map's transforms read it, or InputError naming the rows at fault (numbered from
        `first_row`, for a block of a larger input)."""
        if self.text_stage is not None and self.text_stage.accepts(X):
            X = self.text_stage.transform(X, dtype=np.float64)
        refused = self.zero_rows_refused
        if refused is not None and self.empty_rows != "error":
            refused = None
        return check_input(X, self.spec.input_dim, field=field, zero_rows_refused=refused, first_row=first_row)

    @property
    def zero_rows_refused(self) -> str | None:
        """Why `check` refuses an all-zero row (said in the error), or None where one is allowed."""
        return None

    @property
    def empty_rows(self) -> str:
        """What an all-zero row gives, for maps whose math needs a nonzero row (`params.empty_rows`, see
        EMPTY_ROWS): "error" (refused, naming the row: the default), "zero" (dense maps: the zero feature
        vector) or "code" (GCWS: EMPTY_CODE in every sample)."""
        # The params' own dict: getattr of a field a pydantic model lacks raises inside (~5 us, measured).
        return self.params.__dict__.get("empty_rows", "error")

    @abstractmethod
    def transform(self, X, *, dtype=None):
        """Features of the rows of X (dense ndarray, or OneHotFeatures for one-hot maps)."""

    def hash(self, X) -> np.ndarray:
        raise UnsupportedOperation("method", f"'{self.method}' maps have no discrete codes")

    @abstractmethod
    def kernel(self, X, Y=None) -> np.ndarray:
        """The map's estimate of the kernel between the rows of X and Y (Y defaults to X)."""

    @abstractmethod
    def exact_kernel(self, X, Y=None) -> np.ndarray:
        """The kernel the map targets, computed directly."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.spec.id!r})"


class DiscreteCodeMap(FeatureMap):
    """A map whose `hash` gives one discrete code per sample (GCWS, random binning).

    Its kernel estimate is the fraction of samples whose codes agree, and its features are
    one-hot blocks of 2^bits per sample at the lowest `bits` bits of a per-sample value.
    """

    has_hash = True
    one_hot = True

    def kernel(self, X, Y=None) -> np.ndarray:
        codes_x = self.hash(self.check(X, "x"))
        codes_y = codes_x if Y is None else self.hash(self.check(Y, "y"))
        return match_fraction(codes_x, codes_y)

    def _one_hot(self, values: np.ndarray, bits: int) -> OneHotFeatures:
        samples = values.shape[1]
        block_starts = np.arange(samples, dtype=np.int64) << bits
        indices = block_starts + (values & ((1 << bits) - 1))
        return OneHotFeatures(indices=indices, scale=float(1.0 / np.sqrt(samples)), dim=samples << bits)


def match_fraction(codes_x: np.ndarray, codes_y: np.ndarray) -> np.ndarray:
    """Fraction of positions where two rows of codes agree, for every pair of rows."""
    out = np.empty((codes_x.shape[0], codes_y.shape[0]))
    for row, codes in enumerate(codes_x):
        out[row] = (codes_y == codes).mean(axis=1)
    return out


class DenseFeatureMap(FeatureMap):
    """A map whose features are a dense matrix: its kernel estimate is Z(X) Z(Y)^T.

    `transform` validates, then fills the output in row chunks: each chunk is turned into
    the working precision by `_working_copy` and written by `_features_into`. Features that
    leave the floating-point range are refused (InputError naming the row), never returned.
    """

    # Said after "its features overflow <dtype>" (e.g. which formula grows).
    overflow_hint: ClassVar[str] = "its projections leave the floating-point range"
    # Chunks of one batch may be computed by several threads at once (`_features_into` and the
    # parameters it reads are safe to share once materialised).
    shares_rows: ClassVar[bool] = False
    # `_short_features` computes small batches (issue 32: a single row was 0.5-0.6x numpy's time, most of it
    # the layers around the kernels: the input check's Python half, np.errstate, wrappers).
    short_path: ClassVar[bool] = False

    @property
    def shared_chunk_rows(self) -> int:
        """The fewest rows worth a chunk of their own when threads share a batch."""
        return 1

    def transform(self, X, *, dtype=None) -> np.ndarray:
        if (self.short_path and type(X) is np.ndarray and X.ndim == 2 and self.text_stage is None
                and 0 < X.shape[0] * self.output_dim < SHORT_PATH_ELEMENTS):
            out = np.empty((X.shape[0], self.output_dim), dtype=output_dtype(dtype))
            if self._short_features(X, out):
                return out
        self.require_features()
        X = self.check(X)
        out = np.empty((X.shape[0], self.output_dim), dtype=output_dtype(dtype))
        self.features_into(X, out)
        return out

    def require_features(self) -> None:
        """Raise SpecError if this map only estimates its kernel and has no features (e.g. a sparse
        quadrature grid with negative weights); `transform` and streaming callers ask first."""

    def row_chunks(self, n_rows: int, elements: int | None = None) -> list[slice]:
        """Row slices whose features hold about `elements` numbers each (CHUNK_ELEMENTS by default; at
        least one row)."""
        rows = max(1, (CHUNK_ELEMENTS if elements is None else elements) // self.output_dim)
        return [slice(start, min(n_rows, start + rows)) for start in range(0, n_rows, rows)]

    def features_into(self, X, out: np.ndarray, *, first_row: int = 0, threads: int | None = None) -> None:
        """The features of rows X (already checked) into `out`, whose dtype is the working precision;
        InputError naming the first row (numbered from `first_row`) whose features are not finite.
        Computed in row chunks (the temporaries are one chunk wide), by several threads (`threads`, by
        default all that `_row_threads` allows) for a large batch of a map that `shares_rows`."""
        total = X.shape[0] * self.output_dim
        if self.short_path and threads in (None, 1) and total < SHORT_PATH_ELEMENTS and self._short_features(X, out):
            return
        if threads is None:
            threads = row_threads.thread_count() if self._may_share(X.shape[0]) else 1
        if threads > 1:
            chunks = self.row_chunks(X.shape[0], self._shared_chunk_elements(total // threads))
            if len(chunks) > 1:
                self._prepare_shared(out.dtype)
                found = row_threads.run_chunks(lambda rows: self._nonfinite_row(X[rows], out[rows]), chunks, threads)
                for rows, bad in zip(chunks, found):
                    if bad is not None:
                        raise self._overflow_error(first_row + rows.start + bad, out.dtype)
                return
        if total < SHARED_MIN_ELEMENTS or not row_threads.blas_exceeds_cores():
            self._features_in_sequence(X, out, first_row)   # small: a single row's latency is mostly overhead
            return
        with row_threads.held_blas():
            self._features_in_sequence(X, out, first_row)

    def _shared_chunk_elements(self, per_thread: int) -> int:
        """Features per chunk when threads share a batch of `per_thread` features each: at least
        SHARED_CHUNKS_PER_THREAD chunks a thread, but no fewer features than half SHARED_MIN_ELEMENTS and
        `shared_chunk_rows` rows, and no more than CHUNK_ELEMENTS."""
        return min(CHUNK_ELEMENTS, max(SHARED_MIN_ELEMENTS // 2, per_thread // SHARED_CHUNKS_PER_THREAD,
                                       self.shared_chunk_rows * self.output_dim))

    def _may_share(self, n_rows: int) -> bool:
        """Whether threads could share a batch of `n_rows`: a map that `shares_rows`, at least
        SHARED_MIN_ELEMENTS features, and more rows than the smallest shared chunk holds, whatever the thread
        count (asked before the thread count, whose BLAS and affinity look-ups took ~20 us cache-cold at
        n = 64, measured)."""
        if not self.shares_rows or n_rows * self.output_dim < SHARED_MIN_ELEMENTS:
            return False
        return n_rows > max(1, self._shared_chunk_elements(0) // self.output_dim)

    def _features_in_sequence(self, X, out: np.ndarray, first_row: int) -> None:
        """`features_into` on this thread, chunk after chunk."""
        if X.shape[0] * self.output_dim <= CHUNK_ELEMENTS:
            bad = self._nonfinite_row(X, out)   # one chunk, no slicing
            if bad is not None:
                raise self._overflow_error(first_row + bad, out.dtype)
            return
        for rows in self.row_chunks(X.shape[0]):
            bad = self._nonfinite_row(X[rows], out[rows])
            if bad is not None:
                raise self._overflow_error(first_row + rows.start + bad, out.dtype)

    def _short_features(self, X, out: np.ndarray) -> bool:
        """The features of a small batch X (not necessarily checked) into `out` by the same kernels as
        `features_into` (so the same bits), without what is not the work: True when done, all finite; False
        when X is not a C-ordered float array of the right width, or its check or bound fails, or a value
        needs numpy (then `out` may be partly written, and the caller takes the full path, which checks,
        recomputes and raises). For maps that set `short_path`."""
        raise NotImplementedError

    def _prepare_shared(self, dtype: np.dtype) -> None:
        """Make the parameters `_features_into` reads in `dtype` before threads share a batch (so no
        two threads build them at once)."""

    def _nonfinite_row(self, X, out: np.ndarray) -> int | None:
        # A new errstate per call: its decorator form, ~7 us faster cache-cold, shares one instance between
        # threads, which numpy 1.x's errstate (this package allows numpy >= 1.26) does not make safe.
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected just below
            if self._features_into(self._working_copy(X, out.dtype), out):
                return None
        if np.isfinite(out).all():
            return None
        return int(np.argmin(np.isfinite(out).all(axis=1)))

    def _overflow_error(self, row: int, dtype: np.dtype) -> InputError:
        advice = "rescale the input" + (" or ask for float64 features (dtype=float64)" if dtype == np.float32 else "")
        return InputError("vectors", f"row {row}: its features overflow {dtype.name} ({self.overflow_hint}); {advice}")

    def refuse_overflow(self, X, *, dtype=None) -> None:
        """Raise the InputError `transform(X, dtype=dtype)` would raise for a row whose features are not
        finite, computing only the rows that `_magnitude_bound` cannot clear (normally none): so a
        caller can refuse a batch before it streams any of its features. X must be checked."""
        dtype = output_dtype(dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            bound = self._magnitude_bound(self._row_l1(X), dtype)
        suspects = np.arange(X.shape[0]) if bound is None else \
            np.flatnonzero(~(bound < np.finfo(dtype).max / 16))
        for chunk in self.row_chunks(suspects.size):
            rows = suspects[chunk]
            bad = self._nonfinite_row(X[rows], np.empty((rows.size, self.output_dim), dtype=dtype))
            if bad is not None:
                raise self._overflow_error(int(rows[bad]), dtype)

    def _row_l1(self, X) -> np.ndarray:
        """||x||_1 of each row, in float64 (inf where it overflows)."""
        if sp.issparse(X):
            return np.asarray(abs(X).sum(axis=1, dtype=np.float64)).ravel()
        # By row blocks of ~4 MiB: np.abs(X) whole was a temporary the size of the batch (the service's
        # request memory is bounded by its body and a few chunks). Each row's sum is the same either way.
        l1 = np.empty(X.shape[0], dtype=np.float64)
        step = max(1, (4 << 20) // max(1, X.itemsize * X.shape[1]))
        for start in range(0, X.shape[0], step):
            l1[start:start + step] = np.abs(X[start:start + step]).sum(axis=1, dtype=np.float64)
        return l1

    def _magnitude_bound(self, l1: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
        """An upper bound of every intermediate and feature magnitude for rows of these l1 norms (float64,
        inf allowed), or None when the map has no such bound (then `refuse_overflow` computes every row)."""
        return None

    def _working_copy(self, X, dtype: np.dtype):
        """X in the working precision; refuses values that float32 cannot hold."""
        if X.dtype == dtype:
            return X
        if isinstance(X, np.ndarray) and dtype == np.float32:
            cast = float32_copy(X)   # None where an entry overflows
        elif isinstance(X, np.ndarray) and X.dtype == np.float32:
            return X.astype(dtype)   # float32 to float64 is exact (no np.errstate: ~1 us of a single row)
        else:
            with np.errstate(over="ignore"):
                cast = X.astype(dtype, copy=False)
            if not np.isfinite(cast.data if sp.issparse(cast) else cast).all():
                cast = None
        if cast is None:
            raise InputError("vectors", "values exceed the float32 range: ask for float64 features "
                             "(dtype=float64) or rescale the input")
        return cast

    @abstractmethod
    def _features_into(self, X, out: np.ndarray) -> bool | None:
        """Write the features of the chunk X (working precision) into `out`; may return True when it
        found them all finite (else `features_into` checks)."""

    def kernel(self, X, Y=None) -> np.ndarray:
        ZX = self.transform(self.check(X, "x"), dtype=np.float64)
        ZY = ZX if Y is None else self.transform(self.check(Y, "y"), dtype=np.float64)
        return ZX @ ZY.T


def largest_magnitude(values: np.ndarray, field: str) -> float:
    """max |v| of a parameter array (no temporary copy); SpecError naming `field` if it is not finite,
    e.g. a bandwidth so large that its frequencies overflow."""
    values = values.data if sp.issparse(values) else values
    largest = float(max(values.max(), -values.min())) if values.size else 0.0
    if not np.isfinite(largest):
        raise SpecError(field, f"too large: the map's random parameters overflow {values.dtype.name}")
    return largest


def require(condition: bool, field: str, message: str) -> None:
    if not condition:
        raise SpecError(field, message)
