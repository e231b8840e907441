"""Write tests/golden/gcws_dart.json: GCWS specs with sampler "dart", fixed inputs and their codes forever.

Like make_golden.py (whose gcws cases use the default sampler "icws" and stay as they are), for
the DartMinHash sampler: each case records the resolved spec (with its id), a small fixed input
and today's codes, one-hot indices and kernel estimates; tests/maps/minhash/test_gcws_dart.py compares
against them. Regenerate only on a deliberate change of the numeric format (which must also bump
FORMAT_VERSION, so that old ids are not silently reused):

    python tests/golden/make_golden_gcws_dart.py --force
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from golden_io import golden_cases, single_file_main
from make_golden import fixed_input

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "gcws_dart.json"

# (name, spec request): bit_source "index" as these specs were stored before the parameter (a plain
# request now gets "mixed_code", pinned in gcws_mixed_bits.json); full codes, 0-bit, pGMM both sides of 1, a large seed, k not a power of two
CASES = [
    ("dart", {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 15,
              "params": {"bits": 4, "sampler": "dart", "bit_source": "index"}}),
    ("dart_zero_bit", {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 15,
                       "params": {"bits": 4, "zero_bit": True, "sampler": "dart", "bit_source": "index"}}),
    ("dart_pgmm_half", {"method": "gcws", "input_dim": 8, "n_components": 24, "seed": 16,
                        "params": {"power": 0.5, "bits": 6, "sampler": "dart", "bit_source": "index"}}),
    ("dart_pgmm_two", {"method": "gcws", "input_dim": 6, "n_components": 100, "seed": 2**62 + 3,
                       "params": {"power": 2.0, "bits": 2, "sampler": "dart", "bit_source": "index"}}),
]


def outputs(m, X: np.ndarray) -> dict:
    features = m.transform(X)
    return {"hash": m.hash(X).tolist(), "indices": features.indices.tolist(), "scale": features.scale,
            "dim": features.dim, "kernel": m.kernel(X).tolist(), "exact_kernel": m.exact_kernel(X).tolist()}


def build() -> dict:
    return golden_cases(CASES, fixed_input, 300, outputs)


def main(argv: list[str] | None = None) -> int:
    return single_file_main(__doc__.splitlines()[0], OUTPUT, build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
