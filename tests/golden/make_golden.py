"""Write tests/golden/golden.json: small specs, fixed inputs and the outputs they must give forever.

A stored spec must transform identically in every later release (DESIGN.md "Spec and
identity"). This script records, for each method and variant, the resolved spec (with its
id), a small fixed input and the outputs of today's code; tests/test_golden.py compares
against them. Regenerate only on a deliberate change of the numeric format (which must also
bump FORMAT_VERSION, so that old ids are not silently reused):

    python tests/golden/make_golden.py --force
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from featurehash.maps import create_map
from featurehash.maps import randomness
from golden_io import golden_document, write_golden

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "golden.json"

# (name, spec request); the input depends on (input_dim, seed) only
CASES = [
    ("rff_gaussian_cos_sin", {"method": "rff", "input_dim": 6, "n_components": 12, "seed": 11,
                              "params": {"kernel": "gaussian", "gamma": 0.5, "variant": "cos_sin"}}),
    ("rff_gaussian_phase", {"method": "rff", "input_dim": 5, "n_components": 10, "seed": 12,
                            "params": {"kernel": "gaussian", "gamma": 0.8, "variant": "phase"}}),
    ("rff_laplacian", {"method": "rff", "input_dim": 7, "n_components": 8, "seed": 13,
                       "params": {"kernel": "laplacian", "gamma": 0.3}}),
    ("rff_laplacian_phase", {"method": "rff", "input_dim": 5, "n_components": 9, "seed": 2**62 + 3,
                             "params": {"kernel": "laplacian", "gamma": 1.5, "variant": "phase"}}),
    ("nrff", {"method": "nrff", "input_dim": 6, "n_components": 16, "seed": 14, "params": {"gamma": 2.0}}),
    ("nrff_cos_sin", {"method": "nrff", "input_dim": 5, "n_components": 8, "seed": 0,
                      "params": {"gamma": 0.5, "variant": "cos_sin"}}),
    # bit_source "index": the b-bit features specs had before the parameter (a plain request now gets
    # "mixed_code", pinned in gcws_mixed_bits.json); the stored specs leave the key out.
    ("gcws", {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 15,
              "params": {"bits": 4, "bit_source": "index"}}),
    ("gcws_zero_bit", {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 15,
                       "params": {"bits": 4, "zero_bit": True, "bit_source": "index"}}),
    ("gcws_pgmm", {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 16,
                   "params": {"power": 0.5, "bits": 6, "bit_source": "index"}}),
]

# Raw randomness pinned independently of any map: (seed, tag, count).
RAW_STREAMS = [(0, "golden.raw", 4), (11, "rff.frequencies", 4), (2**63 - 1, "golden.raw", 2)]


def fixed_input(d: int, seed: int) -> list[list[float]]:
    """Four rows with three decimals: negatives, zeros, a sparse row, a large and a small entry."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.standard_normal((4, d)), 3)
    X[1, ::2] = 0.0
    X[2, 1:] = 0.0
    X[2, 0] = 2.5
    X[3, -1] = 12.75
    X[3, 0] = 0.001
    return X.tolist()


def outputs(m, X: np.ndarray) -> dict:
    out: dict = {"exact_kernel": m.exact_kernel(X).tolist()}
    if m.spec.method == "gcws":
        out["hash"] = m.hash(X).tolist()
        features = m.transform(X)
        out["indices"] = features.indices.tolist()
        out["scale"] = features.scale
        out["dim"] = features.dim
        out["kernel"] = m.kernel(X).tolist()
    else:
        out["transform_float64"] = m.transform(X, dtype=np.float64).tolist()
        out["transform_float32"] = m.transform(X).astype(np.float64).tolist()
        frequencies, offsets = m._parameters_for(np.dtype(np.float64))
        out["frequencies_head"] = frequencies[:3].tolist()
        out["offsets_head"] = None if offsets is None else offsets[:5].tolist()
    return out


def build() -> dict:
    cases = {}
    for name, request in CASES:
        m = create_map(request)
        X = fixed_input(m.spec.input_dim, 100 + m.spec.seed % 1000)  # same seed, same input
        cases[name] = {
            "request": request,
            "spec": m.describe(),
            "input": X,
            "expected": outputs(m, np.array(X, dtype=np.float64)),
        }
    raw = []
    for seed, tag, count in RAW_STREAMS:
        words = randomness.raw_words(seed, tag, count)
        raw.append({
            "seed": seed, "tag": tag, "words": [int(w) for w in words],
            "uniform_open": randomness.uniform_open(words).tolist(),
            "normal": randomness.normal(words).tolist(),
            "cauchy": randomness.cauchy(words).tolist(),
            "phase": randomness.phase(words).tolist(),
            "counter_key": int(randomness.counter_key(seed, tag)),
        })
    return golden_document(cases=cases, raw_streams=raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite an existing golden.json")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    return write_golden({args.output: build}, args.force)


if __name__ == "__main__":
    raise SystemExit(main())
