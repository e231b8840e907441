"""Spherical structured features (Lyu, "Spherical Structured Feature Maps for Kernel
Approximation", ICML 2017; the construction and the paper's claim: docs/methods/fourier.md, "SSF: Lyu 2017").

Kernels:
- "gaussian": k(x, y) = exp(-gamma ||x - y||^2), i.e. sigma^2 = 1 / (2 gamma);
- "arccos0/1/2": the arc-cosine kernel of order b (Cho & Saul, NIPS 2009),
  k_b(x, y) = (1/pi) ||x||^b ||y||^b J_b(theta) (`featurehash.maps.kernels.arccos`).

Point set. x is padded to d' = 2m >= d (m = ceil(d/2)). With n >= m and an index set
L = (k_1..k_m) of distinct rows of the n-point DFT F[k, j] = exp(-2 pi i k j / n),
    V = [[Re F_L, -Im F_L], [Im F_L, Re F_L]] / sqrt(m)            (2m x 2n)
has unit columns: 2n points on S^{2m-1}.

Projection in O(n log n). x~ = diag(s) x (s random signs), c = x~[:m] + i x~[m:] (then rotated, see
"Randomisation"); put c_s at position k_s of a zero length-n vector z. Then
y_j = sum_s conj(F[k_s, j]) c_s / sqrt(m) = ifft(z, norm="forward")_j / sqrt(m) (numpy's unnormalised
inverse DFT, exp(+2 pi i k j / n)), and V^T x~ = [Re y, Im y]. One batched FFT per row chunk.

Features (N = 2n directions v_i, P_i = v_i^T x~):
- Gaussian: z(x) = 1/sqrt(N) [cos(t_i P_i), sin(t_i P_i)]_i with ONE radius per direction:
  t_i = F^{-1}_{chi_d'}((pi(i) - 1 + u_i) / N) * sqrt(2 gamma), pi a seeded permutation, so the N
  radii are stratified quantiles of chi with d' = 2m degrees of freedom (the points live on
  S^{d'-1}, so w = t v ~ N(0, 2 gamma I_{d'})): jittered, u_i ~ U(0, 1), with "rotation"; the
  midpoints u_i = 1/2 with "signs". (The paper shares M radii among all directions; one radius per
  direction keeps every direction and has no fixed radial bias.)
- arc-cosine b: z(x) = sqrt(E[r^2b] / N) [step(P_i) P_i^b, step(-P_i) (-P_i)^b]_i, r ~ chi_d'
  (E[r^2b] = 1, d', d'(d'+2)), step(0) = 1/2: each direction with its antipode (the paper's
  "bidirectional" form), so E<z(x), z(y)> = 2 E[r^2b] E_v[step(v.x) step(v.y) (v.x v.y)^b] = k_b.
Both give D = n_components = 4n: n = D / 4, which must be a whole number >= m. Other D are
refused (SpecError naming n_components) rather than truncated: dropping a cos or a sin (or one
half-space) of a direction biases the estimate. So SSF needs D >= 4 ceil(d/2) (about 2d); at
D = 4m, n = m and V is an orthonormal basis of R^{2m}.

Randomisation (`randomization`). Unbiasedness needs each direction v_i uniform on S^{2m-1} and each
radius t_i ~ chi_{2m}.
- "signs" (specs stored before the parameter, which leave the key out): x~ = diag(s) x and midpoint
  radii. The points stay on a torus inside the sphere, so the estimate averaged over seeds does not
  converge to the kernel: biased at every D.
- "rotation" (every new request): c is multiplied by U = P4 F P3 F P2 F P1 (F the unitary m-point DFT,
  P_k diagonals of seeded uniform phases), a rotation of R^{2m} in O(m log m), and the radii are
  jittered. The point set turns as a whole, keeping its low energy, and each direction is close to
  uniform: the estimate averaged over seeds converges to the kernel (tests/maps/fourier/test_ssf.py).

Index set. L is chosen by coordinate ascent on a Riesz log-energy (`optimised_index_set`), a pure
function of (m, n, seed), cached, and stored in the spec (params.index_set) so it is covered by the
spec id and never recomputed from a stored spec. With h_p = sum_s exp(2 pi i k_s p / n), the inner
products between columns are Re h_p / m and -Im h_p / m (see `riesz_log_energy`); swapping k_q for
k changes h by exp(2 pi i k p / n) - exp(2 pi i k_q p / n), so a candidate costs O(n), not the
O(n^2) point pairs. Small searches evaluate every free index (exact coordinate ascent); large ones
rank all free indices by a second-order expansion (two FFTs per coordinate) and evaluate a shortlist
exactly. The search computes with `_portable_math` (exact trigonometric tables, logs and ordered sums,
no BLAS) in compiled loops (`_ssf_search_kernels`: the numpy formulation's operations in its order, no
FMA), so the stored set is the same on every machine; only the shortlist ranking uses scipy's FFT,
and the exact choice within the shortlist makes its last bits matter only if two candidates tie to
~1e-13 at the shortlist's edge and that one is the best.
The energy is that of the 4n points +-V, not of the 2n columns: the features use each direction with
its antipode, so an antipodal pair of columns is as wasted as a coincident one.

When to stop (`search`). "until_unchanged" (specs stored before the parameter, which leave the key
out; a request may still state it) sweeps until a sweep swaps nothing, shortlist 16.
"until_small_gain" (every new request without an index set) stops after a sweep that lowers the
energy by at most SMALL_GAIN of what the first sweep did, shortlists 2 candidates ranked by one FFT of
both ranking inputs packed together (`_ssf_search_kernels.packed_ranking_input`), and skips a
coordinate whose own index beat its best rival at its last exact check by more than SKIP_RATIO times
the energy gained by all swaps since. Nearly all of the energy is gained in the first sweep.

Transforms are computed in float32 unless float64 is asked for, in row chunks (bounded
temporaries). For small d (Gaussian kernel, d <= DENSE_MAX_DIM) the projection is one BLAS product with
the d x 2n matrix of the basis vectors' projections (made once, by the FFTs in float64): the same
linear map, rounded once to the working precision. Sparse input is densified one chunk at a time: the
FFT costs O(n log n) per row whatever the sparsity.

Measurements behind these choices (radii per direction, rotation, energy, the stopping rule, the
small-d product): docs/methods/fourier.md, "Measurements behind the design", with `bench/bench_ssf.py`,
`bench/bench_ssf_bias.py`, `bench/bench_ssf_search.py` and their files in bench/results/.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import scipy.fft

import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from .. import kernels
from .. import randomness
from ._fourier_pass import FourierPass, block_rows
from ..base import CHUNK_ELEMENTS, DenseFeatureMap, require
from ..errors import SpecError
from ..inputs import output_dtype
from ..spec import MapSpec
from ._ssf_parameters import ROTATION_BLOCKS, SSFParameters, fft_workers
from ._ssf_parameters import arccos_order  # noqa: F401 (benches and tests call ssf.arccos_order)
from .ssf_search import SPEC_POINT_SET, optimised_index_set

# d up to which the Gaussian projection is a BLAS product (module docstring), and the largest d x 2n
# product matrix (4 bytes each in float32).
DENSE_MAX_DIM = 64
DENSE_MAX_ELEMENTS = 2**22
# The Fourier pass's blocks are 4x the default (`_fourier_pass.block_rows`): each costs ~10 numpy and
# scipy calls; 1.3-2x faster at (n, d, D) = (1000, 32, 1024) and (100000, 64, 512) (measured).
SSF_BLOCK_SCALE = 4


def by_product(input_dim: int, n: int, gaussian: bool) -> bool:
    """Whether the Gaussian projection of n complex directions is one BLAS product (module docstring)."""
    return gaussian and input_dim <= DENSE_MAX_DIM and input_dim * 2 * n <= DENSE_MAX_ELEMENTS


def product_bytes(input_dim: int, n: int, gaussian: bool) -> int:
    """Bytes of the float32 d x 2n product matrix (`by_product`), or 0 where the FFTs project."""
    return 4 * input_dim * 2 * n if by_product(input_dim, n, gaussian) else 0







IndexValue = Annotated[int, Field(strict=True, ge=0)]


class SSFParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kernel: Literal["gaussian", "arccos0", "arccos1", "arccos2"] = "gaussian"
    # Gaussian only (default 1.0 there); the arc-cosine kernels have no bandwidth.
    gamma: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    # The DFT rows L, in the order that pairs them with the input coordinates; filled in by
    # `complete_params` (optimised from the seed) unless given.
    index_set: list[IndexValue] | None = None
    # None (an absent key: every spec stored before the parameter) means "signs"; new requests get
    # "rotation" written out by `complete_new_request` (module docstring, "Randomisation").
    randomization: Literal["signs", "rotation"] | None = None
    # How the index set was searched (`optimised_index_set`): None (an absent key: every spec stored before
    # the parameter) means "until_unchanged"; new requests without an index set get "until_small_gain"
    # written out by `complete_new_request`. A spec with its index set never searches again.
    search: Literal["until_unchanged", "until_small_gain"] | None = None

    @model_serializer(mode="wrap")
    def _omit_legacy_values(self, handler):
        """Stored params leave `randomization` out at "signs" and `search` at "until_unchanged" (or unset):
        specs made before these parameters keep their canonical JSON, hence their ids."""
        params = handler(self)
        if params.get("randomization") in ("signs", None):
            params.pop("randomization", None)
        if params.get("search") in ("until_unchanged", None):
            params.pop("search", None)
        return params

    @property
    def rotates(self) -> bool:
        return self.randomization == "rotation"


def structure(input_dim: int, n_components: int) -> tuple[int, int]:
    """(m, n): input pairs (d' = 2m) and DFT size for D = n_components = 4n; SpecError otherwise."""
    m = (input_dim + 1) // 2
    smallest = 4 * m
    if n_components % 4 or n_components < smallest:
        below = max(smallest, n_components - n_components % 4)
        nearest = sorted({below, max(smallest, below + 4)})
        raise SpecError("n_components", (
            f"SSF gives 4 features per DFT column (cos and sin, or both half-spaces, of the column's two "
            f"real projections), with at least ceil(input_dim/2) = {m} columns: n_components must be a "
            f"multiple of 4 and >= {smallest} for input_dim {input_dim} (nearest valid: "
            f"{' or '.join(map(str, nearest))}); for fewer features use 'rff'"))
    return m, n_components // 4





def chi_moment(order: int, dof: int) -> float:
    """E[r^(2 order)] for r ~ chi with `dof` degrees of freedom (orders 0, 1, 2)."""
    return (1.0, float(dof), float(dof) * (dof + 2))[order]


# -------------------------------------------------------------------------------------------
# the map
# -------------------------------------------------------------------------------------------

class SSFMap(SSFParameters, DenseFeatureMap):
    method = "ssf"
    Params = SSFParams
    shares_rows = True

    def __init__(self, spec: MapSpec):
        super().__init__(spec)
        self.m, self.n = structure(spec.input_dim, spec.n_components)
        self.index_set = np.asarray(self.params.index_set, dtype=np.int64)
        # DFT row k -> which complex coordinate goes there (m: none, a zero).
        self._position = np.full(self.n, self.m, dtype=np.intp)
        self._position[self.index_set] = np.arange(self.m)
        self._parameters: dict[np.dtype, tuple[np.ndarray, np.ndarray | None]] = {}
        self._phases: dict[np.dtype, np.ndarray] = {}  # complex working precision -> phases
        self._passes: dict[np.dtype, FourierPass] = {}
        self._products: dict[np.dtype, np.ndarray] = {}
        self._by_product = by_product(spec.input_dim, self.n, self.params.kernel == "gaussian")

    @classmethod
    def complete_params(cls, params: SSFParams, *, input_dim: int, n_components: int, seed: int) -> SSFParams:
        m, n = structure(input_dim, n_components)
        if params.kernel != "gaussian" and params.gamma is not None:
            raise SpecError("params.gamma", f"the kernel {params.kernel!r} has no bandwidth: leave gamma out")
        updates = {}
        if params.kernel == "gaussian" and params.gamma is None:
            updates["gamma"] = 1.0
        if params.index_set is None:
            search = params.search or "until_unchanged"
            updates["index_set"] = list(optimised_index_set(m, n, seed, SPEC_POINT_SET, search).index_set)
        # A stored spec has both already and comes back as it was.
        return params.model_copy(update=updates) if updates else params

    @classmethod
    def complete_new_request(cls, params: SSFParams) -> SSFParams:
        updates = {}
        if params.randomization is None:
            updates["randomization"] = "rotation"
        if params.search is None and params.index_set is None:
            updates["search"] = "until_small_gain"
        return params.model_copy(update=updates) if updates else params

    @classmethod
    def check_spec(cls, spec: MapSpec) -> None:
        m, n = structure(spec.input_dim, spec.n_components)
        index_set = spec.params["index_set"]
        require(len(index_set) == m, "params.index_set",
                f"needs ceil(input_dim/2) = {m} DFT rows, got {len(index_set)}")
        require(max(index_set) < n, "params.index_set",
                f"rows of the {n}-point DFT are 0..{n - 1}; got {max(index_set)}")
        require(len(set(index_set)) == m, "params.index_set", "the DFT rows must be distinct")

    def materialize(self) -> "SSFMap":
        self._parameters_for(np.dtype(np.float32))
        if self.params.rotates:
            self._phases_for(np.dtype(np.complex64))
        if self._by_product:
            self._product_for(np.dtype(np.float32))
        return self

    @property
    def planned_nbytes(self) -> int:
        return (self._parameter_bytes(self.m, self.n, self.order is None, self.params.rotates)
                + product_bytes(self.input_dim, self.n, self.order is None))

    @classmethod
    def planned_nbytes_bound(cls, spec: MapSpec, **options) -> int:
        m, n = structure(spec.input_dim, spec.n_components)
        gaussian = spec.params.get("kernel", "gaussian") == "gaussian"
        return cls._parameter_bytes(m, n, gaussian, True) + product_bytes(spec.input_dim, n, gaussian)

    @staticmethod
    def _parameter_bytes(m: int, n: int, gaussian: bool, rotates: bool) -> int:
        # float32 signs (2m) and radii (2n, Gaussian only); int64 index set (m) and positions (n);
        # complex64 rotation phases (ROTATION_BLOCKS m).
        return 4 * (2 * m + (2 * n if gaussian else 0)) + 8 * m + 8 * n + (8 * ROTATION_BLOCKS * m if rotates else 0)

    @property
    def nbytes(self) -> int:
        held = sum(a.nbytes for pair in self._parameters.values() for a in pair if a is not None)
        held += sum(a.nbytes for a in self._phases.values()) + sum(a.nbytes for a in self._products.values())
        return held + self.index_set.nbytes + self._position.nbytes

    # -- features ------------------------------------------------------------------

    def _working_copy(self, X, dtype: np.dtype) -> np.ndarray:
        """A dense chunk in the working precision (the FFT needs every coordinate anyway)."""
        return super()._working_copy(X.toarray() if sp.issparse(X) else X, dtype)

    def _fourier(self, X: np.ndarray) -> np.ndarray:
        """y with V^T x~ = [Re y, Im y], complex (rows, n), by one inverse FFT of the rows."""
        m, d = self.m, self.input_dim
        scaled_signs, _ = self._parameters_for(X.dtype)
        # c = x~[:m] + i x~[m:] and a zero in column m: z = c[:, position] puts c_s at k_s and
        # zeros elsewhere as a gather, ~10x faster than scattering into zeros (measured).
        c = np.zeros((X.shape[0], m + 1), dtype=np.result_type(X.dtype, np.complex64))
        np.multiply(X[:, :m], scaled_signs[:m], out=c.real[:, :m])
        # An odd d leaves the last imaginary coordinate as padding: zero.
        np.multiply(X[:, m:], scaled_signs[m:d], out=c.imag[:, :d - m])
        if self.params.rotates:
            c[:, :m] = self.rotate(c[:, :m])
        z = np.take(c, self._position, axis=1)
        return scipy.fft.ifft(z, axis=1, norm="forward", workers=fft_workers(), overwrite_x=True)

    def projections(self, X, *, dtype=np.float64) -> np.ndarray:
        """V^T diag(s) x for each row: the 2n projections, in V's column order, by FFT."""
        X = self.check(X)
        dtype = output_dtype(dtype)
        out = np.empty((X.shape[0], 2 * self.n), dtype=dtype)
        rows = max(1, CHUNK_ELEMENTS // (2 * self.n))
        for start in range(0, X.shape[0], rows):
            y = self._fourier(self._working_copy(X[start:start + rows], dtype))
            out[start:start + rows, :self.n] = y.real
            out[start:start + rows, self.n:] = y.imag
        return out

    def _magnitude_bound(self, l1: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """|projection| <= ||x||_1 max|s|; times the largest radius (Gaussian) or to the power b (arc-cosine)."""
        scaled_signs, radii = self._parameters_for(dtype)
        projection = l1 * float(np.abs(scaled_signs).max())
        if radii is not None:
            return projection * float(radii.max())
        return np.maximum(projection, 1.0) ** max(self.order, 1) * chi_moment(self.order, 2 * self.m)

    def _features_into(self, X, out: np.ndarray) -> bool | None:
        if self.order is None:
            return self._pass_for(out.dtype).run(self._projector(out.dtype), X, out)
        self._features_from_projections(self._fourier(X), out)
        return None

    def _projector(self, dtype: np.dtype):
        """project(rows, into): into = the 2n projections t_i P_i of the rows (FFT, or the product for a
        small d), for the Fourier pass."""
        if self._by_product:
            product = self._product_for(dtype)
            return lambda rows, into: np.matmul(rows, product, out=into)
        _, radii = self._parameters_for(dtype)
        n = self.n

        def project(rows, into):
            y = self._fourier(rows)
            np.multiply(y.real, radii[:n], out=into[:, :n])
            np.multiply(y.imag, radii[n:], out=into[:, n:])
        return project

    def _product_for(self, dtype: np.dtype) -> np.ndarray:
        """The d x 2n matrix whose row j holds the 2n projections t_i P_i of the basis vector e_j (FFTs
        in float64, then rounded to `dtype`): rows X times it are X's projections."""
        if dtype not in self._products:
            held = (set(self._parameters), set(self._phases))
            _, radii = self._parameters_for(np.dtype(np.float64))
            y = self._fourier(np.eye(self.input_dim))
            self._products[dtype] = np.hstack([y.real * radii[:self.n], y.imag * radii[self.n:]]).astype(dtype)
            # float32 features need only the product: the float64 signs, radii and phases were its means.
            for made, before in zip((self._parameters, self._phases), held):
                for key in set(made) - before:
                    del made[key]
        return self._products[dtype]

    def _pass_for(self, dtype: np.dtype) -> FourierPass:
        """1/sqrt(N) [cos, sin] of the N = 2n angles (Gaussian kernel)."""
        if dtype not in self._passes:
            self._passes[dtype] = FourierPass(dtype, np.full(2 * self.n, 1.0 / np.sqrt(2 * self.n)),
                                              **self._block_rule())
        return self._passes[dtype]

    def _block_rule(self) -> dict:
        """A BLAS product's blocks, or the FFTs' (`_fourier_pass.block_rows`)."""
        return {"product": True} if self._by_product else {"block_scale": SSF_BLOCK_SCALE, "product": False}

    @property
    def shared_chunk_rows(self) -> int:
        return block_rows(self.input_dim, 2 * self.n, **self._block_rule())

    def _prepare_shared(self, dtype: np.dtype) -> None:
        self._parameters_for(dtype)
        if self.params.rotates:
            self._phases_for(np.result_type(dtype, np.complex64))
        if self.order is None:
            self._pass_for(dtype)
            self._projector(dtype)   # the product matrix, before threads share the batch

    def _features_from_projections(self, y: np.ndarray, out: np.ndarray) -> None:
        """The arc-cosine features of the projections y (complex, (rows, n))."""
        n, directions = self.n, 2 * self.n
        positive, negative = out[:, :directions], out[:, directions:]
        positive[:, :n] = y.real
        positive[:, n:] = y.imag
        np.negative(positive, out=negative)
        if self.order == 0:
            # step(P) with step(0) = 1/2 (Cho & Saul), so a zero vector gets k_0 = 1/2 as exact.
            np.sign(out, out=out)
            out += 1.0
            out *= out.dtype.type(0.5)
        else:
            np.maximum(out, 0.0, out=out)
            if self.order == 2:
                np.square(out, out=out)
        out *= out.dtype.type(np.sqrt(chi_moment(self.order, 2 * self.m) / directions))

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        X = self.check(X, "x")
        Y = X if Y is None else self.check(Y, "y")
        if self.order is None:
            return kernels.gaussian(X, Y, self.params.gamma)
        return kernels.arccos(X, Y, self.order)


def arccos_random_features(X, n_components: int, order: int, seed: int, *, bidirectional: bool = False) -> np.ndarray:
    """The i.i.d. baseline for the arc-cosine kernels (Cho & Saul): sqrt(2/D) step(w.x) (w.x)^b,
    w ~ N(0, I_d), D = n_components, in float64 (benchmarks and tests compare SSF against it).

    `bidirectional` uses D/2 Gaussian directions with their antipodes instead, scaled sqrt(1/(D/2))
    as in SSF, to tell the structured point set's gain from the antipodal pairing's.
    """
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    count = n_components // 2 if bidirectional else n_components
    words = randomness.raw_words(seed, "ssf.iid_baseline", X.shape[1] * count)
    P = X @ randomness.normal(words).reshape(X.shape[1], count)
    if bidirectional:
        P = np.hstack([P, -P])
    step = 0.5 * (1.0 + np.sign(P))
    features = step if order == 0 else step * P**order
    return features * np.sqrt((1.0 if bidirectional else 2.0) / count)
