"""featurehash.dedup.corpus.files: formats and compressions from names, folders, globs and several paths expanded
in order, refusals naming the path."""

from __future__ import annotations

import pytest
from featurehash.dedup.corpus.files import CorpusFile, expand, kind_of, open_binary
from featurehash.maps.errors import InputError


@pytest.mark.parametrize("name, kind", [("a.jsonl", ("jsonl", None)), ("a.ndjson.gz", ("jsonl", "gzip")),
                                        ("a.CSV.zst", ("csv", "zstd")), ("a.parquet", ("parquet", None)),
                                        ("a.txt.bz2", ("text", "bz2")), ("a.bin", None)])
def test_kind_of_names(name, kind):
    assert kind_of(name) == kind


def test_suffix_repeats_format_and_compression():
    assert CorpusFile("x", "jsonl", "gzip").suffix == ".jsonl.gz"
    assert CorpusFile("x", "csv", None).suffix == ".csv"


def test_folders_globs_and_paths_in_order(tmp_path):
    (tmp_path / "b").mkdir()
    for name in ("b/2.jsonl", "b/1.jsonl", "a.jsonl", "b/.hidden.jsonl", "b/_work.jsonl", "b/notes.bin"):
        (tmp_path / name).write_text("{}\n")
    files = expand([tmp_path / "b", str(tmp_path / "*.jsonl")])
    assert [f.path.rsplit("/", 1)[1] for f in files] == ["1.jsonl", "2.jsonl", "a.jsonl"]
    assert expand(tmp_path / "b" / "notes.bin", input_format="jsonl")[0].format == "jsonl"


def test_refusals_name_the_path(tmp_path):
    with pytest.raises(InputError, match="missing: no such file"):
        expand(str(tmp_path / "missing"))
    (tmp_path / "x.bin").write_text("")
    with pytest.raises(InputError, match="cannot tell its format"):
        expand(tmp_path / "x.bin")
    (tmp_path / "a.csv").write_text("text\n")
    (tmp_path / "b.jsonl").write_text("{}\n")
    with pytest.raises(InputError, match="several formats"):
        expand(tmp_path)


def test_fsspec_urls_are_read(tmp_path):
    import gzip

    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress(b'{"text": "hi"}\n'))
    files = expand(f"file://{tmp_path}")
    assert files[0].path.startswith("file://") and files[0].compression == "gzip"
    with open_binary(files[0].path, files[0].compression) as stream:
        assert stream.read() == b'{"text": "hi"}\n'
