"""The documentation site builds offline with warnings as errors, and renders in a real browser.

The site (mkdocs.yml, docs/) is built once per run, by the first xdist worker that needs it, with
`mkdocs build --strict` in a subprocess (the hooks import the app to write the HTTP reference: no server, no
network). Then Debian's chromium, headless, loads the main pages from a local http.server and dumps the DOM
after Material's scripts ran. Cost on a 2-core machine: the build ~5 s of CPU (15-45 s wall under load), the
browser checks ~1 s of CPU and a few seconds wall per page.
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra: pip install -e '.[docs]'")
pytest.importorskip("material", reason="the docs extra: pip install -e '.[docs]'")


def _build(site: Path) -> dict:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "app")}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return {"returncode": proc.returncode, "output": proc.stdout + proc.stderr,
            "seconds": time.perf_counter() - started, "site": str(site)}


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> dict:
    """One build per run: under xdist the workers share their run's base directory and a lock on it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _build(tmp_path_factory.mktemp("docs") / "site")
    shared = tmp_path_factory.getbasetemp().parent
    with open(shared / "docs-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = shared / "docs-site.json"
        if not record.exists():
            record.write_text(json.dumps(_build(shared / "docs-site")))
        return json.loads(record.read_text())


def test_the_site_builds_strict_and_documents_every_operation(built_site):
    assert built_site["returncode"] == 0, built_site["output"][-3000:]
    warnings = [line for line in built_site["output"].splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not warnings, "\n".join(warnings)
    site = Path(built_site["site"])
    # the HTTP reference holds every operation of the app's own OpenAPI document
    from featurehash.service.app import create_app

    document = create_app().openapi()
    page = (site / "reference" / "http" / "index.html").read_text()
    operations = [f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
                  if method in ("get", "post", "put", "patch", "delete")]
    missing = [op for op in operations if f"<code>{op}</code>" not in page]
    assert len(operations) > 10 and not missing, missing
    # the plots and result tables of bench/results/ are in the site
    for png in (ROOT / "bench" / "results").glob("*.png"):
        assert (site / "benchmarks" / "results" / png.name).read_bytes() == png.read_bytes()


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium if the machine has it; a test never installs it (it would change the machine it runs on)."""
    found = shutil.which("chromium") or (os.path.exists("/usr/bin/chromium") and "/usr/bin/chromium")
    if not found:
        pytest.skip("chromium is not installed (the Debian package chromium; docs/getting-started.md says how to add it); "
                    "the page check needs it")
    return found


@pytest.fixture(scope="session")
def served_site(built_site):
    assert built_site["returncode"] == 0, "the build failed (see the build test)"
    handler = functools.partial(_QuietHandler, directory=built_site["site"])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _chromium(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                           "--virtual-time-budget=5000", *args], capture_output=True, text=True, timeout=120)


# (page, its H1, text the page's content must show)
PAGES = [
    ("", "featurehash", "Which map for which kernel"),
    ("guides/online-scoring/", "Online scoring over HTTP", "FeatureHashClient"),
    ("reference/maps/", "featurehash.maps", "Build the feature map of a spec"),
    ("reference/http/", "HTTP API", "POST /v1/maps"),
]


def test_the_main_pages_render_in_headless_chromium(chromium, served_site, tmp_path):
    for page, title, text in PAGES:
        proc = _chromium(chromium, "--dump-dom", f"{served_site}/{page}")
        dom = proc.stdout
        assert proc.returncode == 0 and dom, (page, proc.stderr[-2000:])
        h1 = re.search(r"<h1[^>]*>(.*?)</h1>", dom, re.S)
        assert h1 and re.sub(r"<[^>]+>|¶", "", h1.group(1)).strip() == title, (page, h1 and h1.group(0))
        assert text in re.sub(r"<[^>]+>", "", dom), (page, text)
        assert 'href="' in dom and "Getting started" in dom, (page, "no navigation")
        # Material's bundle ran: it marks <html> and wraps tables (or code blocks) in the browser
        assert "js-focus-visible" in dom, (page, "scripts did not run")
        if "<table" in dom:
            assert "md-typeset__table" in dom, (page, "tables not wrapped by the scripts")
    # a screenshot of the home page is not blank: it compresses far worse than a blank page of the same size
    shots = {}
    for name, url in (("home", f"{served_site}/"), ("blank", "about:blank")):
        shots[name] = tmp_path / f"{name}.png"
        proc = _chromium(chromium, "--window-size=1280,900", "--hide-scrollbars", f"--screenshot={shots[name]}", url)
        assert shots[name].exists(), proc.stderr[-2000:]
    home, blank = (shots[name].read_bytes() for name in ("home", "blank"))
    assert home[:8] == blank[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(home) > 5 * len(blank), (len(home), len(blank))
