"""The compiled re-ranking over packed vectors (featurehash.lsh.rerank) equals the reference
(featurehash.lsh.similarity's `query` over the decoded vectors, after shared_columns as the index did)
bit for bit, and the exact kernels of featurehash.maps.kernels to rounding; the best matches."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from featurehash.lsh.rerank import (
    _dense_rows,
    best_matches,
    packed_similarities,
    top_matches,
)
from featurehash.lsh.similarity import GMM, Laplacian
from featurehash.maps.kernels import gmm, laplacian, shared_columns
from featurehash.store.lsh_vectors import VectorCodec


def packed(kind: str, X) -> tuple[np.ndarray, np.ndarray]:
    """The codec's blobs, each followed by an id and padded to whole words (as a query's fetch returns them)."""
    blobs = [blob + f"id{i}".encode() for i, blob in enumerate(VectorCodec(kind, X.shape[1]).pack(X))]
    padded = [blob + b"\0" * (-len(blob) % 4) for blob in blobs]
    starts = np.cumsum([0] + [len(blob) // 4 for blob in padded[:-1]])
    return np.frombuffer(b"".join(padded), "<u4"), starts


def reference(similarity, kind, query, X):
    """What the index computed before: the decoded vectors, a sparse query restricted to shared columns."""
    codec = VectorCodec(kind, X.shape[1])
    candidates = codec.unpack(codec.pack(X))[0]
    if sp.issparse(query):
        if sp.issparse(candidates):
            row, candidates = shared_columns(sp.csr_matrix(query), candidates)
            return similarity.query(row.toarray().ravel(), candidates), candidates
        return similarity.query(query.toarray().ravel(), candidates), candidates
    return similarity.query(query, candidates), candidates


def rows(rng, m, d, density):
    X = rng.lognormal(0.0, 1.5, (m, d)) * (rng.random((m, d)) < density) * rng.choice([-1.0, 1.0], (m, d))
    X[:, rng.integers(d)] += 1e-3
    return X


@pytest.mark.parametrize("kind", ["sparse", "float32", "float16"])
def test_packed_similarities_equal_the_reference_bit_for_bit(kind):
    rng = np.random.default_rng(5)
    cases = 0
    for d in (1, 7, 8, 9, 64, 129, 300):  # below, at and past numpy's pairwise blocks (8, 128)
        for density in (0.05, 0.3, 1.0):
            X = rows(rng, int(rng.integers(1, 40)), d, density)
            q = rows(rng, 1, d, density)
            select = rng.permutation(X.shape[0])[: max(1, X.shape[0] // 2)]  # any subset, any order
            words, starts = packed(kind, X)
            for similarity in (GMM(1.0), GMM(0.7), GMM(2.0), Laplacian(0.05)):
                for query in (q[0], sp.csr_matrix(q)):
                    expected, _ = reference(similarity, kind, query, X[select])
                    got = packed_similarities(similarity, query, kind, words, starts[select], d)
                    np.testing.assert_array_equal(got, expected)
                    cases += 1
    assert cases == 7 * 3 * 4 * 2


@pytest.mark.parametrize("kind", ["sparse", "float32"])
def test_packed_similarities_are_the_exact_kernels(kind):
    """Against maps.kernels (GMM for gcws, the Laplacian for binning) on the stored (float32) values."""
    rng = np.random.default_rng(6)
    X = np.abs(rows(rng, 30, 50, 0.3)).astype(np.float32).astype(np.float64)
    q = np.abs(rows(rng, 1, 50, 0.3))
    words, starts = packed(kind, X)
    for power in (1.0, 0.5):
        np.testing.assert_allclose(packed_similarities(GMM(power), q[0], kind, words, starts, 50),
                                   gmm(q, X, power)[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(packed_similarities(Laplacian(0.02), sp.csr_matrix(q), kind, words, starts, 50),
                               laplacian(q, X, 0.02)[0], rtol=1e-12)


def test_a_wide_sparse_query_never_becomes_dense():
    """2^30 columns (a text stage's width): only the columns the query and candidates have are touched."""
    d = 2**30
    X = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([5, d - 1, 77]), np.array([0, 2, 3])), shape=(2, d))
    q = sp.csr_matrix((np.array([2.0, 1.0]), np.array([5, 9]), np.array([0, 2])), shape=(1, d))
    words, starts = packed("sparse", X)
    got = packed_similarities(GMM(1.0), q, "sparse", words, starts, d)
    np.testing.assert_allclose(got, [0.2, 0.0], atol=1e-15)  # sum min / sum max: 1 / (2 + 2 + 1); 0 / 6


def test_best_matches_order_ties_and_floor():
    similarities = np.array([0.5, 0.9, 0.5, 0.1, 0.9, 0.7])
    tie_breaks = np.array([60, 50, 40, 30, 20, 10])
    assert best_matches(similarities, tie_breaks, 3, 0.0).tolist() == [4, 1, 5]
    assert best_matches(similarities, tie_breaks, 10, 0.5).tolist() == [4, 1, 5, 2, 0]
    assert best_matches(similarities, tie_breaks, 1, 0.95).tolist() == []
    assert best_matches(np.empty(0), np.empty(0, np.int64), 5, 0.0).tolist() == []


def test_packed_similarities_look_the_family_up_and_refuse_an_unknown_one():
    class Unknown(GMM):
        family = None

    words, starts = packed("float32", np.ones((2, 3)))
    assert packed_similarities(GMM(1.0), np.ones(3), "float32", words, starts[:0], 3).size == 0
    with pytest.raises(ValueError):
        packed_similarities(Unknown(1.0), np.ones(3), "float32", words, starts, 3)


def test_top_matches_are_best_matches():
    rng = np.random.default_rng(7)
    for m in (0, 1, 5, 40):
        for top_k in (1, 3, 10, 50):
            similarities = np.round(rng.random(m), 1)  # many ties
            numbers = rng.permutation(1000)[:m].astype(np.int64)
            for floor in (0.0, 0.5):
                np.testing.assert_array_equal(top_matches(similarities, numbers, top_k, floor),
                                              best_matches(similarities, numbers, top_k, floor))


@pytest.mark.parametrize("d", [65536, 65535])  # an odd d leaves the last word's high half to the id
def test_every_float16_value_decodes_exactly(d):
    """The packed float16 rows decode to numpy's float16 -> float64 values for all 65,536 bit patterns (signed
    zeros, subnormals, infinities, NaNs), times the row's float32 scale."""
    bits = np.arange(65536, dtype=np.uint16)[:d]
    blob = np.float32(0.75).tobytes() + bits.tobytes() + b"id"
    words = np.frombuffer(blob + b"\0" * (-len(blob) % 4), "<u4")
    decoded = _dense_rows(words, np.zeros(1, np.int64), d, True)[0]
    with np.errstate(invalid="ignore"):
        expected = bits.view(np.float16).astype(np.float64) * 0.75
    assert np.array_equal(decoded, expected, equal_nan=True)
    assert np.array_equal(np.signbit(decoded), np.signbit(expected))


@pytest.mark.parametrize("kind", ["sparse", "float32", "float16"])
def test_packed_jaccard_is_the_reference_and_the_exact_jaccard_of_supports(kind):
    """The Jaccard family (minhash) re-ranks from packed vectors through the GMM path with the support's
    indicator: bit for bit the reference, and |S n T| / |S u T| of the nonzero columns whatever the values."""
    from featurehash.lsh.similarity import Jaccard

    rng = np.random.default_rng(9)
    X = rows(rng, 25, 60, 0.2)
    q = rows(rng, 1, 60, 0.2)
    words, starts = packed(kind, X)
    S, T = q[0] != 0, X != 0
    exact = (S & T).sum(axis=1) / (S | T).sum(axis=1)
    for query in (q[0], sp.csr_matrix(q)):
        expected, _ = reference(Jaccard(), kind, query, X)
        got = packed_similarities(Jaccard(), query, kind, words, starts, 60)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(got, exact)
