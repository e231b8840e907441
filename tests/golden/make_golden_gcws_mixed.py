"""Write tests/golden/gcws_mixed_bits.json: GCWS specs with bit_source "mixed_code" (the b-bit features of
every new request), fixed inputs and their codes and one-hot indices forever.

The cases are plain requests (no bit_source key: `complete_new_request` writes "mixed_code" into the
resolved spec), for both samplers, with and without zero_bit, and b = 1. tests/test_gcws.py compares
against them. Regenerate only on a deliberate change of the numeric format:

    python tests/golden/make_golden_gcws_mixed.py --force
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from featurehash.maps import create_map
from golden_io import golden_document, write_golden
from make_golden import fixed_input
from make_golden_gcws_dart import outputs

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "gcws_mixed_bits.json"

CASES = [
    ("icws_b1", {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 15, "params": {"bits": 1}}),
    ("icws_b4_zero_bit", {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 15,
                          "params": {"bits": 4, "zero_bit": True}}),
    ("icws_pgmm_b6", {"method": "gcws", "input_dim": 8, "n_components": 24, "seed": 16,
                      "params": {"power": 0.5, "bits": 6}}),
    ("dart_b2", {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 2**62 + 3,
                 "params": {"bits": 2, "sampler": "dart"}}),
    ("dart_b8_zero_bit", {"method": "gcws", "input_dim": 6, "n_components": 100, "seed": 17,
                          "params": {"bits": 8, "zero_bit": True, "sampler": "dart"}}),
]


def build() -> dict:
    cases = {}
    for name, request in CASES:
        m = create_map(request)
        X = fixed_input(m.spec.input_dim, 500 + m.spec.seed % 1000)
        cases[name] = {"request": request, "spec": m.describe(), "input": X,
                       "expected": outputs(m, np.array(X, dtype=np.float64))}
    return golden_document(cases=cases)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite an existing gcws_mixed_bits.json")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    return write_golden({args.output: build}, args.force)


if __name__ == "__main__":
    raise SystemExit(main())
