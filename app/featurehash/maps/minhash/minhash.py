"""Minwise hashing of plain sets (docs/methods/minhash.md, "Set minhash").

Kernel: the Jaccard similarity of two sets, J(S, T) = |S n T| / |S u T|, where a row's set is its support
(the columns of its nonzero entries, whatever their values or signs), a document's or token list's set is that
of its tokens (through the spec's text stage, `input`), and pre-hashed tokens (`hash_tokens`: one flat uint64
array and row offsets) are their own elements. Two empty sets have J = 1 (the convention of GMM(0, 0)).

Codes: k = n_components samples h_1..h_k with Pr[h_j(S) = h_j(T)] = J, so the match fraction over k samples
estimates J with variance J (1 - J) / k (exactly Binomial(k, J) / k for "k_permutation"). `variant`:
- "one_permutation" (default): one-permutation hashing (P. Li, A. Owen, C.-H. Zhang, "One permutation
  hashing", NIPS 2012) with optimal densification (A. Shrivastava, "Optimal densification for fast and
  accurate minwise hashing", ICML 2017). Each element x is premixed, y = mix(x xor key) (a keyed bijection of
  64-bit words), its bin is floor(y k / 2^64), and bin j's code is the least y in bin j; an empty bin takes the
  code of the first nonempty bin of its own probe sequence (a hash of (j, try) shared by every set), which
  keeps Pr[match] = J exactly. O(|S| + k) a set: the choice for long sets and for speed.
- "k_permutation": classical minhash (Broder 1997), h_j(x) = min over S of a_j y + b_j mod 2^64 with a_j odd
  (a bijection of 64-bit words: equal minima mean equal elements). O(|S| k), every sample independent: the
  binomial variance exactly, and the k loop is the SIMD loop (multiply, add, min in vector lanes).
- "circulant": C-MinHash (X. Li & P. Li, "C-MinHash: Improving minwise hashing with circulant permutation",
  ICML 2022), over the universe D = input_dim: two random permutations sigma, pi of [0, D) (tables from the
  seed), h_j(S) = min over S of pi[(sigma[x] + j) mod D], j < k <= D. Unbiased, with variance no larger than
  J (1 - J) / k (Theorem 3.4), markedly lower for sets dense in a small universe. Elements must be < D, so it
  takes column rows of input_dim <= 2^24 (the tables hold 8 D bytes), not 64-bit tokens.

Outputs, as GCWS's: `hash` gives int64 codes >= 0 (EMPTY_CODE for an empty set with params.empty_rows "code");
band keys, the LSH index, dedup and re-ranking use them with the exact similarity of the Jaccard code family
(featurehash.lsh.similarity). `transform` gives b-bit one-hot features (b = `bits`): the lowest b bits of a
seeded mix of each code, one-hot in a block of 2^b per sample, k nonzeros of 1/sqrt(k) (Li & Koenig, "b-Bit
minwise hashing", WWW 2010): <f(S), f(T)> = P_b = C + (1 - C) J with C = 2^-b. With `code_bits` b, `hash`
itself returns those b-bit codes (a compact index record; its match fraction is P_b, and `kernel` reports the
corrected (P_b - C) / (1 - C)).

Identical codes on every machine: integer arithmetic only (64-bit multiply, add, xor, shifts, min), tables and
keys from the seed's raw words (featurehash.maps.randomness), golden codes in tests/golden/minhash.json.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from .. import randomness
from ..base import EMPTY_CODE, EMPTY_ROWS, CodeFamily, DiscreteCodeMap, OneHotFeatures, match_fraction, require, \
    without_default_empty_rows
from ..errors import InputError
from ..inputs import csr_parts
from ..numerics import _row_threads as row_threads
from ..numerics._counter_random import stream_keys
from ..spec import MapSpec
from . import _set_kernels, _token_lists

VARIANTS = ("one_permutation", "k_permutation", "circulant")
MAX_CIRCULANT_UNIVERSE = 2**24
# Below this many elements in a batch the pass runs on the calling thread: handing rows to other threads
# costs tens of microseconds, a batch of this size a few.
THREADED_MIN_ELEMENTS = 1 << 15
_CHUNKS_PER_THREAD = 4
TEXT_BLOCK_TOKENS = 1 << 14   # token lists joined a block of rows at a time (`_text_sets`)
_U64 = np.uint64


class MinHashParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    variant: Literal[VARIANTS] = "one_permutation"  # type: ignore[valid-type]
    bits: int = Field(default=8, ge=1, le=24, strict=True)
    code_bits: int | None = Field(default=None, ge=1, le=32, strict=True)
    empty_rows: Literal[EMPTY_ROWS["codes"]] = "error"   # featurehash.maps.base.EMPTY_ROWS

    @model_serializer(mode="wrap")
    def _omit_defaults_that_came_later(self, handler):
        """`code_bits` None and `empty_rows` "error" are left out of stored params, as GCWS does, so a spec's id
        is the same whether or not a later release adds a parameter at its default."""
        params = without_default_empty_rows(handler(self))
        if params.get("code_bits") is None:
            params.pop("code_bits", None)
        return params


class MinHashMap(DiscreteCodeMap):
    method = "minhash"
    code_family = CodeFamily.JACCARD
    Params = MinHashParams

    def __init__(self, spec: MapSpec):
        super().__init__(spec)
        seed = spec.seed
        self._key = randomness.counter_key(seed, "minhash.elements")
        self._densify_key = randomness.counter_key(seed, "minhash.densify")
        # Tables are made on first use (`materialize`): a spec of millions of samples is priced
        # (`planned_nbytes_bound`) before anything of its size is allocated.
        self._bit_keys_made = self._multipliers = self._offsets = self._probes = self._sigma = self._pi = None

    def bit_keys(self) -> np.ndarray:
        """The seeded keys of the b-bit mix, one per sample (uint64)."""
        if self._bit_keys_made is None:
            self._bit_keys_made = stream_keys(randomness.counter_key(self.spec.seed, "minhash.bits"),
                                              self.spec.n_components)
        return self._bit_keys_made

    @classmethod
    def check_spec(cls, spec: MapSpec) -> None:
        if spec.params["variant"] == "circulant":
            require(spec.input_dim <= MAX_CIRCULANT_UNIVERSE, "input_dim",
                    f"variant 'circulant' permutes the universe [0, input_dim) by tables: at most "
                    f"{MAX_CIRCULANT_UNIVERSE} (use 'one_permutation' or 'k_permutation' for larger universes)")
            require(spec.n_components <= spec.input_dim, "n_components",
                    "variant 'circulant' shifts one permutation of input_dim elements: n_components <= input_dim")
        require(spec.n_components < 2**31, "n_components", "at most 2^31 - 1 samples")

    @classmethod
    def output_dim_for(cls, spec: MapSpec) -> int:
        return spec.n_components << spec.params["bits"]

    zero_rows_refused = ("a minhash samples a set's elements, so a set needs one; params.empty_rows = 'code' "
                         "gives an empty set a reserved code")

    @property
    def empty_rows(self) -> str:
        if self.params.empty_rows == "code" or getattr(self.text_stage, "empty_code", False):
            return "code"
        return "error"

    # -- parameters ----------------------------------------------------------------------------------------

    def _circulant_tables(self) -> tuple[np.ndarray, np.ndarray]:
        if self._sigma is None:
            D, k, seed = self.spec.input_dim, self.spec.n_components, self.spec.seed
            # A stable argsort of raw words: a permutation that is the same on every machine (ties, at
            # 2^-64 a pair, are broken by position).
            sigma = np.argsort(randomness.raw_words(seed, "minhash.sigma", D), kind="stable").astype(np.uint32)
            pi = np.argsort(randomness.raw_words(seed, "minhash.pi", D), kind="stable").astype(np.uint32)
            self._pi = np.concatenate([pi, pi[:k]])
            self._sigma = sigma
        return self._sigma, self._pi

    def _tables(self) -> None:
        """The variant's tables (each made once; two threads making one at once make the same numbers)."""
        k, seed, variant = self.spec.n_components, self.spec.seed, self.params.variant
        if variant == "k_permutation" and self._offsets is None:
            self._multipliers = randomness.raw_words(seed, "minhash.multipliers", k) | _U64(1)
            self._offsets = randomness.raw_words(seed, "minhash.offsets", k)
        elif variant == "one_permutation" and self._probes is None:
            self._probes = _set_kernels.probe_table(self._densify_key, k)
        elif variant == "circulant":
            self._circulant_tables()

    def materialize(self) -> "MinHashMap":
        self._tables()
        self.bit_keys()
        return self

    @classmethod
    def _table_bytes(cls, spec: MapSpec) -> int:
        k, D = spec.n_components, spec.input_dim
        tables = {"k_permutation": 16 * k, "one_permutation": _set_kernels.probe_table_nbytes(k),
                  "circulant": 4 * (2 * D + k)}[spec.params["variant"]]
        return tables + 8 * k   # and the b-bit keys

    @classmethod
    def planned_nbytes_bound(cls, spec: MapSpec, **options) -> int:
        return cls._table_bytes(spec)

    @property
    def planned_nbytes(self) -> int:
        return self._table_bytes(self.spec)

    @property
    def nbytes(self) -> int:
        held = [self._multipliers, self._offsets, self._probes, self._sigma, self._pi, self._bit_keys_made]
        return sum(array.nbytes for array in held if array is not None)

    # -- codes ---------------------------------------------------------------------------------------------

    def hash_tokens(self, tokens, offsets, *, threads: int | None = None) -> np.ndarray:
        """Codes (n, k int64) of n sets given as one flat array of uint64 tokens and n + 1 int64 row offsets:
        set r is tokens[offsets[r]:offsets[r + 1]] (repeats allowed). The core entry point: rows, token lists
        and documents come here as their elements. `threads`: how many row threads share the batch (by default
        as many as featurehash.maps.numerics._row_threads allows; 1 keeps it on the calling thread). The GIL is
        released throughout the compiled pass."""
        tokens = np.ascontiguousarray(tokens)
        if tokens.ndim != 1 or (tokens.dtype.kind not in "ui"):
            raise InputError("tokens", "expected a 1-D array of unsigned integers (uint64 token hashes)")
        if tokens.dtype.kind == "i" and tokens.size and tokens.min() < 0:
            raise InputError("tokens", "tokens are unsigned: pass uint64 (a negative int64 is ambiguous)")
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or offsets.size < 2 or offsets[0] != 0 or offsets[-1] != tokens.size \
                or (offsets.size > 1 and (np.diff(offsets) < 0).any()):
            raise InputError("offsets", f"expected n + 1 nondecreasing row offsets from 0 to the {tokens.size} "
                                        "tokens")
        if self.params.variant == "circulant" and tokens.size and int(tokens.max()) >= self.spec.input_dim:
            raise InputError("tokens", f"variant 'circulant' takes elements of [0, input_dim = {self.spec.input_dim})")
        return self._finish(self._codes(tokens, offsets, threads))

    def _codes(self, elements: np.ndarray, offsets: np.ndarray, threads: int | None) -> np.ndarray:
        n, k = offsets.size - 1, self.spec.n_components
        if self.empty_rows == "error":
            empty = np.flatnonzero(offsets[1:] == offsets[:-1])
            if empty.size:
                raise InputError("vectors", f"row {int(empty[0])}: {self.zero_rows_refused}")
        codes = np.empty((n, k), dtype=np.int64)
        pass_rows = self._kernel(elements)
        if threads is None:
            threads = row_threads.thread_count() if elements.size >= THREADED_MIN_ELEMENTS else 1
        if threads <= 1 or n < 2:
            pass_rows(offsets, 0, n, codes)
            return codes
        row_threads.run_chunks(lambda bounds: pass_rows(offsets, bounds[0], bounds[1], codes),
                               _row_chunks(offsets, k, threads * _CHUNKS_PER_THREAD), threads)
        return codes

    def _kernel(self, elements: np.ndarray):
        """pass(offsets, first, last, codes): the variant's compiled pass over rows first..last-1."""
        variant, K = self.params.variant, _set_kernels
        self._tables()
        if variant == "one_permutation":
            key, densify, probes = self._key, self._densify_key, self._probes
            return lambda offsets, first, last, codes: K.one_permutation_rows(elements, offsets, first, last, key,
                                                                              densify, probes, codes)
        if variant == "k_permutation":
            key, a, b = self._key, self._multipliers, self._offsets
            return lambda offsets, first, last, codes: K.k_permutation_rows(elements, offsets, first, last, key, a,
                                                                            b, codes)
        sigma, pi = self._circulant_tables()
        return lambda offsets, first, last, codes: K.circulant_rows(elements, offsets, first, last, sigma, pi,
                                                                    codes)

    def _finish(self, codes: np.ndarray) -> np.ndarray:
        if self.params.code_bits is None:
            return codes
        return _set_kernels.mixed_low_bits(self.bit_keys(), codes, self.params.code_bits)

    def row_sets(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(elements, offsets) of a batch: a row's nonzero columns, or a token list's or document's token
        columns through the spec's text stage (the columns its CSR rows would have, without building them)."""
        fast = self._text_sets(X)
        if fast is not None:
            return fast
        X = self.check(X)
        parts = csr_parts(X)
        offsets, columns = _set_kernels.csr_support(np.asarray(parts.indptr), np.asarray(parts.indices),
                                                    np.asarray(parts.data))
        return columns, offsets

    def hash(self, X, *, threads: int | None = None) -> np.ndarray:
        elements, offsets = self.row_sets(X)
        return self._finish(self._codes(elements, offsets, threads))

    def _text_sets(self, X) -> tuple[np.ndarray, np.ndarray] | None:
        """Token lists and documents straight to the columns of the stage's rows: the support of the rows the
        stage makes is the set of its tokens' columns (every token of a list or document weighs > 0, and a code
        map's stage has no alternate sign), so the codes are those of the stage's CSR rows, without counting,
        sorting or building them. Documents take the stage's compiled pass (`token_hashes`: UTF-8 bytes to
        n-gram hashes, no Python string per token) for either hash; token lists a compiled loop that hashes each
        str's UTF-8 where CPython keeps it (`_token_lists`), for either hash, or where that cannot read them, a
        joined split-and-hash pass for murmur3."""
        stage = self.text_stage
        if stage is None or not isinstance(X, (list, tuple)) or not X:
            return None
        if isinstance(X[0], (str, bytes)):
            # token_hashes falls back to the stage's analyzer for what the compiled pass does not read (bytes,
            # a custom token_pattern, text with no UTF-8 form), with its errors naming the row
            hashed, offsets = stage.token_hashes(X)
            return stage_columns(hashed, stage.params.hash, self.spec.input_dim), offsets
        if not all(type(row) is list or type(row) is tuple for row in X):
            return None
        lengths = np.fromiter(map(len, X), dtype=np.int64, count=len(X))
        offsets = np.zeros(len(X) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # the seeded mode's columns come straight from the loop; scikit-learn's mode maps the 32-bit hashes
        murmur3 = stage.params.hash == "murmur3"
        found = _token_lists.token_columns(X, offsets, stage._key, self.spec.input_dim if murmur3 else 2**32)
        if found is not None:
            return (found if murmur3 else stage_columns(found, "sklearn", self.spec.input_dim)), offsets
        if not murmur3 or not lengths.all():
            return None   # the joined pass: murmur3 only, and an empty list would read as one empty token
        # Rows go in blocks of about TEXT_BLOCK_TOKENS tokens: a block's joined text, its bytes and their
        # columns stay in the core's cache, where one join of the whole batch wrote and read it from memory
        # three times over.
        parts = []
        for first, last in _token_lists.row_blocks(offsets, TEXT_BLOCK_TOKENS):
            try:   # str.join refuses a token that is not a str; encode, text with no UTF-8 form
                data = "\0".join(map("\0".join, X[first:last])).encode("utf-8")
            except (TypeError, UnicodeEncodeError):
                return None   # the stage's own check names the row at fault
            expected = int(offsets[last] - offsets[first])
            if not data:
                return None   # only empty tokens: nothing the pass could read
            columns = _set_kernels.separated_token_columns(np.frombuffer(data, dtype=np.uint8), expected,
                                                           np.uint32(stage._key), self.spec.input_dim)
            if columns.size != expected:
                return None   # a token holding U+0000
            parts.append(columns)
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)), offsets

    def transform(self, X, *, dtype=None) -> OneHotFeatures:
        """b-bit one-hot features: the lowest `bits` bits of a seeded mix of each full code."""
        elements, offsets = self.row_sets(X)
        codes = self._codes(elements, offsets, None)
        low = _set_kernels.mixed_low_bits(self.bit_keys(), codes, self.params.bits)
        low[low == EMPTY_CODE] = (1 << self.params.bits) - 1   # an empty set's block: a fixed position
        return self._one_hot(low, self.params.bits)

    def kernel(self, X, Y=None) -> np.ndarray:
        """The estimate of J: the match fraction of the codes (with `code_bits` b, corrected for the chance
        2^-b of two different samples' b bits agreeing, and clipped to [0, 1])."""
        codes_x = self.hash(X)
        codes_y = codes_x if Y is None else self.hash(Y)
        matches = match_fraction(codes_x, codes_y)   # row by row: no (n, m, k) temporary
        if self.params.code_bits is None:
            return matches
        chance = 2.0 ** -self.params.code_bits
        return np.clip((matches - chance) / (1.0 - chance), 0.0, 1.0)

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        """J of the rows' sets (their nonzero columns, or their tokens' columns through the text stage)."""
        A = _indicator(*self.row_sets(X), self.spec.input_dim)
        B = A if Y is None else _indicator(*self.row_sets(Y), self.spec.input_dim)
        return jaccard_matrix(A, B)


def stage_columns(hashed: np.ndarray, hash_mode: str, width: int) -> np.ndarray:
    """The columns (uint64) a `hashing` stage of `width` columns gives tokens of these 32-bit hashes: the high
    bits of hash x width in the seeded mode, scikit-learn's |signed hash| mod width (int32 min wrapping as
    HashingVectorizer's) in "sklearn" mode (featurehash.maps.text.hashing)."""
    hashed = hashed.astype(np.uint64, copy=False)
    if hash_mode == "murmur3":
        return (hashed * _U64(width)) >> _U64(32)
    signed = hashed.astype(np.uint32).view(np.int32).astype(np.int64)
    columns = np.where(signed == -(2**31), (2**31 - width) % width, np.abs(signed) % width)
    return columns.astype(np.uint64)


def _indicator(elements: np.ndarray, offsets: np.ndarray, width: int) -> sp.csr_matrix:
    rows = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    matrix = sp.csr_matrix((np.ones(elements.size), (rows, elements.astype(np.int64))),
                           shape=(offsets.size - 1, max(width, int(elements.max(initial=0)) + 1)))
    matrix.data[:] = 1.0   # repeated elements were summed
    return matrix


def jaccard_matrix(A: sp.csr_matrix, B: sp.csr_matrix) -> np.ndarray:
    """|S n T| / |S u T| for every pair of rows of two 0/1 CSR matrices of the same width (1 for two empty sets)."""
    width = max(A.shape[1], B.shape[1])
    A = sp.csr_matrix(A, shape=(A.shape[0], width)) if A.shape[1] != width else A
    B = sp.csr_matrix(B, shape=(B.shape[0], width)) if B.shape[1] != width else B
    inter = (A @ B.T).toarray()
    sizes_a = np.asarray(A.sum(axis=1)).ravel()
    sizes_b = np.asarray(B.sum(axis=1)).ravel()
    union = sizes_a[:, None] + sizes_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 1.0)


def _row_chunks(offsets: np.ndarray, k: int, count: int) -> list[tuple[int, int]]:
    """Row ranges of about equal work (elements plus k per row) for `count` chunks."""
    n = offsets.size - 1
    work = offsets + k * np.arange(n + 1, dtype=np.int64)
    cuts = np.searchsorted(work, np.linspace(0, work[-1], count + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], cuts, [n]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
