"""The exact similarity of code rows (featurehash.lsh.similarity): one table keyed by the map's code family, the
kernels of featurehash.maps.kernels to rounding, and bit for bit the numbers of the three implementations it
replaced (maps/lsh.py's query form, store/lsh_duplicates.py's pairs, dedup/verify.py's ExactPairs), copied below
as they were."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from featurehash.lsh.similarity import (
    GMM,
    SIMILARITIES,
    ExactPairs,
    Laplacian,
    aligned_pairs,
    has_exact_similarity,
    similarity_of,
)
from featurehash.maps import create_map
from featurehash.maps.base import CodeFamily
from featurehash.maps.kernels import gmm, laplacian

# -- the replaced implementations, as they were (references) ------------------------------------------------


def _old_l1_distances(query, candidates):
    if not sp.issparse(candidates):
        return np.abs(candidates - query).sum(axis=1)
    candidates = sp.csr_matrix(candidates)
    owners = np.repeat(np.arange(candidates.shape[0]), np.diff(candidates.indptr))
    at = query[candidates.indices]
    change = np.bincount(owners, np.abs(at - candidates.data) - np.abs(at), minlength=candidates.shape[0])
    return np.abs(query).sum() + change


def old_exact_similarities(method, params, query, candidates):
    """maps/lsh.py's exact_similarities."""
    if method == "binning":
        return np.exp(-params["gamma"] * _old_l1_distances(query, candidates))
    power = params.get("power", 1.0)
    peak = max(float(np.abs(query).max(initial=0.0)), float(abs(candidates).max()) if candidates.shape[0] else 0.0)
    scale = 1.0 / peak if peak > 0 else 1.0

    def signed_power(values):
        return np.sign(values) * np.abs(values * scale) ** power

    q = signed_power(query)
    if sp.issparse(candidates):
        candidates = sp.csr_matrix(candidates, copy=True)
        candidates.data = signed_power(candidates.data)
        sums = np.asarray(abs(candidates).sum(axis=1)).ravel()
    else:
        candidates = signed_power(candidates)
        sums = np.abs(candidates).sum(axis=1)
    total = np.abs(q).sum() + sums
    distance = _old_l1_distances(q, candidates)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total + distance > 0, (total - distance) / (total + distance), 1.0)


def old_pair_similarities(method, params, A, B):
    """store/lsh_duplicates.py's pair_similarities."""
    def row_l1(X):
        return np.asarray(abs(X).sum(axis=1)).ravel()

    def signed_power(X, peak, power):
        scale = 1.0 / peak if peak > 0 else 1.0
        if sp.issparse(X):
            X = sp.csr_matrix(X, copy=True)
            X.data = np.sign(X.data) * np.abs(X.data * scale) ** power
            return X
        return np.sign(X) * np.abs(X * scale) ** power

    if method == "binning":
        return np.exp(-params["gamma"] * row_l1(A - B))
    power = params.get("power", 1.0)
    if power != 1.0:
        peak = max(float(abs(A).max()) if A.shape[0] else 0.0, float(abs(B).max()) if B.shape[0] else 0.0)
        A, B = signed_power(A, peak, power), signed_power(B, peak, power)
    total, distance = row_l1(A) + row_l1(B), row_l1(A - B)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total + distance > 0, (total - distance) / (total + distance), 1.0)


def old_exact_pairs(method, params, X, Y, i, j):
    """dedup/verify.py's ExactPairs(feature_map, X, Y)(i, j), without its blocks (per-row results do not depend
    on them)."""
    same = Y is None
    sparse = sp.issparse(X) or (not same and sp.issparse(Y))
    X = sp.csr_matrix(X) if sparse else np.asarray(X)
    Y = X if same else (sp.csr_matrix(Y) if sparse else np.asarray(Y))
    power = float(params["power"]) if method == "gcws" else 1.0

    def peak(Z):
        return float(np.abs(Z.data if sp.issparse(Z) else Z).max(initial=0.0))

    def signed_power(Z, scale):
        if sp.issparse(Z):
            Z = Z.astype(np.float64)
            Z.data = np.sign(Z.data) * np.abs(Z.data * scale) ** power
            return Z
        Z = np.asarray(Z, dtype=np.float64)
        return np.sign(Z) * np.abs(Z * scale) ** power

    def row_l1(Z):
        rows = Z.astype(np.float64, copy=False)
        return np.asarray(abs(rows).sum(axis=1)).ravel() if sp.issparse(Z) else np.abs(rows).sum(axis=1)

    if method == "gcws" and power != 1.0:
        top = max(peak(X), 0.0 if same else peak(Y))
        scale = 1.0 / top if top > 0 else 1.0
        X = signed_power(X, scale)
        Y = X if same else signed_power(Y, scale)
    x, y = X[i].astype(np.float64, copy=False), Y[j].astype(np.float64, copy=False)
    distance = np.asarray(abs(x - y).sum(axis=1)).ravel() if sparse else np.abs(x - y).sum(axis=1)
    if method == "binning":
        return np.exp(-float(params["gamma"]) * distance)
    total = row_l1(X)[i] + row_l1(Y)[j]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total + distance > 0, (total - distance) / (total + distance), 1.0)


CASES = [("gcws", {"power": 1.0}, GMM(1.0)), ("gcws", {"power": 0.7}, GMM(0.7)), ("gcws", {"power": 2.0}, GMM(2.0)),
         ("binning", {"gamma": 0.05}, Laplacian(0.05))]


def signed_rows(rng, m, d, density):
    X = rng.lognormal(0.0, 1.5, (m, d)) * (rng.random((m, d)) < density) * rng.choice([-1.0, 1.0], (m, d))
    X[rng.integers(m)] = 0.0   # a zero row: GMM(0, 0) = 1
    return X


# -- the table -----------------------------------------------------------------------------------------------

def test_the_table_is_keyed_by_the_maps_code_family():
    assert set(SIMILARITIES) == set(CodeFamily)
    gcws = create_map({"method": "gcws", "input_dim": 6, "n_components": 16, "seed": 1, "params": {"power": 0.5}})
    dart = create_map({"method": "gcws", "input_dim": 6, "n_components": 16, "seed": 1,
                       "params": {"sampler": "dart"}})
    binning = create_map({"method": "binning", "input_dim": 6, "n_components": 16, "seed": 1,
                          "params": {"gamma": 0.25}})
    for feature_map, kind, value in ((gcws, GMM, 0.5), (dart, GMM, 1.0), (binning, Laplacian, 0.25)):
        assert has_exact_similarity(feature_map)
        similarity = similarity_of(feature_map)
        assert type(similarity) is kind and similarity.family is feature_map.code_family
        assert (similarity.power if kind is GMM else similarity.gamma) == value
    rff = create_map({"method": "rff", "input_dim": 6, "n_components": 16, "seed": 1})
    assert rff.code_family is None and not has_exact_similarity(rff)
    with pytest.raises(ValueError, match="'rff'"):
        similarity_of(rff)


# -- the query form --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("power", [1.0, 0.5, 2.0])
def test_exact_similarities_are_the_kernels_on_dense_and_sparse_rows(power):
    """(moved from tests/store/test_lsh_exact.py)"""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 30)) * (rng.random((40, 30)) < 0.3) * 50.0  # signed, sparse, wide range
    q = rng.normal(size=30)
    expected = gmm(q[None], X, power)[0]
    for candidates in (X, sp.csr_matrix(X)):
        np.testing.assert_allclose(GMM(power).query(q, candidates), expected, rtol=1e-12, atol=1e-14)
    expected = laplacian(q[None], X, 0.01)[0]
    np.testing.assert_allclose(Laplacian(0.01).query(q, sp.csr_matrix(X)), expected, rtol=1e-12)


def test_the_query_form_gives_the_replaced_numbers_bit_for_bit():
    rng = np.random.default_rng(11)
    for d in (1, 9, 130):
        for density in (0.1, 1.0):
            X, q = signed_rows(rng, 25, d, density), signed_rows(rng, 2, d, 1.0)[1] * 3.0
            for method, params, similarity in CASES:
                for candidates in (X, sp.csr_matrix(X), X[:0]):
                    np.testing.assert_array_equal(similarity.query(q, candidates),
                                                  old_exact_similarities(method, params, q, candidates))


# -- the pair forms --------------------------------------------------------------------------------------------

def test_the_pair_forms_give_the_replaced_numbers_bit_for_bit():
    """aligned_pairs as the index's duplicates computed them, ExactPairs as dedup (and the engines) did: dense
    and sparse rows, float32 rows, a self-join and two collections, power 1 and not, the Laplacian."""
    rng = np.random.default_rng(12)
    for d in (3, 64, 200):
        for density in (0.2, 1.0):
            X, Y = signed_rows(rng, 30, d, density), signed_rows(rng, 20, d, density)
            i, j = rng.integers(0, 30, 200), rng.integers(0, 20, 200)
            ii = rng.integers(0, 30, 200)
            for method, params, similarity in CASES:
                for kind in (np.asarray, sp.csr_matrix):
                    A, B = kind(X[i]), kind(Y[j])
                    np.testing.assert_array_equal(aligned_pairs(similarity, A, B),
                                                  old_pair_similarities(method, params, A, B))
                    np.testing.assert_array_equal(ExactPairs(similarity, kind(X), kind(Y))(i, j),
                                                  old_exact_pairs(method, params, kind(X), kind(Y), i, j))
                    np.testing.assert_array_equal(ExactPairs(similarity, kind(X))(i, ii),
                                                  old_exact_pairs(method, params, kind(X), None, i, ii))
                X32 = X.astype(np.float32)
                np.testing.assert_array_equal(ExactPairs(similarity, X32)(i, ii),
                                              old_exact_pairs(method, params, X32, None, i, ii))


def test_pairs_are_the_kernels_and_an_empty_block_is_empty():
    rng = np.random.default_rng(13)
    X = np.abs(signed_rows(rng, 12, 16, 0.5))
    i, j = np.repeat(np.arange(12), 12), np.tile(np.arange(12), 12)
    for power in (1.0, 0.5):
        np.testing.assert_allclose(ExactPairs(GMM(power), X)(i, j), gmm(X, X, power).ravel(), rtol=1e-12,
                                   atol=1e-14)
    np.testing.assert_allclose(ExactPairs(Laplacian(0.1), sp.csr_matrix(X))(i, j), laplacian(X, X, 0.1).ravel(),
                               rtol=1e-12)
    for similarity in (GMM(2.0), Laplacian(1.0)):
        assert aligned_pairs(similarity, X[:0], X[:0]).size == 0


def test_jaccard_family_is_the_jaccard_of_supports_in_every_shape():
    """minhash's code family: RowSimilarity.query, ExactPairs and aligned_pairs give |S n T| / |S u T| of the
    rows' nonzero columns (signs and magnitudes ignored), exactly, with two empty rows at 1."""
    import scipy.sparse as sp

    from featurehash.lsh.similarity import ExactPairs, Jaccard, aligned_pairs, similarity_of
    from featurehash.maps import create_map

    rng = np.random.default_rng(4)
    X = rng.standard_normal((12, 40)) * (rng.random((12, 40)) < 0.3)
    X[11] = 0.0
    S = X != 0
    inter = S.astype(int) @ S.T.astype(int)
    union = S.sum(1)[:, None] + S.sum(1)[None, :] - inter
    exact = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
    m = create_map({"method": "minhash", "input_dim": 40, "n_components": 8, "params": {"empty_rows": "code"}})
    similarity = similarity_of(m)
    assert isinstance(similarity, Jaccard)
    np.testing.assert_array_equal(m.exact_kernel(X), exact)
    i, j = np.meshgrid(np.arange(12), np.arange(12), indexing="ij")
    for rows in (X, sp.csr_matrix(X)):
        np.testing.assert_array_equal(ExactPairs(similarity, rows)(i.ravel(), j.ravel()), exact.ravel())
        np.testing.assert_array_equal(similarity.query(X[0], rows), exact[0])
    np.testing.assert_array_equal(aligned_pairs(similarity, X, X[::-1]), exact[np.arange(12), np.arange(12)[::-1]])
