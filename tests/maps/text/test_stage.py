"""A text front stage (`spec.input = {"hashing": {...}}`) on other maps: one spec and one id from documents,
token lists or weighted tokens to features and codes; GCWS codes of weighted tokens collide at the exact GMM
(weighted Jaccard) rate of the token weight vectors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash import create_map
from featurehash.maps import InputError, SpecError

DOCUMENTS = ["the quick brown fox jumps over the lazy dog near the river bank",
             "the quick brown fox jumps over the lazy cat near the river bank",
             "an entirely different sentence about tables, numbers and contents"]


def weighted_pairs(n_pairs: int = 40, seed: int = 5):
    """Pairs of weighted-token rows whose GMM spans ~0.05..1: each pair has its own vocabulary (so the pairs'
    codes are independent), shared tokens with perturbed weights and tokens of its own on each side."""
    rng = np.random.default_rng(seed)
    left, right = [], []
    for pair in range(n_pairs):
        shared = rng.integers(5, 40)
        own = rng.integers(0, 30, size=2) if pair else (0, 0)   # pair 0: identical rows
        weights = rng.gamma(2.0, 1.0, size=shared)
        noise = 1.0 if pair == 0 else rng.lognormal(0.0, 0.5, size=shared)
        left.append({**{f"p{pair}s{t}": float(w) for t, w in enumerate(weights)},
                     **{f"p{pair}l{t}": float(rng.gamma(2.0)) for t in range(own[0])}})
        right.append({**{f"p{pair}s{t}": float(w) for t, w in enumerate(weights * noise)},
                      **{f"p{pair}r{t}": float(rng.gamma(2.0)) for t in range(own[1])}})
    return left, right


@pytest.mark.parametrize("sampler", ["icws", "dart"])
def test_gcws_codes_of_weighted_tokens_collide_at_the_gmm_rate(sampler):
    k = 2048
    feature_map = create_map({"method": "gcws", "n_components": k, "seed": 9, "params": {"sampler": sampler},
                              "input": {"hashing": {}}})
    assert feature_map.spec.input_dim == 2**30
    left, right = weighted_pairs()
    gmm = np.array([feature_map.exact_kernel([a], [b])[0, 0] for a, b in zip(left, right)])
    assert gmm[0] == 1.0 and 0.02 < gmm.min() and (gmm > 0.5).sum() >= 5
    matches = (feature_map.hash(left) == feature_map.hash(right)).mean(axis=1)
    z = (matches - gmm) / np.sqrt(np.maximum(gmm * (1 - gmm), 1e-12) / k)
    assert matches[0] == 1.0
    assert np.abs(z[1:]).max() < 4.5                       # each pair: binomial noise only
    assert abs(z[1:].mean() * np.sqrt(z.size - 1)) < 4.5   # no common bias (the pairs are independent)


def test_the_front_stage_is_the_hashing_map_then_the_map():
    spec = {"method": "rff", "input_dim": 2**12, "n_components": 256, "seed": 4, "params": {"gamma": 0.5},
            "input": {"hashing": {"ngram_range": [1, 2]}}}
    with_text = create_map(spec)
    hashed = create_map({"method": "hashing", "n_components": 2**12, "seed": 4,
                         "params": {"ngram_range": [1, 2]}}).transform(DOCUMENTS, dtype=np.float64)
    numeric = create_map({key: value for key, value in spec.items() if key != "input"})
    np.testing.assert_array_equal(with_text.transform(DOCUMENTS), numeric.transform(hashed))
    np.testing.assert_array_equal(with_text.transform(hashed), numeric.transform(hashed))   # numbers still go in
    np.testing.assert_allclose(with_text.exact_kernel(DOCUMENTS), numeric.exact_kernel(hashed))
    tokens = [document.split() for document in DOCUMENTS]
    assert with_text.transform(tokens).shape == (3, 256)


def test_codes_from_documents_find_the_near_duplicate():
    feature_map = create_map({"method": "gcws", "n_components": 256, "params": {"sampler": "dart"},
                              "input": {"hashing": {"ngram_range": [3, 3]}}})
    codes = feature_map.hash(DOCUMENTS)
    assert (codes[0] == codes[1]).mean() > 0.4 and (codes[0] == codes[2]).mean() == 0.0
    binning = create_map({"method": "binning", "n_components": 64, "params": {"gamma": 0.2},
                          "input": {"hashing": {"weighting": "binary"}}})
    assert binning.hash(DOCUMENTS).shape == (3, 64)


def test_the_stage_is_part_of_the_id_and_round_trips():
    plain = create_map({"method": "gcws", "input_dim": 2**30, "n_components": 64})
    text = create_map({"method": "gcws", "n_components": 64, "input": {"hashing": {}}})
    other = create_map({"method": "gcws", "n_components": 64, "input": {"hashing": {"ngram_range": [1, 2]}}})
    assert len({plain.spec.id, text.spec.id, other.spec.id}) == 3
    assert "input" not in plain.spec.to_dict()
    again = create_map(text.spec.to_dict())
    assert again.spec == text.spec
    np.testing.assert_array_equal(again.hash(DOCUMENTS), text.hash(DOCUMENTS))
    assert text.spec.to_dict()["input"]["hashing"]["alternate_sign"] is False   # codes need nonnegative weights


@pytest.mark.parametrize("spec, field", [
    ({"method": "gcws", "n_components": 8, "input": {"hashing": {"alternate_sign": True}}},
     "input.hashing.alternate_sign"),
    ({"method": "rff", "n_components": 8, "input": {"hashing": {}}}, "input_dim"),
    ({"method": "gcws", "n_components": 8, "input": {"shingles": {}}}, "input"),
    ({"method": "gcws", "n_components": 8, "input": {"hashing": {"ngram_range": [0, 1]}}}, "input.hashing.ngram_range"),
    ({"method": "hashing", "n_components": 8, "input": {"hashing": {}}}, "input"),
])
def test_bad_front_stages_name_the_field(spec, field):
    with pytest.raises(SpecError) as caught:
        create_map(spec)
    assert caught.value.field == field


def test_empty_documents_are_refused_by_maps_that_refuse_zero_rows():
    feature_map = create_map({"method": "gcws", "n_components": 8, "input": {"hashing": {}}})
    with pytest.raises(InputError, match=r"row\(s\) 1"):
        feature_map.hash(["some words here", "!"])


def test_numeric_input_is_unchanged():
    feature_map = create_map({"method": "gcws", "input_dim": 2**30, "n_components": 16, "input": {"hashing": {}}})
    X = sp.csr_matrix(([1.0, 2.0], ([0, 0], [5, 2**29])), shape=(1, 2**30))
    assert feature_map.hash(X).shape == (1, 16)


def test_empty_documents_get_the_empty_code_when_the_spec_asks():
    from featurehash.maps.minhash.gcws import EMPTY_TEXT_CODE
    spec = {"method": "gcws", "n_components": 16, "params": {"sampler": "dart"},
            "input": {"hashing": {}, "empty": "code"}}
    feature_map = create_map(spec)
    codes = feature_map.hash(["some words here", "!", ""])
    assert (codes[1:] == EMPTY_TEXT_CODE).all() and (codes[0] != EMPTY_TEXT_CODE).all()
    np.testing.assert_array_equal(codes[0], create_map({**spec, "input": {"hashing": {}}}).hash(["some words here"])[0])
    assert (feature_map.hash(["", ""]) == EMPTY_TEXT_CODE).all()
    assert create_map({**spec, "input": {"hashing": {}}}).spec.input == {"hashing": feature_map.spec.input["hashing"]}
    with pytest.raises(SpecError, match="gcws"):
        create_map({"method": "binning", "n_components": 8, "input": {"hashing": {}, "empty": "code"}})
