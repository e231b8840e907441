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
