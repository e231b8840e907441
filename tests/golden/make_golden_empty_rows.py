"""Write tests/golden/empty_rows.json: specs with `params.empty_rows` (the explicit result of an all-zero row),
a fixed input holding such a row, and today's outputs, forever.

nrff and srf with "zero" (the zero feature vector), gcws with "code" (EMPTY_CODE in every sample) for both
samplers, mixed and index bits, full and 0-bit codes. tests/test_golden.py compares against them, and checks
that the other rows get what the map without the option gives them. Regenerate only on a deliberate change of
the numeric format (which must also bump FORMAT_VERSION, so that old ids are not silently reused):

    python tests/golden/make_golden_empty_rows.py --force
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from golden_io import golden_cases, single_file_main
from make_golden import fixed_input

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "empty_rows.json"
EMPTY_ROW = 2   # where the all-zero row goes among make_golden's four fixed rows

CASES = [
    ("nrff_zero", {"method": "nrff", "input_dim": 6, "n_components": 16, "seed": 41,
                   "params": {"gamma": 0.7, "empty_rows": "zero"}}),
    ("srf_zero", {"method": "srf", "input_dim": 6, "n_components": 16, "seed": 42,
                  "params": {"degree": 2, "bias": 3.0, "variant": "cos_sin", "empty_rows": "zero"}}),
    ("gcws_code", {"method": "gcws", "input_dim": 6, "n_components": 12, "seed": 43,
                   "params": {"bits": 3, "empty_rows": "code"}}),
    ("gcws_code_dart_zero_bit", {"method": "gcws", "input_dim": 6, "n_components": 12, "seed": 44,
                                 "params": {"bits": 3, "zero_bit": True, "sampler": "dart", "empty_rows": "code"}}),
    ("gcws_code_index_bits", {"method": "gcws", "input_dim": 6, "n_components": 12, "seed": 45,
                              "params": {"bits": 2, "bit_source": "index", "empty_rows": "code"}}),
]


def input_with_an_empty_row(d: int, seed: int) -> list[list[float]]:
    rows = fixed_input(d, seed)
    return [*rows[:EMPTY_ROW], [0.0] * d, *rows[EMPTY_ROW:]]


def outputs(m, X: np.ndarray) -> dict:
    out = {"exact_kernel": m.exact_kernel(X).tolist(), "kernel": m.kernel(X).tolist()}
    if m.one_hot:
        features = m.transform(X)
        return {**out, "hash": m.hash(X).tolist(), "indices": features.indices.tolist(), "scale": features.scale,
                "dim": features.dim}
    return {**out, "transform_float64": m.transform(X, dtype=np.float64).tolist(),
            "transform_float32": m.transform(X).astype(np.float64).tolist()}


def build() -> dict:
    return golden_cases(CASES, input_with_an_empty_row, 400, outputs)


def main(argv: list[str] | None = None) -> int:
    return single_file_main(__doc__.splitlines()[0], OUTPUT, build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
