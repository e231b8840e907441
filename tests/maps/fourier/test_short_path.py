"""The short path of small dense batches (`DenseFeatureMap.short_path`, `ShortFourierPath._short_features` of
rff, nrff, srf and quadrature; issue 32).

It computes a small batch with the products and compiled kernels of the full path, so every feature is the
same bits as the full path's (a twin map with the short path turned off), for every input type it takes; it
refuses (hands to the full path) whatever the full path must check, reduce with numpy or report, so errors
and their messages are unchanged; and it never warns. Other CPUs are simulated in subprocesses (OpenBLAS
kernels and threads, numpy's SIMD paths): there too the short path is the full path's bits, and a row's
features alone and inside batches agree within the promise of tests/feature_promises.py. They are not the
same bits: BLAS computes one row by gemv and several by gemm, which round differently (measured here, and
under the Haswell and Prescott kernels even between gemm batches of different sizes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from feature_promises import assert_dense_features_match

from featurehash.maps import InputError, create_map
from featurehash.maps.base import SHORT_PATH_ELEMENTS

SPECS = {
    "rff": ("rff", {"gamma": 0.05}),
    "rff_phase": ("rff", {"gamma": 0.05, "variant": "phase"}),
    "rff_laplacian": ("rff", {"kernel": "laplacian", "gamma": 0.05}),
    "rff_orthogonal": ("rff", {"gamma": 0.05, "frequencies": "orthogonal"}),
    "rff_structured": ("rff", {"gamma": 0.05, "frequencies": "structured"}),
    "rff_matern": ("rff", {"kernel": "matern", "nu": 1.5, "gamma": 0.05}),
    "nrff": ("nrff", {"gamma": 2.0}),
    "nrff_cos_sin": ("nrff", {"gamma": 2.0, "variant": "cos_sin"}),
    "srf": ("srf", {"degree": 3, "bias": 4.0}),
    "quadrature": ("quadrature", {"gamma": 0.05, "grid": "subsampled"}),
}


def twins(name: str, d: int, D: int = 256):
    """(the map, the same spec with the short path turned off)."""
    method, params = SPECS[name]
    m = create_map({"method": method, "input_dim": d, "n_components": D, "seed": 3, "params": params})
    full = create_map(m.spec.to_dict())
    full.short_path = False
    return m, full


def counted(m):
    """Wrap m's short path to record what it answered."""
    answers = []
    inner = m._short_features

    def spy(X, out):
        answers.append(inner(X, out))
        return answers[-1]

    m._short_features = spy
    return answers


def rows(n: int, d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)) * 2.0


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("d", [16, 200])   # 200: structured frequencies by the O(D log d) transform
def test_the_short_path_gives_the_full_paths_bits(name, d):
    m, full = twins(name, d)
    answers = counted(m)
    for n in (1, 3, 64, 200):
        for in_type in (np.float32, np.float64):
            X = rows(n, d, n).astype(in_type)
            for dtype in (np.float32, np.float64):
                expected = full.transform(X, dtype=dtype)
                np.testing.assert_array_equal(m.transform(X, dtype=dtype), expected)
                out = np.empty_like(expected)
                m.features_into(m.check(X), out)   # the service's call: a checked batch
                np.testing.assert_array_equal(out, expected)
    assert answers and all(answers)


def test_only_small_dense_c_ordered_float_batches_take_it():
    m, full = twins("rff", 16)
    answers = counted(m)
    X = rows(8, 16)
    for other in (X.T.copy().T, X.astype(np.int64), X.tolist()):   # Fortran order, integers, lists
        np.testing.assert_array_equal(m.transform(other), full.transform(other))
    big = rows(SHORT_PATH_ELEMENTS // m.output_dim, 16)
    np.testing.assert_array_equal(m.transform(big), full.transform(big))
    # Fortran order: refused by transform and by features_into (the checked batch keeps its order); integers:
    # refused unchecked, taken once `check` made them float64; a list: taken once checked; the big batch: never asked.
    assert answers == [False, False, False, True, True]


def outcome(m, X, dtype):
    """m's features of X, or the message of the InputError it raises."""
    try:
        return m.transform(X, dtype=dtype)
    except InputError as error:
        return str(error)


@pytest.mark.parametrize("name", ["rff", "rff_phase", "nrff"])
def test_bad_rows_get_the_full_paths_errors(name):
    m, full = twins(name, 16)
    answers = counted(m)
    cases = []
    for value in (np.nan, np.inf, -np.inf):
        X = rows(4, 16)
        X[2, 5] = value
        cases.append(X)
    wide = rows(2, 16)
    wide[1, 0] = 1e39                 # beyond float32: refused for float32 features
    cases.append(wide)
    cases.append(np.full((2, 16), 1.7e308))   # projections that overflow float64 in some columns
    cases.append(rows(2, 16) * 1e300)         # finite but beyond the bound: numpy's cos reduces them
    for X in cases:
        for dtype in (np.float32, np.float64):
            ours, theirs = outcome(m, X, dtype), outcome(full, X, dtype)
            if isinstance(theirs, str):
                assert ours == theirs
            else:
                np.testing.assert_array_equal(ours, theirs)
    assert sum(isinstance(outcome(full, X, np.float64), str) for X in cases) >= 3   # nan, inf, -inf at least
    assert len(answers) > 6 and not any(answers[:6])   # the nonfinite rows (asked once each): never computed there


def test_all_zero_rows_follow_empty_rows():
    m, full = twins("nrff", 16)
    X = rows(3, 16)
    X[1] = 0
    with pytest.raises(InputError, match="row.s. 1"):
        m.transform(X)
    zero = create_map({**m.spec.to_dict(), "params": {**m.spec.params, "empty_rows": "zero"}, "id": None})
    Z = zero.transform(X)
    assert not Z[1].any() and Z[0].any()
    rff, rff_full = twins("rff", 16)
    np.testing.assert_array_equal(rff.transform(X), rff_full.transform(X))   # rff has no such refusal


def test_arguments_beyond_the_compiled_reduction_go_through_numpy():
    """Laplacian frequencies are Cauchy: a large gamma gives phases beyond the compiled passes' reduction,
    which numpy's cos and sin reduce (the full path); the answers are the full path's."""
    m, full = twins("rff_laplacian", 16)
    X = rows(5, 16) * 1e6
    answers = counted(m)
    for dtype in (np.float32, np.float64):
        np.testing.assert_array_equal(m.transform(X, dtype=dtype), full.transform(X, dtype=dtype))
    assert answers and not any(answers)


def test_the_short_path_never_warns():
    m, _ = twins("rff", 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.transform(rows(4, 16))
        for bad in (np.nan, 1e39):
            X = rows(4, 16)
            X[3, 3] = bad
            with pytest.raises(InputError):
                m.transform(X)
        with pytest.raises(InputError, match="overflow"):
            m.transform(np.full((2, 16), 1.7e308), dtype=np.float64)


# -- other CPUs --------------------------------------------------------------------------------------------

CHILD = r"""
import json, sys
import numpy as np
from featurehash.maps import create_map
out = {}
rng = np.random.default_rng(0)
for name, (method, params) in json.loads(sys.argv[1]).items():
    for d in (64, 300):
        m = create_map({"method": method, "input_dim": d, "n_components": 512, "seed": 3, "params": params})
        full = create_map(m.spec.to_dict())
        full.short_path = False
        X = rng.standard_normal((64, d))
        cuts = ((0, 4), (4, 20), (20, 64))
        for dtype in ("float32", "float64"):
            def cut_by(feature_map, pieces):
                return np.concatenate([feature_map.transform(X[a:b], dtype=dtype) for a, b in pieces])
            alone = cut_by(m, [(i, i + 1) for i in range(len(X))])
            batches = cut_by(m, cuts)
            whole = m.transform(X, dtype=dtype)
            assert np.array_equal(alone, cut_by(full, [(i, i + 1) for i in range(len(X))])), (name, d, dtype)
            assert np.array_equal(batches, cut_by(full, cuts)), (name, d, dtype)
            assert np.array_equal(whole, full.transform(X, dtype=dtype)), (name, d, dtype)
            out[f"{name}/{d}/{dtype}"] = [alone.tolist(), batches.tolist(), whole.tolist()]
W = np.array(create_map({"method": "rff", "input_dim": 300, "n_components": 1024, "seed": 3})._parameters_for(
    np.dtype(np.float32))[0].T)   # the projector's np.dot is np.matmul's BLAS call: the same bits
for dtype in (np.float32, np.float64):
    for n in (1, 2, 4, 16, 64, 200):
        rows, Wt = rng.standard_normal((n, 300)).astype(dtype), W.astype(dtype)
        assert np.array_equal(np.dot(rows, Wt), np.matmul(rows, Wt)), (dtype, n)
from threadpoolctl import threadpool_info
out["blas"] = [(i["architecture"], i["num_threads"]) for i in threadpool_info() if i["internal_api"] == "openblas"]
print(json.dumps(out))
"""


def _dispatch_found() -> list[str]:
    try:
        import numpy._core._multiarray_umath as umath
    except ImportError:  # numpy < 2
        import numpy.core._multiarray_umath as umath
    return [name for name in umath.__cpu_dispatch__ if umath.__cpu_features__.get(name)]


VARIANTS = {
    "default": {},
    "sandybridge_1_thread": {"OPENBLAS_CORETYPE": "Sandybridge", "OPENBLAS_NUM_THREADS": "1",
                             "NUMBA_NUM_THREADS": "1"},
    "prescott_2_threads_baseline_simd": {"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_NUM_THREADS": "2",
                                         "NUMBA_NUM_THREADS": "2",
                                         **({"NPY_DISABLE_CPU_FEATURES": ",".join(_dispatch_found())}
                                            if _dispatch_found() else {})},
}
CPU_SPECS = {name: SPECS[name] for name in ("rff", "rff_phase", "nrff", "rff_orthogonal")}


def _run(env_update: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(CPU_SPECS)], env={**os.environ, **env_update},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_on_simulated_cpus_short_is_full_and_a_row_alone_agrees_with_its_batches():
    """In each variant the child asserts that the short path gives the full path's bits (alone, in uneven
    batches, whole) and that np.dot (the projector's) is np.matmul's product, bit for bit; here a row alone,
    in batches and in the whole batch, on every variant, agree within the promise (float32 against float64
    features of the default run)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(VARIANTS, pool.map(_run, VARIANTS.values())))
    assert all(blas == ["Sandybridge", 1] for blas in runs["sandybridge_1_thread"]["blas"])
    assert all(blas[1] == 2 for blas in runs["prescott_2_threads_baseline_simd"]["blas"])
    reference = runs["default"]
    for key in (k for k in reference if k.endswith("float32")):
        exact = np.array(reference[key.replace("float32", "float64")][2])
        own = np.array(reference[key][2])
        for run in runs.values():
            for Z32, Z64 in zip(run[key], run[key.replace("float32", "float64")]):
                assert_dense_features_match(np.array(Z32), np.array(Z64), own, exact)


def test_float32_passes_give_an_element_its_own_bits_whatever_its_row():
    """The float32 passes pick a row's loop by whether all its arguments are below the float32 reduction's
    bound (a comparison each, `_fourier_kernels._all_below`); an element's result must not depend on the
    row: computed alone (a 1 x 1 pass) it is the same bits, also at the bounds, beyond them, and next to NaN."""
    from featurehash.maps.fourier import _fourier_kernels as kernels

    rng = np.random.default_rng(4)
    near = np.float32(65535.5 * np.pi) * (1 + np.linspace(-3e-7, 3e-7, 7))
    values = np.concatenate([rng.standard_normal(9) * 5, near, near / 2, [1e6, -3e5, np.nan]]).astype(np.float32)
    P = np.stack([values, rng.permutation(values), np.full(values.size, 2.5, np.float32)])
    P[2, 4] = near[3]   # one element at the bound in an otherwise easy row
    offsets = rng.uniform(0, 6.28, values.size).astype(np.float32)
    weights = rng.uniform(0.5, 1.0, values.size).astype(np.float32)
    phase = P.copy()
    kernels.shifted_cos_float32(phase, offsets, 0.3, False)
    both = np.empty((3, 2 * values.size), np.float32)
    kernels.cos_sin_into_float32(P, weights, both, False)
    for i in range(3):
        for j in range(values.size):
            alone = P[i:i + 1, j:j + 1].copy()
            kernels.shifted_cos_float32(alone, offsets[j:j + 1], 0.3, False)
            np.testing.assert_array_equal(alone[0, 0], phase[i, j])
            pair = np.empty((1, 2), np.float32)
            kernels.cos_sin_into_float32(P[i:i + 1, j:j + 1].copy(), weights[j:j + 1], pair, False)
            np.testing.assert_array_equal(pair[0], both[i, [j, values.size + j]])


def test_a_quadrature_grid_over_anova_families_is_left_to_the_full_path():
    """With anova the grid's W is CSR, not the dense product of the short path: it answers False, and the
    features are the full path's."""
    m = create_map({"method": "quadrature", "input_dim": 12, "n_components": 256, "seed": 3,
                    "params": {"gamma": 0.05, "grid": "subsampled", "anova": {"window": 3}}})
    full = create_map(m.spec.to_dict())
    full.short_path = False
    answers = counted(m)
    X = np.random.default_rng(1).standard_normal((3, 12))
    for dtype in (np.float32, np.float64):
        assert np.array_equal(m.transform(X, dtype=dtype), full.transform(X, dtype=dtype))
    assert answers and not any(answers)
