"""featurehash.dedup.corpus.writing: shards of at most shard_rows records in the input's format and compression,
a failed write leaving no shard behind."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from featurehash.dedup.corpus.files import CorpusFile
from featurehash.dedup.corpus.writing import ShardWriter


def test_lines_are_sharded_and_compressed(tmp_path):
    writer = ShardWriter(str(tmp_path), CorpusFile("in.jsonl.gz", "jsonl", "gzip"), shard_rows=2)
    writer.lines([b'{"a": 1}\n', b'{"a": 2}', b'{"a": 3}\n'])
    shards = writer.close()
    assert [s.rsplit("/", 1)[1] for s in shards] == ["part-00000.jsonl.gz", "part-00001.jsonl.gz"]
    assert gzip.decompress(open(shards[0], "rb").read()) == b'{"a": 1}\n{"a": 2}\n'
    assert writer.count == 3 and not list(tmp_path.glob("*.partial"))


def test_csv_rows_under_the_header(tmp_path):
    writer = ShardWriter(str(tmp_path), CorpusFile("in.csv", "csv", None), shard_rows=10)
    writer.rows(["id", "text"], [["1", "a, b"], ["2", 'say "hi"']])
    (shard,) = writer.close()
    assert open(shard, newline="").read() == 'id,text\r\n1,"a, b"\r\n2,"say ""hi"""\r\n'


def test_parquet_tables_split_at_shard_rows(tmp_path):
    writer = ShardWriter(str(tmp_path), CorpusFile("in.parquet", "parquet", None), shard_rows=3)
    writer.table(pa.table({"id": [1, 2, 3, 4, 5], "text": list("abcde")}))
    shards = writer.close()
    assert [pq.read_table(s)["id"].to_pylist() for s in shards] == [[1, 2, 3], [4, 5]]


def test_abort_removes_every_shard(tmp_path):
    writer = ShardWriter(str(tmp_path), CorpusFile("in.txt", "text", None), shard_rows=1)
    writer.lines([b"a\n", b"b\n"])
    writer.abort()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("rows", [0])
def test_nothing_written_makes_no_shard(tmp_path, rows):
    writer = ShardWriter(str(tmp_path), CorpusFile("in.txt", "text", None), shard_rows=1)
    assert writer.close() == [] and list(tmp_path.iterdir()) == []
