"""A deduplicated corpus written to an fsspec URL (featurehash.dedup.corpus.remote, memory:// here): staged in a
local work directory, then the shards, duplicates.parquet and summary.json uploaded, the same as a local
output; an output URL holding a summary refused without force."""

from __future__ import annotations

import io
import json
import uuid

import fsspec
import pyarrow.parquet as pq
import pytest
from corpus_support import corpus_folder, outcome
from featurehash.dedup.corpus import dedup_corpus
from featurehash.maps.errors import InputError


def test_memory_url_output_equals_a_local_one(tmp_path):
    folder = corpus_folder(tmp_path)
    url = f"memory://dedup-{uuid.uuid4().hex[:8]}/out"
    options = {"id_field": "id", "on_error": "skip", "shard_rows": 10}
    local = dedup_corpus(folder, tmp_path / "local", **options)
    remote = dedup_corpus(folder, url, work_dir=tmp_path / "staging", **options)
    fs = fsspec.filesystem("memory")
    summary = json.loads(fs.cat(f"{url}/summary.json"))
    assert summary["shards"] == remote["shards"] and all(s.startswith(url) for s in summary["shards"])
    kept = sorted(json.loads(line)["id"] for shard in summary["shards"] for line in fs.cat(shard).splitlines())
    table = pq.read_table(io.BytesIO(fs.cat(f"{url}/duplicates.parquet"))).to_pylist()
    for row in table:
        row["similarity"] = round(row["similarity"], 12)
    assert (kept, sorted(table, key=lambda r: r["id"])) == outcome(tmp_path / "local")
    assert remote["kept"] == local["kept"] and not (tmp_path / "staging").exists()   # staging removed
    with pytest.raises(InputError, match="--force"):
        dedup_corpus(folder, url, **options)
    again = dedup_corpus(folder, url, force=True, **{**options, "shard_rows": 1000})
    assert len(again["shards"]) == 1
    assert len([p for p in fs.ls(url, detail=False) if "part-" in p]) == 1   # the earlier run's shards removed


def test_work_dir_only_for_an_output_url(tmp_path):
    with pytest.raises(InputError, match="work_dir"):
        dedup_corpus(corpus_folder(tmp_path), tmp_path / "out", work_dir=tmp_path / "w", on_error="skip")
