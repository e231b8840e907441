"""similarity_join and duplicate_clusters past memory (featurehash.dedup.sources / spill / output).

The spilled join must be the in-memory join exactly: the same candidates band by band (a bucket's rows all
land in one partition file), each verified once by the same first-shared-band rule read from the keys
file, and the same per-pair arithmetic. So pairs, similarities (bit for bit) and candidate counts are
compared for equality, for every kind of input, one and two collections, verify exact and codes. A budget
of a few kB forces many partition files (and several band ranges) on these few hundred rows.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp

from dedup_support import dense_planted, sparse_planted
from featurehash import create_map
from featurehash.dedup import duplicate_clusters, similarity_join
from featurehash.dedup.sources import open_rows
from featurehash.dedup.spill import RECORD_WORK, BandKeySpill, plan_spill
from featurehash.maps import InputError

THRESHOLD = 0.6
TINY = 100_000   # bytes: forces spilling of keys and iterables here


@pytest.fixture(scope="module")
def sparse_case():
    X = sparse_planted(n_groups=60, group_size=4, n_background=160, dim=1000, nnz=25, seed=5)
    m = create_map({"method": "gcws", "input_dim": 1000, "n_components": 128, "seed": 3})
    return X, m, similarity_join(X, m, THRESHOLD)


def assert_same(expected, found):
    order = np.lexsort((found.j, found.i))   # files keep the order found
    np.testing.assert_array_equal(np.asarray(found.i)[order], expected.i)
    np.testing.assert_array_equal(np.asarray(found.j)[order], expected.j)
    np.testing.assert_array_equal(np.asarray(found.similarity)[order], expected.similarity)
    assert found.candidates == expected.candidates and len(found) == len(expected)


def test_plan_keeps_each_file_under_half_the_budget():
    for n, bands, budget in ((10**6, 30, 2e9), (10**6, 30, 2e8), (400, 22, TINY), (10**8, 40, 1e9)):
        plan = plan_spill(n, bands, budget)
        per_file = n * max(stop - start for start, stop in plan.band_ranges) / plan.partitions
        assert per_file * RECORD_WORK <= budget / 2 * 1.01 or plan.partitions == 256 and len(plan.band_ranges) == bands
        assert plan.partitions & (plan.partitions - 1) == 0
    assert plan_spill(400, 22, TINY).files > 1


def inputs(X, tmp_path):
    sp.save_npz(tmp_path / "stored.npz", X, compressed=False)   # memory-mapped in place
    sp.save_npz(tmp_path / "zipped.npz", X)                      # compressed: loaded
    np.save(tmp_path / "dense.npy", X.toarray())
    np.savez(tmp_path / "one.npz", rows=X.toarray())
    return {"sparse": X, "dense": X.toarray(), "npy": str(tmp_path / "dense.npy"),
            "npz": tmp_path / "stored.npz", "npz-compressed": str(tmp_path / "zipped.npz"),
            "npz-array": str(tmp_path / "one.npz"),
            "iterable": (X[start:start + 64] for start in range(0, X.shape[0], 64)),
            "dense-chunks": [X[start:start + 100].toarray() for start in range(0, X.shape[0], 100)]}


def mapped(array) -> bool:
    while array is not None and not isinstance(array, np.memmap):
        array = array.base
    return array is not None


def test_files_are_memory_mapped(sparse_case, tmp_path):
    X, _, _ = sparse_case
    found = inputs(X, tmp_path)
    rows = open_rows(found["npz"], "x")
    assert mapped(rows.data) and mapped(rows.indices) and (rows != X).nnz == 0
    assert mapped(open_rows(found["npy"], "x")) and not mapped(open_rows(found["npz-compressed"], "x").data)


def test_every_input_spilled_gives_the_in_memory_result(sparse_case, tmp_path, monkeypatch):
    X, m, expected = sparse_case
    spilled = []
    original = BandKeySpill.add_all
    monkeypatch.setattr(BandKeySpill, "add_all", lambda self, *args: spilled.append(self.plan) or original(self, *args))
    dense = similarity_join(X.toarray(), m, THRESHOLD)   # dense rows sum |x - y| in another order
    np.testing.assert_allclose(dense.similarity, expected.similarity, rtol=1e-12)
    for name, source in inputs(X, tmp_path).items():
        spill_dir = tmp_path / f"spill-{name}"
        spill_dir.mkdir()
        found = similarity_join(source, m, THRESHOLD, memory_budget=TINY, spill_dir=spill_dir)
        assert_same(dense if name in ("dense", "npy", "npz-array", "dense-chunks") else expected, found)
        assert os.listdir(spill_dir) == [], name   # temporary files removed
        assert spilled.pop().files > 1, name


def test_dense_rows_and_codes_verification_spilled(sparse_case):
    X = dense_planted(n_groups=40, group_size=3, n_background=120, dim=16, seed=2)
    m = create_map({"method": "gcws", "input_dim": 16, "n_components": 128, "seed": 1, "params": {"power": 0.7}})
    assert_same(similarity_join(X, m, 0.7), similarity_join(X, m, 0.7, memory_budget=TINY))
    X, m, _ = sparse_case
    codes = similarity_join(X, m, THRESHOLD, verify="codes")
    assert_same(codes, similarity_join(X, m, THRESHOLD, verify="codes", memory_budget=TINY))
    chunks = (X[start:start + 64] for start in range(0, X.shape[0], 64))   # hashed, never kept
    assert_same(codes, similarity_join(chunks, m, THRESHOLD, verify="codes", memory_budget=TINY))


def test_two_collections_spilled(sparse_case):
    X, m, _ = sparse_case
    left, right = X[:250], X[250:]
    expected = similarity_join(left, m, THRESHOLD, Y=right)
    assert len(expected) > 10
    chunks = (right[start:start + 50] for start in range(0, right.shape[0], 50))
    assert_same(expected, similarity_join(left, m, THRESHOLD, Y=chunks, memory_budget=TINY))


def test_pairs_written_to_npz_and_parquet(sparse_case, tmp_path):
    X, m, expected = sparse_case
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    written = similarity_join(X, m, THRESHOLD, memory_budget=TINY, output=tmp_path / "pairs.npz")
    assert written.path == str(tmp_path / "pairs.npz") and isinstance(written.i, np.memmap)
    assert_same(expected, written)
    with np.load(tmp_path / "pairs.npz") as archive:
        assert sorted(archive.files) == ["i", "j", "similarity"]
        np.testing.assert_array_equal(archive["similarity"], written.similarity)
    table = similarity_join(X, m, THRESHOLD, output=str(tmp_path / "pairs.parquet"))
    assert table.i is None and len(table) == len(expected)
    read = pq.read_table(tmp_path / "pairs.parquet")
    columns = {name: read.column(name).to_numpy() for name in ("i", "j", "similarity")}
    assert_same(expected, type(expected)(**{**expected.__dict__, **columns}))
    streamed = [np.concatenate(column) for column in zip(*table.blocks(block_pairs=7))]
    np.testing.assert_array_equal(streamed[2], columns["similarity"])
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".partial")]


def test_clusters_from_spilled_pairs_equal_in_memory(sparse_case, tmp_path):
    X, m, _ = sparse_case
    for mode in ("components", "representatives"):
        expected = duplicate_clusters(X, m, THRESHOLD, mode=mode)
        found = duplicate_clusters(X, m, THRESHOLD, mode=mode, memory_budget=TINY, spill_dir=tmp_path)
        np.testing.assert_array_equal(found.labels, expected.labels)
        np.testing.assert_array_equal(found.representatives, expected.representatives)
        assert found.pairs.i is None and len(found.pairs) == len(expected.pairs) > 0
        assert expected.n_clusters < X.shape[0]
    assert os.listdir(tmp_path) == []


def test_temporary_files_removed_on_error(sparse_case, tmp_path):
    X, m, _ = sparse_case

    def chunks():
        yield X[:200]
        yield X[200:300]
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        similarity_join(chunks(), m, THRESHOLD, memory_budget=TINY, spill_dir=tmp_path)
    assert os.listdir(tmp_path) == []


def test_bad_parameters_refused(sparse_case, tmp_path):
    X, m, _ = sparse_case
    with pytest.raises(InputError, match="memory_budget"):
        similarity_join(X, m, THRESHOLD, memory_budget=0)
    with pytest.raises(InputError, match="output"):
        similarity_join(X, m, THRESHOLD, output=tmp_path / "pairs.csv")
    with pytest.raises(InputError, match="no such file"):
        similarity_join(tmp_path / "missing.npy", m, THRESHOLD)
    with pytest.raises(InputError, match="different widths"):
        similarity_join([X[:10], X[10:20, :500]], m, THRESHOLD)
    bad = X[:40].toarray()
    bad[25, 3] = np.nan
    with pytest.raises(InputError, match=r"x: contains NaN or infinity at row\(s\) 25 \(row 25, column 3: nan\) \(in the block of rows 20 to 39\)"):
        similarity_join([X[:20].toarray(), bad[20:]], m, THRESHOLD, verify="codes")
