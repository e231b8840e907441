"""Row chunks shared by threads (`_row_threads`, DenseFeatureMap.features_into) and the blocked Fourier
pass (`_fourier_pass`): the same features whatever the threads, blocks and chunks, errors naming the
first bad row, and BLAS's thread count given back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp

import featurehash.maps.fourier._fourier_pass as fourier_pass
import featurehash.maps.base as base_module
from featurehash.maps import InputError, create_map
from featurehash.maps.numerics import _row_threads as row_threads
from feature_promises import assert_dense_features_match

FOURIER_SPECS = [
    ("rff", {}), ("rff", {"variant": "phase"}), ("rff", {"kernel": "laplacian", "variant": "phase"}),
    ("nrff", {}), ("srf", {"variant": "cos_sin"}), ("quadrature", {}), ("ssf", {}),
]


def make(method, params, d=24, D=96, seed=3):
    return create_map({"method": method, "input_dim": d, "n_components": D, "seed": seed, "params": params})


def data(n=700, d=24, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d)) / np.sqrt(d)


@pytest.mark.parametrize(("method", "params"), FOURIER_SPECS, ids=[f"{m}-{p}" for m, p in FOURIER_SPECS])
def test_threads_blocks_and_chunks_give_the_same_features(method, params, monkeypatch):
    m = make(method, params)
    X = data()
    alone64, alone32 = (np.empty((len(X), m.output_dim), dtype=t) for t in (np.float64, np.float32))
    m.features_into(X, alone64, threads=1)
    m.features_into(X.astype(np.float32), alone32, threads=1)
    monkeypatch.setattr(fourier_pass, "BLOCK_ELEMENTS", 7 * m.output_dim)   # several blocks per chunk
    monkeypatch.setattr(fourier_pass, "MIN_BLOCK_ROWS", 5)
    monkeypatch.setattr(fourier_pass, "PRODUCT_BLOCK_ROWS", 5)
    monkeypatch.setattr(base_module, "SHARED_MIN_ELEMENTS", 8 * m.output_dim)  # many chunks
    for threads in (1, 2, 3):
        shared64, shared32 = np.empty_like(alone64), np.empty_like(alone32)
        m.features_into(X, shared64, threads=threads)
        m.features_into(X.astype(np.float32), shared32, threads=threads)
        # Rows are computed independently: other cuts change at most the products' last bits (in
        # float32 amplified by large phases, as another BLAS kernel would: the promise of docs/exactness.md).
        assert_dense_features_match(shared32, shared64, alone32, alone64)
    np.testing.assert_allclose(m.transform(sp.csr_matrix(X), dtype=np.float64), alone64, rtol=0, atol=1e-12)


def test_the_first_bad_row_is_named_when_threads_share_the_batch(monkeypatch):
    monkeypatch.setattr(base_module, "SHARED_MIN_ELEMENTS", 1000)
    m = make("rff", {"variant": "phase"})
    X = data(n=2000)
    X[[1733, 911, 1500]] = 1e38   # their float32 projections overflow
    with pytest.raises(InputError, match="row 911:"):
        m.features_into(X.astype(np.float32), np.empty((len(X), m.output_dim), np.float32), threads=2)
    with pytest.raises(InputError, match="row 5911:"):
        m.features_into(X.astype(np.float32), np.empty((len(X), m.output_dim), np.float32), threads=2,
                        first_row=5000)


def test_run_chunks_keeps_order_and_raises_the_first_error_after_all_threads_stop():
    seen = []
    results = row_threads.run_chunks(lambda k: (seen.append(k), k * k)[1], list(range(50)), threads=3)
    assert results == [k * k for k in range(50)] and sorted(seen) == list(range(50))

    def work(k):
        if k in (7, 31):
            raise ValueError(f"chunk {k}")
        return row_threads.in_shared_section()

    with pytest.raises(ValueError, match="chunk 7"):
        row_threads.run_chunks(work, list(range(40)), threads=2)
    assert all(row_threads.run_chunks(lambda k: row_threads.in_shared_section(), list(range(9)), threads=2))
    assert not row_threads.in_shared_section()


def test_blas_threads_come_back_after_overlapping_shared_batches(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(base_module, "SHARED_MIN_ELEMENTS", 1000)
    before = [info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]
    m = make("rff", {})
    X = data(n=3000)
    expected = m.transform(X, dtype=np.float64)
    inside = []

    def one(_):
        out = np.empty_like(expected)
        m.features_into(X, out, threads=2)
        inside.append(row_threads._blas.count())
        return out

    with ThreadPoolExecutor(4) as pool:
        for out in pool.map(one, range(12)):
            np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    after = [info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]
    assert after == before
    # While sections overlap, the count reported is the one saved, not the 1 set meanwhile.
    assert set(inside) == {row_threads._blas.count()}
    assert threading.active_count() < 20


def test_a_batch_on_fewer_cores_than_blas_threads_computes_with_one_blas_thread(monkeypatch):
    """After the process's affinity narrowed below OpenBLAS's pool (sized when it loaded), a batch is
    computed on one thread with BLAS held to one thread (its threads spun on each block's product), and
    the count is given back; the features stay the same up to BLAS blocking."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    row_threads._blas.count()   # looks the library up
    if row_threads._blas._get is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS threadpoolctl finds")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        before = row_threads._blas.count()
        m = make("rff", {"variant": "phase"})
        X = data(n=3000)
        expected = m.transform(X, dtype=np.float64)
        monkeypatch.setattr(row_threads, "usable_cores", lambda: 1)
        monkeypatch.setattr(base_module, "SHARED_MIN_ELEMENTS", 1000)
        seen = []
        project = m._projector

        def recording_projector(dtype):
            inner = project(dtype)
            return lambda rows, into: (seen.append(int(row_threads._blas._get())), inner(rows, into))

        monkeypatch.setattr(m, "_projector", recording_projector)
        out = m.transform(X, dtype=np.float64)
        assert before == 2 and seen and set(seen) == {1}
        assert row_threads._blas.count() == 2
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)   # other chunks: other BLAS blocking


def test_float32_passes_are_within_two_ulps_of_the_exact_features():
    """The compiled float32 passes compute in float32 arithmetic, within 2^-22 of the weight (two float32 ulps
    of the largest feature): phase of x + b rounded to float32 first, as numpy's `out += b` does; cos_sin of
    the projection. Arguments beyond their reduction go through a float64 formula, element by element."""
    from featurehash.maps.fourier import _fourier_kernels as kernels

    rng = np.random.default_rng(5)
    P = np.concatenate([rng.uniform(-6, 6, 4000), rng.uniform(-2e5, 2e5, 4000), [0.0, np.pi / 2]]).astype(np.float32)
    offsets = rng.uniform(0, 2 * np.pi, P.size).astype(np.float32)
    weight = 0.037
    shifted = P[None, :].copy()
    assert kernels.shifted_cos_float32(shifted, offsets, weight, False) == 0
    exact = weight * np.cos((P + offsets).astype(np.float64))
    assert np.abs(shifted[0] - exact).max() <= 2.0**-22 * weight
    both = np.empty((1, 2 * P.size), dtype=np.float32)
    weights = np.full(P.size, weight, dtype=np.float32)
    assert kernels.cos_sin_into_float32(P[None, :], weights, both, False) == 0
    for got, exact in ((both[0, :P.size], weight * np.cos(P.astype(np.float64))),
                       (both[0, P.size:], weight * np.sin(P.astype(np.float64)))):
        assert np.abs(got - exact).max() <= 2.0**-22 * weight
    beyond = np.array([[1e7, 3.0, np.inf, 2e5, -1.5e5]], dtype=np.float32)
    wide = np.empty((1, 10), dtype=np.float32)
    assert kernels.cos_sin_into_float32(beyond, np.ones(5, np.float32), wide, False) == 2   # then numpy's
    in_range = [1, 3, 4]
    np.testing.assert_allclose(wide[0, in_range], np.cos(beyond[0, in_range].astype(np.float64)), rtol=0, atol=2.0**-22)
    np.testing.assert_allclose(wide[0, 5:][in_range], np.sin(beyond[0, in_range].astype(np.float64)), rtol=0,
                               atol=2.0**-22)
    alone = np.empty((1, 2), dtype=np.float32)
    kernels.cos_sin_into_float32(beyond[:, 1:2], np.ones(1, np.float32), alone, False)
    assert wide[0, 1] == alone[0, 0] and wide[0, 6] == alone[0, 1]   # bits independent of the neighbours
    beyond = np.array([[1e7, 3.0, np.inf, 4e5, -3e5]], dtype=np.float32)
    wide = beyond.copy()
    assert kernels.shifted_cos_float32(wide, np.zeros(5, np.float32), 1.0, False) == 2   # then numpy's
    exact = np.cos(beyond[0, [1, 3, 4]].astype(np.float64))
    assert np.abs(wide[0, [1, 3, 4]] - exact).max() <= 2.0**-22
    in_range = beyond[:, 1:2].copy()
    kernels.shifted_cos_float32(in_range, np.zeros(1, np.float32), 1.0, False)
    assert wide[0, 1] == in_range[0, 0]   # an element's bits do not depend on its neighbours


def test_fused_unit_rows_equal_the_separate_pass():
    """nrff's row normalisation inside the cos passes gives the bits of the separate pass (numpy's blocks),
    rows of unit norm; a row with an argument beyond the float32 reduction too."""
    from featurehash.maps.fourier import _fourier_kernels as kernels

    rng = np.random.default_rng(6)
    P = rng.uniform(-8, 8, (5, 1003)).astype(np.float32)
    P[2, 7] = 3e5
    offsets = rng.uniform(0, 2 * np.pi, 1003).astype(np.float32)
    for dtype, shifted_cos in ((np.float32, kernels.shifted_cos_float32),
                               (np.float64, kernels.shifted_cos_inplace)):
        fused, separate = P.astype(dtype), P.astype(dtype)
        shifted_cos(fused, offsets.astype(dtype), 0.3, True)
        shifted_cos(separate, offsets.astype(dtype), 0.3, False)
        kernels.normalize_rows(separate)
        assert np.array_equal(fused, separate)
        np.testing.assert_allclose(np.linalg.norm(fused.astype(np.float64), axis=1), 1.0, rtol=1e-6)
    for dtype, cos_sin in ((np.float32, kernels.cos_sin_into_float32), (np.float64, kernels.cos_sin_into)):
        fused, separate = (np.empty((5, 2006), dtype=dtype) for _ in range(2))
        cos_sin(P.astype(dtype), np.full(1003, 0.3, dtype=dtype), fused, True)
        cos_sin(P.astype(dtype), np.full(1003, 0.3, dtype=dtype), separate, False)
        kernels.normalize_rows(separate)
        assert np.array_equal(fused, separate)


HOLD_EVERY_OPENBLAS = """
import json, os, numpy, scipy.linalg  # scipy's own OpenBLAS beside numpy's
from threadpoolctl import ThreadpoolController, threadpool_info
from featurehash.maps.numerics import _row_threads as row_threads
libraries = [info for info in threadpool_info() if info["internal_api"] == "openblas"]
numpy_home = os.path.realpath(os.path.dirname(numpy.__file__))
others = [info["filepath"] for info in libraries if not os.path.realpath(info["filepath"]).startswith(numpy_home)]
for path in others:   # scipy's at one thread: the count must still be numpy's two
    ThreadpoolController().select(filepath=path).limit(limits=1)
count = row_threads._blas.count()
with row_threads.held_blas():
    inside = sorted({info["num_threads"] for info in threadpool_info() if info["internal_api"] == "openblas"})
after = {info["filepath"]: info["num_threads"] for info in threadpool_info() if info["internal_api"] == "openblas"}
numpys = [after[info["filepath"]] for info in libraries if info["filepath"] not in others]
print(json.dumps({"libraries": len(libraries), "count": count, "inside": inside, "numpys_after": numpys}))
"""


@pytest.mark.parametrize("hash_seed", ["1", "2", "4"])
def test_every_openblas_is_held_and_numpys_is_counted(hash_seed):
    """numpy's and scipy's OpenBLAS are both held to one thread in a shared section whatever order
    threadpoolctl lists them in (it followed the hash seed), and the count outside is numpy's."""
    pytest.importorskip("threadpoolctl")
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OPENBLAS_NUM_THREADS": "2"}
    out = json.loads(subprocess.run([sys.executable, "-c", HOLD_EVERY_OPENBLAS], env=env, capture_output=True,
                                    text=True, timeout=120, check=True).stdout)
    if out["libraries"] == 0:
        pytest.skip("no OpenBLAS that threadpoolctl finds (another BLAS): nothing is held")
    assert out["count"] == 2 and out["inside"] == [1] and out["numpys_after"] == [2]


def _pool_available() -> bool:
    row_threads._blas.count()   # looks the library up
    return row_threads._blas.pool_runner is not None


def test_a_lone_section_runs_its_chunks_on_numpys_blas_pool_with_the_bits_of_helper_threads(monkeypatch):
    """Alone, a batch's chunks run on the calling thread and numpy's OpenBLAS pool threads (which spin after
    any numpy product, and take the work at once); with the pool turned off they run on helper threads: the
    chunks are the same, so are the bits. A section overlapping another uses helper threads."""
    if not _pool_available():
        pytest.skip("numpy's BLAS is not a pthreads OpenBLAS exporting gotoblas_pthread")
    monkeypatch.setattr(base_module, "SHARED_MIN_ELEMENTS", 1000)
    m = make("rff", {})
    X = data(n=3000).astype(np.float32)
    used, run = [], row_threads._run_on_blas_pool
    monkeypatch.setattr(row_threads, "_run_on_blas_pool", lambda work, threads: (used.append(threads),
                                                                                  run(work, threads))[1])
    on_pool = np.empty((len(X), m.output_dim), np.float32)
    m.features_into(X, on_pool, threads=2)
    assert used == [2]
    monkeypatch.setattr(row_threads, "_USE_BLAS_POOL", False)
    on_helpers = np.empty_like(on_pool)
    m.features_into(X, on_helpers, threads=2)
    assert used == [2] and np.array_equal(on_pool, on_helpers)
    monkeypatch.setattr(row_threads, "_USE_BLAS_POOL", True)
    with row_threads.held_blas():   # another section is running: helper threads
        inside = np.empty_like(on_pool)
        m.features_into(X, inside, threads=2)
    assert used == [2] and np.array_equal(inside, on_pool)
    # Two threads run the chunks: each waits (the GIL released) until the other has taken one too.
    seen, both = set(), threading.Event()

    def meet(_):
        seen.add(threading.get_native_id())
        if len(seen) >= 2 or not both.wait(10):   # after one wait in vain, no more (the assert fails)
            both.set()

    row_threads.run_chunks(meet, list(range(64)), threads=2)
    assert len(used) == 2 and threading.get_native_id() in seen and len(seen) == 2


RAISED_MEANWHILE = """
import threading, numpy as np
from threadpoolctl import threadpool_limits
from featurehash import create_map
import featurehash.maps.base as base_module
base_module.SHARED_MIN_ELEMENTS = 1000
m = create_map({"method": "rff", "input_dim": 64, "n_components": 512, "seed": 1})
X = np.random.default_rng(0).standard_normal((20000, 64)).astype(np.float32)
expected = m.transform(X, dtype=np.float32)
stop = threading.Event()
def raise_the_count():   # what threadpoolctl's limits do when given back in another thread
    while not stop.is_set():
        threadpool_limits(2, user_api="blas")
threading.Thread(target=raise_the_count, daemon=True).start()
for _ in range(20):
    out = np.empty_like(expected)
    m.features_into(X, out, threads=2)
    assert np.abs(out - expected).max() < 1e-3
stop.set()
print("done")
"""


def test_a_blas_count_raised_during_a_section_on_the_pool_does_not_hang_it():
    """Another thread setting numpy's BLAS count to 2 while chunks run on the pool makes a chunk's product
    ask the pool for a thread: a spare one is kept, so the batch finishes (a subprocess with a timeout: a
    hang fails instead of stopping the suite)."""
    pytest.importorskip("threadpoolctl")
    if not _pool_available():
        pytest.skip("numpy's BLAS is not a pthreads OpenBLAS exporting gotoblas_pthread")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", RAISED_MEANWHILE], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]


def test_chunk_results_on_the_blas_pool_are_freed_without_the_cyclic_collector():
    """The pool's ctypes callback sits in a reference cycle; the chunks' results must not hang from it (they
    did: ~25 MB a text batch stayed resident until the cyclic collector ran)."""
    import gc
    import weakref

    if not _pool_available():
        pytest.skip("numpy's BLAS is not a pthreads OpenBLAS exporting gotoblas_pthread")

    class Result:
        pass

    used, run = [], row_threads._run_on_blas_pool
    gc.disable()
    try:
        row_threads._run_on_blas_pool, original = (lambda work, threads: (used.append(threads), run(work, threads))[1],
                                                   row_threads._run_on_blas_pool)
        try:
            results = row_threads.run_chunks(lambda chunk: Result(), list(range(8)), threads=2)
        finally:
            row_threads._run_on_blas_pool = original
        alive = [weakref.ref(r) for r in results]
        del results
        assert used == [2] and all(ref() is None for ref in alive)
    finally:
        gc.enable()
