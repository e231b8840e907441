"""Write tests/golden/frequencies.json: orthogonal and structured frequencies (`params.frequencies`)
of rff, nrff and srf, pinned as the other golden files pin their maps.

Each case records the request, the resolved spec (with its id), the first frequencies, a small
fixed input and today's outputs; tests/maps/fourier/test_orthogonal_frequencies.py compares against them.
Regenerate only on a deliberate change of the numeric format (which must also bump
FORMAT_VERSION, so that old ids are not silently reused):

    python tests/golden/make_golden_frequencies.py --force
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from golden_io import golden_cases, single_file_main
from make_golden_polynomial import fixed_input

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "frequencies.json"

# Fewer frequencies than d (one partial block), several blocks with a partial last one, d not a
# power of two (structured pads to d'), both variants, a large seed.
CASES = [
    ("rff_orthogonal_one_block", {"method": "rff", "input_dim": 6, "n_components": 8, "seed": 51,
                                  "params": {"gamma": 0.3, "frequencies": "orthogonal"}}),
    ("rff_orthogonal_blocks_phase", {"method": "rff", "input_dim": 5, "n_components": 13, "seed": 2**62 + 7,
                                     "params": {"gamma": 0.7, "variant": "phase", "frequencies": "orthogonal"}}),
    ("rff_structured", {"method": "rff", "input_dim": 5, "n_components": 20, "seed": 52,
                        "params": {"gamma": 0.3, "frequencies": "structured"}}),
    ("nrff_orthogonal", {"method": "nrff", "input_dim": 4, "n_components": 10, "seed": 53,
                         "params": {"gamma": 2.0, "frequencies": "orthogonal"}}),
    ("nrff_structured_cos_sin", {"method": "nrff", "input_dim": 7, "n_components": 12, "seed": 54,
                                 "params": {"gamma": 1.5, "variant": "cos_sin", "frequencies": "structured"}}),
    ("srf_orthogonal", {"method": "srf", "input_dim": 6, "n_components": 14, "seed": 55,
                        "params": {"degree": 4, "bias": 3.0, "frequencies": "orthogonal"}}),
    ("srf_structured", {"method": "srf", "input_dim": 3, "n_components": 10, "seed": 56,
                        "params": {"degree": 3, "bias": 4.0, "frequencies": "structured"}}),
]


def outputs(m, X: np.ndarray) -> dict:
    frequencies, offsets = m._parameters_for(np.dtype(np.float64))
    return {
        "frequencies_head": frequencies[:3].tolist(),
        "offsets_head": None if offsets is None else offsets[:5].tolist(),
        "transform_float64": m.transform(X, dtype=np.float64).tolist(),
        "transform_float32": m.transform(X).astype(np.float64).tolist(),
    }


def build() -> dict:
    return golden_cases(CASES, fixed_input, 100, outputs)


def main(argv: list[str] | None = None) -> int:
    return single_file_main(__doc__.splitlines()[0], OUTPUT, build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
