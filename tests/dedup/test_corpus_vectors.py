"""Corpora that are not text (featurehash.dedup.corpus.vectors, vector_near): token lists and vectors in every
form find the planted exact and near copies, canonical forms hash alike, bad records are named by file and
line, and what cannot be read is refused."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_support import expected_removed, vector_rows, write
from featurehash.dedup.corpus import dedup_corpus
from featurehash.dedup.corpus.vectors import VectorFields, _vector, token_hashes
from featurehash.maps.errors import InputError

FIELD = {"tokens": "tokens_field", "vector": "vector_field"}


def _duplicates(output) -> dict[str, tuple[str, str]]:
    return {r["id"]: (r["kept_id"], r["kind"]) for r in pq.read_table(output / "duplicates.parquet").to_pylist()}


@pytest.mark.parametrize("kind", ["tokens", "vector"])
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_planted_copies_found_in_vectors_and_token_lists(tmp_path, kind, fmt):
    rows = vector_rows(kind)
    if fmt == "parquet" and kind == "vector":   # Parquet holds one type a column: the {indices, values} form
        for row in rows:
            v = row["vector"]
            pairs = (list(enumerate(v)) if isinstance(v, list) else
                     list(zip(v["indices"], v["values"])) if "indices" in v else [(int(k), w) for k, w in v.items()])
            row["vector"] = {"indices": [i for i, _ in pairs], "values": [float(w) for _, w in pairs]}
    source = write(rows, tmp_path / "in", fmt)
    summary = dedup_corpus(source, tmp_path / "out", id_field="id", **{FIELD[kind]: kind})
    found = _duplicates(tmp_path / "out")
    assert {i: kept for i, (kept, _) in found.items()} == expected_removed()
    assert {i for i, (_, how) in found.items() if how == "exact"} == {i for i in found if i.startswith("e")}
    assert summary["records"] == kind and summary["kept"] == len(rows) - len(found)
    shards = summary["shards"]
    kept = (pq.read_table(shards).to_pylist() if fmt == "parquet"
            else [json.loads(line) for shard in shards for line in open(shard)])
    assert {r["id"] for r in kept} == {r["id"] for r in rows} - set(found)
    assert all(set(r) == set(rows[0]) for r in kept)   # every field written back


def test_weighted_tokens_count_repeats(tmp_path):
    rows = [{"id": "a", "t": ["x", "y", "y"]}, {"id": "b", "t": ["y", "x", "y"]}, {"id": "c", "t": ["x", "y"]}]
    source = write(rows, tmp_path / "in", "jsonl")
    dedup_corpus(source, tmp_path / "sets", id_field="id", tokens_field="t", threshold=0.9)
    assert _duplicates(tmp_path / "sets") == {"b": ("a", "exact"), "c": ("a", "exact")}
    dedup_corpus(source, tmp_path / "weighted", id_field="id", tokens_field="t", threshold=0.9, weighted=True)
    assert _duplicates(tmp_path / "weighted") == {"b": ("a", "exact")}   # c weighs y once: weighted Jaccard < 0.9


def test_canonical_forms_hash_alike():
    fields = VectorFields()
    forms = [[0, 1.5, 0, 2], {"1": 1.5, "3": 2}, {"indices": [3, 1], "values": [2, 1.5]}, [[3, 2.0], [1, 1.5]],
             {"0": 0, "1": 1.5, "3": 2}]
    for form in forms:
        indices, values = _vector(1, form, fields)
        assert indices.tolist() == [1, 3] and values.tolist() == [1.5, 2.0]
    tokens = pa.array([["b", "a", "a"], ["a", "b"], ["a", "b", "b"], ["é", "a"], ["a", "é"]], pa.list_(pa.string()))
    sets, counts = token_hashes(tokens, False), token_hashes(tokens, True)
    assert (sets[0] == sets[1]).all() and (sets[1] == sets[2]).all() and (sets[3] == sets[4]).all()
    assert not (sets[0] == sets[3]).all()
    assert not (counts[0] == counts[1]).all() and not (counts[0] == counts[2]).all() and (counts[3] == counts[4]).all()


@pytest.mark.parametrize("value, reason", [
    ([1, -2], "a negative value"), ([1, float("nan")], "not JSON"), ({"x": 1}, "must be integers"),
    ({"indices": [1, 1], "values": [1, 2]}, "an index given twice"), ("text", "not a list of numbers"),
    ([True, 1], "must be numbers")])
def test_bad_vectors_named_by_file_and_line(tmp_path, value, reason):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"vector": [1, 2]}) + "\n\n" + json.dumps({"vector": value}).replace("NaN", "nan") + "\n")
    with pytest.raises(InputError, match=f"in.jsonl:3.*{reason}"):
        dedup_corpus(path, tmp_path / "out", vector_field="vector")
    summary = dedup_corpus(path, tmp_path / "skip", vector_field="vector", on_error="skip")
    assert summary["bad_records"] == 1 and summary["kept"] == 1 and "in.jsonl:3" in summary["bad_named"][0]


def test_refused_what_cannot_be_read(tmp_path):
    source = write([{"text": "a b c d", "tokens": "a"}], tmp_path / "in", "csv")
    with pytest.raises(InputError, match="JSON Lines or Parquet"):
        dedup_corpus(source, tmp_path / "csv", tokens_field="tokens")
    jsonl = write([{"tokens": ["a", "b"], "vector": [1.0]}], tmp_path / "in", "jsonl")
    with pytest.raises(InputError, match="not both"):
        dedup_corpus(jsonl, tmp_path / "both", tokens_field="tokens", vector_field="vector")
    text_spec = {"method": "minhash", "n_components": 64, "input": {"hashing": {"weighting": "binary",
                                                                                "alternate_sign": False}}}
    with pytest.raises(InputError, match="without a text stage"):
        dedup_corpus(jsonl, tmp_path / "spec", vector_field="vector", spec=text_spec)
    with pytest.raises(InputError, match="jsonl or parquet"):
        dedup_corpus(jsonl, tmp_path / "fmt", vector_field="vector", output_format="text")
    narrow = {"method": "gcws", "input_dim": 4, "n_components": 64, "seed": 1}
    bad = tmp_path / "wide.jsonl"
    bad.write_text(json.dumps({"vector": {"7": 1.0}}) + "\n")
    with pytest.raises(InputError, match=r"wide.jsonl:1.*outside \[0, 4\)"):
        dedup_corpus(bad, tmp_path / "wide", vector_field="vector", spec=narrow)
