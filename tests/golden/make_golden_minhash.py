"""Write tests/golden/minhash.json: set-minhash specs, fixed inputs and their codes forever.

Each case records the resolved spec (with its id), a fixed numeric input (its rows' supports are the sets),
fixed pre-hashed uint64 tokens with row offsets, and, for the text case, fixed token lists; with today's codes,
one-hot indices and kernel estimates. tests/maps/minhash/test_minhash.py compares against them. Regenerate only
on a deliberate change of the numeric format (which must also bump FORMAT_VERSION):

    python tests/golden/make_golden_minhash.py --force
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from golden_io import golden_document, single_file_main
from make_golden import fixed_input

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "minhash.json"

CASES = [
    ("one_permutation", {"method": "minhash", "input_dim": 12, "n_components": 16, "seed": 21}),
    ("k_permutation", {"method": "minhash", "input_dim": 12, "n_components": 16, "seed": 22,
                       "params": {"variant": "k_permutation", "bits": 4}}),
    ("circulant", {"method": "minhash", "input_dim": 12, "n_components": 12, "seed": 23,
                   "params": {"variant": "circulant", "bits": 3}}),
    ("one_permutation_code_bits", {"method": "minhash", "input_dim": 12, "n_components": 24, "seed": 2**62 + 5,
                                   "params": {"code_bits": 8, "empty_rows": "code"}}),
    ("k_not_a_power_of_two", {"method": "minhash", "input_dim": 12, "n_components": 100, "seed": 24}),
]
TEXT_CASE = ("text_tokens", {"method": "minhash", "n_components": 16, "seed": 25, "input": {"hashing": {}}})
TOKEN_LISTS = [["the", "quick", "brown", "fox"], ["the", "quick", "brown", "dog", "dog"], ["été", "naïve"]]


def fixed_tokens(seed: int) -> tuple[list[int], list[int]]:
    """Three sets of uint64 tokens (the second shares half of the first's, the third one token), as ints."""
    words = np.random.default_rng(seed).integers(0, 2**64 - 1, size=30, dtype=np.uint64, endpoint=True)
    tokens = np.concatenate([words[:20], words[10:29], words[29:30]])
    return [int(t) for t in tokens], [0, 20, 39, 40]


def outputs(m, X: np.ndarray) -> dict:
    features = m.transform(X)
    return {"hash": m.hash(X).tolist(), "indices": features.indices.tolist(), "scale": features.scale,
            "dim": features.dim, "kernel": m.kernel(X).tolist(), "exact_kernel": m.exact_kernel(X).tolist()}


def build() -> dict:
    from featurehash.maps import create_map

    built = {}
    for name, request in CASES:
        m = create_map(request)
        X = fixed_input(m.spec.input_dim, 400 + m.spec.seed % 1000)
        case = {"request": request, "spec": m.describe(), "input": X,
                "expected": outputs(m, np.array(X, dtype=np.float64))}
        if m.params.variant != "circulant":
            tokens, offsets = fixed_tokens(m.spec.seed % 1000)
            case["tokens"], case["offsets"] = tokens, offsets
            case["expected"]["hash_tokens"] = m.hash_tokens(np.array(tokens, dtype=np.uint64), offsets).tolist()
        built[name] = case
    name, request = TEXT_CASE
    m = create_map(request)
    built[name] = {"request": request, "spec": m.describe(), "token_lists": TOKEN_LISTS,
                   "expected": {"hash": m.hash(TOKEN_LISTS).tolist(), "exact_kernel": m.exact_kernel(TOKEN_LISTS).tolist()}}
    return golden_document(cases=built)


def main(argv: list[str] | None = None) -> int:
    return single_file_main(__doc__.splitlines()[0], OUTPUT, build, argv)


if __name__ == "__main__":
    raise SystemExit(main())
