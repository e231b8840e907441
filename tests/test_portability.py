"""One spec, one map, on every machine (DESIGN.md "What the same map promises"; docs/exactness.md "What is exact").

CI runs on whatever CPU it gets, so the other CPUs are simulated here: `tests/portability_fingerprint.py`
runs in subprocesses under other OpenBLAS kernels (OPENBLAS_CORETYPE), with numpy's AVX-512 and AVX2
dispatch turned off (NPY_DISABLE_CPU_FEATURES, names read from this numpy), libm's FMA/AVX2 variants
masked (GLIBC_TUNABLES), and BLAS / numba thread counts 1 and 2 (variants combine several, as a real
other machine would). Then:
- spec ids and every stored parameter (SRF shells, SSF index sets, reweighted quadrature, ...) and
  every discrete code (GCWS, binning) are bit-identical to the default run and to the golden files;
- dense features agree within DENSE_BOUND across variants, and across batch cuts within a run.
Each variant is checked to have taken effect (the BLAS kernel, SIMD paths and threads it reports).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from feature_promises import FLOAT32_ERROR_FACTOR, FLOAT64_RELATIVE

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "portability_fingerprint.py"
# The promise for dense features (docs/exactness.md "What is exact", tests/feature_promises.py): two float32
# computations of the same rows (another CPU, BLAS kernel, thread count or batch cut) differ by at most
# 4 times the float32 error max |z32 - z64| (measured ratio <= 0.88 here); float64 features by at most
# 1e-11 of the largest feature (measured <= 4.5e-13, Laplacian RFF, whose Cauchy frequencies give
# large phases).
FLOAT32_RATIO_BOUND = FLOAT32_ERROR_FACTOR
FLOAT64_RELATIVE_BOUND = FLOAT64_RELATIVE


def _dispatch_features() -> list[str]:
    try:
        import numpy._core._multiarray_umath as umath
    except ImportError:  # numpy < 2
        import numpy.core._multiarray_umath as umath

    return [name for name in umath.__cpu_dispatch__ if umath.__cpu_features__.get(name)]


def _variants() -> dict[str, dict[str, str]]:
    found = _dispatch_features()
    avx512 = [name for name in found if "512" in name or name == "X86_V4"]
    variants = {
        "default": {},
        "sandybridge_1_thread": {"OPENBLAS_CORETYPE": "Sandybridge", "OPENBLAS_NUM_THREADS": "1",
                                 "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"},
        "prescott_2_threads": {"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_NUM_THREADS": "2",
                               "OMP_NUM_THREADS": "2", "NUMBA_NUM_THREADS": "2"},
    }
    if avx512:
        # A Sandy Bridge has no AVX-512: numpy's AVX-512 paths off in that variant rather than in one of their own
        # (each variant recomputes every fit: ~8 s of CPU).
        variants["sandybridge_1_thread"]["NPY_DISABLE_CPU_FEATURES"] = ",".join(avx512)
    # An old CPU: numpy's baseline SIMD only, libm without its FMA/AVX2 variants.
    variants["baseline_simd_plain_libm"] = {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F",
                                            **({"NPY_DISABLE_CPU_FEATURES": ",".join(found)} if found else {})}
    return variants


VARIANTS = _variants()
# One worker computes the fingerprints (a module fixture is per xdist worker: split, both paid ~30 s of CPU).
pytestmark = pytest.mark.xdist_group("portability")


def _run(name: str, env_update: dict[str, str], directory: Path) -> tuple[str, dict]:
    out = directory / f"{name}.npz"
    env = {**os.environ, **env_update}
    done = subprocess.run([sys.executable, str(SCRIPT), str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
    with np.load(out) as loaded:
        return name, {key: loaded[key] for key in loaded.files}


@pytest.fixture(scope="module")
def fingerprints(tmp_path_factory) -> dict[str, dict]:
    directory = tmp_path_factory.mktemp("portability")
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda item: _run(item[0], item[1], directory), VARIANTS.items()))
    return dict(runs)


def _environment(fingerprint: dict) -> dict:
    return json.loads(str(fingerprint["environment"]))


def test_each_variant_took_effect(fingerprints):
    default = _environment(fingerprints["default"])
    for name, env_update in VARIANTS.items():
        seen = _environment(fingerprints[name])
        blas = [entry for entry in seen["blas"] if entry["api"] == "blas"]
        if "OPENBLAS_CORETYPE" in env_update:
            # OpenBLAS releases name the Prescott kernels differently (Katmai in numpy 2's, Prescott in 1.26's)
            expected = {"Sandybridge": {"Sandybridge"},
                        "Prescott": {"Katmai", "Prescott"}}[env_update["OPENBLAS_CORETYPE"]]
            assert blas and all(entry["architecture"] in expected for entry in blas), (name, blas)
        if "OPENBLAS_NUM_THREADS" in env_update:
            assert all(entry["threads"] == int(env_update["OPENBLAS_NUM_THREADS"]) for entry in blas), (name, blas)
            assert seen["numba_threads"] == int(env_update["NUMBA_NUM_THREADS"])
        if "NPY_DISABLE_CPU_FEATURES" in env_update:
            disabled = set(env_update["NPY_DISABLE_CPU_FEATURES"].split(","))
            assert not disabled & set(seen["simd_dispatch_found"]), (name, seen)
            assert disabled <= set(default["simd_dispatch_found"])


def _golden_specs() -> dict[str, dict]:
    import portability_fingerprint as fp

    specs = {}
    for file_name in fp.GOLDEN_FILES:
        for name, case in json.loads((HERE / "golden" / file_name).read_text())["cases"].items():
            specs[f"{file_name.removesuffix('.json')}/{name}"] = case["spec"]
    return specs


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_spec_ids_stored_parameters_and_codes_are_bit_identical(fingerprints, variant):
    run, reference = fingerprints[variant], fingerprints["default"]
    specs = json.loads(str(run["specs"]))
    golden = _golden_specs()
    assert specs.keys() == golden.keys()
    for key, spec in specs.items():
        assert spec == {k: v for k, v in golden[key].items() if k in spec}, key
    codes = [key for key in reference if key.startswith("codes/")]
    assert codes and codes == [key for key in run if key.startswith("codes/")]
    for key in codes:
        np.testing.assert_array_equal(run[key], reference[key], err_msg=f"{variant} {key}")


def dense_deviations(fingerprints) -> dict[str, tuple[float, float]]:
    """Per dense method: the largest float32 difference (across variants and batch cuts) over the float32
    error max |z32 - z64|, and the largest float64 difference over the largest feature."""
    reference = fingerprints["default"]
    labels = sorted({key.split("/")[1] for key in reference if key.startswith("dense/")})
    out = {}
    for label in labels:
        exact = reference[f"dense/{label}/float64/whole"]
        own_error = float(np.max(np.abs(reference[f"dense/{label}/float32/whole"] - exact)))
        gaps = {"float32": 0.0, "float64": 0.0}
        for run in fingerprints.values():
            for dtype in gaps:
                ref = reference[f"dense/{label}/{dtype}/whole"]
                for part in ("whole", "batches"):
                    gaps[dtype] = max(gaps[dtype], float(np.max(np.abs(run[f"dense/{label}/{dtype}/{part}"] - ref))))
        out[label] = (gaps["float32"] / own_error, gaps["float64"] / float(np.max(np.abs(exact))))
    return out


def test_dense_features_agree_within_the_stated_bound(fingerprints):
    worst = dense_deviations(fingerprints)
    print("largest difference across variants and batch cuts: float32 / own float32 error, float64 relative")
    for label, (ratio32, relative64) in worst.items():
        print(f"  {label:18s} {ratio32:6.2f}  {relative64:.1e}")
    requests = __import__("portability_fingerprint")
    assert len(worst) == len(requests.DENSE_REQUESTS) + len(requests.FITTED_DENSE_REQUESTS)
    assert max(ratio for ratio, _ in worst.values()) <= FLOAT32_RATIO_BOUND
    assert max(relative for _, relative in worst.values()) <= FLOAT64_RELATIVE_BOUND


def test_compiled_loops_keep_ieee_order_on_this_machine():
    """The fitted numbers' solver relies on numba neither fusing a * b + c into one rounding nor
    reordering a reduction. Checked on whatever CPU runs the suite (FMA or not)."""
    import numba

    @numba.njit
    def multiply_add(a, b, c):
        return a * b + c

    @numba.njit
    def running_sum(values):
        total = 0.0
        for value in values:
            total += value
        return total

    a, b = 1.0 + 2.0**-30, 1.0 - 2.0**-30
    assert multiply_add(a, b, -1.0) == 0.0  # a fused multiply-add would give -2^-60
    values = np.array([1.0, 2.0**-53, 2.0**-53, 2.0**-53, 2.0**-53] * 50)
    expected = 0.0
    for value in values:
        expected += value
    assert running_sum(values) == expected
