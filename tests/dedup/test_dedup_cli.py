"""`featurehash dedup`: the library's pairs and clusters written by the command line, one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from dedup_support import sparse_planted
from featurehash import create_map
from featurehash.cli import BAD_INPUT, main
from featurehash.dedup import duplicate_clusters
from featurehash.dedup.command import parse_bytes

SPEC = {"method": "gcws", "input_dim": 600, "n_components": 128, "seed": 3}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dedup-cli")
    X = sparse_planted(n_groups=40, group_size=3, n_background=100, dim=600, nnz=20, seed=8)
    sp.save_npz(folder / "rows.npz", X)
    np.save(folder / "rows.npy", X.toarray())
    (folder / "spec.json").write_text(json.dumps(SPEC))
    return folder, X


@pytest.mark.parametrize("source", ["rows.npz", "rows.npy"])
def test_pairs_and_clusters_written(files, source, capsys):
    folder, X = files
    argv = ["dedup", str(folder / source), "--spec", str(folder / "spec.json"), "--threshold", "0.6",
            "--pairs", str(folder / f"{source}-pairs.npz"), "--clusters", str(folder / f"{source}-labels"),
            "--mode", "representatives", "--memory-budget", "40kB", "--no-progress"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = X if source.endswith(".npz") else X.toarray()
    expected = duplicate_clusters(rows, create_map(SPEC), 0.6, mode="representatives")
    assert summary["count"] == len(expected.pairs) > 0 and summary["n_clusters"] == expected.n_clusters
    np.testing.assert_array_equal(np.load(folder / f"{source}-labels.npy"), expected.labels)
    with np.load(folder / f"{source}-pairs.npz") as pairs:
        order = np.lexsort((pairs["j"], pairs["i"]))
        np.testing.assert_array_equal(pairs["i"][order], expected.pairs.i)
        np.testing.assert_array_equal(pairs["similarity"][order], expected.pairs.similarity)


@pytest.mark.parametrize("change, message", [
    ({"input": "missing.npz"}, "missing.npz: no such file"),
    ({"--threshold": "1.5"}, "--threshold: must lie in (0, 1]"),
    ({"--pairs": "pairs.csv"}, "--pairs: "),
    ({"--memory-budget": "lots"}, "--memory-budget: 'lots'"),
])
def test_bad_input_is_one_line(files, change, message, capsys):
    folder, _ = files
    options = {"input": "rows.npz", "--spec": "spec.json", "--threshold": "0.6", "--pairs": "out.npz", **change}
    argv = ["dedup", str(folder / options.pop("input"))]
    for name, value in options.items():
        argv += [name, value if name == "--threshold" or name == "--memory-budget" else str(folder / value)]
    assert main(argv) == BAD_INPUT
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("featurehash: ") and message in error


def test_a_garbled_npy_header_is_one_line(files, capsys):
    folder, _ = files
    text = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 600".ljust(117) + "\n"   # cut in its dict
    (folder / "garbled.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode())
    argv = ["dedup", str(folder / "garbled.npy"), "--spec", str(folder / "spec.json"), "--threshold", "0.6",
            "--pairs", str(folder / "garbled-pairs.npz")]
    assert main(argv) == BAD_INPUT
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(f"featurehash: {folder / 'garbled.npy'}: not a readable .npy")


def test_sizes_parse():
    assert parse_bytes("2GB") == 2 * 10**9 and parse_bytes("512MiB") == 512 * 2**20 and parse_bytes("1e6") == 10**6


TEXT_SPEC = {"method": "gcws", "n_components": 128, "params": {"sampler": "dart"},
             "input": {"hashing": {"ngram_range": [3, 3]}}}


TEXT_MINHASH = {"method": "minhash", "n_components": 128, "input": {"hashing": {"ngram_range": [3, 3]}}}


@pytest.mark.parametrize("suffix, spec", [(".txt", TEXT_SPEC), (".jsonl", TEXT_SPEC), (".txt", TEXT_MINHASH)],
                         ids=["txt", "jsonl", "txt-minhash"])
def test_documents_of_a_text_file_are_joined_through_the_specs_text_stage(tmp_path, capsys, suffix, spec):
    rng = np.random.default_rng(3)
    documents = []
    for _ in range(30):
        words = [f"w{word}" for word in rng.integers(0, 3000, size=60)]
        edited = list(words)
        edited[7], edited[40] = "edited", "changed"
        documents += [" ".join(words), " ".join(edited)]
    path = tmp_path / f"docs{suffix}"
    path.write_text("\n".join(json.dumps(d) if suffix == ".jsonl" else d for d in documents) + "\n")
    (tmp_path / "text.json").write_text(json.dumps(spec))
    argv = ["dedup", str(path), "--spec", str(tmp_path / "text.json"), "--threshold", "0.6", "--pairs",
            str(tmp_path / "pairs.npz"), "--clusters", str(tmp_path / "labels.npy"), "--memory-budget", "64kB",
            "--no-progress"]
    assert main(argv) == 0
    expected = duplicate_clusters(documents, create_map(spec), 0.6)
    assert json.loads(capsys.readouterr().out)["count"] == len(expected.pairs) == 30
    np.testing.assert_array_equal(np.load(tmp_path / "labels.npy"), expected.labels)
    (tmp_path / "bad.jsonl").write_text('"a fine document here"\n{"broken": \n')
    argv[1] = str(tmp_path / "bad.jsonl")
    assert main(argv) == BAD_INPUT and "bad.jsonl: line 2: not JSON" in capsys.readouterr().err
    (tmp_path / "plain.json").write_text(json.dumps({"method": "gcws", "input_dim": 4, "n_components": 8}))
    argv[1], argv[3] = str(path), str(tmp_path / "plain.json")
    assert main(argv) == BAD_INPUT and "needs a spec with a text stage" in capsys.readouterr().err
