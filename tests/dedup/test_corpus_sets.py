"""featurehash.dedup.corpus.sets: the default near stage's path from documents to minhash codes without sparse
rows gives the general path's sets, codes, similarities and pairs, in memory and spilled past a budget."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_support import WORDS
from featurehash import create_map
from featurehash.dedup import similarity_join
from featurehash.dedup.corpus.near import near_pairs
from featurehash.dedup.corpus.normalise import default_spec, document_rows
from featurehash.dedup.candidates import band_keys as general_band_keys
from featurehash.dedup.corpus.sets import band_keys, document_columns, jaccard_pairs, takes_sets
from featurehash.lsh.similarity import ExactPairs, similarity_of


def corpus(n: int = 400, seed: int = 3) -> list[str]:
    """Bases of 20-80 words and copies with a few words changed (near pairs at many similarities), short
    documents with no shingle, and text the compiled pass hands to Python (capital sigma) or case-folds."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        words = [rng.choice(WORDS) + str(rng.randrange(30)) for _ in range(rng.randrange(20, 80))]
        out.append(" ".join(words))
        for _ in range(rng.randrange(1, 4)):
            edited = list(words)
            for _ in range(rng.randrange(1, 6)):
                edited[rng.randrange(len(edited))] = rng.choice(WORDS)
            out.append(" ".join(edited))
    return out[:n] + ["two words", "", "ΟΔΟΣ ΣΟΦΟΣ ΚΑΙ ΛΟΓΟΣ ΝΕΟΣ", "Ünïcode Straße the same ÉCOLE words", "a"]


def test_default_map_takes_the_set_path_and_weighted_does_not():
    assert takes_sets(create_map(default_spec()))
    assert not takes_sets(create_map(default_spec(weighted=True)))
    sklearn = default_spec()
    sklearn["input"]["hashing"]["hash"] = "sklearn"   # columns |h| mod n: not the shingle_hashes' columns
    assert not takes_sets(create_map(sklearn))


def test_sets_codes_and_keys_are_the_rows_supports_and_theirs():
    feature_map = create_map(default_spec())
    texts = corpus()
    rows, nonempty = document_rows(feature_map, texts)
    elements, offsets = document_columns(feature_map, texts)
    assert (np.diff(offsets) > 0).tolist() == nonempty.tolist()
    for r in range(len(texts)):
        assert set(elements[offsets[r]:offsets[r + 1]].tolist()) == set(rows.indices[rows.indptr[r]:rows.indptr[r + 1]].tolist())
    keep = np.flatnonzero(nonempty)
    codes = feature_map.hash_tokens(elements.astype(np.uint64), np.concatenate(([0], offsets[1:][keep])))
    np.testing.assert_array_equal(codes, feature_map.hash(rows[keep]))
    np.testing.assert_array_equal(band_keys(codes, 17, 5), general_band_keys(codes, 17, 5)[0])


def test_jaccard_is_the_exact_similarity_of_the_rows():
    feature_map = create_map(default_spec())
    texts = corpus(120)
    rows, nonempty = document_rows(feature_map, texts)
    elements, offsets = document_columns(feature_map, texts)
    keep = np.flatnonzero(nonempty)
    rng = np.random.default_rng(0)
    i, j = rng.choice(keep, 500), rng.choice(keep, 500)
    expected = ExactPairs(similarity_of(feature_map), rows)(i, j)
    np.testing.assert_allclose(jaccard_pairs(elements, offsets, i, j), expected, rtol=0, atol=1e-12)
    empty = np.flatnonzero(~nonempty)[:1]
    assert jaccard_pairs(elements, offsets, np.r_[empty, keep[0]], np.r_[empty, empty]).tolist() == [1.0, 0.0]


@pytest.mark.parametrize("memory_budget", [None, 20e3])
def test_near_pairs_equal_the_general_join(tmp_path, memory_budget):
    feature_map = create_map(default_spec())
    texts = corpus()
    paths = [tmp_path / "p0.parquet", tmp_path / "p1.parquet"]
    pq.write_table(pa.table({"text": texts[:150]}), paths[0])
    pq.write_table(pa.table({"text": texts[150:]}), paths[1])
    wanted = np.arange(0, len(texts), 1 + (memory_budget is None))   # every other position: positions, not rows
    work = tmp_path / "work"
    work.mkdir()
    a, b, s, figures = near_pairs(paths, wanted, feature_map, 0.6, target_recall=0.95, memory_budget=memory_budget,
                                  workdir=work, progress=False)
    rows, nonempty = document_rows(feature_map, [texts[p] for p in wanted])
    at = wanted[nonempty]
    direct = similarity_join(rows[nonempty], feature_map, 0.6, target_recall=0.95)
    got = sorted(zip(a.tolist(), b.tolist(), s.tolist()))
    want = sorted(zip(at[direct.i].tolist(), at[direct.j].tolist(), direct.similarity.tolist()))
    assert len(got) > 20 and [g[:2] for g in got] == [w[:2] for w in want]
    np.testing.assert_allclose([g[2] for g in got], [w[2] for w in want], rtol=0, atol=1e-12)
    assert figures["rows"] == at.size and figures["candidates"] == direct.candidates
    assert list(work.iterdir()) == []   # the sets and spilled keys are gone
