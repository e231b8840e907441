"""Write the golden vectors of the polynomial-kernel maps: tests/golden/srf_shells.json,
random_maclaurin.json and tensorsketch.json.

tests/golden/srf.json (specs with the paper's Gaussian-mixture spectrum, fitted before version 0.2)
is no longer written: it pins how those stored specs transform, forever. The same requests now
fit spherical shells, pinned in srf_shells.json.

As tests/golden/make_golden.py does for the other maps: for each case the request, the
resolved spec (with its id and, for SRF, the fitted mixture), a small fixed input and the
outputs of today's code; tests/maps/fourier/test_srf.py and tests/maps/polynomial/test_polynomial_baselines.py compare
against them. Regenerate only on a deliberate change of the numeric format (which must also
bump FORMAT_VERSION, so that old ids are not silently reused):

    python tests/golden/make_golden_polynomial.py --force
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import numpy as np

from golden_io import golden_cases, write_golden

HERE = Path(__file__).resolve().parent

CASES = {
    "srf": [
        ("srf_default", {"method": "srf", "input_dim": 6, "n_components": 12, "seed": 21}),
        ("srf_degree10_bias2_cos_sin", {"method": "srf", "input_dim": 5, "n_components": 10, "seed": 22,
                                        "params": {"degree": 10, "bias": 2.0, "variant": "cos_sin"}}),
        ("srf_degree20", {"method": "srf", "input_dim": 7, "n_components": 8, "seed": 2**62 + 5,
                          "params": {"degree": 20, "bias": 4.0}}),
        # Above 200 dimensions Omega_d is computed by quadrature instead of hyp0f1.
        ("srf_dim300", {"method": "srf", "input_dim": 300, "n_components": 6, "seed": 24,
                        "params": {"degree": 7, "bias": 3.0}}),
    ],
    "random_maclaurin": [
        ("random_maclaurin_default", {"method": "random_maclaurin", "input_dim": 6, "n_components": 12, "seed": 31}),
        ("random_maclaurin_homogeneous", {"method": "random_maclaurin", "input_dim": 5, "n_components": 8,
                                          "seed": 32, "params": {"degree": 2, "coef0": 0.0}}),
        ("random_maclaurin_degree5", {"method": "random_maclaurin", "input_dim": 4, "n_components": 7,
                                      "seed": 33, "params": {"degree": 5, "coef0": 2.5}}),
    ],
    "tensorsketch": [
        ("tensorsketch_default", {"method": "tensorsketch", "input_dim": 6, "n_components": 16, "seed": 41}),
        ("tensorsketch_odd_width", {"method": "tensorsketch", "input_dim": 5, "n_components": 9, "seed": 42,
                                    "params": {"degree": 4, "coef0": 2.5}}),
        ("tensorsketch_homogeneous", {"method": "tensorsketch", "input_dim": 4, "n_components": 8,
                                      "seed": 43, "params": {"degree": 2, "coef0": 0.0}}),
    ],
}


FILE_NAMES = {"srf": "srf_shells.json"}


def fixed_input(d: int, seed: int) -> list[list[float]]:
    """Four rows with three decimals: negatives, zeros, a sparse row, a large and a small entry
    (the recipe of make_golden.py; no row is all zero, so SRF takes them all)."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.standard_normal((4, d)), 3)
    X[1, ::2] = 0.0
    X[2, 1:] = 0.0
    X[2, 0] = 2.5
    X[3, -1] = 12.75
    X[3, 0] = 0.001
    return X.tolist()


def parameters_head(m) -> dict:
    """The first seed-derived parameters, pinned on their own."""
    if m.spec.method == "srf":
        frequencies, offsets = m._parameters_for(np.dtype(np.float64))
        return {"frequencies_head": frequencies[:3].tolist(),
                "offsets_head": None if offsets is None else offsets[:5].tolist()}
    if m.spec.method == "random_maclaurin":
        projections, constants = m._parameters_for(np.dtype(np.float64))
        return {"signs_head": projections[:, :2].tolist(), "constants_head": constants[:, :5].tolist()}
    sketches = m._parameters_for(np.dtype(np.float64))
    return {"buckets": [matrix.indices.tolist() for matrix, _, _ in sketches],
            "signs": [matrix.data.tolist() for matrix, _, _ in sketches],
            "constant_buckets": [bucket for _, bucket, _ in sketches],
            "constant_values": [value for _, _, value in sketches]}


def outputs(m, X: np.ndarray) -> dict:
    out = {
        "exact_kernel": m.exact_kernel(X).tolist(),
        "transform_float64": m.transform(X, dtype=np.float64).tolist(),
        "transform_float32": m.transform(X).astype(np.float64).tolist(),
        **parameters_head(m),
    }
    if m.spec.method == "srf":
        out["fitted_kernel"] = m.fitted_kernel(X).tolist()
    return out


def build(method: str) -> dict:
    return golden_cases(CASES[method], fixed_input, 100, outputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.add_argument("--output-dir", type=Path, default=HERE)
    args = parser.parse_args(argv)
    return write_golden({args.output_dir / FILE_NAMES.get(method, f"{method}.json"): functools.partial(build, method)
                         for method in CASES}, args.force)


if __name__ == "__main__":
    raise SystemExit(main())
