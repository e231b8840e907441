"""Generalized consistent weighted sampling (Li, "Linearized GMM kernels and normalized
random Fourier features", KDD 2017, sections 1.1-1.4; docs/methods/minhash.md, "GCWS: Li 2017").

Kernel: GMM(u, v) = sum_i min(u~_i, v~_i) / sum_i max(u~_i, v~_i), where u~ in R^{2d}
splits each entry into its positive and negative part; pGMM raises u~ to `power` first.

For each of k samples j and each i with u~_i > 0, with r_ij, c_ij ~ Gamma(2, 1) and
beta_ij ~ U(0, 1) depending only on (seed, j, i):
    t_ij = floor(log(u~_i) / r_ij + beta_ij),  a_ij = log(c_ij) - r_ij (t_ij + 1 - beta_ij),
    i*_j = argmin_i a_ij,  t*_j = t_{i*_j}.
Pr[(i*_j, t*_j) equal for u and v] = GMM(u, v) (Theorem 1).

Outputs:
- `hash`: one int64 code per sample, equal iff (i*, t*) are equal (or i* alone with
  `zero_bit`), laid out as i* << 32 | zigzag(t*) so codes are >= 0;
- `transform`: the b-bit linearisation (Li 2017, section 1.4, after Li & Koenig's b-bit minwise
  hashing): b = `bits` bits of each sample's code as a one-hot block of 2^bits per sample, k
  nonzeros each 1/sqrt(k) (so <f(u), f(v)> = b-bit match fraction), returned as indices + scale,
  never as a dense k * 2^bits matrix. `bit_source` says which bits:
  - "mixed_code" (new requests): the lowest b bits of mix(key_j + G code_j), a seeded splitmix64
    bijection (`_gcws_kernels.mixed_codes`) of the code `hash` returns (i* with `zero_bit`, as the
    paper's features, else (i*, t*) or (i*, dart), whose match probability is exactly GMM; linear SVM
    accuracy was about the same either way, bench/bench_gcws_bbit.py --zero-bit). Distinct codes get
    independent-looking uniform bits whatever the data's signs, so the b-bit match probability is
    P_b = P + (1 - P) 2^-b with P = Pr[codes equal] (= GMM without `zero_bit`), and b = 1 is a real
    1-bit minwise hash;
  - "index" (the only one of specs stored before the parameter existed, which leave the key out):
    the lowest b bits of i* itself. Its lowest bit is the sign of the sampled entry (2i for the
    positive part, 2i+1 for the negative), so on nonnegative data b = 1 is constant and b bits
    carry b - 1. Kept so stored specs keep their features; asked for explicitly it is still served.
Cost is O(nnz * k) per vector: sparse input touches only its nonzeros. The per-(j, i)
constants come from a table when it fits the byte budget and on demand otherwise, with
identical results.

Samplers (`sampler`): "icws" is the above (the default, and the only one of specs made before
the parameter existed: at its default the key is left out of the stored params, so their ids
stand). "dart" (gcws_dart.py, DartMinHash) draws codes with the same law, Pr[equal] = GMM
exactly, in expected O(k log k + nnz) per vector; its codes are i* << 32 | a dart identity, and
i* (0-bit codes, b-bit features) is the element as for ICWS, but the two samplers give
different codes for the same seed.
"""

from __future__ import annotations

import threading
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from .. import kernels
from ..pair_similarity import gmm_of_all_pairs
from ..numerics import _counter_random
from . import _gcws_kernels
from .. import randomness
from .gcws_dart import DartSampler
from ..base import (EMPTY_CODE, EMPTY_ROWS, CodeFamily, DiscreteCodeMap, OneHotFeatures,
                    without_default_empty_rows)
from ..inputs import csr_parts, zero_rows
from ..spec import MapSpec

DEFAULT_TABLE_BUDGET_BYTES = 256 * 2**20
_TABLE_BYTES_PER_ENTRY = 16  # four float32 constants per (coordinate, sample)
# numba's default (workqueue) threading layer must not run parallel kernels from two
# threads at once; the service calls maps from a thread pool.
_PARALLEL_KERNEL_LOCK = threading.Lock()
# Below this many rows the kernel runs on the calling thread: waking numba's pool costs
# more than it saves, and concurrent small requests then hash in parallel instead.
PARALLEL_MIN_ROWS = 8
# The codes of an all-zero row with `empty_rows = "code"`, and of an empty document when a text spec asks for
# them (`"input": {..., "empty": "code"}`, featurehash.maps.text.stage): featurehash.maps.base.EMPTY_CODE.
EMPTY_TEXT_CODE = EMPTY_CODE


class GCWSParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    power: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    bits: int = Field(default=8, ge=1, le=24, strict=True)
    zero_bit: bool = False
    sampler: Literal["icws", "dart"] = "icws"
    # None (an absent key: every spec stored before the parameter) means "index"; new requests get
    # "mixed_code" written out by `complete_new_request`.
    bit_source: Literal["index", "mixed_code"] | None = None
    empty_rows: Literal[EMPTY_ROWS["codes"]] = "error"   # featurehash.maps.base.EMPTY_ROWS

    @model_serializer(mode="wrap")
    def _omit_legacy_defaults(self, handler):
        """Stored params leave `sampler` out at "icws", `bit_source` at "index" (or unset) and `empty_rows` at
        "error": the id of every spec made before those parameters existed (and of the same spec asked for
        today with those values) stays what it was."""
        params = without_default_empty_rows(handler(self))
        if params.get("sampler") == "icws":
            del params["sampler"]
        if params.get("bit_source") in ("index", None):
            params.pop("bit_source", None)
        return params

    @property
    def mixes_bits(self) -> bool:
        return self.bit_source == "mixed_code"


class GCWSMap(DiscreteCodeMap):
    method = "gcws"
    code_family = CodeFamily.GMM
    Params = GCWSParams
    randomness_table = True

    @classmethod
    def complete_new_request(cls, params: GCWSParams) -> GCWSParams:
        if params.bit_source is not None:
            return params
        return params.model_copy(update={"bit_source": "mixed_code"})

    def __init__(self, spec: MapSpec, *, table_budget_bytes: int = DEFAULT_TABLE_BUDGET_BYTES):
        super().__init__(spec)
        self._bit_keys = (_counter_random.stream_keys(randomness.counter_key(spec.seed, "gcws.feature_bits"),
                                                      spec.n_components)
                          if self.params.mixes_bits else np.empty(0, dtype=np.uint64))
        self._darts = (DartSampler(spec.seed, spec.n_components, self.params.power)
                       if self.params.sampler == "dart" else None)
        self._streams = (_counter_random.stream_keys(randomness.counter_key(spec.seed, "gcws.samples"),
                                                     spec.n_components)
                         if self._darts is None else np.empty(0, dtype=np.uint64))
        self._n_coordinates = 2 * spec.input_dim
        self.uses_table = (self._darts is None and
                           self._n_coordinates * spec.n_components * _TABLE_BYTES_PER_ENTRY <= table_budget_bytes)
        self._table: tuple[np.ndarray, ...] | None = None

    zero_rows_refused = ("GCWS samples only nonzero entries, so a vector needs one; params.empty_rows = 'code' "
                         "gives such a row a reserved code")

    @property
    def empty_rows(self) -> str:
        """"code" with params.empty_rows "code", or for a text spec whose stage asks it for empty documents."""
        if self.params.empty_rows == "code" or getattr(self.text_stage, "empty_code", False):
            return "code"
        return "error"

    def check(self, X, field: str = "vectors", *, first_row: int = 0):
        X = super().check(X, field, first_row=first_row)
        if self._darts is not None:
            self._darts.check_weights(X, field)
        return X

    @classmethod
    def output_dim_for(cls, spec: MapSpec) -> int:
        return spec.n_components << spec.params["bits"]

    def materialize(self) -> "GCWSMap":
        self._constants()
        return self

    @property
    def planned_nbytes(self) -> int:
        table = self._n_coordinates * self.spec.n_components * _TABLE_BYTES_PER_ENTRY if self.uses_table else 0
        return table + self._streams.nbytes + self._bit_keys.nbytes

    @property
    def nbytes(self) -> int:
        table = sum(a.nbytes for a in self._table) if self._table is not None else 0
        return table + self._streams.nbytes + self._bit_keys.nbytes

    def _constants(self) -> tuple[np.ndarray, ...]:
        if not self.uses_table:
            empty = np.empty((0, 0), dtype=np.float32)
            return empty, empty, empty, empty
        if self._table is None:
            with _PARALLEL_KERNEL_LOCK:
                if self._table is None:
                    self._table = _gcws_kernels.build_table(self._streams, self._n_coordinates)
        return self._table

    def samples(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(i*, t*) for every row and sample ("icws"), or (i*, dart identity) ("dart"): two int64
        arrays of shape (n, k). An all-zero row (let through by `empty_rows`) has EMPTY_CODE in both."""
        X = self.check(X)
        sampled = self._sampled_rows(X)
        if sampled is None:
            return self._samples(X)
        i_star, t_star = (np.full((X.shape[0], self.spec.n_components), EMPTY_CODE, dtype=np.int64) for _ in "it")
        if sampled.size:
            i_star[sampled], t_star[sampled] = self._samples(X[sampled])
        return i_star, t_star

    def _sampled_rows(self, X) -> np.ndarray | None:
        """None when every row of checked X is sampled, else the rows that are (all-zero rows are not)."""
        if self.empty_rows == "error":
            return None
        flags = zero_rows(X)
        return np.flatnonzero(~flags) if flags.any() else None

    def _samples(self, X) -> tuple[np.ndarray, np.ndarray]:
        X = csr_parts(X)
        if self._darts is not None:
            if X.shape[0] < PARALLEL_MIN_ROWS:
                return self._darts.samples(X, parallel=False)
            with _PARALLEL_KERNEL_LOCK:
                return self._darts.samples(X, parallel=True)
        n, k = X.shape[0], self.spec.n_components
        i_star = np.empty((n, k), dtype=np.int64)
        t_star = np.empty((n, k), dtype=np.int64)
        arguments = (X.indptr, X.indices, X.data, float(self.params.power), self._streams, self.uses_table,
                     *self._constants(), i_star, t_star)
        if n < PARALLEL_MIN_ROWS:
            _gcws_kernels.hash_csr_serial(*arguments)
        else:
            with _PARALLEL_KERNEL_LOCK:
                _gcws_kernels.hash_csr_parallel(*arguments)
        return i_star, t_star

    def hash(self, X) -> np.ndarray:
        X = self.check(X)
        sampled = self._sampled_rows(X)
        if sampled is None:
            return self._codes(*self._samples(X))
        codes = np.full((X.shape[0], self.spec.n_components), EMPTY_CODE, dtype=np.int64)
        if sampled.size:   # the spec chose a code for all-zero rows (empty_rows "code")
            codes[sampled] = self._codes(*self._samples(X[sampled]))
        return codes

    def _codes(self, i_star: np.ndarray, t_star: np.ndarray) -> np.ndarray:
        if self.params.zero_bit:
            return i_star
        if self._darts is not None:
            return (i_star << 32) | t_star  # t_star holds the 32-bit dart identity
        return _gcws_kernels.full_codes(i_star, t_star)

    def transform(self, X, *, dtype=None) -> OneHotFeatures:
        """The b-bit one-hot features; an all-zero row (empty_rows "code") has those of EMPTY_CODE (its i* and
        its code in every sample), so with "mixed_code" bits its match probability with any other row is 2^-b
        a sample, as for two rows of GMM 0, and 1 with another empty row."""
        if not self.params.mixes_bits:
            return self._one_hot(self.samples(X)[0], self.params.bits)
        return self._one_hot(_gcws_kernels.mixed_codes(self._bit_keys, self.hash(X)), self.params.bits)

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        """pGMM of every pair of rows. Sparse rows far wider than their nonzeros (a text stage's 2^30 columns)
        go through the near-duplicate join's pair verifier (featurehash.maps.pair_similarity: the nonzeros of
        each pair only, and the join's numbers); others through featurehash.maps.kernels.gmm."""
        X = self.check(X, "x")
        same = Y is None
        Y = X if same else self.check(Y, "y")
        if kernels.wide_sparse(X, Y):
            return gmm_of_all_pairs(X, None if same else Y, self.params.power)
        return kernels.gmm(X, Y, self.params.power)

