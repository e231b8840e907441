"""Write tests/golden/matern.json: Matérn kernels, per-dimension lengthscales and data-driven gammas of rff
and nystroem (issue 34), pinned as the other golden files pin their maps.

Each case records the request, the resolved spec (with its id: a data-driven gamma is stored as its number),
a small fixed input and today's outputs; tests/maps/fourier/test_matern.py compares against them.
Regenerate only on a deliberate change of the numeric format (which must also bump FORMAT_VERSION):

    python tests/golden/make_golden_matern.py --force
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from golden_io import golden_cases, single_file_main
from make_golden_polynomial import fixed_input

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "matern.json"


def _rows(n: int, d: int, seed: int) -> list[list[float]]:
    """Rows with short exact decimals, so the request is the same JSON everywhere."""
    return (np.random.default_rng(seed).integers(-40, 41, size=(n, d)) / 8.0).tolist()


# nu with the summed chi-square (2 nu = 1, 3, 5) and with Marsaglia-Tsang (0.8: shape < 1, boosted; 3.7),
# both variants, orthogonal blocks, lengthscales on every kernel, both bandwidth rules, nystroem's Matérn.
CASES = [
    ("rff_matern_half", {"method": "rff", "input_dim": 4, "n_components": 12, "seed": 61,
                         "params": {"kernel": "matern", "nu": 0.5, "gamma": 0.4}}),
    ("rff_matern_default_nu", {"method": "rff", "input_dim": 5, "n_components": 10, "seed": 62,
                               "params": {"kernel": "matern", "gamma": 0.3, "variant": "phase"}}),
    ("rff_matern_five_halves_ard", {"method": "rff", "input_dim": 3, "n_components": 8, "seed": 63,
                                    "params": {"kernel": "matern", "nu": 2.5, "lengthscales": [0.5, 2.0, 1.25]}}),
    ("rff_matern_gamma_sampler_orthogonal", {"method": "rff", "input_dim": 4, "n_components": 14, "seed": 64,
                                             "params": {"kernel": "matern", "nu": 0.8, "gamma": 0.6,
                                                        "frequencies": "orthogonal"}}),
    ("rff_matern_large_nu", {"method": "rff", "input_dim": 3, "n_components": 8, "seed": 2**62 + 65,
                             "params": {"kernel": "matern", "nu": 3.7, "gamma": 0.2}}),
    ("rff_gaussian_ard_orthogonal", {"method": "rff", "input_dim": 4, "n_components": 10, "seed": 66,
                                     "params": {"gamma": 0.5, "lengthscales": [1.0, 2.0, 0.5, 4.0],
                                                "frequencies": "orthogonal"}}),
    ("rff_laplacian_ard", {"method": "rff", "input_dim": 3, "n_components": 8, "seed": 67,
                           "params": {"kernel": "laplacian", "gamma": 0.7, "lengthscales": [3.0, 1.0, 0.25]}}),
    ("rff_gamma_median", {"method": "rff", "input_dim": 4, "n_components": 8, "seed": 68,
                          "params": {"kernel": "matern", "nu": 1.5, "gamma": "median", "fit_sample": _rows(40, 4, 1)}}),
    ("rff_gamma_median_sampled_pairs", {"method": "rff", "input_dim": 3, "n_components": 8, "seed": 69,
                                        "params": {"gamma": "median", "fit_sample": _rows(200, 3, 2)}}),
    ("rff_laplacian_gamma_scale", {"method": "rff", "input_dim": 3, "n_components": 8, "seed": 70,
                                   "params": {"kernel": "laplacian", "gamma": "scale", "fit_sample": _rows(30, 3, 3)}}),
    ("nystroem_matern_ard_median", {"method": "nystroem", "input_dim": 3, "n_components": 6, "seed": 71,
                                    "params": {"kernel": "matern", "nu": 0.5, "gamma": "median",
                                               "lengthscales": [1.0, 0.5, 2.0], "fit_sample": _rows(25, 3, 4)}}),
    ("quadrature_subsampled_ard", {"method": "quadrature", "input_dim": 3, "n_components": 12, "seed": 73,
                                   "params": {"gamma": 0.4, "lengthscales": [2.0, 0.5, 1.0]}}),
    ("nystroem_gaussian_scale", {"method": "nystroem", "input_dim": 4, "n_components": 5, "seed": 72,
                                 "params": {"gamma": "scale", "fit_sample": _rows(20, 4, 5)}}),
]


def outputs(m, X: np.ndarray) -> dict:
    out = {"transform_float64": m.transform(X, dtype=np.float64).tolist(),
           "transform_float32": m.transform(X).astype(np.float64).tolist(),
           "exact_kernel": m.exact_kernel(X).tolist()}
    if m.spec.method == "rff":
        frequencies, offsets = m._parameters_for(np.dtype(np.float64))
        out.update(frequencies_head=frequencies[:3].tolist(),
                   offsets_head=None if offsets is None else offsets[:5].tolist())
    return out


def build() -> dict:
    return golden_cases(CASES, fixed_input, 200, outputs)


def main(argv: list[str] | None = None) -> int:
    return single_file_main(__doc__.splitlines()[0], OUTPUT, build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
