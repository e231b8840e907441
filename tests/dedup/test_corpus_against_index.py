"""A batch deduplicated against an LSH index in Redis (featurehash.dedup.corpus.against, over the embedded Redis
of tests/index_support.py): the first batch fills the index (--add-to-index), the second keeps only what is new
to it, its copies of indexed documents named with the item and the index's exact similarity."""

from __future__ import annotations

import uuid

import pyarrow.parquet as pq
import pytest
import redis
from corpus_support import documents, write
from featurehash.dedup.corpus import dedup_corpus, default_spec
from featurehash.maps import create_map
from featurehash.maps.errors import InputError
from featurehash.store import LSHIndexes
from index_support import redis_url  # noqa: F401


@pytest.fixture
def index_prefix(redis_url):  # noqa: F811
    prefix = f"featurehash-corpus-test-{uuid.uuid4().hex[:12]}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"{prefix}*"):
        client.delete(key)
    client.close()


def test_second_batch_keeps_only_what_is_new_to_the_index(tmp_path, redis_url, index_prefix):  # noqa: F811
    client = redis.Redis.from_url(redis_url)
    indexes = LSHIndexes(client, key_prefix=index_prefix)
    indexes.create(create_map(default_spec()), name="clean", threshold=0.7, vectors="sparse")
    rows = documents()
    first = write(rows[:30], tmp_path / "first", "jsonl")     # d0..d29: distinct
    options = {"id_field": "id", "against_index": indexes.open("clean")}
    one = dedup_corpus(first, tmp_path / "one", add_to_index=True, **options)
    assert one["kept"] == 30 and one["index"]["added"] == 30 and one["index"]["compared"] == "exact"
    assert indexes.open("clean").describe()["items"] == 30
    # the second batch: d30..d59 (new), exact copies e0..e50 and near copies n3..n59 (some of the first batch)
    second = write(rows[30:], tmp_path / "second", "jsonl")
    two = dedup_corpus(second, tmp_path / "two", **options)
    table = {r["id"]: r for r in pq.read_table(tmp_path / "two" / "duplicates.parquet").to_pylist()}
    expected = {f"e{k}": f"d{k}" for k in range(0, 30, 10)} | {f"n{k}": f"d{k}" for k in range(3, 30, 7)}
    assert {i: r["kept_id"] for i, r in table.items() if r["kind"] == "index"} == expected
    index = indexes.open("clean")
    for i, kept in expected.items():
        text = next(r["text"] for r in rows if r["id"] == i)
        assert table[i]["similarity"] == pytest.approx(index.query([text], top_k=1).results[0][0][1])
        assert table[i]["similarity"] >= 0.7
    assert two["index_duplicates"] == len(expected) and "added" not in two["index"]
    assert index.describe()["items"] == 30   # not added without --add-to-index
    client.close()


def test_a_different_map_or_a_missing_index_is_refused(tmp_path, redis_url, index_prefix):  # noqa: F811
    client = redis.Redis.from_url(redis_url)
    index = LSHIndexes(client, key_prefix=index_prefix).create(create_map(default_spec()), name="clean",
                                                               threshold=0.7)
    source = write(documents(5), tmp_path / "in", "jsonl")
    with pytest.raises(InputError, match="leave --spec out"):
        dedup_corpus(source, tmp_path / "a", against_index=index, spec=default_spec(weighted=True))
    with pytest.raises(InputError, match="needs an index"):
        dedup_corpus(source, tmp_path / "c", add_to_index=True)
    client.close()


def test_command_line_opens_the_index_by_name(tmp_path, redis_url, index_prefix, capsys):  # noqa: F811
    import json

    from featurehash.cli import BAD_INPUT, main

    client = redis.Redis.from_url(redis_url)
    LSHIndexes(client, key_prefix=index_prefix).create(create_map(default_spec()), name="clean", threshold=0.7)
    source = write(documents(20), tmp_path / "in", "jsonl")
    argv = ["dedup", str(source), "--id-field", "id", "--against-index", "clean", "--redis-url", redis_url,
            "--key-prefix", index_prefix, "--no-progress"]
    assert main(argv + ["--output", str(tmp_path / "one"), "--add-to-index"]) == 0
    assert json.loads(capsys.readouterr().out)["index"]["added"] == 20
    assert main(argv + ["--output", str(tmp_path / "two")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kept"] == 0 and summary["index_duplicates"] == 25   # its in-batch copies too
    assert main(argv[:5] + ["other"] + argv[6:] + ["--output", str(tmp_path / "three")]) == BAD_INPUT
    assert "no index 'other'" in capsys.readouterr().err
    client.close()
