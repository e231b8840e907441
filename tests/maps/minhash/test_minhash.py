"""Set minhash (app/featurehash/maps/minhash/minhash.py) against the exact Jaccard similarity.

Statistics: each sample's codes of S and T agree with probability J(S, T), so a pair's match fraction has mean
J and, for independent samples ("k_permutation"), variance J (1 - J) / k; one-permutation hashing with optimal
densification has the same mean and a variance close to it (Shrivastava 2017), C-MinHash a variance no larger
(Li & Li 2022). Per family of planted pairs: every pair within 4 binomial sd (floored at 1/k), no common bias
(the standardised mean within 4), and the mean squared z-score (mean 1, sd sqrt(2/n) for binomial pairs) within 4
of its standard errors of 1, so over- or under-dispersion (correlated or non-random samples) fails. One-permutation
hashing is held to its own law: below the binomial variance on sets much longer than k (bins sampled without
replacement), above it on sets much shorter than k (densified bins copy the few filled ones), measured 0.72 at
|S| = 500 and 1.3-1.5 at |S| = 5-20 for k = 128; its bias is held to the same bound. Per pair, 4.5 sd: 200 pairs
of a correct sampler trip it with probability ~0.1%. Seeds fixed: the outcome is deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path

import numba
import numpy as np
import pytest
import scipy.sparse as sp

from featurehash.maps import InputError, SpecError, create_map, resolve_spec
from featurehash.maps.base import EMPTY_CODE
from featurehash.maps.minhash import _set_kernels, _token_lists
from featurehash.maps.minhash import minhash as minhash_module

GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "golden" / "minhash.json").read_text())
SPEC_FIELDS = ("method", "input_dim", "n_components", "seed", "params")
VARIANTS = ("one_permutation", "k_permutation", "circulant")
Z_MAX = 4.0
PAIR_Z_MAX = 4.5


def minhash(input_dim: int = 2**20, n_components: int = 128, seed: int = 5, **params):
    return create_map({"method": "minhash", "input_dim": input_dim, "n_components": n_components, "seed": seed,
                       "params": params})


def planted_pairs(rng, pairs: int, size: int, universe: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`pairs` pairs of sets of `size` distinct elements of [0, universe) sharing m elements, m spread over
    [0, size]: (elements, offsets) of the 2 * pairs sets (pair p is rows 2p, 2p + 1) and the exact J."""
    shared = np.linspace(0, size, pairs).round().astype(np.int64)
    rows, exact = [], np.empty(pairs)
    for p, m in enumerate(shared):   # building the test data, not the code under test
        chosen = rng.choice(universe, size=2 * size - m, replace=False).astype(np.uint64)
        rows += [chosen[:size], np.concatenate([chosen[:m], chosen[size:]])]
        exact[p] = m / (2 * size - m)
    offsets = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int64)
    return np.concatenate(rows), offsets, exact


def pair_estimates(codes: np.ndarray) -> np.ndarray:
    return (codes[0::2] == codes[1::2]).mean(axis=1)


def assert_binomial(estimate: np.ndarray, exact: np.ndarray, k: int, what: str, *, dispersion: bool = True,
                    low: float | None = None, high: float | None = None) -> dict:
    """The module docstring's checks; `low` / `high` replace the binomial bounds of the mean z^2 (one side
    each), for a law whose variance is known to differ from the binomial."""
    sd = np.maximum(np.sqrt(exact * (1 - exact) / k), 1 / k)
    z = (estimate - exact) / sd
    inner = (exact > 0.01) & (exact < 0.99)
    mean_square = float(np.mean(z[inner] ** 2))
    spread = max(1.0, mean_square)
    assert np.abs(z).max() <= PAIR_Z_MAX * np.sqrt(spread), f"{what}: a pair at z = {z[np.argmax(np.abs(z))]:.2f}"
    bias = float(np.mean(z[inner]) * np.sqrt(inner.sum() / spread))
    assert abs(bias) <= Z_MAX, f"{what}: common bias, standardised sum {bias:.2f}"
    if dispersion:
        tolerance = Z_MAX * np.sqrt(2 / inner.sum())
        assert (1 - tolerance if low is None else low) <= mean_square <= (1 + tolerance if high is None else high), \
            f"{what}: mean z^2 = {mean_square:.3f}"
    return {"mean_z2": mean_square, "bias": bias}


# ---------------------------------------------------------------- 1. the collision law


@pytest.mark.parametrize("variant", ["one_permutation", "k_permutation"])
@pytest.mark.parametrize("size", [5, 50, 500])
def test_match_fraction_is_jaccard_on_token_sets(variant, size):
    elements, offsets, exact = planted_pairs(np.random.default_rng(size), 200, size, 2**62)
    k = 128
    codes = minhash(n_components=k, seed=size, variant=variant).hash_tokens(elements, offsets)
    bounds = {}
    if variant == "one_permutation":
        bounds = {"low": 0.0} if size > k else {"high": 2.0} if size < k / 4 else {}
    assert_binomial(pair_estimates(codes), exact, k, f"{variant} |S| = {size}", **bounds)


def test_match_fraction_is_jaccard_on_consecutive_columns():
    """Structured input (runs of consecutive columns) is what a weak permutation gets wrong."""
    k, exact, rows = 128, [], []
    for shift in range(0, 200, 2):
        rows += [np.arange(100), np.arange(shift, shift + 100)]
        exact.append(max(0, 100 - shift) / (100 + min(shift, 100)))
    X = sp.csr_matrix((np.ones(200 * 100), np.concatenate(rows), np.arange(0, 200 * 100 + 1, 100)), shape=(200, 1000))
    for variant in VARIANTS:
        codes = minhash(1000, k, seed=9, variant=variant).hash(X)
        assert_binomial(pair_estimates(codes), np.array(exact), k, f"{variant} on runs", dispersion=False)


def test_circulant_is_unbiased_with_lower_variance_than_binomial_on_dense_sets():
    """C-MinHash's claim (Li & Li 2022, Theorem 3.4 and their Figure 3): over random (sigma, pi), the estimate is
    unbiased and its variance is below J (1 - J) / k, by much when the union fills the universe."""
    D = k = 64
    rng = np.random.default_rng(3)
    S = rng.random(D) < 0.6
    T = S.copy()
    flip = rng.choice(D, 20, replace=False)
    T[flip] = ~T[flip]
    X = sp.csr_matrix(np.vstack([S, T]).astype(float))
    J = (S & T).sum() / (S | T).sum()
    estimates = {}
    for variant in ("circulant", "k_permutation"):
        estimates[variant] = np.array([create_map({"method": "minhash", "input_dim": D, "n_components": k,
                                                   "seed": seed, "params": {"variant": variant}}).kernel(X)[0, 1]
                                       for seed in range(400)])
    binomial = J * (1 - J) / k
    for variant, values in estimates.items():
        assert abs(values.mean() - J) <= Z_MAX * np.sqrt(binomial / values.size), variant
    ratio = estimates["circulant"].var() / binomial
    assert ratio < 0.6, f"C-MinHash variance / binomial = {ratio:.2f}"
    # the classical one is at the binomial variance (chi-square with 399 dof: 4 sd is about +-0.28)
    assert abs(estimates["k_permutation"].var() / binomial - 1) < 0.3


# ---------------------------------------------------------------- 2. one set, many forms: the same codes


@pytest.mark.parametrize("variant", VARIANTS)
def test_dense_csr_tokens_and_explicit_zeros_give_the_same_codes(variant):
    rng = np.random.default_rng(1)
    X = np.where(rng.random((9, 300)) < 0.05, rng.standard_normal((9, 300)), 0.0)
    X[:, 0] = 1.0   # no empty row
    m = minhash(300, 40, seed=2, variant=variant)
    codes = m.hash(X)
    assert codes.dtype == np.int64 and codes.shape == (9, 40) and (codes >= 0).all()
    np.testing.assert_array_equal(m.hash(sp.csr_matrix(X)), codes)
    np.testing.assert_array_equal(m.hash((X != 0) * 7.5), codes)   # values and signs do not matter
    with_zeros = sp.csr_matrix(X)
    with_zeros.data[::3] = 0.0   # explicit zeros are not in the set
    np.testing.assert_array_equal(m.hash(with_zeros), m.hash(with_zeros.toarray()))
    csr = sp.csr_matrix(X)
    np.testing.assert_array_equal(m.hash_tokens(csr.indices.astype(np.uint64), csr.indptr), codes)
    repeated = np.concatenate([csr.indices, csr.indices]).astype(np.uint64)   # every token twice, in another order
    order = np.argsort(np.repeat(np.arange(9), np.diff(csr.indptr)).tolist() * 2, kind="stable")
    np.testing.assert_array_equal(m.hash_tokens(repeated[order], 2 * csr.indptr), codes)
    np.testing.assert_array_equal(np.vstack([m.hash(X[r:r + 1]) for r in range(9)]), codes)   # batch-free


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser in numpy's wrapping uint64 arithmetic (the compiled `mix`)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def one_permutation_reference(m, elements: np.ndarray, offsets) -> np.ndarray:
    """The module docstring's one-permutation codes, written from the formula: y = mix(x xor key), bin
    floor(y k / 2^64) by the top 32 bits, the least y of each bin, empty bins from their probe sequence, >> 1."""
    k = m.spec.n_components
    m.materialize()
    codes = np.empty((len(offsets) - 1, k), dtype=np.int64)
    for row in range(len(offsets) - 1):
        y = _mix(elements[offsets[row]:offsets[row + 1]] ^ m._key)
        bins = ((y >> np.uint64(32)) * np.uint64(k)) >> np.uint64(32)
        minima = np.full(k, np.iinfo(np.uint64).max, dtype=np.uint64)
        np.minimum.at(minima, bins.astype(np.int64), y)
        filled = minima.copy()
        for j in np.flatnonzero(minima == np.iinfo(np.uint64).max):
            attempt = 1
            while filled[j] == np.iinfo(np.uint64).max:
                filled[j] = minima[_set_kernels.probe(m._densify_key, j, attempt, k)]
                attempt += 1
        codes[row] = (filled >> np.uint64(1)).astype(np.int64)
    return codes


@pytest.mark.parametrize("k", [1, 2, 3, 100, 128, 256])
def test_one_permutation_codes_are_the_formula_for_every_k(k):
    """The pass takes the bin as the top log2 k bits when k is a power of two and by the multiply otherwise:
    both are floor(y k / 2^64), so both give the formula's codes, for sets shorter and longer than k."""
    rng = np.random.default_rng(k)
    sizes = [1, 3, 40, 700]
    elements = rng.integers(0, 2**64, size=sum(sizes), dtype=np.uint64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    m = minhash(n_components=k, seed=k + 1)
    np.testing.assert_array_equal(m.hash_tokens(elements, offsets), one_permutation_reference(m, elements, offsets))


@pytest.mark.parametrize("variant", ["one_permutation", "k_permutation"])
def test_threads_do_not_change_codes(variant):
    elements, offsets, _ = planted_pairs(np.random.default_rng(4), 300, 200, 2**62)
    m = minhash(n_components=64, variant=variant)
    one = m.hash_tokens(elements, offsets, threads=1)
    np.testing.assert_array_equal(m.hash_tokens(elements, offsets, threads=2), one)
    np.testing.assert_array_equal(m.hash_tokens(elements, offsets), one)


def test_short_sets_densify_past_the_cached_probe_tries():
    """A one-element set fills every bin from its one bin: with k = 256 most bins need more tries than the
    table caches, computed by the same hash."""
    m = minhash(n_components=256)
    codes = m.hash_tokens(np.array([12345], dtype=np.uint64), [0, 1])
    assert np.unique(codes).size == 1 and codes[0, 0] >= 0
    for k in (32, 2**16 + 3):   # uint16 bins, 32 tries; uint32 bins, 16 tries
        probes = _set_kernels.probe_table(np.uint64(99), k)
        assert probes.shape == (_set_kernels.probes_cached(k), k) and probes.nbytes == 64 * k
        bins = range(32) if k == 32 else (0, 1, 40_000, k - 1)
        computed = [[_set_kernels.probe(np.uint64(99), j, t + 1, k) for j in bins] for t in range(probes.shape[0])]
        np.testing.assert_array_equal(probes[:, list(bins)], computed)


def test_the_k_loop_is_vectorised():
    """The inner loop over samples compiles to vector integer multiply and min (LLVM IR vector types): the
    reason the pass keeps up with a compiled peer."""
    m = minhash(n_components=64, variant="k_permutation").materialize()
    fresh = numba.njit(nogil=True)(_set_kernels.k_permutation_rows.py_func)   # cached code cannot be inspected
    codes = np.empty((1, 64), dtype=np.int64)
    fresh(np.arange(10, dtype=np.uint64), np.array([0, 10]), 0, 1, m._key, m._multipliers, m._offsets, codes)
    np.testing.assert_array_equal(codes, m.hash_tokens(np.arange(10, dtype=np.uint64), [0, 10]))
    ir = "".join(fresh.inspect_llvm().values())
    assert any(f"<{w} x i64>" in ir for w in (2, 4, 8)), "no vector of 64-bit lanes in the k-permutation pass"
    assert "umin" in ir or "icmp ult <" in ir


# ---------------------------------------------------------------- 3. text through the spec's stage


def test_token_lists_and_documents_hash_as_the_stage_rows():
    m = create_map({"method": "minhash", "n_components": 64, "seed": 3, "input": {"hashing": {}}})
    lists = [["a", "b", "c", "d"], ["a", "b", "c", "e", "e"], ["naïve", "café"], ["x"]]
    rows = m.text_stage.transform(lists, dtype=np.float64)   # the stage's CSR rows (the general path)
    codes = m.hash(lists)
    np.testing.assert_array_equal(codes, m.hash(rows))
    # documents through the analyzer (words of two or more characters by default)
    np.testing.assert_array_equal(m.hash(["aa bb cc dd", "Aa bb cc ee ee"]),
                                  m.hash([["aa", "bb", "cc", "dd"], ["aa", "bb", "cc", "ee", "ee"]]))
    np.testing.assert_allclose(m.exact_kernel(lists[:2]), [[1, 0.6], [0.6, 1]])
    # what the joined fast path cannot read goes the general way, with the same codes
    odd = [["a\0b", "c"], ("a", "b\0"), ["", "d"]]
    np.testing.assert_array_equal(m.hash(odd), m.hash(m.text_stage.transform(odd, dtype=np.float64)))
    with pytest.raises(InputError):
        m.hash([["a", 3]])
    with pytest.raises(InputError):
        m.hash([["a"], []])   # an empty set, refused by default
    coded = create_map({"method": "minhash", "n_components": 8, "seed": 3,
                        "input": {"hashing": {}, "empty": "code"}})
    assert (coded.hash([["a"], []])[1] == EMPTY_CODE).all()


DOCUMENTS = ["The quick brown fox jumps over the lazy dog near the river bank today",
             "the quick brown fox jumped over a lazy dog near the river bank today!",
             "Ünïcödé naïve café déjà vu über straße Œuvre ﬁne ΣΊΣΥΦΟΣ ΟΔΟΣ σοφός",
             "中文 文档 的 分词 测试 日本語 の テキスト 한국어 텍스트 😀 emoji 🎉 row",
             "a b c d e f g h i j k l m n o p q r s t u v w x y z aa bb cc dd ee ff gg hh",
             "tabs\tand\u00a0non-breaking\u2003spaces, and  dots.in.words and under_scores too"]


def _python_path_codes(m, documents):
    """The codes as the minhash map computed them before the compiled pass: the stage's Python analyzer, its
    MurmurHash3 of each token's UTF-8 bytes, and the stage's column formula."""
    rows = m.text_stage.check(documents)
    columns = minhash_module.stage_columns(m.text_stage.hashes(rows), m.text_stage.params.hash, m.spec.input_dim)
    return m.hash_tokens(columns, rows.starts)


@pytest.mark.parametrize("hash_mode", ["murmur3", "sklearn"])
@pytest.mark.parametrize("stage", [{"ngram_range": [3, 3]}, {"ngram_range": [5, 5]}, {"ngram_range": [1, 2]},
                                   {"ngram_range": [3, 3], "strip_accents": "unicode"},
                                   {"analyzer": "char_wb", "ngram_range": [3, 5]}])
@pytest.mark.parametrize("k", [128, 256])
def test_documents_through_the_compiled_pass_give_the_stage_rows_codes(hash_mode, stage, k):
    """Documents go from UTF-8 bytes through the stage's compiled pass to the minhash kernel, with no CSR: the
    codes equal those of the stage's CSR rows and those of the Python analyzer's tokens, bit for bit."""
    m = create_map({"method": "minhash", "n_components": k, "seed": 11,
                    "input": {"hashing": {**stage, "hash": hash_mode}}})
    documents = [d for d in DOCUMENTS if m.text_stage.check([d]).starts[-1] > 0]
    assert len(documents) >= 4
    codes = m.hash(documents)
    assert codes.shape == (len(documents), k)
    np.testing.assert_array_equal(codes, m.hash(m.text_stage.transform(documents, dtype=np.float64)))
    np.testing.assert_array_equal(codes, _python_path_codes(m, documents))
    assert not (codes[0] == codes[2]).all()


def test_documents_take_the_compiled_pass_and_fall_back_with_the_same_codes(monkeypatch):
    m = create_map({"method": "minhash", "n_components": 64, "seed": 2, "input": {"hashing": {"ngram_range": [3, 3]}}})
    expected = _python_path_codes(m, DOCUMENTS)

    def refused(*args, **kwargs):
        raise AssertionError("str documents went through the Python analyzer or the CSR rows")

    with monkeypatch.context() as patched:
        patched.setattr(m.text_stage, "check", refused)
        patched.setattr(m.text_stage, "transform", refused)
        np.testing.assert_array_equal(m.hash(DOCUMENTS), expected)
        # the row threads split the pass by chunks of bytes: a batch of many chunks gives every row's codes
        many = DOCUMENTS * 4000
        np.testing.assert_array_equal(m.hash(many), np.tile(expected, (4000, 1)))
    # bytes rows and a custom token pattern keep the analyzer, with the same codes
    np.testing.assert_array_equal(m.hash([d.encode() for d in DOCUMENTS]), expected)
    custom = create_map({"method": "minhash", "n_components": 64, "seed": 2,
                         "input": {"hashing": {"ngram_range": [3, 3], "token_pattern": r"(?u)\b\w+\b"}}})
    np.testing.assert_array_equal(custom.hash(DOCUMENTS), _python_path_codes(custom, DOCUMENTS))
    with pytest.raises(InputError, match="row 1"):
        m.hash(["fine words here", "a lone \ud800 surrogate"])
    with pytest.raises(InputError, match="row 1"):
        m.hash(["three words here", "two words"])   # no 3-shingle: an empty set, refused by default
    coded = create_map({"method": "minhash", "n_components": 8, "seed": 3,
                        "input": {"hashing": {"ngram_range": [3, 3]}, "empty": "code"}})
    assert (coded.hash(["three words here", ""])[1] == EMPTY_CODE).all()


def test_the_token_list_pass_is_the_stages_murmur3_columns_for_any_length_and_alphabet():
    """Tokens of 0-12 characters, ASCII and multi-byte UTF-8 (every tail length of MurmurHash3's 4-byte blocks):
    the compiled split-and-hash pass gives the columns of the stage's CSR rows, hence the same codes."""
    m = create_map({"method": "minhash", "n_components": 32, "seed": 9, "input": {"hashing": {}}})
    rng = np.random.default_rng(1)
    alphabet = list("abcdefghij") + ["é", "ß", "中", "😀"]
    rows = [["".join(rng.choice(alphabet, size=rng.integers(0, 13))) for _ in range(rng.integers(1, 30))]
            for _ in range(300)]
    expected = m.hash(m.text_stage.transform(rows, dtype=np.float64))
    np.testing.assert_array_equal(m.hash(rows), expected)
    assert m.hash([[""]]).shape == (1, 32)   # only empty tokens
    with pytest.MonkeyPatch.context() as patched:   # the joined pass, where str buffers cannot be read in place
        patched.setattr(_token_lists, "AVAILABLE", False)
        np.testing.assert_array_equal(m.hash(rows), expected)
        assert m.hash([[""]]).shape == (1, 32)   # only empty tokens: the general path


@pytest.mark.parametrize("width", [None, 1000, 2**18])
def test_token_lists_in_scikit_learn_mode_are_the_stage_rows(width):
    """scikit-learn's hash mode (|signed MurmurHash3| mod width, any width) from the token loop's hashes: the codes
    of the stage's CSR rows."""
    m = create_map({"method": "minhash", "n_components": 32, "seed": 6, "input": {"hashing": {"hash": "sklearn"}}}
                   | ({} if width is None else {"input_dim": width}))
    rows = [["alpha", "beta", "é", ""], ("gamma",), ["alpha", "delta", "x" * 17]]
    np.testing.assert_array_equal(m.hash(rows), m.hash(m.text_stage.transform(rows, dtype=np.float64)))


def test_token_lists_joined_in_blocks_of_rows_give_the_codes_of_one_block(monkeypatch):
    """Blocks of 7 tokens (rows cut at block edges, long rows alone) and one block of the whole batch: the same
    codes as the stage's CSR rows; a U+0000 token in a late block still takes the general path (the same codes)."""
    m = create_map({"method": "minhash", "n_components": 64, "seed": 4, "input": {"hashing": {}}})
    rng = np.random.default_rng(2)
    rows = [[str(t) for t in rng.integers(0, 10**6, rng.integers(1, 40))] for _ in range(80)]
    reference = m.hash(m.text_stage.transform(rows, dtype=np.float64))
    monkeypatch.setattr(_token_lists, "AVAILABLE", False)   # the joined pass
    for block in (7, 2**30):
        monkeypatch.setattr(minhash_module, "TEXT_BLOCK_TOKENS", block)
        np.testing.assert_array_equal(m.hash(rows), reference)
    rows[70] = rows[70] + ["a\0b"]
    np.testing.assert_array_equal(m.hash(rows), m.hash(m.text_stage.transform(rows, dtype=np.float64)))


# ---------------------------------------------------------------- 4. empty sets, b-bit codes, the spec


def test_empty_sets_are_refused_or_coded():
    X = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 0, 0]]))
    with pytest.raises(InputError, match=r"row\(s\) 1"):
        minhash(3, 8).hash(X)
    with pytest.raises(InputError, match="row 1"):
        minhash(3, 8).hash_tokens(np.array([1, 2], dtype=np.uint64), [0, 2, 2])
    codes = minhash(3, 8, empty_rows="code").hash(X)
    assert (codes[1] == EMPTY_CODE).all() and (codes[0] != EMPTY_CODE).all()
    assert minhash(3, 8, empty_rows="code").exact_kernel(X)[1, 1] == 1.0


def test_bad_tokens_and_offsets_are_refused():
    m = minhash()
    with pytest.raises(InputError, match="offsets"):
        m.hash_tokens(np.arange(4, dtype=np.uint64), [0, 5])
    with pytest.raises(InputError, match="offsets"):
        m.hash_tokens(np.arange(4, dtype=np.uint64), [0, 3, 2, 4])
    with pytest.raises(InputError, match="tokens"):
        m.hash_tokens(np.array([-1, 2]), [0, 2])
    with pytest.raises(InputError, match="circulant"):
        minhash(100, 16, variant="circulant").hash_tokens(np.array([100], dtype=np.uint64), [0, 1])


def test_b_bit_codes_estimate_jaccard_after_the_chance_correction():
    elements, offsets, exact = planted_pairs(np.random.default_rng(8), 200, 100, 2**40)
    k, b = 256, 2
    m = minhash(n_components=k, code_bits=b)
    codes = m.hash_tokens(elements, offsets)
    assert codes.min() >= 0 and codes.max() < 2**b
    chance = 2.0**-b
    P = chance + (1 - chance) * exact   # Li & Koenig: the b-bit match probability
    assert_binomial(pair_estimates(codes), P, k, "2-bit codes")
    corrected = m.kernel(sp.csr_matrix(([1.0] * 3, ([0, 0, 1], [1, 2, 2])), shape=(2, 2**20)))
    assert corrected.shape == (2, 2) and corrected[0, 0] == 1.0


def test_spec_defaults_ids_and_refusals():
    spec = resolve_spec({"method": "minhash", "input_dim": 10, "n_components": 4})
    assert spec.params == {"variant": "one_permutation", "bits": 8}   # later defaults stay out of the id
    assert resolve_spec({"method": "minhash", "input_dim": 10, "n_components": 4,
                         "params": {"code_bits": None, "empty_rows": "error"}}).id == spec.id
    with pytest.raises(SpecError, match="input_dim"):
        resolve_spec({"method": "minhash", "input_dim": 2**25, "n_components": 4, "params": {"variant": "circulant"}})
    with pytest.raises(SpecError, match="n_components"):
        resolve_spec({"method": "minhash", "input_dim": 10, "n_components": 11, "params": {"variant": "circulant"}})
    with pytest.raises(SpecError, match="variant"):
        resolve_spec({"method": "minhash", "input_dim": 10, "n_components": 4, "params": {"variant": "x"}})
    for variant in VARIANTS:
        m = minhash(10, 4, variant=variant)
        assert m.nbytes == 0   # nothing of the spec's size is made before it is used
        assert m.materialize().nbytes == m.planned_nbytes
    huge = {"method": "minhash", "input_dim": 10, "n_components": 2**22}
    with pytest.raises(SpecError, match="n_components"):   # priced before any table is made
        create_map(huge, max_nbytes=2**20)


def test_one_hot_features_inner_product_is_the_b_bit_match_fraction():
    X = sp.csr_matrix(np.random.default_rng(2).random((5, 50)) < 0.3, dtype=float)
    m = minhash(50, 32, bits=3)
    features = m.transform(X).to_csr()
    assert features.shape == (5, 32 << 3) and (features.getnnz(axis=1) == 32).all()
    low = _set_kernels.mixed_low_bits(m.bit_keys(), m.hash(X), 3)
    np.testing.assert_allclose((features @ features.T).toarray(), (low[:, None] == low[None]).mean(axis=2), atol=1e-6)


# ---------------------------------------------------------------- 5. golden codes


@pytest.mark.parametrize("name", list(GOLDEN["cases"]))
def test_golden_codes(name):
    case = GOLDEN["cases"][name]
    stored = case["spec"]
    assert create_map(case["request"]).spec.id == stored["id"]
    m = create_map({key: stored[key] for key in (*SPEC_FIELDS, "id")} | ({"input": stored["input"]}
                                                                          if "input" in stored else {}))
    expected = case["expected"]
    if "token_lists" in case:
        assert m.hash(case["token_lists"]).tolist() == expected["hash"]
        np.testing.assert_allclose(m.exact_kernel(case["token_lists"]), expected["exact_kernel"], rtol=1e-15)
        return
    X = np.array(case["input"], dtype=np.float64)
    assert m.hash(X).tolist() == expected["hash"]
    assert m.hash(sp.csr_matrix(X)).tolist() == expected["hash"]
    features = m.transform(X)
    assert features.indices.tolist() == expected["indices"] and features.dim == expected["dim"]
    np.testing.assert_array_equal(m.kernel(X), np.array(expected["kernel"]))
    np.testing.assert_allclose(m.exact_kernel(X), expected["exact_kernel"], rtol=1e-15)
    if "tokens" in case:
        tokens = np.array(case["tokens"], dtype=np.uint64)
        assert m.hash_tokens(tokens, case["offsets"]).tolist() == expected["hash_tokens"]


def test_codes_are_the_same_compiled_for_a_cpu_without_vector_units(tmp_path):
    """The vector loops compiled for a generic x86-64 (no AVX: NUMBA_CPU_NAME=generic, an empty cache) give the
    golden codes: integer lanes do not depend on the vector width, as the module docstring says."""
    import os
    import subprocess
    import sys

    script = (
        "import json, sys, numpy as np\n"
        "from featurehash.maps import create_map\n"
        "golden = json.load(open(sys.argv[1]))['cases']\n"
        "out = {}\n"
        "for name, case in golden.items():\n"
        "    m = create_map(case['request'])\n"
        "    out[name] = m.hash(case['token_lists'] if 'token_lists' in case else np.array(case['input'])).tolist()\n"
        "    if 'tokens' in case:\n"
        "        out[name + '/tokens'] = m.hash_tokens(np.array(case['tokens'], dtype=np.uint64), case['offsets']).tolist()\n"
        "print(json.dumps(out))\n")
    env = {**os.environ, "NUMBA_CPU_NAME": "generic", "NUMBA_CACHE_DIR": str(tmp_path)}
    golden_path = Path(__file__).resolve().parents[2] / "golden" / "minhash.json"
    done = subprocess.run([sys.executable, "-c", script, str(golden_path)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    for name, case in GOLDEN["cases"].items():
        assert got[name] == case["expected"]["hash"], name
        if "tokens" in case:
            assert got[name + "/tokens"] == case["expected"]["hash_tokens"], name
