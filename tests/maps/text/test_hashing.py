"""The hashing trick (method "hashing"): scikit-learn's HashingVectorizer and FeatureHasher bit for bit in the
compatibility mode, on real text shipped in packages; the kernel it estimates; seeds; bad text input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash import create_map
from featurehash.maps import InputError, SpecError
from text_support import real_corpus

sklearn = pytest.importorskip("sklearn")
from sklearn.feature_extraction import FeatureHasher  # noqa: E402
from sklearn.feature_extraction.text import HashingVectorizer  # noqa: E402


# Real text shipped in packages, plus edge cases: accents, empty and blank documents, one character.
CORPUS = real_corpus() + ["Crème brûlée à la café, naïve façade", "", "   ", "x"]


def same_csr(ours: sp.csr_matrix, theirs: sp.csr_matrix) -> None:
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours.indptr, theirs.indptr)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_array_equal(ours.data, theirs.data)   # bit for bit: values and signs


@pytest.mark.parametrize("settings", [
    {},
    {"analyzer": "char", "ngram_range": (2, 4)},
    {"analyzer": "char_wb", "ngram_range": (1, 3), "lowercase": False},
    {"ngram_range": (1, 3), "binary": True, "norm": "l1", "alternate_sign": False},
    {"strip_accents": "unicode", "token_pattern": r"(?u)\b\w+\b", "n_features": 1000},
    {"strip_accents": "ascii", "analyzer": "char", "ngram_range": (5, 5), "norm": None, "n_features": 2**22},
])
def test_equals_hashing_vectorizer(settings):
    settings = dict(settings)
    n = settings.pop("n_features", 2**20)
    theirs = HashingVectorizer(n_features=n, **settings).transform(CORPUS)
    params = {key: value for key, value in settings.items() if key != "binary"}
    params["norm"] = params.get("norm", "l2") or "none"
    if settings.get("binary"):
        params["weighting"] = "binary"
    if "ngram_range" in params:
        params["ngram_range"] = list(params["ngram_range"])
    feature_map = create_map({"method": "hashing", "n_components": n, "seed": 7,   # the seed is ignored here
                              "params": {"hash": "sklearn", **params}})
    assert theirs.nnz > 2000
    same_csr(feature_map.transform(CORPUS, dtype=np.float64), theirs)
    # float32 features are the float64 ones rounded, or computed in float32 as scikit-learn does with that dtype
    theirs32 = HashingVectorizer(n_features=n, dtype=np.float32, **settings).transform(CORPUS)
    same_csr(feature_map.transform(CORPUS), theirs32)


def test_equals_feature_hasher_on_tokens_and_weighted_tokens():
    tokens = [document.split() for document in CORPUS]
    weighted = [{token: float(len(token) % 5) - 1.5 for token in row} for row in tokens]
    feature_map = create_map({"method": "hashing", "n_components": 2**18,
                              "params": {"hash": "sklearn", "norm": "none"}})
    same_csr(feature_map.transform(tokens, dtype=np.float64),
             FeatureHasher(n_features=2**18, input_type="string").transform(tokens))
    same_csr(feature_map.transform(weighted, dtype=np.float64), FeatureHasher(n_features=2**18).transform(weighted))
    pairs = [list(row.items()) for row in weighted]   # (token, weight) pairs are read as the mapping
    same_csr(feature_map.transform(pairs, dtype=np.float64), FeatureHasher(n_features=2**18).transform(weighted))


def test_unhashed_inner_product_is_the_mean_over_seeds():
    """Weinberger et al., Lemma 2: with random signs E<phi(x), phi(y)> = <x, y> (no norm). At D = 32 columns
    collisions are frequent; 400 seeds make the mean's standard error small against a wrong sign rule's bias
    (the sum over colliding pairs, ~<|x|,|y|> / D here)."""
    documents = [" ".join(f"w{(7 * i + j) % 50}" for j in range(30 + i)) for i in range(6)]
    exact = create_map({"method": "hashing", "n_components": 32, "params": {"norm": "none"}}).exact_kernel(documents)
    estimates = np.stack([create_map({"method": "hashing", "n_components": 32, "seed": seed,
                                      "params": {"norm": "none"}}).kernel(documents) for seed in range(400)])
    z = (estimates.mean(axis=0) - exact) / (estimates.std(axis=0) / np.sqrt(400))
    assert np.abs(z).max() < 4.5
    unsigned = np.stack([create_map({"method": "hashing", "n_components": 32, "seed": seed,
                                     "params": {"norm": "none", "alternate_sign": False}}).kernel(documents)
                         for seed in range(50)])
    assert (unsigned.mean(axis=0) - exact > 0).all()   # without signs, collisions only add


def test_cosine_is_estimated_with_normalised_rows():
    feature_map = create_map({"method": "hashing", "n_components": 2**20})
    exact = feature_map.exact_kernel(CORPUS[:40])
    np.testing.assert_allclose(np.diag(exact)[np.diag(exact) > 0], 1.0)
    assert np.abs(feature_map.kernel(CORPUS[:40]) - exact).max() < 0.02   # 2^20 columns: collisions are rare


def test_weighting_options_on_tokens():
    tokens = [["a", "a", "a", "b"], ["b", "c"]]
    for weighting, expected in (("count", [3.0, 1.0]), ("binary", [1.0, 1.0]), ("sublinear", [1 + np.log(3), 1.0])):
        feature_map = create_map({"method": "hashing", "n_components": 2**16,
                                  "params": {"weighting": weighting, "norm": "none", "alternate_sign": False}})
        row = feature_map.transform(tokens, dtype=np.float64)[0]
        np.testing.assert_allclose(np.sort(row.data)[::-1], expected)


def test_seeds_give_independent_columns_and_the_id_pins_the_map():
    documents = CORPUS[:20]
    a = create_map({"method": "hashing", "n_components": 2**20, "seed": 1}).transform(documents)
    b = create_map({"method": "hashing", "n_components": 2**20, "seed": 2}).transform(documents)
    assert abs(a.nnz - b.nnz) <= 3   # only the rare collisions differ
    shared = np.intersect1d(a.indices, b.indices).size
    assert shared < 0.05 * np.unique(a.indices).size   # ~0.3% by chance at 2^20 columns
    spec = create_map({"method": "hashing", "n_components": 1024}).spec
    assert spec.input_dim == 1
    with pytest.raises(SpecError, match="input_dim"):
        create_map({"method": "hashing", "input_dim": 5, "n_components": 1024})
    with pytest.raises(SpecError, match="ngram_range"):
        create_map({"method": "hashing", "n_components": 1024, "params": {"ngram_range": [3, 2]}})
    with pytest.raises(SpecError, match="weighting"):   # refused when the spec is made, not at its first transform
        create_map({"method": "hashing", "n_components": 1024, "params": {"hash": "sklearn", "weighting": "sublinear"}})
    with pytest.raises(SpecError, match="token_pattern"):
        create_map({"method": "hashing", "n_components": 1024, "params": {"token_pattern": "(a)(b)"}})


def test_golden_columns():
    """Pinned: the default mode's columns and values for a fixed spec (a change here breaks every stored model)."""
    feature_map = create_map({"method": "hashing", "n_components": 1 << 20, "seed": 3})
    row = feature_map.transform(["the quick brown fox jumps over the lazy dog"], dtype=np.float64)
    assert feature_map.spec.id == GOLDEN["id"]
    assert row.indices.tolist() == GOLDEN["indices"]
    np.testing.assert_array_equal(row.data, np.array(GOLDEN["data"]))


GOLDEN = json.loads('{"id": "hashing-v1-57b10d14abd72b0a32e5ab88", "indices": [11111, 203482, 299172, 341482, '
                    '346306, 395942, 638904, 855289], "data": [-0.30151134457776363, -0.30151134457776363, '
                    '-0.30151134457776363, 0.30151134457776363, 0.30151134457776363, -0.6030226891555273, '
                    '0.30151134457776363, 0.30151134457776363]}')


@pytest.mark.parametrize("batch, message", [
    ("one document", "wrap a single document"),
    ([], "empty"),
    (["text", ["a", "b"]], "row 1: every row must be of one kind"),
    ([["a", 3]], "row 0"),
    ([{"a": float("nan")}], "row 0: the weight of 'a' is NaN"),
    ([{"a": True}], "must be a number"),
    ([b"\xff\xfe"], "row 0: not UTF-8"),
    (["ok", "bad \ud800 surrogate"], "row 1: text with no UTF-8 form"),
    (42, "expected a list"),
])
def test_bad_text_input_names_the_row(batch, message):
    feature_map = create_map({"method": "hashing", "n_components": 1024})
    with pytest.raises(InputError, match=message):
        feature_map.transform(batch)


def test_empty_documents_are_zero_rows():
    features = create_map({"method": "hashing", "n_components": 1024}).transform(["", "ab cd"])
    assert features.shape == (2, 1024) and features[0].nnz == 0 and features[1].nnz == 2
