"""featurehash.dask.dedup_corpus (threads and a two-worker distributed cluster) against featurehash.dedup.corpus
on one machine: the same kept records and duplicates table (by id) on the small corpus of corpus_support."""

from __future__ import annotations

import pytest

pytest.importorskip("dask.dataframe", reason="dask is an optional extra: pip install 'featurehash[dask]'")
import featurehash.dask as fhd
from corpus_support import corpus_folder, outcome
from featurehash.dedup.corpus import dedup_corpus


def test_dask_equals_one_machine(tmp_path):
    folder = corpus_folder(tmp_path)
    options = {"id_field": "id", "keep": "min:score", "on_error": "skip", "shard_rows": 10}
    one = dedup_corpus(folder, tmp_path / "one", **options)
    many = fhd.dedup_corpus(folder, tmp_path / "dask", **options)
    assert outcome(tmp_path / "dask") == outcome(tmp_path / "one")
    for name in ("documents_in", "exact_duplicates", "near_duplicates", "kept", "bad_records", "bytes_kept"):
        assert many[name] == one[name], name


def test_dask_distributed_incremental_equals_one_machine(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    folder = corpus_folder(tmp_path)
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "old.jsonl").write_text((folder / "part0.jsonl").read_text())
    options = {"id_field": "id", "on_error": "skip", "reference": clean}
    one = dedup_corpus(folder, tmp_path / "one", **options)
    with distributed.Client(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None):
        many = fhd.dedup_corpus(folder, tmp_path / "dask", **options)
    assert outcome(tmp_path / "dask") == outcome(tmp_path / "one")
    assert many["reference_documents"] == one["reference_documents"] > 0 and many["kept"] == one["kept"]


@pytest.mark.parametrize("kind", ["tokens", "vector"])
def test_dask_vectors_and_tokens_equal_one_machine(tmp_path, kind):
    from corpus_support import vector_rows, write

    folder = tmp_path / "in"
    folder.mkdir()
    rows = vector_rows(kind)
    for k in range(3):
        write(rows[k::3], folder / f"part{k}", "jsonl")
    options = {"id_field": "id", "keep": "min:score", "shard_rows": 10, {"tokens": "tokens_field", "vector": "vector_field"}[kind]: kind}
    one = dedup_corpus(folder, tmp_path / "one", **options)
    many = fhd.dedup_corpus(folder, tmp_path / "dask", **options)
    assert outcome(tmp_path / "dask") == outcome(tmp_path / "one")
    assert many["near_duplicates"] == one["near_duplicates"] > 0 and many["kept"] == one["kept"]
