"""featurehash.dedup.corpus.normalise: what counts as the same text, its 128-bit hash, the input rows."""

from __future__ import annotations

import numpy as np
from featurehash import create_map
from featurehash.dedup.corpus.normalise import (
    default_spec,
    document_rows,
    hash128,
    normalise,
)


def test_normalise_case_space_and_compatibility_forms():
    assert normalise("  Hello\t WORLD \n") == "hello world"
    assert normalise("ﬁle Ａ") == "file a"   # NFKC: ligature and full-width letter


def test_hash128_equal_iff_texts_equal():
    h = hash128(["a", "b", "a", ""])
    assert h.shape == (4, 2) and h.dtype == np.uint64
    assert (h[0] == h[2]).all() and not (h[0] == h[1]).all() and not (h[0] == h[3]).all()


def test_document_rows_mark_documents_without_a_shingle():
    feature_map = create_map(default_spec())
    rows, nonempty = document_rows(feature_map, ["one two three four", "too short", ""])
    assert rows.shape[0] == 3 and nonempty.tolist() == [True, False, False]
    assert rows[0].nnz == 2 and set(rows.data) == {1.0}   # binary weights: two distinct 3-shingles


def test_weighted_spec_counts_repeats():
    binary, weighted = create_map(default_spec()), create_map(default_spec(weighted=True))
    text = ["a1 b2 c3 a1 b2 c3 a1 b2 c3"]
    assert document_rows(binary, text)[0].data.max() == 1.0
    assert document_rows(weighted, text)[0].data.max() > 1.0
