"""Random binning features (Rahimi & Recht, "Random features for large-scale kernel machines",
NIPS 2007; docs/methods/minhash.md, "Random binning: Rahimi & Recht 2007").

Kernel: Laplacian k(x, y) = exp(-gamma ||x - y||_1) (gamma = 1/sigma).

For each of P = n_components grids and each coordinate i: pitch delta ~ Gamma(2, scale 1/gamma),
shift u ~ U[0, delta), bin_i(x) = floor((x_i - u) / delta). In one dimension two points share a
bin with probability max(0, 1 - |x_i - y_i| / delta), whose mean over delta's Gamma(2) law is
exp(-gamma |x_i - y_i|); the coordinates are independent, so
    Pr[all d bins equal] = exp(-gamma ||x - y||_1) = k(x, y)
and the fraction of the P grids where the bins agree is Binomial(P, k) / P: variance k (1 - k) / P.

Outputs (like GCWS, discrete codes):
- `hash`: one int64 code >= 0 per grid, a hash of the grid's d bin numbers: equal bins give equal
  codes, different bins equal codes with probability ~2^-63 (`_binning_kernels`: an additive 64-bit
  hash of (grid, coordinate, bin) with the top bit cleared). LSH band keys follow from the codes
  (featurehash.lsh.banding, POST /hash with "bands"): Pr[band of r grids collides] = k^r.
- `transform`: the one-hot linearisation, the lowest `bits` bits of each code in a block of 2^bits
  per grid, indices p 2^bits + (code & (2^bits - 1)), P nonzeros each 1/sqrt(P) (so <f(x), f(y)> is
  the match fraction of the b-bit codes, k plus the chance 2^-bits of a spurious low-bit match).
- `kernel`: the match fraction of the full codes, an unbiased estimate of k.
Cost: zero is always in bin -1, whose hash term is 0, so a row costs O(nnz * P) (dense rows:
O(d * P)), with no per-map base hash. The per-(i, p) variates come from a counter-based mixer keyed
by the seed (`randomness.counter_key(seed, "binning.grids")`, codes keyed by "binning.codes"), read
from a table (d x P, 16 bytes an entry) when it fits the byte budget, else made on demand: the
codes are identical either way, and input_dim can be huge (hashed feature spaces).
"""

from __future__ import annotations

import threading

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .. import kernels
from ..pair_similarity import laplacian_of_all_pairs
from . import _binning_kernels
from ..numerics import _counter_random
from .. import randomness
from ..base import CodeFamily, DiscreteCodeMap, OneHotFeatures
from .gcws import _PARALLEL_KERNEL_LOCK, PARALLEL_MIN_ROWS
from ..inputs import csr_parts
from ..spec import MapSpec

DEFAULT_TABLE_BUDGET_BYTES = 256 * 2**20
_TABLE_BYTES_PER_ENTRY = 16  # two float64 constants per (coordinate, grid)
# numba's default (workqueue) threading layer is one per process and must not run parallel kernels
# from two threads at once: binning takes GCWS's _PARALLEL_KERNEL_LOCK, so that a binning and a GCWS
# request never do.


class BinningParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gamma: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    bits: int = Field(default=8, ge=1, le=24, strict=True)


class BinningMap(DiscreteCodeMap):
    method = "binning"
    code_family = CodeFamily.LAPLACIAN
    Params = BinningParams
    randomness_table = True

    def __init__(self, spec: MapSpec, *, table_budget_bytes: int = DEFAULT_TABLE_BUDGET_BYTES):
        super().__init__(spec)
        grids = spec.n_components
        self._streams = _counter_random.stream_keys(randomness.counter_key(spec.seed, "binning.grids"), grids)
        self._code_streams = _counter_random.stream_keys(randomness.counter_key(spec.seed, "binning.codes"), grids)
        self.uses_table = spec.input_dim * grids * _TABLE_BYTES_PER_ENTRY <= table_budget_bytes
        self._table: tuple[np.ndarray, np.ndarray] | None = None
        self._table_lock = threading.Lock()

    @classmethod
    def output_dim_for(cls, spec: MapSpec) -> int:
        return spec.n_components << spec.params["bits"]

    # -- random parameters ---------------------------------------------------------

    def grid_constants(self) -> tuple[np.ndarray, np.ndarray]:
        """(gamma / G, U3), each (d, P) float64: bin_i = floor(x_i * gamma / G - U3), i.e. pitch
        delta = G / gamma and shift u = U3 * delta. Built even past the table budget (for checks)."""
        if self._table is not None:
            return self._table
        return _binning_kernels.build_table(self._streams, self.input_dim, float(self.params.gamma))

    def _constants(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.uses_table:
            empty = np.empty((0, 0))
            return empty, empty
        if self._table is None:
            with self._table_lock:
                if self._table is None:
                    self._table = _binning_kernels.build_table(self._streams, self.input_dim,
                                                               float(self.params.gamma))
        return self._table

    def materialize(self) -> "BinningMap":
        self._constants()
        return self

    @property
    def planned_nbytes(self) -> int:
        table = self.input_dim * self.spec.n_components * _TABLE_BYTES_PER_ENTRY if self.uses_table else 0
        return table + self._streams.nbytes + self._code_streams.nbytes

    @property
    def nbytes(self) -> int:
        table = sum(a.nbytes for a in self._table) if self._table is not None else 0
        return table + self._streams.nbytes + self._code_streams.nbytes

    # -- codes and features --------------------------------------------------------

    def hash(self, X) -> np.ndarray:
        """int64 codes >= 0, shape (n, P): code p is equal for two rows iff their bins in grid p are
        (up to a ~2^-63 hash collision)."""
        X = self.check(X)
        X = csr_parts(X)
        codes = np.empty((X.shape[0], self.spec.n_components), dtype=np.int64)
        arguments = (X.indptr.astype(np.int64, copy=False), X.indices.astype(np.int64, copy=False),
                     X.data.astype(np.float64, copy=False), self._streams, self._code_streams,
                     float(self.params.gamma), self.uses_table, *self._constants(), codes)
        if X.shape[0] < PARALLEL_MIN_ROWS:
            _binning_kernels.hash_csr_serial(*arguments)
        else:
            with _PARALLEL_KERNEL_LOCK:
                _binning_kernels.hash_csr_parallel(*arguments)
        return codes

    def transform(self, X, *, dtype=None) -> OneHotFeatures:
        return self._one_hot(self.hash(X), self.params.bits)

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        """exp(-gamma ||x - y||_1) of every pair; sparse rows far wider than their nonzeros (a text stage's 2^30
        columns) by the join's pair verifier (featurehash.maps.pair_similarity), the nonzeros of each pair only."""
        X = self.check(X, "x")
        same = Y is None
        Y = X if same else self.check(Y, "y")
        if kernels.wide_sparse(X, Y):
            return laplacian_of_all_pairs(X, None if same else Y, self.params.gamma)
        return kernels.laplacian(X, Y, self.params.gamma)
