"""featurehash.dedup.corpus.near: the join of the representatives' texts read back from the read stage's parts
(positions, not join rows), and the exact similarity of any pair of positions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_support import chain
from featurehash import create_map
from featurehash.dedup import similarity_join
from featurehash.dedup.corpus.near import near_pairs, pair_similarities, texts_of
from featurehash.dedup.corpus.normalise import default_spec, document_rows


@pytest.fixture
def parts(tmp_path):
    texts = [r["text"] for r in chain()]
    rows = ["short", texts[0], "x y", texts[1], texts[2]]
    paths = [tmp_path / "p0.parquet", tmp_path / "p1.parquet"]
    pq.write_table(pa.table({"text": rows[:2]}), paths[0])
    pq.write_table(pa.table({"text": rows[2:]}), paths[1])
    return paths, rows


def test_texts_of_wanted_positions(parts):
    paths, rows = parts
    got = [(p.tolist(), t) for p, t in texts_of(paths, np.array([1, 4]))]
    assert got == [([1], [rows[1]]), ([4], [rows[4]])]


def test_near_pairs_are_positions(parts, tmp_path):
    paths, rows = parts
    feature_map = create_map(default_spec())
    a, b, s, figures = near_pairs(paths, np.arange(5), feature_map, 0.7, target_recall=0.95, memory_budget=None,
                                  workdir=tmp_path, progress=False)
    direct = similarity_join(document_rows(feature_map, [rows[k] for k in (1, 3, 4)])[0], feature_map, 0.7)
    at = np.array([1, 3, 4])
    assert sorted(zip(a.tolist(), b.tolist())) == sorted(zip(at[direct.i].tolist(), at[direct.j].tolist()))
    assert figures["rows"] == 3 and np.allclose(np.sort(s), np.sort(direct.similarity))


def test_pair_similarities_of_unjoined_pairs(parts):
    paths, rows = parts
    feature_map = create_map(default_spec())
    got = pair_similarities(paths, feature_map, np.array([1, 3]), np.array([4, 4]))
    direct = similarity_join(document_rows(feature_map, [rows[1], rows[4]])[0], feature_map, 0.01)
    assert got[0] < 0.7 <= got[1] and (direct.similarity.size == 0 or np.isclose(direct.similarity[0], got[0]))


def test_texts_of_reads_row_group_by_row_group_in_position_order(tmp_path):
    rows = [f"document {k} " + "word " * (k % 7) for k in range(50)]
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    pq.write_table(pa.table({"text": rows[:30]}), paths[0], row_group_size=7)
    pq.write_table(pa.table({"text": rows[30:]}), paths[1], row_group_size=5)
    every = [(p.tolist(), t) for p, t in texts_of(paths, batch_rows=3)]
    assert [k for p, _ in every for k in p] == list(range(50)) and [t for _, ts in every for t in ts] == rows
    assert all(len(p) <= 3 for p, _ in every)
    wanted = np.array([0, 13, 14, 29, 30, 49])   # row groups 0, 1, 2, 4 of the first file and 0, 3 of the second
    got = [(p.tolist(), t) for p, t in texts_of(paths, wanted, arrow=True)]
    assert [k for p, _ in got for k in p] == wanted.tolist()
    assert [t.as_py() for _, ts in got for t in ts] == [rows[k] for k in wanted]


def test_pair_similarities_of_a_set_map_equal_the_general_kernel(parts):
    from featurehash.dedup.corpus.sets import takes_sets
    from featurehash.lsh.similarity import ExactPairs, similarity_of

    paths, rows = parts
    feature_map = create_map(default_spec())
    assert takes_sets(feature_map)
    x, y = np.array([1, 3, 1, 0, 2, 0]), np.array([4, 4, 3, 1, 4, 2])   # (0, 2): two documents without a shingle
    got = pair_similarities(paths, feature_map, x, y)
    matrix = document_rows(feature_map, rows)[0]
    general = np.nan_to_num(ExactPairs(similarity_of(feature_map), matrix)(x, y))
    assert np.array_equal(got, general)
