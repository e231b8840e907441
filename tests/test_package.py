"""One import name: `featurehash` is the library, the service, the client and the CLI, and nothing
is importable as `app` (the source root), so a user's own `app/` package cannot shadow it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


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


HEAVY = ("numpy", "scipy", "numba")
FAMILIES = ("fourier", "polynomial", "minhash", "fitted", "text")


def loaded_after(code: str, tmp_path: Path) -> dict:
    """Which heavy packages and map families a fresh process holds after running `code`."""
    done = run(f"{code}\nimport json, sys\n"
               f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
               "or m.startswith('featurehash.maps.'))))", tmp_path)
    assert done.returncode == 0, done.stderr
    loaded = set(__import__("json").loads(done.stdout.splitlines()[-1]))
    return {"heavy": {name for name in HEAVY if name in loaded},
            "families": {m.split(".")[2] for m in loaded
                         if m.startswith("featurehash.maps.") and m.split(".")[2] in FAMILIES},
            "modules": loaded}


@pytest.mark.parametrize("code", ["import featurehash", "from featurehash import create_map",
                                  "from featurehash.maps import METHODS, SpecError, create_map\n"
                                  "assert 'rff' in METHODS and len(METHODS) == len(list(METHODS))",
                                  "from featurehash.cli import main\ntry:\n    main(['--version'])\n"
                                  "except SystemExit:\n    pass"])
def test_importing_the_library_or_asking_the_version_imports_no_numerics(code, tmp_path):
    # The package, the registry's method table and the launcher: no numpy, scipy or numba (~1-2 s of start-up).
    loaded = loaded_after(code, tmp_path)
    assert loaded["heavy"] == set() and loaded["families"] == set()


def test_one_rff_map_imports_its_family_only(tmp_path):
    loaded = loaded_after("import numpy as np\nfrom featurehash import create_map\n"
                          "m = create_map({'method': 'rff', 'input_dim': 3, 'n_components': 4})\n"
                          "m.transform(np.ones((2, 3), dtype=np.float32))", tmp_path)
    assert loaded["families"] == {"fourier"}
    assert not {"featurehash.maps.fourier.ssf", "featurehash.maps.fourier.srf",
                "featurehash.maps.fourier.quadrature"} & loaded["modules"]
    # scipy.stats, scipy.spatial and scipy.optimize are imported where an exact kernel or a fit needs them.
    assert not {"scipy.stats", "scipy.spatial", "scipy.optimize"} & loaded["modules"]


def test_the_method_table_names_every_class_and_loads_it_on_access():
    from featurehash.maps import METHODS, FeatureMap
    from featurehash.maps.registry import IMPLEMENTATIONS

    assert list(METHODS) == list(IMPLEMENTATIONS) and len(METHODS) == len(IMPLEMENTATIONS)
    for method, cls in METHODS.items():
        assert issubclass(cls, FeatureMap) and cls.method == method and METHODS.get(method) is cls
    assert "nope" not in METHODS and METHODS.get("nope") is None
    with pytest.raises(KeyError):
        METHODS["nope"]


def test_help_of_create_map_lists_every_method_and_its_params():
    from featurehash import create_map
    from featurehash.maps.registry import GUIDE, METHODS, params_summary

    assert list(GUIDE) == list(METHODS)
    for method, (_, params) in GUIDE.items():
        # On a failure, paste the model's own summary into registry.GUIDE.
        assert params == params_summary(METHODS[method].Params), method
        assert f"    {method} " in create_map.__doc__
        for field in METHODS[method].Params.model_fields:
            assert f"{field}=" in create_map.__doc__
