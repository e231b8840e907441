"""featurehash.dedup.corpus.columnar: JSON Lines read in columns give what `records` gives line by line (numbers,
ids, keys, texts, blank lines), and any chunk holding a record `records` refuses is read by `records`, so bad
records are named by file and line whichever reader meets them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from featurehash.dedup.corpus import columnar
from featurehash.dedup.corpus.columnar import Block, jsonl_blocks
from featurehash.dedup.corpus.files import CorpusFile
from featurehash.dedup.corpus.records import BadRecord, Fields, read
from featurehash.dedup.corpus.scan import scan_table
from featurehash.maps.errors import InputError


def _flat(items):
    """(number, id, key, text) of each good record and (number, reason) of each bad one."""
    good, bad = [], []
    for item in items:
        if isinstance(item, Block):
            good += list(zip(item.number.tolist(), item.id.to_pylist(), item.key.tolist(), item.text.to_pylist()))
        elif isinstance(item, BadRecord):
            bad.append((item.number, item.reason))
        else:
            good.append((item.number, item.id, item.key, item.text))
    return good, bad


def _same_as_records(path, fields):
    file = CorpusFile(str(path), "jsonl", None)
    blank_fast, blank_slow = [0], [0]
    fast = _flat(jsonl_blocks(file, fields, blank_fast))
    slow = _flat(read(file, fields, blank_slow))
    nan = lambda rows: [tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in r) for r in rows]
    assert nan(fast[0]) == nan(slow[0]) and fast[1] == slow[1] and blank_fast == blank_slow
    return fast


LINES = ['{"id": "a", "text": "Hello  World", "meta": {"x": [1, 2.5e3, null, true]}}', "", "   \t",
         '{"id": "b", "text": "caf\\u00e9 \\ud83d\\ude00 Σ", "k": 3}', "\r", '{"text": "x", "id": "c", "k": null}']


@pytest.mark.parametrize("chunk", [16, 64, 1 << 20])
def test_good_file_in_columns_equals_records(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(LINES * 5))   # no newline at the end
    good, bad = _same_as_records(path, Fields(id="id", key="k"))
    assert len(good) == 15 and not bad
    good, _ = _same_as_records(path, Fields())   # ids "<file>:<line>"
    assert good[1][1] == f"{path}:4"


@pytest.mark.parametrize("bad_line", [
    "not json", "[1, 2]", '{"text": 5}', '{"id": "z"}', '{"text": "a", "x": NaN}', '{"text": "a", "x": Infinity}',
    '{"text": "a"} {"text": "b"}', '{"text": "a\\ud800"}', '{"text": "a", "n": 123456789012345678901234567}',
    '{"text": "a", /* c */ "n": 1}', '{"text": "a", "id": null}', '{"text": "a",}', '\x0c{"text": "a"}',
    '{"text": "a", "text": "b"}', '{"text": "a", "k": "2.5"}', '{"text": "a", "k": true}', '{"text": "a", "id": 7}',
    '{"text": "a", "id": 7.5}'])
def test_a_chunk_records_refuses_or_types_pyarrow_would_not_take_goes_to_records(tmp_path, bad_line):
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join([LINES[0], bad_line, LINES[3]]) + "\n")
    _same_as_records(path, Fields(id="id", key="k"))


def test_not_utf8_is_a_bad_record_named_by_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "a"}\n\n{"text": "b\xff"}\n{"text": "c"}\n')
    file = CorpusFile(str(path), "jsonl", None)
    with pytest.raises(InputError, match=rf"^{path}:3: not UTF-8"):
        scan_table(file, Fields())
    table, counts = scan_table(file, Fields(), on_error="skip")
    assert table["number"].to_pylist() == [1, 4] and counts.bad == 1 and counts.blank == 1


def test_numeric_ids_are_written_as_python_writes_them(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 12, "text": "a"}\n{"id": -3, "text": "b"}\n')
    good, _ = _same_as_records(path, Fields(id="id"))
    assert [g[1] for g in good] == ["12", "-3"]
    assert np.array_equal(scan_table(CorpusFile(str(path), "jsonl", None), Fields(id="id"))[0]["number"], [1, 2])
