"""The examples gallery (examples/gallery/*.py) runs and prints what it shows, and the example files the
guides name (examples/make_files.py) are the committed ones.

The gallery's scripts run in one process, one after another, each with runpy in a fresh namespace (imports
are paid once; a script that needed another's names would fail), from a scratch working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GALLERY = sorted((ROOT / "examples" / "gallery").glob("*.py"))
pytest.importorskip("sklearn", reason="the gallery uses scikit-learn: pip install -e '.[sklearn]'")

RUNNER = """
import contextlib, io, json, runpy, sys, traceback
results = {}
for path in sys.argv[1:]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        results[path] = {"ok": True, "output": out.getvalue()}
    except BaseException:
        results[path] = {"ok": False, "output": out.getvalue() + traceback.format_exc(limit=-6)}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def gallery_runs(tmp_path_factory) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT / "app"), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.run([sys.executable, "-c", RUNNER, *map(str, GALLERY)], cwd=tmp_path_factory.mktemp("gallery"),
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_gallery_is_listed():
    assert len(GALLERY) >= 5
    listed = (ROOT / "examples" / "gallery" / "README.md").read_text()
    assert all(f"`{path.name}`" in listed for path in GALLERY), "every script has a row in examples/gallery/README.md"


@pytest.mark.parametrize("path", GALLERY, ids=lambda path: path.name)
def test_gallery_script_runs_and_prints(path: Path, gallery_runs):
    result = gallery_runs[str(path)]
    assert result["ok"], result["output"]
    docstring = path.read_text().split('"""')[1]
    assert "===" in docstring, "a title underlined as in scikit-learn's gallery"
    assert len(result["output"].splitlines()) >= 3, f"{path.name} printed too little:\n{result['output']}"


def test_example_files_are_what_make_files_writes():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import make_files
    finally:
        sys.path.pop(0)
    import io

    import scipy.sparse as sp

    for name, content in make_files.files().items():
        committed = (ROOT / "examples" / name).read_bytes()
        if name.endswith(".npz"):   # the archive's bytes may differ between numpy versions; its matrix may not
            made, kept = sp.load_npz(io.BytesIO(content)), sp.load_npz(io.BytesIO(committed))
            assert made.shape == kept.shape and (made != kept).nnz == 0, f"examples/{name}: run examples/make_files.py"
        else:
            assert committed == content, f"examples/{name}: run examples/make_files.py"
