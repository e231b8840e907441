"""`featurehash dedup PATH... --output DIR`: the corpus mode of the command line (summary on stdout, one-line
errors naming the file and line or the option), beside the row mode it leaves as it was."""

from __future__ import annotations

import json

import pytest
from corpus_support import documents, expected_removed, write
from featurehash.cli import BAD_INPUT, main


def test_folder_of_jsonl_in_parquet_of_duplicates_out(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    rows = documents()
    write(rows[:50], folder / "a", "jsonl")
    write(rows[50:], folder / "b", "jsonl", "gzip")
    with pytest.raises(SystemExit):   # no input at all: argparse's usage error
        main(["dedup", "--output", str(tmp_path / "out")])
    capsys.readouterr()
    argv = ["dedup", str(folder / "a.jsonl"), str(folder / "b.jsonl.gz"), "--output", str(tmp_path / "out"),
            "--id-field", "id", "--keep", "first", "--no-progress", "--memory-budget", "64MB"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kept"] == 60 and summary["exact_duplicates"] + summary["near_duplicates"] == 15
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "duplicates.parquet").to_pylist()
    assert {r["id"]: r["kept_id"] for r in table} == expected_removed()
    assert main(argv) == BAD_INPUT
    assert "already holds a deduplicated corpus; pass --force" in capsys.readouterr().err
    assert main(argv + ["--force"]) == 0


@pytest.mark.parametrize("extra, message", [
    (["--keep", "biggest"], "--keep: 'biggest': expected one of first"),
    (["--threshold", "0"], "--threshold: must lie in (0, 1]"),
    (["--pairs", "p.npz"], "--output: writes a corpus"),
    (["--memory-budget", "lots"], "--memory-budget: 'lots'"),
])
def test_bad_options_are_one_line(tmp_path, capsys, extra, message):
    source = write(documents(), tmp_path / "c", "jsonl")
    assert main(["dedup", str(source), "--output", str(tmp_path / "out"), *extra]) == BAD_INPUT
    assert message in capsys.readouterr().err


def test_bad_record_named_by_file_and_line(tmp_path, capsys):
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "fine"}\n\n{"text": 5}\n')
    assert main(["dedup", str(path), "--output", str(tmp_path / "out")]) == BAD_INPUT
    assert f"{path}:3: a int as its 'text' field" in capsys.readouterr().err
    assert main(["dedup", str(path), "--output", str(tmp_path / "out"), "--on-error", "skip", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["bad_records"] == 1 and summary["blank_lines"] == 1 and summary["kept"] == 1


def test_row_mode_still_needs_its_options(tmp_path, capsys):
    assert main(["dedup", str(tmp_path / "x.npy"), "--threshold", "0.5"]) == BAD_INPUT
    assert "--pairs: required (or give --output DIR" in capsys.readouterr().err


def test_tokens_field_to_a_memory_url_and_its_errors(tmp_path, capsys):
    import uuid

    import fsspec
    from corpus_support import vector_rows

    source = write(vector_rows("tokens"), tmp_path / "in", "jsonl")
    url = f"memory://cli-{uuid.uuid4().hex[:8]}/out"
    argv = ["dedup", str(source), "--output", url, "--id-field", "id", "--tokens-field", "tokens",
            "--work-dir", str(tmp_path / "staging"), "--no-progress"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == "tokens" and summary["kept"] == 60
    assert json.loads(fsspec.filesystem("memory").cat(f"{url}/summary.json"))["kept"] == 60
    assert main(argv) == BAD_INPUT and "pass --force" in capsys.readouterr().err
    assert main(argv[:-3] + ["--vector-field", "tokens", "--force"]) == BAD_INPUT
    assert "--vector-field: give a vector field or a tokens field, not both" in capsys.readouterr().err
    assert main(["dedup", str(source), "--output", str(tmp_path / "o"), "--tokens-field", "tokens",
                 "--add-to-index"]) == BAD_INPUT
    assert "--add-to-index: needs an index" in capsys.readouterr().err
