"""featurehash.maps.text.streams: text collections (lists, iterators, .txt / .jsonl files) read in blocks through
a text stage; the library's near-duplicate join and clusters over them equal the join of the whole collection's
rows, inside a memory budget, and errors name the row of the whole collection (or the file's line)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash import create_map
from featurehash.dedup import duplicate_clusters, similarity_join
from featurehash.maps import InputError
from featurehash.maps.text import streams
from text_support import real_corpus

SPEC = {"method": "gcws", "n_components": 128, "seed": 4, "params": {"sampler": "dart"},
        "input": {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}}


def near_duplicates(n: int = 1500, seed: int = 3) -> list[str]:
    """Paragraphs of real text and copies of them with ~5% of the words dropped (pairs at Jaccard ~0.6-1)."""
    base = [part for text in real_corpus() for part in text.split("\n\n") if len(part.split()) >= 12]
    rng = np.random.default_rng(seed)
    documents = []
    for i in range(n):
        words = base[i % len(base)].split()
        documents.append(" ".join(w for w, keep in zip(words, rng.random(len(words)) >= 0.05) if keep))
    return documents


@pytest.fixture(scope="module")
def documents():
    return near_duplicates()


@pytest.fixture(scope="module")
def feature_map():
    return create_map(SPEC)


def same_pairs(a, b):
    assert a.candidates == b.candidates and len(a) == len(b) > 100
    np.testing.assert_array_equal(a.i, b.i)
    np.testing.assert_array_equal(a.j, b.j)
    np.testing.assert_array_equal(a.similarity, b.similarity)


def test_blocks_stacked_are_the_whole_transform(documents, feature_map):
    stage = feature_map.text_stage
    blocks = list(streams.text_blocks(stage, documents, "x", 100))
    assert len(blocks) == 15 and all(block.shape[0] == 100 for block in blocks)
    whole = stage.transform(documents, dtype=np.float64)
    assert (sp.vstack(blocks, format="csr") != whole).nnz == 0
    assert streams.text_blocks(stage, np.ones((3, 4)), "x", 100) is None


def test_streamed_join_equals_the_join_of_all_rows_in_memory(documents, feature_map, tmp_path, monkeypatch):
    rows = feature_map.text_stage.transform(documents, dtype=np.float64)
    reference = similarity_join(rows, feature_map, 0.7)
    seen = []
    transform = type(feature_map.text_stage).transform

    def recording(self, X, **kwargs):
        seen.append(len(X))
        return transform(self, X, **kwargs)

    monkeypatch.setattr(type(feature_map.text_stage), "transform", recording)
    # a list, a generator and a .txt file, in blocks of 200 rows, under a budget small enough to spill
    path = tmp_path / "documents.txt"
    path.write_text("\n".join(documents) + "\n", encoding="utf-8")
    for given in (documents, (document for document in documents), str(path)):
        seen.clear()
        streamed = similarity_join(given, feature_map, 0.7, chunk_rows=200, memory_budget=2e6, spill_dir=tmp_path)
        same_pairs(streamed, reference)
        assert max(seen) <= 200 and sum(seen) == len(documents)
    clusters = duplicate_clusters(iter(documents), feature_map, 0.7, chunk_rows=300, memory_budget=2e6)
    np.testing.assert_array_equal(clusters.labels, duplicate_clusters(rows, feature_map, 0.7).labels)


def test_a_jsonl_file_and_a_second_collection(documents, feature_map, tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text("".join(json.dumps(document) + "\n" for document in documents[:400]), encoding="utf-8")
    reference = similarity_join(documents[400:900], feature_map, 0.7, Y=documents[:400])
    streamed = similarity_join(iter(documents[400:900]), feature_map, 0.7, Y=str(path), chunk_rows=64)
    same_pairs(streamed, reference)


def test_errors_name_the_row_of_the_collection_and_the_line_of_the_file(feature_map, tmp_path):
    rows = ["fine document with words"] * 10 + [12] + ["more"]
    with pytest.raises(InputError) as caught:
        list(streams.text_blocks(feature_map.text_stage, iter(rows), "x", 4))
    assert caught.value.field == "x" and "row 10" in caught.value.message
    path = tmp_path / "bad.jsonl"
    path.write_text('"a fine document here"\n"another"\n{"broken": \n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        similarity_join(str(path), feature_map, 0.7, chunk_rows=2)
    assert caught.value.field == str(path) and "line 3: not JSON" in caught.value.message
    with pytest.raises(InputError, match="empty"):
        similarity_join(iter([]), feature_map, 0.7)
    plain = create_map({"method": "gcws", "input_dim": 8, "n_components": 64})
    with pytest.raises(InputError, match="needs a spec with a text stage"):
        similarity_join(str(path), plain, 0.7)
