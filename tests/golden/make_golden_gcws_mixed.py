"""Write tests/golden/gcws_mixed_bits.json: GCWS specs with bit_source "mixed_code" (the b-bit features of
every new request), fixed inputs and their codes and one-hot indices forever.

The cases are plain requests (no bit_source key: `complete_new_request` writes "mixed_code" into the
resolved spec), for both samplers, with and without zero_bit, and b = 1. tests/maps/minhash/test_gcws.py compares
against them. Regenerate only on a deliberate change of the numeric format:

    python tests/golden/make_golden_gcws_mixed.py --force
"""

from __future__ import annotations

from pathlib import Path


from golden_io import golden_cases, single_file_main
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
    return golden_cases(CASES, fixed_input, 500, outputs)


def main(argv: list[str] | None = None) -> int:
    return single_file_main(__doc__.splitlines()[0], OUTPUT, build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
