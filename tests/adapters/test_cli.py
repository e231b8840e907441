"""The featurehash command line: version, spec resolution, transform and hash files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from featurehash import __version__
from featurehash.cli import main
from featurehash.maps import create_map

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_version_from_a_fresh_process():
    done = subprocess.run([sys.executable, "-m", "featurehash.cli", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"featurehash {__version__}"


def test_spec_prints_resolved_spec_with_id(capsys):
    assert main(["spec", str(EXAMPLES / "rff_spec.json")]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = create_map(json.loads((EXAMPLES / "rff_spec.json").read_text()))
    assert printed["id"] == expected.spec.id
    assert printed["params"] == {"kernel": "gaussian", "gamma": 0.5, "variant": "cos_sin"}
    assert printed["output_dim"] == 16


def test_transform_writes_the_library_features(tmp_path, capsys):
    out = tmp_path / "features.npy"
    assert main(["transform", "--spec", str(EXAMPLES / "rff_spec.json"),
                 "--input", str(EXAMPLES / "vectors.npy"), "--output", str(out)]) == 0
    expected = create_map(json.loads((EXAMPLES / "rff_spec.json").read_text())).transform(
        np.load(EXAMPLES / "vectors.npy"))
    written = np.load(out)
    assert written.dtype == np.float32
    np.testing.assert_array_equal(written, expected)


def test_transform_of_a_one_hot_map_writes_indices_and_reports_scale(tmp_path, capsys):
    out = tmp_path / "indices.npy"
    assert main(["transform", "--spec", str(EXAMPLES / "gcws_spec.json"),
                 "--input", str(EXAMPLES / "vectors.npy"), "--output", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dim"] == 32 * 2**4
    assert report["scale"] == 1 / np.sqrt(32)
    assert np.load(out).shape == (4, 32)


def test_hash_accepts_sparse_npz_and_matches_dense(tmp_path):
    vectors = np.load(EXAMPLES / "vectors.npy")
    sp.save_npz(tmp_path / "vectors.npz", sp.csr_matrix(vectors))
    spec = str(EXAMPLES / "gcws_spec.json")
    assert main(["hash", "--spec", spec, "--input", str(tmp_path / "vectors.npz"),
                 "--output", str(tmp_path / "sparse.npy")]) == 0
    assert main(["hash", "--spec", spec, "--input", str(EXAMPLES / "vectors.npy"),
                 "--output", str(tmp_path / "dense.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "sparse.npy"), np.load(tmp_path / "dense.npy"))


def test_bad_spec_exits_2_with_the_field_named(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"method": "rff", "input_dim": 8, "n_components": 16, "params": {"gamma": -1}}))
    assert main(["transform", "--spec", str(bad), "--input", str(EXAMPLES / "vectors.npy"),
                 "--output", str(tmp_path / "x.npy")]) == 2
    assert "params.gamma" in capsys.readouterr().err


def test_wrong_dimension_exits_2(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((2, 3)))
    assert main(["transform", "--spec", str(EXAMPLES / "rff_spec.json"), "--input", str(tmp_path / "x.npy"),
                 "--output", str(tmp_path / "z.npy")]) == 2
    assert "wrong dimension" in capsys.readouterr().err


# -- streaming: inputs larger than memory are read memory-mapped and written chunk by chunk ----------

def _chunked(args, tmp_path, rows=103, chunk_rows=10):
    X = np.random.default_rng(5).standard_normal((rows, 8))
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.npy"
    code = main([*args, "--input", str(tmp_path / "x.npy"), "--output", str(out), "--chunk-rows", str(chunk_rows),
                 "--quiet"])
    return code, X, out


def test_chunked_transform_equals_the_in_process_transform(tmp_path, capsys):
    code, X, out = _chunked(["transform", "--spec", str(EXAMPLES / "rff_spec.json")], tmp_path)
    assert code == 0
    written = np.load(out)
    expected = create_map(json.loads((EXAMPLES / "rff_spec.json").read_text())).transform(X)
    assert written.dtype == np.float32 and written.shape == expected.shape
    np.testing.assert_allclose(written, expected, rtol=0, atol=64 * 2.0**-24 * np.abs(expected).max())
    assert json.loads(capsys.readouterr().out)["shape"] == [103, 16]


def test_chunked_hash_is_bitwise_the_in_process_hash(tmp_path):
    spec = {"method": "binning", "input_dim": 8, "n_components": 24, "seed": 2, "params": {"gamma": 0.3}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    code, X, out = _chunked(["hash", "--spec", str(tmp_path / "spec.json")], tmp_path, chunk_rows=7)
    assert code == 0
    np.testing.assert_array_equal(np.load(out), create_map(spec).hash(X))


def test_a_bad_row_midway_leaves_no_output(tmp_path, capsys):
    X = np.ones((50, 3))
    X[37, 1] = np.nan
    np.save(tmp_path / "x.npy", X)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"method": "rff", "input_dim": 3, "n_components": 4}))
    assert main(["transform", "--spec", str(spec), "--input", str(tmp_path / "x.npy"),
                 "--output", str(tmp_path / "z.npy"), "--chunk-rows", "10", "--quiet"]) == 2
    assert "NaN or infinity at row(s) 37 (row 37, column 1: nan)" in capsys.readouterr().err   # the file's row
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.json", "x.npy"]


def test_progress_bar_counts_rows(tmp_path, capsys):
    from featurehash.npy.stream import stream

    X = np.random.default_rng(0).standard_normal((64, 4))
    np.save(tmp_path / "x.npy", X)
    feature_map = create_map({"method": "rff", "input_dim": 4, "n_components": 8})
    result = stream(feature_map, str(tmp_path / "x.npy"), str(tmp_path / "z.npy"), chunk_rows=16, progress=True)
    err = capsys.readouterr().err
    assert result.rows == 64 and "100%" in err and "64.0/64.0" in err and "rows/s" in err


# -- bad input: one line naming the file and the problem, exit code 2 -----------------------------------

def _write_bad_inputs(tmp_path: Path) -> None:
    np.save(tmp_path / "object.npy", np.array([{}, 1], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "dense.npz", x=np.ones((2, 8)))
    np.savetxt(tmp_path / "data.csv", np.ones((2, 8)), delimiter=",")
    np.save(tmp_path / "narrow.npy", np.ones((2, 3)))
    np.save(tmp_path / "cube.npy", np.ones((2, 3, 8)))
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "notjson.json").write_text("{method: rff")
    _write_npy_header(tmp_path / "garbled.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 8")
    _write_npy_header(tmp_path / "notadict.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 8), ]")
    (tmp_path / "truncated.npy").write_bytes((tmp_path / "garbled.npy").read_bytes()[:30])
    sp.save_npz(tmp_path / "bad-indices.npz", sp.csr_matrix(np.ones((2, 8))), compressed=False)
    with np.load(tmp_path / "bad-indices.npz") as members:
        arrays = dict(members)
    arrays["indices"][9] = 99   # row 1: past the 8 columns (scipy's load_npz does not look)
    np.savez(tmp_path / "bad-indices.npz", **arrays)


def _write_npy_header(path: Path, header: str) -> None:
    """An .npy file with numpy's magic and this header dict (padded as numpy pads it), then 2 x 8 float64s."""
    text = header.ljust(117) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode() + bytes(128))


BAD_INPUTS = {  # (spec, input, output): what stderr says after "featurehash: "
    "missing input": ("rff_spec.json", "missing.npy", "o.npy", "{tmp}/missing.npy: no such file"),
    "object npy": ("rff_spec.json", "object.npy", "o.npy", "{tmp}/object.npy: holds Python objects (dtype object)"),
    "dense npz": ("rff_spec.json", "dense.npz", "o.npy", "{tmp}/dense.npz: holds no scipy sparse matrix"),
    "csv": ("rff_spec.json", "data.csv", "o.npy",
            "{tmp}/data.csv: not an .npy file (no NPY header: text such as CSV?)"),
    "empty": ("rff_spec.json", "empty.npy", "o.npy", "{tmp}/empty.npy: empty file"),
    "wrong dimension": ("rff_spec.json", "narrow.npy", "o.npy", "{tmp}/narrow.npy: vectors: wrong dimension"),
    "3-D": ("rff_spec.json", "cube.npy", "o.npy", "{tmp}/cube.npy: vectors: expected a 2-D array (n, 8), got 3-D; "
            "reshape it to (n, 8)"),
    "spec not JSON": ("{tmp}/notjson.json", "{ex}/vectors.npy", "o.npy", "{tmp}/notjson.json: not valid JSON"),
    "missing spec": ("{tmp}/nospec.json", "{ex}/vectors.npy", "o.npy", "{tmp}/nospec.json: no such file"),
    "no output dir": ("rff_spec.json", "{ex}/vectors.npy", "nodir/o.npy",
                      "{tmp}/nodir/o.npy: cannot be written: its directory does not exist"),
    "header cut in its dict": ("rff_spec.json", "garbled.npy", "o.npy",
                               "{tmp}/garbled.npy: not a readable .npy array (TokenError: "),
    "header not a dict": ("rff_spec.json", "notadict.npy", "o.npy",
                          "{tmp}/notadict.npy: not a readable .npy array (Cannot parse header"),
    "truncated header": ("rff_spec.json", "truncated.npy", "o.npy",
                         "{tmp}/truncated.npy: not a readable .npy array (EOF: reading array header"),
    "sparse index past the width": ("rff_spec.json", "bad-indices.npz", "o.npy",
                                    "{tmp}/bad-indices.npz: row 1: column index 99 lies outside [0, 8): a malformed "
                                    "sparse matrix"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_naming_the_file_with_exit_code_2(tmp_path, capsys, case):
    _write_bad_inputs(tmp_path)
    spec, given, output, message = (part.format(tmp=tmp_path, ex=EXAMPLES) for part in BAD_INPUTS[case])
    spec = spec if "/" in spec else str(EXAMPLES / spec)
    given = given if "/" in given else str(tmp_path / given)
    assert main(["transform", "--spec", spec, "--input", given, "--output", str(tmp_path / output), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"featurehash: {message}") and err.count("\n") == 1, err
    assert not list(tmp_path.glob("o.npy*"))


def test_hash_with_a_dense_spec_names_the_spec(tmp_path, capsys):
    spec = str(EXAMPLES / "rff_spec.json")
    assert main(["hash", "--spec", spec, "--input", str(EXAMPLES / "vectors.npy"),
                 "--output", str(tmp_path / "c.npy")]) == 2
    assert capsys.readouterr().err == f"featurehash: {spec}: method: 'rff' maps have no discrete codes; use transform\n"


def test_output_name_reported_is_the_file_written(tmp_path, capsys):
    assert main(["transform", "--spec", str(EXAMPLES / "rff_spec.json"), "--input", str(EXAMPLES / "vectors.npy"),
                 "--output", str(tmp_path / "out2"), "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["features"] == str(tmp_path / "out2.npy")
    assert [path.name for path in tmp_path.iterdir()] == ["out2.npy"]


def test_warm_cache_runs_every_method(capsys):
    from featurehash.service import compile_cache
    from featurehash.maps.registry import METHODS

    labels = compile_cache.warm()
    assert {label.split()[0] for label in labels} == set(METHODS)   # a new method must be added to the warm-up
    # npy bodies arrive read-only, and numba compiles kernels apart for those: the warm-up covers them too
    from featurehash.maps.fourier import _fourier_kernels
    from featurehash.maps import inputs
    for kernel in (inputs._has_nonfinite, inputs._nonfinite_and_zero_rows, inputs._dense_csr,
                   _fourier_kernels.unit_rows_into):
        read_only = {(signature[0].dtype.name, signature[0].mutable) for signature in kernel.signatures}
        assert {("float32", False), ("float64", False)} <= read_only, kernel
    assert main(["warm-cache"]) == 0
    assert json.loads(capsys.readouterr().out)["maps"] == len(labels)


# -- text files --------------------------------------------------------------------------------

TEXT_GCWS = {"method": "gcws", "n_components": 32, "seed": 3, "params": {"sampler": "dart"},
             "input": {"hashing": {"ngram_range": [1, 2]}}}
HASHING = {"method": "hashing", "input_dim": 1, "n_components": 512, "seed": 2, "params": {"hash": "sklearn"}}
LINES = ["the quick brown fox", "jumps over the lazy dog", "Crème brûlée, naïve façade", "a fourth document here",
         "and a fifth"]


def _write_spec(tmp_path, spec) -> str:
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    return str(tmp_path / "spec.json")


def test_codes_of_jsonl_documents_tokens_and_weights_in_chunks(tmp_path, capsys):
    spec = _write_spec(tmp_path, TEXT_GCWS)
    tokens = [line.split() for line in LINES]
    weighted = [{token: 1.5 for token in row} for row in tokens]
    for rows in (LINES, tokens, weighted):
        (tmp_path / "in.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        assert main(["hash", "--spec", spec, "--input", str(tmp_path / "in.jsonl"), "--output",
                     str(tmp_path / "codes"), "--chunk-rows", "2", "--quiet"]) == 0
        np.testing.assert_array_equal(np.load(tmp_path / "codes.npy"), create_map(TEXT_GCWS).hash(rows))
    assert json.loads(capsys.readouterr().out.split("}\n")[-2] + "}")["shape"] == [5, 32]


def test_sparse_features_of_a_txt_file_go_to_an_npz(tmp_path, capsys):
    spec = _write_spec(tmp_path, HASHING)
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert main(["transform", "--spec", spec, "--input", str(tmp_path / "in.txt"), "--output",
                 str(tmp_path / "features"), "--chunk-rows", "3", "--float64", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["sparse_features"] == str(tmp_path / "features.npz")
    written = sp.load_npz(tmp_path / "features.npz")
    assert written.dtype == np.float64 and (written != create_map(HASHING).transform(LINES, dtype=np.float64)).nnz == 0
    assert main(["transform", "--spec", spec, "--input", str(tmp_path / "in.txt"), "--output",
                 str(tmp_path / "features.npy")]) == 2
    assert "name the output .npz" in capsys.readouterr().err
    dense = {"method": "rff", "input_dim": 1024, "n_components": 16, "seed": 1, "input": {"hashing": {}}}
    assert main(["transform", "--spec", _write_spec(tmp_path, dense), "--input", str(tmp_path / "in.txt"),
                 "--output", str(tmp_path / "dense"), "--quiet"]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "dense.npy"), create_map(dense).transform(LINES))


@pytest.mark.parametrize("lines, spec, expected", [
    (['"one"', '"two"', '{"broken": ', '"four"'], TEXT_GCWS, "in.jsonl: line 3: not JSON"),
    (['"one"', '42', '"three"'], TEXT_GCWS, "line 2: expected a JSON string"),
    (['"one"', '"two"', '"three"', '"!"', '"five"'], TEXT_GCWS, "all-zero vector at line(s) 4"),
    (['["a", "b"]', '["c"]', '["d"]', '["e"]', '["f", 7]'], TEXT_GCWS, "line 5: a token list holds strings only"),
    (['"one"', '["two"]'], HASHING, "line 2: every row must be of one kind"),
])
def test_a_bad_line_is_one_error_naming_it(tmp_path, capsys, lines, spec, expected):
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(["transform" if spec is HASHING else "hash", "--spec", _write_spec(tmp_path, spec), "--input",
                 str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.npz" if spec is HASHING else "out"),
                 "--chunk-rows", "2", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.jsonl", "spec.json"]   # no partial output


def test_text_needs_a_spec_that_reads_it(tmp_path, capsys):
    (tmp_path / "in.txt").write_bytes(b"one\n\xff\n")
    assert main(["hash", "--spec", str(EXAMPLES / "gcws_spec.json"), "--input", str(tmp_path / "in.txt"),
                 "--output", str(tmp_path / "out")]) == 2
    assert "reads vectors, not text" in capsys.readouterr().err
    assert main(["hash", "--spec", _write_spec(tmp_path, TEXT_GCWS), "--input", str(tmp_path / "in.txt"),
                 "--output", str(tmp_path / "out"), "--quiet"]) == 2
    assert "line 2: not UTF-8" in capsys.readouterr().err


# -- the commands' common failures: one line on stderr, exit code 2 (usage) or 1 (runtime) -------------------

def _run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    from service_support import serve_command, service_env

    return subprocess.run(serve_command() + list(args), env=env or service_env(), capture_output=True, text=True,
                          timeout=120)


def _one_line(done: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("featurehash"), done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


def test_a_second_serve_on_a_data_directory_or_a_port_in_use_is_one_line(embedded_server, tmp_path):
    """A running server (the session's) holds its data directory and its port: a second launcher on either
    says so in one line and exits 1, starting nothing (no Redis in the new directory)."""
    _one_line(_run_cli("serve", "--port", "0", "--data-dir", str(embedded_server.data_dir)), 1,
              "another featurehash server already uses", str(embedded_server.data_dir.resolve()))
    _one_line(_run_cli("serve", "--port", str(embedded_server.port), "--data-dir", str(tmp_path / "data")), 1,
              f"cannot listen on 127.0.0.1:{embedded_server.port}", "--port")
    assert not (tmp_path / "data" / "appendonly.aof").exists()


def test_bad_settings_and_command_lines_are_one_line_with_exit_code_2(tmp_path):
    from service_support import service_env

    _one_line(_run_cli("serve", env=service_env(workers="many")), 2, "workers", "FEATUREHASH_WORKERS", "'many'")
    _one_line(_run_cli("serve", "--workers", "0", "--data-dir", str(tmp_path)), 2, "--workers", "greater than")
    _one_line(_run_cli("transform", "--spec", "s.json", "--input", "x.npy", "--output", "o.npy", "--chunk-rows",
                       "0"), 2, "--chunk-rows", "positive integer")
    _one_line(_run_cli("transfrom"), 2, "invalid choice: 'transfrom'")


def test_serve_with_an_unreachable_redis_says_so_in_one_line_and_serves(tmp_path):
    """REDIS_URL pointing at nothing: one line naming it (without its password), then the service runs and
    answers 503 until Redis answers (an orchestrator may start Redis after the service)."""
    from service_support import ServiceProcess, free_port, wait_until

    url = f"redis://:secret@127.0.0.1:{free_port()}/0"
    server = ServiceProcess("no-redis", tmp_path, redis_url=url).start()
    try:
        assert wait_until(lambda: "Uvicorn running" in server.log_tail(), 60.0), server.log_tail()
        warning = [line for line in server.log_tail().splitlines() if line.startswith("featurehash:")]
        assert len(warning) == 1 and "does not answer" in warning[0] and "secret" not in warning[0], warning
        with server.client(timeout=10.0) as http:
            assert http.get("/healthz").status_code == 200
            assert http.get("/readyz").status_code == 503
    finally:
        assert not server.terminate()


def test_minhash_codes_of_text_and_of_sparse_rows(tmp_path, capsys):
    """The set method through the CLI: documents and token lists through its text stage, and rows of a .npz
    (their supports), in chunks, are the library's codes."""
    text = {"method": "minhash", "n_components": 32, "seed": 3, "input": {"hashing": {"ngram_range": [1, 2]}}}
    spec = _write_spec(tmp_path, text)
    for rows in (LINES, [line.split() for line in LINES]):
        (tmp_path / "in.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        assert main(["hash", "--spec", spec, "--input", str(tmp_path / "in.jsonl"), "--output",
                     str(tmp_path / "codes"), "--chunk-rows", "2", "--quiet"]) == 0
        np.testing.assert_array_equal(np.load(tmp_path / "codes.npy"), create_map(text).hash(rows))
    rows_spec = {"method": "minhash", "input_dim": 50, "n_components": 16, "seed": 1,
                 "params": {"variant": "k_permutation"}}
    X = sp.random(7, 50, density=0.2, format="csr", random_state=1)
    sp.save_npz(tmp_path / "rows.npz", X)
    assert main(["hash", "--spec", _write_spec(tmp_path, rows_spec), "--input", str(tmp_path / "rows.npz"),
                 "--output", str(tmp_path / "row_codes"), "--chunk-rows", "3", "--quiet"]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "row_codes.npy"), create_map(rows_spec).hash(X))
