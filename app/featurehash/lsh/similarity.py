"""The exact similarity discrete codes estimate, written once per code family and looked up in one table by the
map's `code_family` (featurehash.maps.base.CodeFamily), never by method name.

- GMM (gcws, either sampler): pGMM(x, y) = sum min(u~, v~) / sum max(u~, v~), with u~ the positive and
  negative parts of x raised to `power` (Li, "Linearized GMM kernels and normalized random Fourier features",
  KDD 2017; featurehash.maps.kernels.gmm). With t(x) = sign(x) |x|^p, the split parts give
  sum |u~ - v~| = ||t(x) - t(y)||_1 and sum u~ = ||t(x)||_1, so through min + max = u~ + v~ and
  max - min = |u~ - v~|: pGMM = (S - D) / (S + D), S = ||t(x)||_1 + ||t(y)||_1, D = ||t(x) - t(y)||_1.
  All vectors are first divided by one common scale (the ratio does not change), so no power overflows.
  Two zero vectors: 1.
- Laplacian (binning): exp(-gamma ||x - y||_1) (Rahimi & Recht's random binning).
- Jaccard (minhash): |S n T| / |S u T| of the rows' supports S = {i : x_i != 0}. It is GMM of the 0/1
  indicator rows (sum min / sum max of two indicators is |S n T| / |S u T|), so it is the GMM machinery with the
  indicator in place of the power t(x); every sum is of small integers, hence exact in any order.

Two shapes of the same numbers, each keeping its own order of floating-point operations (the answers of the
index and of dedup are pinned bit for bit):
- `RowSimilarity.query(query, candidates)`: one dense query (d,) to candidate rows (dense or CSR), O(nnz) for
  sparse candidates (the L1 distance through |q|_1 plus each nonzero's change); the GMM scale is always applied.
  What an LSH index re-ranks with; featurehash.lsh.rerank computes it from packed vectors.
- `ExactPairs(similarity, X, Y)(i, j)`: pairs of rows (X[i_t], Y[j_t]) in blocks, the rows never copied whole
  (only with power != 1, whose t(x) is computed once: they may be memory-mapped, cast to float64 block by block);
  `aligned_pairs(similarity, A, B)`: the pairs (A[t], B[t]). What dedup, the engines and the index's duplicates
  verify with.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from ..maps.base import CodeFamily
# the pair verifier lives with the maps, whose exact kernels use it too; re-exported here for its callers
from ..maps.pair_similarity import BLOCK_ELEMENTS, ExactPairs, GMMPairs, row_l1

__all__ = ["BLOCK_ELEMENTS", "ExactPairs", "GMM", "Laplacian", "RowSimilarity", "aligned_pairs", "has_exact_similarity",
           "l1_distances", "row_l1", "similarity_of"]



def l1_distances(query: np.ndarray, candidates) -> np.ndarray:
    """||query - row||_1 for each row of candidates (dense (m, d) or CSR), query dense (d,)."""
    if not sp.issparse(candidates):
        return np.abs(candidates - query).sum(axis=1)
    candidates = sp.csr_matrix(candidates)
    owners = np.repeat(np.arange(candidates.shape[0]), np.diff(candidates.indptr))
    at = query[candidates.indices]
    # |q - v|_1 = |q|_1 + sum over the row's nonzeros of (|q_j - v_j| - |q_j|)
    change = np.bincount(owners, np.abs(at - candidates.data) - np.abs(at), minlength=candidates.shape[0])
    return np.abs(query).sum() + change


class RowSimilarity:
    """One code family's exact similarity: `combine` turns (S, D) into the similarity; `transforms` says whether
    the rows of pairs go through `signed_power` first."""

    family: ClassVar[CodeFamily]
    transforms: bool = False

    @classmethod
    def of_params(cls, params) -> RowSimilarity:
        raise NotImplementedError

    def combine(self, total, distance: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def query(self, query: np.ndarray, candidates) -> np.ndarray:
        """The similarity of `query` (d,) to each candidate row (float64)."""
        raise NotImplementedError


class GMM(GMMPairs, RowSimilarity):
    family = CodeFamily.GMM

    @classmethod
    def of_params(cls, params) -> GMM:
        return cls(params.power)

    def query(self, query: np.ndarray, candidates) -> np.ndarray:
        peak = max(float(np.abs(query).max(initial=0.0)),
                   float(abs(candidates).max()) if candidates.shape[0] else 0.0)
        scale = self.scale(peak)
        q = self.signed_power(query, scale)
        if sp.issparse(candidates):
            candidates = sp.csr_matrix(candidates, copy=True)
            candidates.data = self.signed_power(candidates.data, scale)
            sums = np.asarray(abs(candidates).sum(axis=1)).ravel()
        else:
            candidates = self.signed_power(candidates, scale)
            sums = np.abs(candidates).sum(axis=1)
        return self.combine(np.abs(q).sum() + sums, l1_distances(q, candidates))


class Laplacian(RowSimilarity):
    family = CodeFamily.LAPLACIAN

    def __init__(self, gamma: float):
        self.gamma = float(gamma)

    @classmethod
    def of_params(cls, params) -> Laplacian:
        return cls(params.gamma)

    def combine(self, total, distance: np.ndarray) -> np.ndarray:
        return np.exp(-self.gamma * distance)

    def query(self, query: np.ndarray, candidates) -> np.ndarray:
        return self.combine(None, l1_distances(query, candidates))


class Jaccard(GMM):
    family = CodeFamily.JACCARD

    def __init__(self):
        super().__init__(1.0)
        # Not 1.0: the packed re-ranking's p = 1 shortcuts read the values themselves, not their indicator.
        self.power = 0.0
        self.transforms = True

    @classmethod
    def of_params(cls, params) -> Jaccard:
        return cls()

    def signed_power(self, values: np.ndarray, scale: float) -> np.ndarray:
        """The indicator of the support, in place of t(x): GMM of indicators is the Jaccard of the supports."""
        return (np.asarray(values) != 0).astype(np.float64)


# Code family -> its similarity: the one table every caller looks a map up in.
SIMILARITIES: dict[CodeFamily, type[RowSimilarity]] = {GMM.family: GMM, Laplacian.family: Laplacian,
                                                       Jaccard.family: Jaccard}


def has_exact_similarity(feature_map) -> bool:
    """Whether the map's codes estimate a similarity of this table (its code family has an entry)."""
    return getattr(feature_map, "code_family", None) in SIMILARITIES


def similarity_of(feature_map) -> RowSimilarity:
    """The exact similarity the map's codes estimate, with the map's parameters; ValueError if it has none."""
    if not has_exact_similarity(feature_map):
        raise ValueError(f"no exact similarity for '{feature_map.method}' codes")
    return SIMILARITIES[feature_map.code_family].of_params(feature_map.params)


def aligned_pairs(similarity: RowSimilarity, A, B) -> np.ndarray:
    """The exact similarity of each pair of rows (A[t], B[t]) (dense or CSR, same kind); the common GMM scale is
    the largest magnitude of A and B."""
    rows = np.arange(A.shape[0])
    return ExactPairs(similarity, A, B)(rows, rows)


