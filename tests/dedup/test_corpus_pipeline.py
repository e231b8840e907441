"""dedup_corpus end to end: every input format (plain, gzip, zstd), folders and globs, the keep policies, the
duplicates table and summary, --force, bad records by file and line, blank lines, resume, incremental runs."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from corpus_support import documents, expected_removed, write
from featurehash.dedup.corpus import dedup_corpus
from featurehash.dedup.corpus import pipeline as pipeline_module
from featurehash.maps.errors import InputError


def _removed(output) -> dict[str, str]:
    table = pq.read_table(f"{output}/duplicates.parquet").to_pylist()
    return {row["id"]: row["kept_id"] for row in table}


def _kept_ids(output, fmt) -> list[str]:
    shards = json.loads((output / "summary.json").read_text())["shards"]
    ids = []
    for shard in shards:
        if fmt == "parquet":
            ids += pq.read_table(shard)["id"].to_pylist()
        elif fmt == "csv":
            import csv
            import gzip

            opener = gzip.open if shard.endswith(".gz") else open
            with opener(shard, "rt", newline="") as file:
                ids += [row["id"] for row in csv.DictReader(file)]
        else:
            import fsspec

            with fsspec.open(shard, "rt", compression="infer") as file:
                ids += [json.loads(line)["id"] for line in file]
    return ids


def _compression(name):
    if name == "zstd":
        pytest.importorskip("zstandard", reason="zstandard is not installed: .zst input is read only when it is")
    return name


@pytest.mark.parametrize("fmt, compression", [("jsonl", None), ("jsonl", "gzip"), ("jsonl", "zstd"),
                                              ("csv", None), ("csv", "gzip"), ("parquet", None)])
def test_formats_give_the_same_duplicates(tmp_path, fmt, compression):
    rows = documents()
    source = write(rows, tmp_path / "corpus", fmt, _compression(compression))
    out = tmp_path / "out"
    summary = dedup_corpus(source, out, id_field="id", shard_rows=25)
    assert _removed(out) == expected_removed()
    assert summary["documents_in"] == len(rows) and summary["kept"] == 60
    assert summary["exact_duplicates"] == 6 and summary["near_duplicates"] == 9
    assert len(summary["shards"]) == 3 and all(s.endswith(source.name.split("corpus")[1]) for s in summary["shards"])
    assert _kept_ids(out, fmt) == [r["id"] for r in rows[:60]]
    if fmt == "parquet":   # every input column comes back
        assert pq.read_table(summary["shards"][0]).schema.names == ["id", "text", "score"]


def test_plain_text_lines_and_files_and_globs(tmp_path):
    rows = documents()
    folder = tmp_path / "in"
    folder.mkdir()
    write(rows[:40], folder / "a", "text")
    write(rows[40:], folder / "b", "text")
    summary = dedup_corpus(str(folder / "*.txt"), tmp_path / "out")
    assert summary["kept"] == 60 and summary["documents_in"] == len(rows)
    assert all(i.startswith(str(folder)) and ":" in i for i in _removed(tmp_path / "out"))
    per_file = tmp_path / "docs"
    per_file.mkdir()
    for k, row in enumerate(rows[:12]):
        (per_file / f"doc{k:02d}.txt").write_text(row["text"])
    (per_file / "zcopy.txt").write_text(rows[3]["text"])
    summary = dedup_corpus(per_file, tmp_path / "out2", text_unit="file")
    assert summary["kept"] == 12 and _removed(tmp_path / "out2") == {str(per_file / "zcopy.txt"):
                                                                      str(per_file / "doc03.txt")}


@pytest.mark.parametrize("keep, kept_of_e0", [("first", "d0"), ("longest", "e0"), ("shortest", "d0"),
                                              ("max:score", "e0"), ("min:score", "d0")])
def test_keep_policies(tmp_path, keep, kept_of_e0):
    source = write(documents(), tmp_path / "c", "jsonl")
    dedup_corpus(source, tmp_path / "out", id_field="id", keep=keep)
    removed = _removed(tmp_path / "out")
    assert len(removed) == 15
    assert (removed.get("e0") or "e0") == kept_of_e0 or removed.get("d0") == kept_of_e0


def test_duplicates_table_similarities(tmp_path):
    source = write(documents(), tmp_path / "c", "jsonl")
    dedup_corpus(source, tmp_path / "out", id_field="id")
    table = pq.read_table(tmp_path / "out" / "duplicates.parquet").to_pylist()
    exact = [r for r in table if r["id"].startswith("e")]
    near = [r for r in table if r["id"].startswith("n")]
    assert all(r["similarity"] == 1.0 and r["kind"] == "exact" for r in exact)
    assert all(r["similarity"] == pytest.approx(42 / 54, abs=0.05) and r["kind"] == "near" for r in near)
    assert sorted({r["cluster"] for r in table}) == list(range(14))   # d10 has an exact and a near copy


def test_refuses_to_overwrite_without_force(tmp_path):
    source = write(documents(), tmp_path / "c", "jsonl")
    dedup_corpus(source, tmp_path / "out", id_field="id")
    with pytest.raises(InputError, match="--force"):
        dedup_corpus(source, tmp_path / "out", id_field="id")
    other = tmp_path / "busy"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        dedup_corpus(source, other, id_field="id")
    summary = dedup_corpus(source, tmp_path / "out", id_field="id", keep="longest", force=True)
    assert summary["kept"] == 60 and not summary["resumed"]


def test_bad_records_refused_or_skipped_by_file_and_line(tmp_path):
    path = tmp_path / "c.jsonl"
    lines = [json.dumps(r) for r in documents()[:5]]
    lines[2] = '{"id": "x", "text": '   # truncated JSON on line 3
    path.write_text("\n".join(lines[:4]) + "\n\n   \n" + '{"id": "y"}\n' + lines[4] + "\n")
    with pytest.raises(InputError, match=rf"{path}:3: not JSON"):
        dedup_corpus(path, tmp_path / "out", id_field="id")
    summary = dedup_corpus(path, tmp_path / "out", id_field="id", on_error="skip", force=True)
    assert summary["bad_records"] == 2 and summary["blank_lines"] == 2 and summary["kept"] == 4
    assert summary["bad_named"][0].startswith(f"{path}:3: not JSON")
    assert summary["bad_named"][1] == f"{path}:7: no 'text' field (a string)"
    assert _kept_ids(tmp_path / "out", "jsonl") == ["d0", "d1", "d3", "d4"]


def test_interrupted_run_resumes_to_the_same_output(tmp_path, monkeypatch):
    folder = tmp_path / "in"
    folder.mkdir()
    rows = documents()
    for k in range(3):
        write(rows[k::3], folder / f"part{k}", "jsonl")
    clean = dedup_corpus(folder, tmp_path / "clean", id_field="id", shard_rows=7)
    real = pipeline_module.ShardWriter.lines
    calls = {"n": 0}

    def failing(self, raws):   # the write stage dies part way, after some shards were written
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        real(self, raws)

    monkeypatch.setattr(pipeline_module.ShardWriter, "lines", failing)
    with pytest.raises(KeyboardInterrupt):
        dedup_corpus(folder, tmp_path / "out", id_field="id", shard_rows=7)
    monkeypatch.setattr(pipeline_module.ShardWriter, "lines", real)
    resumed = dedup_corpus(folder, tmp_path / "out", id_field="id", shard_rows=7)
    assert resumed["resumed"] and resumed["stages"]["near"].get("reused")
    assert resumed["stages"]["read"]["files_reused"] == 3
    assert [p.split("/")[-1] for p in resumed["shards"]] == [p.split("/")[-1] for p in clean["shards"]]
    for a, b in zip(resumed["shards"], clean["shards"]):
        assert open(a, "rb").read() == open(b, "rb").read()
    assert _removed(tmp_path / "out") == _removed(tmp_path / "clean")


def test_incremental_batch_keeps_only_what_is_new(tmp_path):
    rows = documents()
    clean = write(rows[:60], tmp_path / "clean", "jsonl")
    batch = [dict(r, id=f"new-{r['id']}") for r in rows[55:]] + [{"id": "fresh", "text": "an entirely new "
                                                                  "document about nothing in particular at all"}]
    new = write(batch, tmp_path / "batch", "jsonl")
    summary = dedup_corpus(new, tmp_path / "out", id_field="id", reference=clean)
    assert summary["reference_documents"] == 60 and summary["documents_in"] == len(batch)
    assert _kept_ids(tmp_path / "out", "jsonl") == ["fresh"]
    removed = _removed(tmp_path / "out")
    assert removed["new-d57"] == "d57" and removed["new-n3"] == "d3"


def test_chained_cluster_similarity_to_the_kept_document_is_computed(tmp_path):
    from corpus_support import chain
    from featurehash import create_map
    from featurehash.dedup.corpus import default_spec, document_rows
    from featurehash.lsh.similarity import ExactPairs, similarity_of

    source = write(chain(), tmp_path / "chain", "jsonl")
    summary = dedup_corpus(source, tmp_path / "out", id_field="id")
    table = {r["id"]: r for r in pq.read_table(tmp_path / "out" / "duplicates.parquet").to_pylist()}
    assert summary["kept"] == 1 and set(table) == {"c1", "c2"} and table["c2"]["kept_id"] == "c0"
    feature_map = create_map(default_spec())
    rows, _ = document_rows(feature_map, [r["text"].lower() for r in chain()])
    exact = ExactPairs(similarity_of(feature_map), rows)
    far, near = exact(np.array([0, 0]), np.array([2, 1]))
    assert far < 0.7 <= near
    assert table["c2"]["similarity"] == pytest.approx(far, rel=1e-12)
    assert table["c1"]["similarity"] == pytest.approx(near, rel=1e-12)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet", "text"])
def test_output_format_converts_every_field(tmp_path, fmt):
    source = write(documents(), tmp_path / "c", fmt)
    target = "parquet" if fmt != "parquet" else "jsonl"
    summary = dedup_corpus(source, tmp_path / "out", id_field=None if fmt == "text" else "id",
                           output_format=target)
    assert summary["kept"] == 60 and all(s.endswith(f".{target}") for s in summary["shards"])
    if target == "parquet":
        table = pq.read_table(summary["shards"])
        expected = {"text"} if fmt == "text" else {"id", "text", "score"}
        assert set(table.schema.names) == expected and table.num_rows == 60
        assert table["text"].to_pylist() == [r["text"] for r in documents()[:60]]
    else:
        assert _kept_ids(tmp_path / "out", "jsonl") == [r["id"] for r in documents()[:60]]
