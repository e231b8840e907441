"""Rows shared by the Spark and Ray adapter tests: dense, sparse and text collections with planted
near-duplicates (seeded), their specs and thresholds, and the in-process answers they are held to."""

from __future__ import annotations

import numpy as np
from dedup_support import dense_planted, sparse_planted

DENSE_GCWS = {"method": "gcws", "input_dim": 24, "n_components": 128, "seed": 8}
SPARSE_GCWS = {"method": "gcws", "input_dim": 2000, "n_components": 128, "seed": 7}
TEXT_GCWS = {"method": "gcws", "n_components": 128, "seed": 3, "input": {"hashing": {"ngram_range": [3, 3]}}}
DENSE_RFF = {"method": "rff", "input_dim": 24, "n_components": 64, "seed": 4, "params": {"gamma": 0.05}}
SPARSE_RFF = {"method": "rff", "input_dim": 2000, "n_components": 64, "seed": 4, "params": {"gamma": 0.05}}
TEXT_HASHING = {"method": "hashing", "n_components": 1024, "seed": 0}
# similarities rtol: the same entries summed in the same order (room for another numpy's block order)
RTOL = 1e-12


def documents(n_base: int = 40, seed: int = 5) -> list[str]:
    """Documents of the real corpus (their first 300 characters) and copies with a few words changed."""
    from text_support import real_corpus

    rng = np.random.default_rng(seed)
    base = [" ".join(text.split())[:300] for text in real_corpus()[:n_base]]
    copies = []
    for text in base[: n_base // 2]:
        words = text.split(" ")
        for at in rng.choice(len(words), size=max(1, len(words) // 12), replace=False):
            words[at] = "changed"
        copies.append(" ".join(words))
    rows = base + copies
    return [rows[at] for at in rng.permutation(len(rows))]


def cases() -> dict:
    """name: (rows, gcws spec, threshold, feature spec): rows an ndarray, a CSR matrix or documents."""
    return {
        "dense": (dense_planted(n_groups=25, group_size=4, n_background=40, dim=24, seed=1), DENSE_GCWS, 0.6,
                  DENSE_RFF),
        "sparse": (sparse_planted(n_groups=25, group_size=4, n_background=50, dim=2000, nnz=30, seed=2),
                   SPARSE_GCWS, 0.5, SPARSE_RFF),
        "text": (documents(), TEXT_GCWS, 0.5, TEXT_HASHING),
    }


def assert_same_pairs(i, j, similarity, expected) -> None:
    assert len(i) == len(expected) > 0
    np.testing.assert_array_equal(i, expected.i)
    np.testing.assert_array_equal(j, expected.j)
    np.testing.assert_allclose(similarity, expected.similarity, rtol=RTOL, atol=0)
