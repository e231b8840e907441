"""Write tests/golden/quadrature_forward.json: reweighted quadrature specs fitted with selection "forward"
(what every new reweighted request without a penalty gets), fixed inputs and their outputs forever.

As make_golden_quadrature.py (whose reweighted cases keep the l1 path, as specs stored before the
parameter), with the same case format. The requests are plain (no selection key: `complete_new_request`
writes "forward" into the resolved spec). tests/maps/fourier/test_quadrature.py compares against them and refits the
requests bit for bit, also under other BLAS kernels, SIMD paths and thread counts. Regenerate only on a
deliberate change of the numeric format:

    python tests/golden/make_golden_quadrature_forward.py --force
"""

from __future__ import annotations

from pathlib import Path

from golden_io import golden_document, single_file_main
from make_golden_quadrature import fit_sample, quadrature_case

OUTPUT = Path(__file__).resolve().parent / "quadrature_forward.json"

# (name, request): a plain Gaussian fit, and an ANOVA fit whose points are shared out over the windows.
CASES = [
    ("reweighted_forward", {"method": "quadrature", "input_dim": 6, "n_components": 16, "seed": 46,
                            "params": {"grid": "reweighted", "gamma": 0.25, "fit_sample": fit_sample(40, 6, 46)}}),
    ("reweighted_forward_anova", {"method": "quadrature", "input_dim": 5, "n_components": 20, "seed": 47,
                                  "params": {"grid": "reweighted", "gamma": 0.3, "anova": {"window": 2},
                                             "fit_pairs": 400, "fit_sample": fit_sample(40, 5, 47)}}),
]


def build() -> dict:
    return golden_document(cases={name: quadrature_case(request) for name, request in CASES})


if __name__ == "__main__":
    raise SystemExit(single_file_main(__doc__.splitlines()[0], OUTPUT, build, None))
