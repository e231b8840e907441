"""Write tests/golden/ssf_rotation.json: SSF specs with randomization "rotation" (what every new request
gets), fixed inputs and their outputs forever.

As make_golden_ssf.py (whose cases keep randomization "signs", as specs stored before the parameter),
plus the rotation's phases. The requests have no randomization key (`complete_new_request` writes
"rotation" into the resolved spec) and state the index-set search "until_unchanged" they were made
with. tests/maps/fourier/test_ssf.py compares against them. Regenerate only on a deliberate change of the numeric
format:

    python tests/golden/make_golden_ssf_rotation.py --force
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from featurehash.maps import create_map
from golden_io import golden_document, write_golden
from make_golden_ssf import fixed_input, outputs

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "ssf_rotation.json"

# The index-set search these specs were made with, stated explicitly since new requests get "until_small_gain"
# (make_golden_ssf_search.py).
UNTIL_UNCHANGED = {"search": "until_unchanged"}
# (name, spec request): every kernel, n = m and n > m, odd and even d, m = 1, a large seed.
CASES = [
    ("gaussian_square", {"method": "ssf", "input_dim": 6, "n_components": 12, "seed": 31,
                         "params": {"kernel": "gaussian", "gamma": 0.5, **UNTIL_UNCHANGED}}),
    ("gaussian", {"method": "ssf", "input_dim": 9, "n_components": 40, "seed": 32,
                  "params": {"gamma": 0.8, **UNTIL_UNCHANGED}}),
    ("gaussian_one_pair", {"method": "ssf", "input_dim": 2, "n_components": 8, "seed": 33,
                           "params": {**UNTIL_UNCHANGED}}),
    ("arccos0", {"method": "ssf", "input_dim": 7, "n_components": 24, "seed": 34,
                 "params": {"kernel": "arccos0", **UNTIL_UNCHANGED}}),
    ("arccos1", {"method": "ssf", "input_dim": 8, "n_components": 40, "seed": 2**62 + 5,
                 "params": {"kernel": "arccos1", **UNTIL_UNCHANGED}}),
    ("arccos2", {"method": "ssf", "input_dim": 3, "n_components": 16, "seed": 35,
                 "params": {"kernel": "arccos2", **UNTIL_UNCHANGED}}),
]


def build(requests: list[tuple[str, dict]] = CASES) -> dict:
    cases = {}
    for name, request in requests:
        m = create_map(request)
        X = fixed_input(m.spec.input_dim, 400 + m.spec.seed % 1000)
        expected = outputs(m, np.array(X, dtype=np.float64), searched=True)
        phases = m.phases()
        expected["phases"] = [phases.real.tolist(), phases.imag.tolist()]
        cases[name] = {"request": request, "spec": m.describe(), "input": X, "expected": expected}
    return golden_document(cases=cases)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite an existing ssf_rotation.json")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    return write_golden({args.output: build}, args.force)


if __name__ == "__main__":
    raise SystemExit(main())
