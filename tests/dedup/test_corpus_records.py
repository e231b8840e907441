"""featurehash.dedup.corpus.records: each format's records with their line (or row) numbers, ids and keys;
blank lines counted, bad records yielded with their number and reason."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from featurehash.dedup.corpus.files import CorpusFile
from featurehash.dedup.corpus.records import BadRecord, Fields, read


def _read(path, fmt, fields=Fields()):
    blank = [0]
    return list(read(CorpusFile(str(path), fmt, None), fields, blank)), blank[0]


def test_jsonl_numbers_ids_keys_and_bad_lines(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"id": 7, "text": "one", "n": "2.5"}\n\n"just a string"\n{"text": 3}\n\xff\xfe\n'
                     b'{"id": 8, "text": "two", "n": "high"}\n{"text": "no id"}\n')
    records, blank = _read(path, "jsonl", Fields(id="id", key="n"))
    assert blank == 1
    good = [r for r in records if not isinstance(r, BadRecord)]
    bad = [(r.number, r.reason) for r in records if isinstance(r, BadRecord)]
    assert [(r.number, r.id, r.text, r.key) for r in good] == [(1, "7", "one", 2.5)]
    assert [n for n, _ in bad] == [3, 4, 5, 6, 7]
    assert "expected an object" in bad[0][1] and "a int as its 'text'" in bad[1][1] and "not UTF-8" in bad[2][1]
    assert "not a number" in bad[3][1] and "no 'id' field" in bad[4][1]


def test_text_lines_and_whole_files(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("first\n  \nsecond\r\n")
    records, blank = _read(path, "text")
    assert [(r.number, r.text, r.id) for r in records] == [(1, "first", f"{path}:1"), (3, "second", f"{path}:3")]
    assert blank == 1
    whole, _ = _read(path, "text", Fields(text_unit="file"))
    assert len(whole) == 1 and whole[0].text == "first\n  \nsecond\r\n" and whole[0].id == str(path)


def test_csv_lines_count_quoted_newlines(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text('id,text\n1,"two\nlines"\n2,plain\n3\n,\n')
    records, blank = _read(path, "csv", Fields(id="id"))
    assert [(r.number, r.id) for r in records if not isinstance(r, BadRecord)] == [(2, "1"), (4, "2")]
    assert [(r.number, r.reason) for r in records if isinstance(r, BadRecord)] == [(5, "1 values for 2 columns")]
    assert blank == 1


def test_parquet_rows_from_zero(tmp_path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": ["a", None, "c"], "id": [1, 2, 3]}), path)
    records, _ = _read(path, "parquet", Fields(id="id"))
    assert [r.number for r in records] == [0, 1, 2] and isinstance(records[1], BadRecord)
    assert records[2].raw == 2 and records[2].id == "3"
