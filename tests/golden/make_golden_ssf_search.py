"""Write tests/golden/ssf_search.json: SSF specs as every new request gets them (randomization "rotation",
index-set search "until_small_gain"), fixed inputs and their outputs forever.

As make_golden_ssf_rotation.py (whose requests state the search "until_unchanged" they were made with),
with plain requests: `complete_new_request` writes both values into the resolved spec. One case is large
enough for the FFT-ranked shortlist (ssf.EXACT_SEARCH_TERMS). tests/maps/fourier/test_ssf.py compares against them.
Regenerate only on a deliberate change of the numeric format:

    python tests/golden/make_golden_ssf_search.py --force
"""

from __future__ import annotations

import argparse
from pathlib import Path

from golden_io import write_golden
from make_golden_ssf_rotation import build as build_cases

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "ssf_search.json"

# (name, spec request): every kernel, n = m and n > m, odd and even d, m = 1, a large seed, a shortlist search.
CASES = [
    ("gaussian_square", {"method": "ssf", "input_dim": 6, "n_components": 12, "seed": 41,
                         "params": {"kernel": "gaussian", "gamma": 0.5}}),
    ("gaussian", {"method": "ssf", "input_dim": 9, "n_components": 40, "seed": 42, "params": {"gamma": 0.8}}),
    ("gaussian_one_pair", {"method": "ssf", "input_dim": 2, "n_components": 8, "seed": 43, "params": {}}),
    ("arccos0", {"method": "ssf", "input_dim": 7, "n_components": 24, "seed": 44, "params": {"kernel": "arccos0"}}),
    ("arccos1", {"method": "ssf", "input_dim": 8, "n_components": 40, "seed": 2**62 + 7,
                 "params": {"kernel": "arccos1"}}),
    ("arccos2", {"method": "ssf", "input_dim": 3, "n_components": 16, "seed": 45, "params": {"kernel": "arccos2"}}),
    # m = 48, n = 512: past EXACT_SEARCH_TERMS, so the FFT-ranked shortlist chooses.
    ("gaussian_shortlist", {"method": "ssf", "input_dim": 96, "n_components": 2048, "seed": 46,
                            "params": {"gamma": 0.01}}),
]


def build() -> dict:
    return build_cases(CASES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite an existing ssf_search.json")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    return write_golden({args.output: build}, args.force)


if __name__ == "__main__":
    raise SystemExit(main())
