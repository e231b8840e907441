"""One import name: `featurehash` is the library, the service, the client and the CLI, and nothing
is importable as `app` (the source root), so a user's own `app/` package cannot shadow it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np


def run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_library_is_featurehash_and_app_is_not_a_package(tmp_path):
    done = run("import importlib.util, featurehash\n"
               "from featurehash import create_map\n"
               "m = create_map({'method': 'rff', 'input_dim': 3, 'n_components': 4})\n"
               "print(m.spec.id, importlib.util.find_spec('app') is None)", tmp_path)
    assert done.returncode == 0, done.stderr
    spec_id, no_app = done.stdout.split()
    assert spec_id.startswith("rff-v1-") and no_app == "True"


def test_a_users_own_app_package_does_not_shadow_the_cli_or_the_service(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "main.py").write_text("NOT_FEATUREHASH = True\n")
    (tmp_path / "app" / "cli.py").write_text("raise SystemExit('the user app was imported')\n")
    done = run("import featurehash.cli, featurehash.service.app\n"
               "print(callable(featurehash.service.app.create_app), featurehash.cli.__file__)", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True") and str(tmp_path) not in done.stdout
    np.testing.assert_equal(run("import app.main; print(app.main.NOT_FEATUREHASH)", tmp_path).stdout.strip(), "True")


def test_the_top_level_exports_are_the_maps_exports():
    import featurehash
    import featurehash.maps

    for name in featurehash.__all__:
        if name != "__version__":
            assert getattr(featurehash, name) is getattr(featurehash.maps, name)
