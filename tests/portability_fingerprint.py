"""What "the same map on every machine" covers, computed in one process: run it under other BLAS kernels,
SIMD paths and thread counts and compare (tests/test_portability.py).

    python tests/portability_fingerprint.py OUT.npz

Writes, for every golden request (tests/golden/*.json): the resolved spec (id and every stored
parameter), its discrete codes and one-hot feature indices on the golden input where the map has
them, and for one map of every dense method the features of a 1500-row input computed whole and in
uneven batches (float32 and float64). Also what the process ran on (SIMD paths found, BLAS kernel and threads), so a variant that
did not take effect is noticed rather than passing silently.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from featurehash.maps import create_map

GOLDEN = Path(__file__).resolve().parent / "golden"
# Files whose "request"s resolve today (the others pin specs stored by older versions).
GOLDEN_FILES = ("golden.json", "binning.json", "quadrature.json", "random_maclaurin.json", "srf_shells.json",
                "ssf.json", "tensorsketch.json", "kernel_approximation.json", "frequencies.json",
                "gcws_mixed_bits.json", "ssf_rotation.json", "quadrature_forward.json",
                "ssf_search.json", "matern.json", "empty_rows.json")
DENSE_REQUESTS = {
    "rff_cos_sin": {"method": "rff", "params": {"gamma": 0.02}},
    "rff_phase": {"method": "rff", "params": {"gamma": 0.02, "variant": "phase"}},
    "rff_laplacian": {"method": "rff", "params": {"kernel": "laplacian", "gamma": 0.05}},
    "rff_orthogonal": {"method": "rff", "params": {"gamma": 0.02, "frequencies": "orthogonal"}},
    "rff_structured": {"method": "rff", "params": {"gamma": 0.02, "variant": "phase", "frequencies": "structured"}},
    "rff_matern": {"method": "rff", "params": {"kernel": "matern", "nu": 0.8, "gamma": 0.02,
                                                "lengthscales": [1.0 + i / 64 for i in range(64)]}},
    "nrff": {"method": "nrff", "params": {"gamma": 2.0}},
    "nrff_orthogonal": {"method": "nrff", "params": {"gamma": 2.0, "frequencies": "orthogonal"}},
    "srf": {"method": "srf", "params": {"degree": 5, "bias": 3.0}},
    "ssf_gaussian": {"method": "ssf", "params": {"gamma": 0.02}},
    "ssf_arccos1": {"method": "ssf", "params": {"kernel": "arccos1"}},
    "quadrature": {"method": "quadrature", "params": {"grid": "subsampled", "gamma": 0.02}},
    "random_maclaurin": {"method": "random_maclaurin", "params": {"degree": 3, "coef0": 1.0}},
    "tensorsketch": {"method": "tensorsketch", "params": {"degree": 3, "coef0": 1.0}},
    "skewed_chi2": {"method": "skewed_chi2", "params": {"skewedness": 0.5}},
}
# Requests fitted to rows of the dense input (every third row), added to DENSE_REQUESTS.
FITTED_DENSE_REQUESTS = {
    "nystroem_gaussian": {"method": "nystroem", "params": {"gamma": 0.02}},
    "nystroem_arccos1": {"method": "nystroem", "params": {"kernel": "arccos1", "sampling": "uniform"}},
    "nystroem_matern_median": {"method": "nystroem", "params": {"kernel": "matern", "nu": 2.5, "gamma": "median"}},
}
DENSE_SHAPE = (1500, 64, 512)  # rows, input_dim, n_components
BATCH_CUTS = (0, 1, 17, 400, 1023, 1500)


def golden_input(stored, dim: int):
    """A golden file's input: rows, or a CSR matrix as {indptr, indices, data}."""
    if isinstance(stored, dict):
        return sp.csr_matrix((stored["data"], stored["indices"], stored["indptr"]), shape=(len(stored["indptr"]) - 1, dim))
    return np.array(stored, dtype=np.float64)


def dense_input() -> np.ndarray:
    """Digits-like rows: nonnegative, some zeros, a spread of norms (fixed, no randomness API)."""
    rows, dim, _ = DENSE_SHAPE
    grid = np.add.outer(np.arange(rows) * 0.37, np.arange(dim) * 1.13)
    X = np.floor(8.0 * (1.0 + np.sin(grid))) * (np.arange(dim) % 5 != 0)
    X[::7] *= 0.1
    return X + 0.01


def environment() -> dict:
    from threadpoolctl import threadpool_info

    try:
        import numpy._core._multiarray_umath as umath
    except ImportError:  # numpy < 2
        import numpy.core._multiarray_umath as umath

    blas = [{"architecture": info.get("architecture"), "threads": info.get("num_threads"),
             "api": info.get("user_api"), "prefix": info.get("prefix")} for info in threadpool_info()]
    dispatch = [name for name in umath.__cpu_dispatch__ if umath.__cpu_features__.get(name)]
    import numba

    return {"simd_dispatch_found": dispatch, "blas": blas, "numba_threads": numba.config.NUMBA_NUM_THREADS}


def fingerprint() -> dict[str, np.ndarray | str]:
    out: dict[str, np.ndarray | str] = {}
    specs = {}
    for file_name in GOLDEN_FILES:
        cases = json.loads((GOLDEN / file_name).read_text())["cases"]
        for name, case in cases.items():
            m = create_map(case["request"])
            key = f"{file_name.removesuffix('.json')}/{name}"
            specs[key] = m.spec.to_dict()
            if m.describe().get("has_hash"):
                out[f"codes/{key}"] = m.hash(golden_input(case["input"], m.spec.input_dim))
            if m.one_hot:
                out[f"codes/{key}/one_hot"] = m.transform(golden_input(case["input"], m.spec.input_dim)).indices
    out["specs"] = json.dumps(specs, sort_keys=True)
    X = dense_input()
    _, dim, width = DENSE_SHAPE
    fitted = {name: {**request, "params": {**request["params"], "fit_sample": X[::3].tolist()}}
              for name, request in FITTED_DENSE_REQUESTS.items()}
    for name, request in {**DENSE_REQUESTS, **fitted}.items():
        m = create_map({**request, "input_dim": dim, "n_components": width, "seed": 7})
        if name in fitted:  # the fit of a 500-row sample: compared bit for bit like the codes
            for field in ("landmarks", "normalization"):
                rows = getattr(m.params, field)
                out[f"codes/fit/{name}/{field}"] = np.concatenate([np.asarray(row) for row in rows])
        for dtype in (np.float32, np.float64):
            tag = np.dtype(dtype).name
            out[f"dense/{name}/{tag}/whole"] = m.transform(X, dtype=dtype)
            out[f"dense/{name}/{tag}/batches"] = np.concatenate(
                [m.transform(X[a:b], dtype=dtype) for a, b in zip(BATCH_CUTS, BATCH_CUTS[1:])])
    out["environment"] = json.dumps(environment())
    return out


if __name__ == "__main__":
    np.savez(sys.argv[1], **fingerprint())
