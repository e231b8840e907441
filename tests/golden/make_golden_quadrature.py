"""Write tests/golden/quadrature.json and tests/golden/binning.json: specs, fixed inputs and the
outputs they must give forever.

As tests/golden/make_golden.py does for the first methods: each case records the request, the
resolved spec (with its id; for the reweighted grid, the fitted points and weights that replace the
fit sample), a small fixed input and today's outputs; tests/maps/fourier/test_quadrature.py and
tests/maps/minhash/test_binning.py compare against them. The reweighted requests refit to their stored specs
bit for bit on any machine since the portable fit (issue 10), which reproduced these numbers;
tests/maps/fourier/test_quadrature.py checks it under other BLAS kernels, SIMD paths and thread counts. Regenerate only on a deliberate change of the numeric
format (which must also bump FORMAT_VERSION, so that old ids are not silently reused):

    python tests/golden/make_golden_quadrature.py --force
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from featurehash.maps import create_map
from golden_io import golden_document, write_golden

HERE = Path(__file__).resolve().parent


def fit_sample(rows: int, d: int, seed: int) -> list[list[float]]:
    """Rows with three decimals, so the request is exact in JSON."""
    return np.round(np.random.default_rng(seed).standard_normal((rows, d)) * 0.8, 3).tolist()


QUADRATURE_CASES = [
    ("dense", {"method": "quadrature", "input_dim": 2, "n_components": 16, "seed": 41,
               "params": {"grid": "dense", "points_per_dim": 4, "gamma": 0.7}}),
    ("dense_odd_rule", {"method": "quadrature", "input_dim": 3, "n_components": 28, "seed": 0,
                        "params": {"grid": "dense", "points_per_dim": 3, "gamma": 0.3}}),
    ("sparse_feature_map", {"method": "quadrature", "input_dim": 2, "n_components": 6,
                            "params": {"grid": "sparse", "level": 1, "gamma": 0.5}}),
    ("sparse_kernel_only", {"method": "quadrature", "input_dim": 4, "n_components": 50,
                            "params": {"grid": "sparse", "level": 2, "gamma": 0.5}}),
    # points_per_dim 10: the subsampled grid's default before it became 64 (the stored spec holds 10).
    ("subsampled", {"method": "quadrature", "input_dim": 5, "n_components": 24, "seed": 42,
                    "params": {"points_per_dim": 10, "gamma": 0.4}}),
    ("subsampled_anova", {"method": "quadrature", "input_dim": 6, "n_components": 16, "seed": 2**62 + 5,
                          "params": {"grid": "subsampled", "points_per_dim": 6, "gamma": 0.4,
                                     "anova": {"window": 3}}}),
    ("dense_anova_subsets", {"method": "quadrature", "input_dim": 5, "n_components": 30, "seed": 43,
                             "params": {"grid": "dense", "points_per_dim": 3, "gamma": 0.6,
                                        "anova": {"subsets": [[0, 4], [1, 2], [3, 0]]}}}),
    # selection "l1_path": the reweighted grid's selection before new requests got "forward" (the stored
    # spec leaves the key out).
    ("reweighted", {"method": "quadrature", "input_dim": 4, "n_components": 12, "seed": 44,
                    "params": {"grid": "reweighted", "gamma": 0.3, "points_per_dim": 8, "selection": "l1_path",
                               "fit_sample": fit_sample(30, 4, 44)}}),
    ("reweighted_anova_l1", {"method": "quadrature", "input_dim": 5, "n_components": 16, "seed": 45,
                             "params": {"grid": "reweighted", "gamma": 0.3, "anova": {"window": 2},
                                        "penalty": "l1", "candidates": 40, "fit_pairs": 300,
                                        "fit_sample": fit_sample(40, 5, 45)}}),
]

BINNING_CASES = [
    ("default", {"method": "binning", "input_dim": 5, "n_components": 16, "seed": 51}),
    ("bits_gamma", {"method": "binning", "input_dim": 7, "n_components": 24, "seed": 2**62 + 7,
                    "params": {"gamma": 0.35, "bits": 4}}),
    ("hashed_space", {"method": "binning", "input_dim": 2**30, "n_components": 8, "seed": 52,
                      "params": {"gamma": 2.0, "bits": 12}}),
]


def fixed_input(d: int, seed: int) -> np.ndarray:
    """Four rows with three decimals: negatives, zeros, a sparse row, a large and a small entry."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.standard_normal((4, d)), 3)
    X[1, ::2] = 0.0
    X[2, 1:] = 0.0
    X[2, 0] = 2.5
    X[3, -1] = 6.75
    X[3, 0] = 0.001
    return X


def sparse_input(d: int, seed: int) -> sp.csr_matrix:
    """Four rows of a huge space: a few nonzeros each, with three decimals."""
    rng = np.random.default_rng(seed)
    counts = [3, 1, 0, 5]
    indices = np.concatenate([np.sort(rng.choice(d, c, replace=False)) for c in counts])
    values = np.round(rng.standard_normal(indices.size), 3)
    return sp.csr_matrix((values, indices, np.cumsum([0] + counts)), shape=(4, d))


def quadrature_case(request: dict) -> dict:
    m = create_map(request)
    X = fixed_input(m.spec.input_dim, 300 + m.spec.seed % 1000)
    W, weights = m.rule()
    W = W.toarray() if sp.issparse(W) else W
    expected = {
        "exact_kernel": m.exact_kernel(X).tolist(),
        "kernel": m.kernel(X).tolist(),
        "frequencies": W.tolist(),
        "weights": weights.tolist(),
        "is_feature_map": m.is_feature_map,
    }
    if m.is_feature_map:
        expected["transform_float64"] = m.transform(X, dtype=np.float64).tolist()
        expected["transform_float32"] = m.transform(X).astype(np.float64).tolist()
    return {"request": request, "spec": m.describe(), "input": X.tolist(), "expected": expected}


def binning_case(request: dict) -> dict:
    m = create_map(request)
    d = m.spec.input_dim
    X = sparse_input(d, 400 + m.spec.seed % 1000) if d > 1000 else sp.csr_matrix(fixed_input(d, 400 + m.spec.seed))
    features = m.transform(X)
    expected = {"hash": m.hash(X).tolist(), "indices": features.indices.tolist(), "scale": features.scale,
                "dim": features.dim, "exact_kernel": m.exact_kernel(X).tolist() if d <= 1000 else None}
    if d <= 1000:
        inverse_pitch, shift = m.grid_constants()
        expected["inverse_pitch_head"] = inverse_pitch[:2].tolist()
        expected["shift_head"] = shift[:2].tolist()
    document = {"indptr": X.indptr.tolist(), "indices": X.indices.tolist(), "data": X.data.tolist()}
    return {"request": request, "spec": m.describe(), "input": document, "expected": expected}


def build(cases, make_case) -> dict:
    return golden_document(cases={name: make_case(request) for name, request in cases})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.add_argument("--output-dir", type=Path, default=HERE)
    args = parser.parse_args(argv)
    return write_golden({args.output_dir / "quadrature.json": lambda: build(QUADRATURE_CASES, quadrature_case),
                         args.output_dir / "binning.json": lambda: build(BINNING_CASES, binning_case)}, args.force)


if __name__ == "__main__":
    raise SystemExit(main())
