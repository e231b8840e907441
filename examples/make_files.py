"""Write the small input files the guides' blocks name, under examples/ (committed; this script remakes
them, and tests/docs/test_examples.py checks that the committed ones are what it makes).

    python examples/make_files.py

- rows.npz: 400 sparse nonnegative rows (d = 2,000, 30 nonzeros each): 100 seeded rows and, for each, three
  near-duplicates (about a tenth of the weights moved), as `scipy.sparse.save_npz(..., compressed=False)`
  (memory-mapped by `featurehash dedup`);
- gcws.json: a GCWS spec for those rows (k = 256, seed 1);
- docs.jsonl: 12 documents, one JSON string a line, some near-copies of others;
- text_gcws.json: a GCWS spec with a text stage (word 3-shingles, binary weights: plain Jaccard), seed 1;
- vectors.npy, gcws_spec.json and rff_spec.json predate this script and are left as they are.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
DIM, NONZEROS, GROUPS, COPIES = 2000, 30, 100, 3
DOCUMENTS = [
    "the quick brown fox jumps over the lazy dog near the river bank",
    "the quick brown fox jumps over a lazy dog near the river bank",
    "a quick brown fox jumped over the lazy dog near the river bank",
    "feature hashing maps tokens to columns with a seeded hash function",
    "feature hashing maps tokens into columns with a seeded hash function",
    "random fourier features approximate a shift invariant kernel",
    "the service stores each spec in redis and every replica rebuilds the map",
    "the service keeps each spec in redis and every replica rebuilds the same map",
    "minhash signatures estimate the jaccard similarity of two sets",
    "weighted minhash estimates the generalised min max similarity",
    "an unrelated note about lunch on friday",
    "near duplicate documents share most of their word shingles",
]


def rows() -> sp.csr_matrix:
    rng = np.random.default_rng(2026)
    found = []
    for _ in range(GROUPS):
        columns = np.sort(rng.choice(DIM, NONZEROS, replace=False))
        values = rng.gamma(1.0, 1.0, NONZEROS)
        found.append((columns, values))
        for _ in range(COPIES):
            moved = values * np.where(rng.random(NONZEROS) < 0.4, rng.uniform(0.1, 1.9, NONZEROS), 1.0)
            found.append((columns, moved))
    indptr = np.arange(0, NONZEROS * len(found) + 1, NONZEROS)
    return sp.csr_matrix((np.concatenate([v for _, v in found]), np.concatenate([c for c, _ in found]), indptr),
                         shape=(len(found), DIM))


def files() -> dict[str, bytes]:
    """name -> content of every file this script writes (rows.npz as written by save_npz)."""
    import io

    buffer = io.BytesIO()
    sp.save_npz(buffer, rows(), compressed=False)
    return {
        "rows.npz": buffer.getvalue(),
        "gcws.json": (json.dumps({"method": "gcws", "input_dim": DIM, "n_components": 256, "seed": 1}) + "\n").encode(),
        "docs.jsonl": "".join(json.dumps(document) + "\n" for document in DOCUMENTS).encode(),
        "text_gcws.json": (json.dumps({"method": "gcws", "n_components": 128, "seed": 1, "input": {
            "hashing": {"ngram_range": [3, 3], "weighting": "binary"}}}) + "\n").encode(),
    }


def main() -> None:
    for name, content in files().items():
        (HERE / name).write_bytes(content)
        print(f"wrote examples/{name} ({len(content)} bytes)")


if __name__ == "__main__":
    main()
