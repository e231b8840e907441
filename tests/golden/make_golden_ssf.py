"""Write tests/golden/ssf.json: SSF specs, fixed inputs and the outputs they must give forever.

Like make_golden.py (which covers the other methods), for the `ssf` map: each case records the
resolved spec (with its id and the optimised index set), the index-set search (energies, sweeps),
the seed-derived parameters (signs, radii), a small fixed input and today's outputs;
tests/maps/fourier/test_ssf.py compares against them. Regenerate only on a deliberate change of the numeric
format (which must also bump FORMAT_VERSION, so that old ids are not silently reused):

    python tests/golden/make_golden_ssf.py --force
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from featurehash.maps import create_map
from featurehash.maps.fourier import ssf
from golden_io import golden_document, write_golden

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "ssf.json"

# (name, spec request): every kernel, n = m and n > m, odd and even d, a large seed, a given index set.
# randomization "signs": these specs were stored before the parameter (which they leave out); a plain
# request now gets "rotation", pinned in ssf_rotation.json (make_golden_ssf_rotation.py). The index-set search
# "until_unchanged" they were made with is stated too: a plain request now gets "until_small_gain"
# (ssf_search.json, make_golden_ssf_search.py).
SIGNS = {"randomization": "signs", "search": "until_unchanged"}

CASES = [
    ("gaussian_square", {"method": "ssf", "input_dim": 6, "n_components": 12, "seed": 21,
                         "params": {"kernel": "gaussian", "gamma": 0.5, **SIGNS}}),
    ("gaussian", {"method": "ssf", "input_dim": 5, "n_components": 32, "seed": 22, "params": {"gamma": 0.8, **SIGNS}}),
    ("arccos0", {"method": "ssf", "input_dim": 7, "n_components": 24, "seed": 23,
                 "params": {"kernel": "arccos0", **SIGNS}}),
    ("arccos1", {"method": "ssf", "input_dim": 8, "n_components": 40, "seed": 2**62 + 3,
                 "params": {"kernel": "arccos1", **SIGNS}}),
    ("arccos2", {"method": "ssf", "input_dim": 3, "n_components": 16, "seed": 24,
                 "params": {"kernel": "arccos2", **SIGNS}}),
    ("given_index_set", {"method": "ssf", "input_dim": 4, "n_components": 20, "seed": 25,
                         "params": {"kernel": "arccos1", "index_set": [3, 0], **SIGNS}}),
]


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


def energy(value: float) -> float | str:
    """A random start can have coincident points (energy inf): stored as "inf", so the file stays JSON."""
    return value if np.isfinite(value) else "inf"


def outputs(m, X: np.ndarray, searched: bool) -> dict:
    out = {
        "exact_kernel": m.exact_kernel(X).tolist(),
        "transform_float64": m.transform(X, dtype=np.float64).tolist(),
        "transform_float32": m.transform(X).astype(np.float64).tolist(),
        "projections": m.projections(X).tolist(),
        "signs": m.signs().tolist(),
        "unit_radii": m.unit_radii().tolist() if m.params.kernel == "gaussian" else None,
    }
    if searched:  # the index set came from the seed, not from the request
        search = ssf.optimised_index_set(m.m, m.n, m.spec.seed, ssf.SPEC_POINT_SET,
                                         m.params.search or "until_unchanged")
        out["search"] = {"index_set": list(search.index_set), "initial_energy": energy(search.initial_energy),
                         "final_energy": energy(search.final_energy), "sweeps": search.sweeps,
                         "swaps": search.swaps, "converged": search.converged}
    return out


def build() -> dict:
    cases = {}
    for name, request in CASES:
        m = create_map(request)
        X = fixed_input(m.spec.input_dim, 200 + m.spec.seed % 1000)
        expected = outputs(m, np.array(X, dtype=np.float64), searched="index_set" not in request["params"])
        cases[name] = {"request": request, "spec": m.describe(), "input": X, "expected": expected}
    return golden_document(cases=cases)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite an existing ssf.json")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    return write_golden({args.output: build}, args.force)


if __name__ == "__main__":
    raise SystemExit(main())
