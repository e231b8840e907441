"""Compile the numba kernels ahead of the first request: `featurehash warm-cache`.

Every compiled kernel (`cache=True`) is written to numba's cache the first time a process needs it
(NUMBA_CACHE_DIR, else next to the sources); a process that finds it there loads it in milliseconds.
A fresh container has no cache, so its first SSF map at d = 4096 took 3.9 s instead of 1.5 s, and
every method's first call pays its kernels' compilation. This runs one small map of every method and
variant through what the service calls (creation with its fits and searches, dense and sparse float32
and float64 features, codes; dense inputs also read-only, as npy bodies arrive, for which numba compiles
apart: 0.25-0.43 s on the first npy request otherwise, measured), so that an image built with it
(Dockerfile) starts warm. numba keys its cache by CPU: a machine of another kind compiles again on first
use, as without this.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ..maps import create_map
from ..maps.base import DenseFeatureMap

INPUT_DIM = 40
N_COMPONENTS = {"additive_chi2": 3 * INPUT_DIM}   # its width is fixed (sample_steps 2); others take 128
ROWS = 8
REQUESTS = (
    ("rff", {"gamma": 0.1}),
    ("rff", {"gamma": 0.1, "variant": "phase"}),
    ("rff", {"kernel": "laplacian", "gamma": 0.1}),
    ("rff", {"gamma": 0.1, "frequencies": "orthogonal"}),
    ("nrff", {"gamma": 1.0}),
    ("srf", {"degree": 3, "bias": 2.0}),
    ("ssf", {"gamma": 0.1}),
    ("ssf", {"kernel": "arccos1"}),
    ("quadrature", {"grid": "subsampled", "gamma": 0.1}),
    ("random_maclaurin", {"degree": 2, "coef0": 1.0}),
    ("tensorsketch", {"degree": 2, "coef0": 1.0}),
    ("skewed_chi2", {"skewedness": 0.5}),
    ("additive_chi2", {}),
    ("gcws", {"bits": 4}),
    ("gcws", {"bits": 4, "sampler": "dart"}),
    ("binning", {"gamma": 0.1}),
    ("minhash", {}),
    ("minhash", {"variant": "k_permutation", "code_bits": 8}),
)
# Structured frequencies and SSF's FFT path take larger inputs (below them a dense product is used).
WIDE_REQUESTS = (
    ("rff", {"gamma": 0.01, "variant": "phase", "frequencies": "structured"}, 256, 512),
    ("ssf", {"gamma": 0.01}, 256, 512),
    ("minhash", {"variant": "circulant"}, 256, 128),  # one permutation of input_dim >= n_components elements
)


def _inputs(input_dim: int) -> tuple:
    rng = np.random.default_rng(0)
    dense = np.abs(rng.standard_normal((ROWS, input_dim))) / np.sqrt(input_dim) + 0.01
    sparse = sp.random(ROWS, input_dim, density=0.3, format="csr", random_state=1, dtype=np.float64)
    sparse.data += 0.01
    for row in range(ROWS):   # no all-zero row (GCWS and the unit-sphere maps refuse them)
        if sparse.indptr[row] == sparse.indptr[row + 1]:
            sparse = sp.csr_matrix(sparse + sp.csr_matrix(([0.5], ([row], [0])), shape=sparse.shape))
    return dense, dense.astype(np.float32), sparse


def _read_only(X):
    """X as the service's npy decoder gives it: a read-only view (numba compiles kernels apart for those)."""
    view = X.view()
    view.setflags(write=False)
    return view


def _exercise(feature_map, inputs: tuple) -> None:
    inputs = (*inputs, *(_read_only(X) for X in inputs if isinstance(X, np.ndarray)))
    for X in inputs:
        if isinstance(feature_map, DenseFeatureMap):
            for dtype in (np.float32, np.float64):
                feature_map.transform(X, dtype=dtype)
        else:
            feature_map.transform(X)
        if feature_map.has_hash:
            feature_map.hash(X)


def warm() -> list[str]:
    """Create and run the maps of REQUESTS and WIDE_REQUESTS (and a fitted Nystroem map); their labels."""
    done = []
    requests = [(method, params, INPUT_DIM, N_COMPONENTS.get(method, 128)) for method, params in REQUESTS]
    requests += WIDE_REQUESTS
    for method, params, input_dim, n_components in requests:
        inputs = _inputs(input_dim)
        feature_map = create_map({"method": method, "input_dim": input_dim, "n_components": n_components,
                                  "seed": 1, "params": params})
        _exercise(feature_map, inputs)
        done.append(f"{method} {params}")
    dense = _inputs(INPUT_DIM)[0]
    nystroem = create_map({"method": "nystroem", "input_dim": INPUT_DIM, "n_components": 4, "seed": 1,
                           "params": {"gamma": 0.1, "fit_sample": dense.tolist()}})
    _exercise(nystroem, (dense,))
    done.append("nystroem")
    documents = ["Warm the text kernels: documents, token lists", "and weighted tokens, in both hash modes."]
    for params in ({}, {"hash": "sklearn", "analyzer": "char_wb", "ngram_range": [2, 4]}):
        hashing = create_map({"method": "hashing", "input_dim": 1, "n_components": 1024, "seed": 1, "params": params})
        hashing.transform(documents)
        hashing.transform([document.split() for document in documents])
        hashing.transform([{"weighted": 2.0, "tokens": 0.5}])
        done.append(f"hashing {params}")
    return done


def main() -> dict:
    start = time.perf_counter()
    done = warm()
    return {"maps": len(done), "seconds": round(time.perf_counter() - start, 2)}
