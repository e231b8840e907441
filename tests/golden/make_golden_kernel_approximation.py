"""Write the golden vectors of scikit-learn's kernel_approximation methods: tests/golden/kernel_approximation.json
(nystroem, additive_chi2, skewed_chi2).

As tests/golden/make_golden_polynomial.py: for each case the request (Nystroem's with its fit_sample), the
resolved spec (Nystroem's with the fitted landmarks and normalization, bit for bit), a small fixed
nonnegative input and today's outputs; tests/maps/fitted/test_nystroem.py and tests/maps/fourier/test_chi2.py compare against them,
and tests/portability_fingerprint.py refits every request under other CPUs. Regenerate only on a deliberate
change of the numeric format (which must also bump FORMAT_VERSION):

    python tests/golden/make_golden_kernel_approximation.py --force
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from featurehash.maps import create_map
from golden_io import golden_document, write_golden
from make_golden_polynomial import fixed_input

HERE = Path(__file__).resolve().parent


def fit_sample(rows: int, d: int, seed: int) -> list[list[float]]:
    """Nonnegative rows with three decimals, some zeros (histogram-like)."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.gamma(0.8, 1.0, size=(rows, d)), 3)
    X[rng.random((rows, d)) < 0.25] = 0.0
    X[:, 0] += 0.5
    return X.tolist()


def _nystroem(name, seed, params, d=5, m=6, rows=24):
    return (name, {"method": "nystroem", "input_dim": d, "n_components": m, "seed": seed,
                   "params": {**params, "fit_sample": fit_sample(rows, d, seed)}})


CASES = [
    _nystroem("nystroem_gaussian", 51, {"gamma": 0.3}),
    _nystroem("nystroem_laplacian_uniform", 52, {"kernel": "laplacian", "gamma": 0.2, "sampling": "uniform"}),
    _nystroem("nystroem_chi2", 53, {"kernel": "chi2", "gamma": 0.5}),
    _nystroem("nystroem_polynomial", 54, {"kernel": "polynomial", "gamma": 0.5, "degree": 2, "coef0": 1.0}),
    _nystroem("nystroem_arccos1", 55, {"kernel": "arccos1"}, m=5),
    _nystroem("nystroem_arccos0", 56, {"kernel": "arccos0"}),
    _nystroem("nystroem_pgmm", 57, {"kernel": "gmm", "power": 0.7}),
    # Rank below n_components: 3 distinct rows, 8 landmarks asked, 3 stored, 5 zero features.
    ("nystroem_low_rank", {"method": "nystroem", "input_dim": 4, "n_components": 8, "seed": 58,
                           "params": {"gamma": 0.5, "fit_sample": [[1.0, 0.0, 2.0, 0.5], [0.0, 1.5, 0.25, 3.0],
                                                                   [1.0, 0.0, 2.0, 0.5], [2.0, 2.0, 0.0, 0.0]]}}),
    ("additive_chi2_default", {"method": "additive_chi2", "input_dim": 5, "n_components": 15}),
    ("additive_chi2_steps4", {"method": "additive_chi2", "input_dim": 4, "n_components": 28,
                              "params": {"sample_steps": 4, "sample_interval": 0.3}}),
    ("skewed_chi2_default", {"method": "skewed_chi2", "input_dim": 6, "n_components": 12, "seed": 61}),
    ("skewed_chi2_skewedness", {"method": "skewed_chi2", "input_dim": 5, "n_components": 9, "seed": 2**62 + 7,
                                "params": {"skewedness": 0.3}}),
]


def build() -> dict:
    cases = {}
    for name, request in CASES:
        m = create_map(request)
        X = np.abs(np.array(fixed_input(m.spec.input_dim, 100 + m.spec.seed % 1000)))
        cases[name] = {"request": request, "spec": m.describe(), "input": X.tolist(), "expected": {
            "exact_kernel": m.exact_kernel(X).tolist(),
            "transform_float64": m.transform(X, dtype=np.float64).tolist(),
            "transform_float32": m.transform(X).astype(np.float64).tolist()}}
    return golden_document(cases=cases)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.add_argument("--output-dir", type=Path, default=HERE)
    args = parser.parse_args(argv)
    return write_golden({args.output_dir / "kernel_approximation.json": build}, args.force)


if __name__ == "__main__":
    raise SystemExit(main())
