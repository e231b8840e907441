"""The hashing trick: tokens hashed into `n_components` columns, with no vocabulary to store (Weinberger,
Dasgupta, Langford, Smola & Attenberg, "Feature Hashing for Large Scale Multitask Learning", ICML 2009;
Shi et al., JMLR 2009; scikit-learn's FeatureHasher and HashingVectorizer).

Kernel: the linear kernel <x, y> of the rows' token vectors x (x_t = the weight of token t: its count,
1 if present, or 1 + ln(count)), each divided by its l2 or l1 norm when `norm` says so. The map is
phi(x)_j = sum_{t : h(t) = j} xi(t) x_t, with h a hash into [0, n_components) and xi(t) in {-1, +1} a second
hash (`alternate_sign`); then E[<phi(x), phi(y)>] = <x, y> (Weinberger et al., Lemma 2: unbiased, with
variance O(1 / n_components) for bounded ||x||_inf / ||x||_2), before normalisation. With a norm the hashed
vector is normalised (its norm is hashed too, as scikit-learn does), which makes the estimate of the cosine
slightly biased, O(1 / n_components). Without signs, colliding tokens only add: <phi(x), phi(y)> >= <x, y>.
`exact_kernel` computes <x, y> on the tokens themselves.

Hashes (`params.hash`):
- "murmur3" (default): MurmurHash3 x86 32-bit of the token's UTF-8 bytes, keyed by a 32-bit key drawn from the
  spec's seed, so that two seeds give independent maps; column = floor(h n / 2^32) (Lemire's multiply-shift:
  every column gets 2^32 / n hashes to within one, at any n, where h mod n favours the low columns when n is
  not a power of two), sign = the lowest bit of h (independent of the column's high bits). Tokens are
  weighted per row before hashing (binary: a token present counts 1, whatever columns collide).
- "sklearn": scikit-learn's rules bit for bit: seed 0 whatever the spec's seed, h read as a signed 32-bit
  integer, column = |h| mod n (h = -2^31: (2^31 - n) mod n), sign = + for h >= 0; tokens of weight 0 are
  skipped; the matrix is summed per column (explicit zeros from cancelling signs kept); "binary" then sets
  every stored value to 1 (after hashing, as HashingVectorizer(binary=True)), and the norm divides each row by
  its norm summed in order (sklearn.preprocessing.normalize). HashingVectorizer(n_features=n, ...) is
  `{"method": "hashing", "n_components": n, "params": {"hash": "sklearn", ...}}` with the same analyzer
  settings, on documents; FeatureHasher(input_type="string") takes token lists and FeatureHasher() weighted
  tokens, both with `"norm": "none"`.

Inputs (featurehash.maps.text.token_rows): documents (analysed by the spec's analyzer,
featurehash.maps.text.analyzers), token lists, or weighted tokens. Output: a scipy CSR matrix (n,
n_components), float32 unless float64 is asked for; `input_dim` is 1 (a row is one document).
float32 output: the counts are summed exactly (integers), then each row's norm is summed in float64 from the
float32 values and each value divided in float64 and rounded once to float32, as scikit-learn's
HashingVectorizer(dtype=np.float32) does; so float32 output equals scikit-learn's float32 bit for bit, and the
float64 output equals its float64 (the default) bit for bit. With count or binary weights (integers whose squares
are exact in float32) each float32 value is the float64 output rounded once to the nearest float32 (relative
error <= 2^-24); sublinear weights are rounded to float32 before the norm, so their float32 rows may differ from
the rounded float64 ones by a few ulps.

Cost: a batch of `str` documents with a built-in analyzer (word with the default token pattern, char, char_wb)
takes one compiled pass from their UTF-8 bytes to the hashes of their tokens or n-grams and on to the CSR rows
(featurehash.maps.text.documents, _compiled_text: O(total characters x n-gram sizes), no Python string per
token, the rows split over the row threads without the GIL); a custom token_pattern, bytes rows, token lists
and weighted tokens take Python's analyzer and `re` (as scikit-learn's) and one compiled hash pass over the
tokens' bytes. Both give the same numbers (tests/maps/text/test_compiled_text.py). Memory O(tokens), never
O(n_components) per row.
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ..base import FeatureMap, require
from ..errors import InputError
from ..inputs import output_dtype
from ..spec import MapSpec
from . import _compiled_text as compiled
from ._murmur import murmur3_32_many, token_bytes
from ._sparse_rows import normalize_rows
from .analyzers import ANALYZERS, DEFAULT_TOKEN_PATTERN, Analyzer
from .documents import CompiledAnalyzer, encoded, hash_key
from .token_rows import TokenRows, is_text_batch, token_rows

_INT32_MIN = -(2**31)


class HashingParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    analyzer: Literal[ANALYZERS] = "word"  # type: ignore[valid-type]
    ngram_range: tuple[int, int] = (1, 1)
    lowercase: bool = True
    strip_accents: Literal["unicode", "ascii"] | None = None
    token_pattern: str = Field(default=DEFAULT_TOKEN_PATTERN, max_length=1000)
    hash: Literal["murmur3", "sklearn"] = "murmur3"   # before weighting, whose check reads it
    weighting: Literal["count", "binary", "sublinear"] = "count"
    norm: Literal["l2", "l1", "none"] = "l2"
    alternate_sign: bool = True

    @field_validator("weighting")
    @classmethod
    def _weighting(cls, value: str, info: ValidationInfo) -> str:
        if value == "sublinear" and info.data.get("hash") == "sklearn":
            raise ValueError("'sublinear' is not a scikit-learn hashing option; use hash 'murmur3'")
        return value

    @field_validator("ngram_range")
    @classmethod
    def _ngram_range(cls, value: tuple[int, int]) -> tuple[int, int]:
        low, high = value
        if not 1 <= low <= high <= 64:
            raise ValueError("needs 1 <= low <= high <= 64")
        return value

    @field_validator("token_pattern")
    @classmethod
    def _token_pattern(cls, value: str) -> str:
        try:
            groups = re.compile(value).groups
        except re.error as exc:
            raise ValueError(f"not a regular expression ({exc})") from None
        if groups > 1:
            raise ValueError("at most one capturing group (its match is the token)")
        return value


class HashingMap(FeatureMap):
    method = "hashing"
    Params = HashingParams
    text_input = True
    empty_code = False   # as a front stage of gcws: whether empty documents get EMPTY_TEXT_CODE (stage.py)

    def __init__(self, spec: MapSpec):
        super().__init__(spec)
        p = self.params
        self.analyzer = Analyzer(p.analyzer, tuple(p.ngram_range), p.lowercase, p.strip_accents, p.token_pattern)
        self._key = hash_key(p.hash, spec.seed)
        self._compiled = CompiledAnalyzer(self.analyzer) if CompiledAnalyzer.supports(self.analyzer) else None

    @classmethod
    def check_spec(cls, spec: MapSpec) -> None:
        require(spec.input_dim == 1, "input_dim", "a hashing map takes one document (or token list) per row: "
                                                  "input_dim is 1")

    def describe(self) -> dict:
        return {**super().describe(), "features": "sparse"}

    @property
    def nbytes(self) -> int:
        return 0

    @property
    def planned_nbytes(self) -> int:
        return 0

    def accepts(self, X) -> bool:
        """Whether X is text this map reads (a front stage leaves numeric input to the map after it)."""
        return isinstance(X, TokenRows) or is_text_batch(X)

    def check(self, X, field: str = "documents", *, first_row: int = 0) -> TokenRows:
        return X if isinstance(X, TokenRows) else token_rows(X, self.analyzer, field)

    def hashes(self, rows: TokenRows) -> np.ndarray:
        """uint32 hash of every token; InputError naming the row of a token with no UTF-8 form."""
        try:
            data, starts = token_bytes(rows.tokens)
        except UnicodeEncodeError:
            bad = next(i for i, token in enumerate(rows.tokens) if not _encodes(token))
            row = int(np.searchsorted(rows.starts, bad, side="right") - 1)
            raise InputError("documents", f"row {row}: text with no UTF-8 form (a lone surrogate)") from None
        return murmur3_32_many(data, starts, self._key)

    def transform(self, X, *, dtype=None) -> sp.csr_matrix:
        dtype = output_dtype(dtype)
        batch = encoded(X) if self._compiled is not None and isinstance(X, (list, tuple)) and X else None
        if batch is not None:
            return self._compiled_features(X, *batch, dtype)
        rows = self.check(X)
        hashed = self.hashes(rows)
        if self.params.hash == "sklearn":
            return self._sklearn_features(rows, hashed, dtype)
        return self._features(rows, hashed, dtype)

    def token_hashes(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(uint64 hashes, int64 row offsets): the 32-bit hash of every token of every row (documents analysed
        by the spec's analyzer, token lists, or weighted tokens' tokens), in order, repeats kept."""
        batch = encoded(X) if self._compiled is not None and isinstance(X, (list, tuple)) and X else None
        if batch is None:
            rows = self.check(X)
            return self.hashes(rows).astype(np.uint64), rows.starts
        parts = self._compiled.map_rows(X, *batch, self._key, lambda hashes, counts: (hashes, counts))
        offsets = np.zeros(len(X) + 1, dtype=np.int64)
        np.cumsum(np.concatenate([counts for _, counts in parts]), out=offsets[1:])
        return np.concatenate([hashes for hashes, _ in parts]).astype(np.uint64), offsets

    def _compiled_features(self, X, data: np.ndarray, starts: np.ndarray, dtype) -> sp.csr_matrix:
        """`transform` of documents through the compiled pass, chunk by chunk on the row threads: every value is
        an integer count (or 1), summed exactly, so the rows are bit for bit the numpy path's below; weighting
        "sublinear" (a logarithm, whose last bit numpy and libm may round apart) is weighted by the numpy path."""
        p, n = self.params, self.spec.n_components
        norm = {"none": compiled.NORM_NONE, "l2": compiled.NORM_L2, "l1": compiled.NORM_L1}[p.norm]
        binary = p.weighting == "binary"

        def rows(hashes, counts):
            if p.weighting == "sublinear":
                starts_ = np.zeros(counts.size + 1, dtype=np.int64)
                np.cumsum(counts, out=starts_[1:])
                block = self._features(TokenRows([], starts_, None, "documents"), hashes, dtype)
                return np.diff(block.indptr), block.indices, block.data
            indices = np.empty(hashes.size, dtype=np.int32)
            values = np.empty(hashes.size, dtype=dtype)
            if p.hash == "sklearn":
                nnz = compiled.sklearn_rows(hashes, counts, n, p.alternate_sign, binary, indices, values)
            else:
                nnz = compiled.seeded_rows(hashes, counts, n, p.alternate_sign, binary, indices, values)
            used = int(nnz.sum())
            indices, values = indices[:used], values[:used]
            if norm != compiled.NORM_NONE:
                indptr = np.zeros(nnz.size + 1, dtype=np.int64)
                np.cumsum(nnz, out=indptr[1:])
                compiled.normalize(values, indptr, norm)
            return nnz, indices, values

        parts = self._compiled.map_rows(X, data, starts, self._key, rows)
        indptr = np.zeros(len(X) + 1, dtype=np.int64)
        np.cumsum(np.concatenate([nnz for nnz, _, _ in parts]), out=indptr[1:])
        indices = np.concatenate([part[1] for part in parts])
        values = np.concatenate([part[2] for part in parts])
        if indptr[-1] < 2**31:
            indptr = indptr.astype(np.int32)
        features = sp.csr_matrix((values, indices, indptr), shape=(len(X), n))
        features.has_sorted_indices = True
        features.has_canonical_format = True
        return features

    def _sklearn_features(self, rows: TokenRows, hashed: np.ndarray, dtype) -> sp.csr_matrix:
        n = self.spec.n_components
        signed = hashed.view(np.int32).astype(np.int64)
        columns = np.where(signed == _INT32_MIN, (2**31 - n) % n, np.abs(signed) % n)
        values = np.ones(hashed.size) if rows.weights is None else rows.weights.copy()
        if self.params.alternate_sign:
            values[signed < 0] *= -1.0
        kept = values != 0.0
        indptr = np.zeros(rows.n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows.rows[kept], minlength=rows.n_rows), out=indptr[1:])
        features = sp.csr_matrix((values[kept].astype(dtype), columns[kept].astype(np.int32), indptr),
                                 shape=(rows.n_rows, n))
        features.sum_duplicates()
        if self.params.weighting == "binary":   # "sublinear" is refused with this hash (HashingParams)
            features.data.fill(1)
        normalize_rows(features.data, features.indptr, self.params.norm)
        return features

    def _features(self, rows: TokenRows, hashed: np.ndarray, dtype) -> sp.csr_matrix:
        n = self.spec.n_components
        row_of, hashes, weights = _weighted_tokens(rows.rows, hashed.astype(np.int64), rows.weights,
                                                   self.params.weighting)
        columns = ((hashes.astype(np.uint64) * np.uint64(n)) >> np.uint64(32)).astype(np.int32)
        if self.params.alternate_sign:
            weights = np.where(hashes & 1, weights, -weights)
        indptr = np.zeros(rows.n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(row_of, minlength=rows.n_rows), out=indptr[1:])
        features = sp.csr_matrix((weights.astype(dtype), columns, indptr), shape=(rows.n_rows, n))
        features.sum_duplicates()
        features.eliminate_zeros()
        normalize_rows(features.data, features.indptr, self.params.norm)
        return features

    def kernel(self, X, Y=None) -> np.ndarray:
        ZX = self.transform(X, dtype=np.float64)
        ZY = ZX if Y is None else self.transform(Y, dtype=np.float64)
        return (ZX @ ZY.T).toarray()

    def exact_kernel(self, X, Y=None) -> np.ndarray:
        """<x, y> of the weighted, normalised token vectors, each distinct token its own coordinate."""
        rows_x = self.check(X, "x")
        rows_y = rows_x if Y is None else self.check(Y, "y")
        vocabulary: dict[str, int] = {}
        ids_x = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in rows_x.tokens), np.int64)
        ids_y = ids_x if Y is None else np.fromiter((vocabulary.setdefault(t, len(vocabulary))
                                                     for t in rows_y.tokens), np.int64)
        vectors = [self._exact_vectors(rows, ids, len(vocabulary)) for rows, ids in ((rows_x, ids_x), (rows_y, ids_y))]
        return (vectors[0] @ vectors[1].T).toarray()

    def _exact_vectors(self, rows: TokenRows, ids: np.ndarray, width: int) -> sp.csr_matrix:
        row_of, token, weights = _weighted_tokens(rows.rows, ids, rows.weights, self.params.weighting)
        indptr = np.zeros(rows.n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(row_of, minlength=rows.n_rows), out=indptr[1:])
        vectors = sp.csr_matrix((weights, token, indptr), shape=(rows.n_rows, max(width, 1)))
        normalize_rows(vectors.data, vectors.indptr, self.params.norm)
        return vectors


def _weighted_tokens(row_of: np.ndarray, token: np.ndarray, weights: np.ndarray | None, weighting: str):
    """Per distinct (row, token) in sorted order: (row, token, weight) with the weighting applied; tokens whose
    weight ends up 0 are dropped (a weight summing to <= 0 under "sublinear" too)."""
    # tokens are 32-bit hashes or vocabulary ids (< 2^32), rows < 2^31: one int64 key per (row, token)
    distinct, inverse = np.unique((row_of << 32) | token, return_inverse=True)
    distinct_row, distinct_token = distinct >> 32, distinct & 0xFFFFFFFF
    inverse = inverse.ravel()
    total = np.bincount(inverse, weights=weights, minlength=distinct_row.size).astype(np.float64, copy=False)
    if weighting == "binary":
        total = (total != 0).astype(np.float64)
    elif weighting == "sublinear":
        positive = total > 0
        total = np.where(positive, 1.0 + np.log(np.where(positive, total, 1.0)), 0.0)
    kept = total != 0
    return distinct_row[kept], distinct_token[kept], total[kept]


def _encodes(token: str) -> bool:
    try:
        token.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
