"""Every code block of README.md and docs/**/*.md runs as written (one test per block: the count of this
module's tests is the count of blocks run).

- python: the blocks of a page run in one process (`run_blocks.py`), each in a fresh namespace, so a block
  that leans on a name defined by another block fails as it would for a reader;
- bash (curl, the command line): each block in `bash -e -o pipefail`, curl failing on an HTTP error;
- json: parsed; a keys file (it has "keys") validated as `featurehash serve` would, an error answer held to
  `{"detail", "field"}`.
Blocks run in a scratch directory holding a copy of examples/ (the files blocks name), so what they write
stays out of the checkout. A block naming localhost:8000 (or 127.0.0.1:8000) talks to one service this
module starts on a free port: the port is the only text changed. The few blocks that cannot run here are
in EXEMPT with the reason, and each exemption must match a block.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from doc_blocks import ROOT, RUNNABLE, SERVICE, Block, blocks, needs_service

# (page, text the block contains) -> why it is not run here
EXEMPT = {
    ("README.md", "pip install -e . && featurehash serve"):
        "installs the package and starts a server that runs until Ctrl-C (this suite tests the installed "
        "package and starts its own service)",
    ("docs/getting-started.md", "pip install -e . && featurehash serve"):
        "the README's install-and-serve block, repeated",
    ("README.md", "pip install -e '.[docs]' && mkdocs build --strict"):
        "installs packages; tests/docs/test_docs_site.py runs the same strict build",
    ("docs/benchmarks.md", "pip install -e '.[bench]'"):
        "installs packages and runs the benchmarks (minutes each); their committed outputs are checked by "
        "tests/docs/test_figures.py",
}
# Blocks that start an engine: run only with FEATUREHASH_DOC_ENGINES=1 (each took 70-140 s on a loaded 2-core
# host, more than this module's budget in CI); tests/adapters/test_spark.py and test_ray.py make the same calls.
ENGINES = {
    ("docs/guides/past-one-machine.md", "SparkSession.builder"): "starts a Spark session (a JVM)",
    ("docs/guides/past-one-machine.md", "ray.init("): "starts a Ray cluster",
    ("docs/guides/corpus-dedup.md", "SparkSession.builder"): "starts a Spark session (a JVM)",
}
if os.environ.get("FEATUREHASH_DOC_ENGINES") != "1":
    EXEMPT.update({key: f"{reason}: run with FEATUREHASH_DOC_ENGINES=1" for key, reason in ENGINES.items()})


def exemption(block: Block):
    return next((key for key in EXEMPT if key[0] == block.page and key[1] in block.code), None)


ALL = blocks()
RUN = [block for block in ALL if block.lang in RUNNABLE and exemption(block) is None]
PAGE_TIMEOUT = 600
# optional extras a block may import: absent, the block is skipped naming the extra (the suite skips their tests)
OPTIONAL = {"dask": "dask", "pyspark": "spark", "ray": "ray", "sklearn": "sklearn"}
IMPORTED = re.compile(r"^\s*(?:import|from)\s+(\w+)", re.M)


def missing_extra(block: Block) -> str | None:
    for module in IMPORTED.findall(block.code):
        if module in OPTIONAL and importlib.util.find_spec(module) is None:
            return f"{module} is not installed: pip install -e '.[{OPTIONAL[module]}]'"
    return None
pytestmark = pytest.mark.xdist_group("doc-blocks")   # one worker: one service, each page's process once


def test_every_block_is_run_or_exempt_with_a_reason():
    languages = {block.lang for block in ALL}
    assert languages <= set(RUNNABLE), f"blocks in a language this module does not run: {languages - set(RUNNABLE)}"
    for key in EXEMPT:
        matched = [block.label for block in ALL if block.page == key[0] and key[1] in block.code]
        assert len(matched) == 1, f"exemption {key} must match one block, matches {matched}"
    assert len(RUN) + len(EXEMPT) == len(ALL)
    print(f"{len(ALL)} documentation blocks: {len(RUN)} run, {len(EXEMPT)} exempt")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("doc-blocks")
    shutil.copytree(ROOT / "examples", where / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    return where


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from service_support import ServiceProcess

    server = ServiceProcess("doc-blocks", tmp_path_factory.mktemp("doc-blocks-service")).start().wait_ready()
    yield server
    server.terminate()


def _env() -> dict[str, str]:
    python_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT / "app"), os.environ.get("PYTHONPATH")))),
            "PATH": os.pathsep.join((python_bin, os.environ.get("PATH", ""))), "PYTHONDONTWRITEBYTECODE": "1"}


def _served(code: str, server) -> str:
    return SERVICE.sub(f"127.0.0.1:{server.port}", code) if server is not None else code


@pytest.fixture(scope="module")
def python_results(scratch, request) -> dict:
    """label -> result of every python block, run a page at a time on first use."""
    results: dict[str, dict] = {}

    def run_page(page: str) -> None:
        page_blocks = [block for block in RUN if block.page == page and block.lang == "python"
                       and missing_extra(block) is None]
        server = request.getfixturevalue("service") if any(map(needs_service, page_blocks)) else None
        source = scratch / "blocks.json"
        source.write_text(json.dumps([{"label": block.label, "code": _served(block.code, server)}
                                      for block in page_blocks]))
        out = scratch / "results.json"
        out.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, str(Path(__file__).with_name("run_blocks.py")), str(source), str(out)],
                              cwd=scratch, env=_env(), capture_output=True, text=True, timeout=PAGE_TIMEOUT)
        found = json.loads(out.read_text()) if out.exists() else []
        for result in found:
            result["output"] = proc.stdout[-3000:] + proc.stderr[-3000:]
            results[result["label"]] = result
        for block in page_blocks:
            results.setdefault(block.label, {"ok": False, "error": f"the page's process ended with "
                                             f"{proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"})

    results["run_page"] = run_page
    return results


@pytest.mark.parametrize("block", [b for b in RUN if b.lang == "python"], ids=lambda b: b.label)
def test_python_block_runs(block: Block, python_results):
    if missing_extra(block):
        pytest.skip(missing_extra(block))
    if block.label not in python_results:
        python_results["run_page"](block.page)
    result = python_results[block.label]
    assert result["ok"], f"{block.label} failed:\n{result['error']}\n{result.get('output', '')}"


# curl fails on an HTTP error status and says why (the body names the field), as -s alone would hide
BASH_PREAMBLE = 'curl() { command curl --fail-with-body --show-error "$@"; }\n'


@pytest.mark.parametrize("block", [b for b in RUN if b.lang == "bash"], ids=lambda b: b.label)
def test_bash_block_runs(block: Block, scratch, request):
    server = request.getfixturevalue("service") if needs_service(block) else None
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", BASH_PREAMBLE + _served(block.code, server)],
                          cwd=scratch, env=_env(), capture_output=True, text=True, timeout=PAGE_TIMEOUT)
    assert proc.returncode == 0, f"{block.label} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("block", [b for b in RUN if b.lang == "json"], ids=lambda b: b.label)
def test_json_block_is_what_it_shows(block: Block, tmp_path):
    document = json.loads(block.code)
    if "keys" in document:
        from featurehash.service.auth.keys import parse_keys_file

        parsed = parse_keys_file(tmp_path / "keys.json", block.code.encode())
        assert parsed.keys
    else:
        assert set(document) == {"detail", "field"} and isinstance(document["detail"], str), document
