"""featurehash.dedup.corpus.kept: the kept records of a file, as read (byte for byte) or converted."""

from __future__ import annotations

import pyarrow.parquet as pq
from featurehash.dedup.corpus.files import CorpusFile
from featurehash.dedup.corpus.kept import output_like, write_kept, write_whole_files
from featurehash.dedup.corpus.records import Fields
from featurehash.dedup.corpus.writing import ShardWriter


def test_same_format_is_byte_for_byte(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "a",   "x": [1]}\n\n{"text": "b"}\n{"text": "c"}')
    file = CorpusFile(str(path), "jsonl", None)
    writer = ShardWriter(str(tmp_path), output_like(file, None), 10)
    write_kept(file, Fields(), {1, 4}, writer)
    (shard,) = writer.close()
    assert open(shard, "rb").read() == b'{"text": "a",   "x": [1]}\n{"text": "c"}\n'


def test_kept_lines_found_across_read_chunks(tmp_path, monkeypatch):
    from featurehash.dedup.corpus import columnar

    lines = [f'{{"text": "document {k}"}}'.encode() for k in range(1, 41)]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n".join(lines))
    monkeypatch.setattr(columnar, "CHUNK", 50)   # a few lines a chunk: kept numbers cross chunk boundaries
    file = CorpusFile(str(path), "jsonl", None)
    writer = ShardWriter(str(tmp_path), output_like(file, None), 100)
    keep = {1, 2, 3, 17, 18, 29, 40}
    write_kept(file, Fields(), keep, writer)
    (shard,) = writer.close()
    assert open(shard, "rb").read() == b"".join(lines[k - 1] + b"\n" for k in sorted(keep))


def test_converted_to_parquet_and_text(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("id,text\n1,first\n2,second\n")
    file = CorpusFile(str(path), "csv", None)
    writer = ShardWriter(str(tmp_path / "p"), output_like(file, "parquet"), 10)
    (tmp_path / "p").mkdir()
    write_kept(file, Fields(), {3}, writer)
    assert pq.read_table(writer.close()).to_pylist() == [{"id": "2", "text": "second"}]
    (tmp_path / "t").mkdir()
    writer = ShardWriter(str(tmp_path / "t"), output_like(file, "text"), 10)
    write_kept(file, Fields(), {2, 3}, writer)
    assert open(writer.close()[0]).read() == "first\nsecond\n"


def test_whole_files_copied_by_name(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_bytes(b"one\ntwo\n")
    (tmp_path / "out").mkdir()
    (name,) = write_whole_files(CorpusFile(str(path), "text", None), Fields(text_unit="file"), {0},
                                str(tmp_path / "out"), 3)
    assert name.endswith("part-00003-doc.txt") and open(name, "rb").read() == b"one\ntwo\n"
