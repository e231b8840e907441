"""featurehash.maps.text.documents: `shingle_hashes` (flat uint64 hashes with int64 row offsets, the input of
minhash over plain sets) and a hashing map's `token_hashes`, equal to the Python analyzer's tokens hashed; the
encoding of a batch."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils import murmurhash3_32

from featurehash import create_map
from featurehash.maps.text.analyzers import Analyzer
from featurehash.maps.text.documents import encoded, hash_key, shingle_hashes

DOCUMENTS = ["The quick brown fox jumps over the lazy dog", "", "Crème brûlée: the café's naïve façade",
             "one two", "東京都 の 天気 は 晴れ です よ", "the quick brown fox jumps over the lazy cat"]


def test_shingle_hashes_are_the_word_shingles_hashed_in_order():
    hashes, offsets = shingle_hashes(DOCUMENTS, ngram_range=(3, 3), hash="sklearn")
    assert hashes.dtype == np.uint64 and offsets.dtype == np.int64 and offsets.size == len(DOCUMENTS) + 1
    analyzer = Analyzer("word", (3, 3))
    for row, document in enumerate(DOCUMENTS):
        expected = [murmurhash3_32(shingle, seed=0, positive=True) for shingle in analyzer(document)]
        assert hashes[offsets[row]:offsets[row + 1]].tolist() == expected
    assert offsets[2] - offsets[1] == 0 and offsets[4] - offsets[3] == 0   # no 3-shingle in "" or "one two"
    # near-duplicate documents share all but the shingles touching the changed word
    first = set(hashes[offsets[0]:offsets[1]].tolist())
    last = set(hashes[offsets[5]:offsets[6]].tolist())
    assert len(first & last) == 6 and len(first | last) == 8


def test_a_seed_keys_the_hash_as_the_hashing_maps():
    feature_map = create_map({"method": "hashing", "n_components": 2**20, "seed": 9,
                              "params": {"ngram_range": [2, 2]}})
    hashes, offsets = shingle_hashes(DOCUMENTS, ngram_range=(2, 2), seed=9)
    mapped, mapped_offsets = feature_map.token_hashes(DOCUMENTS)
    np.testing.assert_array_equal(hashes, mapped)
    np.testing.assert_array_equal(offsets, mapped_offsets)
    other, _ = shingle_hashes(DOCUMENTS, ngram_range=(2, 2), seed=10)
    assert np.mean(other == hashes) < 0.05
    assert hash_key("sklearn", 9) == 0 and hash_key("murmur3", 9) != hash_key("murmur3", 10)


def test_python_path_settings_give_the_same_layout():
    """A custom token pattern (Python's `re`) and token lists still come back as flat hashes and offsets."""
    hashes, offsets = shingle_hashes(DOCUMENTS, analyzer="word", ngram_range=(1, 1), token_pattern=r"(?u)\b\w+\b")
    analyzer = Analyzer("word", (1, 1), token_pattern=r"(?u)\b\w+\b")
    assert offsets[-1] == sum(len(analyzer(document)) for document in DOCUMENTS) == hashes.size
    feature_map = create_map({"method": "hashing", "n_components": 2**20})
    tokens = [document.split() for document in DOCUMENTS]
    flat, token_offsets = feature_map.token_hashes(tokens)
    assert token_offsets.tolist() == np.concatenate([[0], np.cumsum([len(row) for row in tokens])]).tolist()
    assert flat.size == token_offsets[-1]


@pytest.mark.parametrize("documents", [["ascii only", ""], ["naïve", "東京", "😀"]])
def test_encoded_is_the_utf8_bytes_in_one_buffer(documents):
    data, starts = encoded(documents)
    for row, document in enumerate(documents):
        assert data[starts[row]:starts[row + 1]].tobytes() == document.encode("utf-8")


def test_encoded_refuses_what_is_not_a_list_of_str():
    assert encoded("a document") is None
    assert encoded(["text", b"bytes"]) is None
    assert encoded([["token", "list"]]) is None
