"""featurehash.dedup.corpus.scan: one file's columns (numbers, ids, byte lengths, normalised texts, hashes),
bad records refused by file and line or skipped and counted."""

from __future__ import annotations

import pytest
from featurehash.dedup.corpus.files import CorpusFile
from featurehash.dedup.corpus.normalise import hash128
from featurehash.dedup.corpus.records import Fields
from featurehash.dedup.corpus.scan import scan_table
from featurehash.maps.errors import InputError


def test_columns_of_a_file(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": "x", "text": "Héllo  World"}\n\n{"id": "y", "text": "hello world"}\n')
    table, counts = scan_table(CorpusFile(str(path), "jsonl", None), Fields(id="id"))
    assert table["number"].to_pylist() == [1, 3] and table["id"].to_pylist() == ["x", "y"]
    assert table["length"].to_pylist() == [13, 11] and table["text"].to_pylist() == ["héllo world", "hello world"]
    assert table["h0"].to_pylist()[1] == int(hash128(["hello world"])[0, 0])
    assert counts.records == 2 and counts.blank == 1 and counts.bad == 0


def test_bad_record_refused_or_counted(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "a"}\n[1]\n{"text": "b"}\n')
    file = CorpusFile(str(path), "jsonl", None)
    with pytest.raises(InputError, match=rf"^{path}:2: expected an object"):
        scan_table(file, Fields())
    table, counts = scan_table(file, Fields(), on_error="skip")
    assert table.num_rows == 2 and counts.bad == 1 and counts.named == [f"{path}:2: expected an object with a "
                                                                        "'text' field, got list"]
