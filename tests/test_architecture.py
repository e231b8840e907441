"""The layout's import rules (ARCHITECTURE.md; the contracts are [tool.importlinter] in pyproject.toml): arrows
only point down (adapters -> service -> protocol -> store, npy, dedup -> lsh -> maps), map families are
independent over the numerical floor, the numerics never import the web framework or Redis, and nothing imports
in a cycle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
LINT = ("import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))")


def lint(source_root: Path) -> subprocess.CompletedProcess:
    # the package is read from source_root (grimp finds it on sys.path), whatever copy is installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source_root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", LINT, str(ROOT / "pyproject.toml")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_import_graph_keeps_every_contract():
    done = lint(ROOT / "app")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize("module, line, contract", [
    # an upward arrow: the map core reaching for the service
    ("maps/base.py", "from ..service import config", "Layers: adapters"),
    # a family importing another family
    ("maps/polynomial/tensorsketch.py", "from ..fourier import rff", "Maps: registry"),
    # the floor reaching up, and to Redis
    ("maps/numerics/_row_threads.py", "import redis", "Maps and npy know no web framework"),
    # dedup beside the store, independent of it, and free of Redis
    ("dedup/join.py", "from ..store.index import handles", "Layers: adapters"),
    ("dedup/join.py", "import redis", "Maps and npy know no web framework"),
    # lsh between the maps and store / dedup, with no Redis; within it, banding at the bottom
    ("maps/base.py", "from ..lsh import similarity", "Layers: adapters"),
    ("lsh/similarity.py", "from ..dedup import join", "Layers: adapters"),
    ("lsh/clusters.py", "import redis", "Maps and npy know no web framework"),
    ("lsh/banding.py", "from . import similarity", "LSH: rerank"),
    # the engine adapters: independent of each other, calling the library only; their shared steps engine-free
    ("spark/join.py", "from ..ray import join as ray_join", "Layers: adapters"),
    ("ray/batches.py", "from ..store import specs", "Engine adapters only call the library"),
    ("engines/columns.py", "import pyspark", "The engines' shared steps import no engine"),
    # one index: the operations written once never reach for a layout, nor a layout for the handles
    ("store/index/queries.py", "from . import compact", "One index:"),
    ("store/index/keyed.py", "from . import handles", "One index:"),
    ("store/index/compact/kernels.py", "from . import steps", "Layout 3:"),
    ("store/index/compact/near/table.py", "from . import cache", "The near cache:"),
    ("store/lsh_layout.py", "from .index import handles", "Store:"),
    # a cycle between siblings the layers do not order (two store modules)
    ("store/lsh_vectors.py", "from . import lsh_layout", "No cycles"),
])
def test_a_new_upward_arrow_or_cycle_breaks_a_contract(tmp_path, module, line, contract):
    shutil.copytree(ROOT / "app" / "featurehash", tmp_path / "featurehash",
                    ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "featurehash" / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    done = lint(tmp_path)
    assert done.returncode != 0
    broken = [text for text in done.stdout.splitlines() if text.endswith("BROKEN")]
    assert any(text.startswith(contract) for text in broken), done.stdout[-4000:]
