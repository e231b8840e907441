"""The points and weights of a quadrature map's rule (`featurehash.maps.fourier.quadrature`): the dense,
sparse, subsampled or reweighted grid of its spec, per ANOVA subset, as frequencies W and weights a. A base of
`QuadratureMap`, which computes the features from them.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .. import randomness
from . import _quadrature_fit as fit
from . import _quadrature_rules as rules
from ._quadrature_params import grid_points, shares


class QuadratureGrid:
    """Needs spec, params, input_dim, subsets and n_points (set by QuadratureMap.__init__)."""

    def unit_rule(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per subset: points for N(0, I_r) (P_S, r) and their weights (P_S,), in feature order."""
        params, L = self.params, self.params.points_per_dim
        sizes = [len(subset) for subset in self.subsets]
        if params.grid == "dense":
            cache = {r: rules.dense_grid(L, r) for r in set(sizes)}
            nodes = rules.hermite_rule(L)[0]
            return [nodes[cache[r][0]] for r in sizes], [cache[r][1] for r in sizes]
        if params.grid == "sparse":
            cache = {r: rules.sparse_grid(params.level, r) for r in set(sizes)}
            return [cache[r][0] for r in sizes], [cache[r][1] for r in sizes]
        nodes = rules.hermite_rule(L)[0]
        if params.grid == "subsampled":
            indices = fit._subsampled_indices(self.spec.seed, "quadrature.points", L, shares(self.n_points, len(sizes)),
                                          sizes)
            return [nodes[block] for block in indices], [np.full(len(block), 1.0 / len(block)) for block in indices]
        owners = np.zeros(self.n_points, dtype=np.int64) if params.point_subsets is None \
            else np.asarray(params.point_subsets)
        weights = np.asarray(params.weights, dtype=np.float64)
        points, point_weights = [], []
        for s in range(len(self.subsets)):
            mine = np.flatnonzero(owners == s)
            points.append(nodes[np.array([params.points[k] for k in mine], dtype=np.int64).reshape(-1, sizes[s])])
            point_weights.append(weights[mine])
        return points, point_weights

    def rule(self) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
        """(frequencies W, P x d: dense, or CSR with anova; weights a, P), float64, scaled by sqrt(2 gamma)."""
        points, weights = self.unit_rule()
        scale = math.sqrt(2.0 * self.params.gamma)
        if self.params.anova is None:
            return self._per_dimension(points[0] * scale, slice(None)), weights[0]
        counts = [len(block) for block in points]
        rows = np.repeat(np.arange(sum(counts)), np.repeat([len(subset) for subset in self.subsets], counts))
        columns = np.concatenate([np.tile(subset, c) for subset, c in zip(self.subsets, counts)])
        values = self._per_dimension(np.concatenate([block.ravel() for block in points]) * scale, columns)
        W = sp.csr_matrix((values, (rows, columns)), shape=(sum(counts), self.input_dim))
        W.sort_indices()
        return W, np.concatenate(weights)

    def _subsampled_frequencies(self, dtype: np.dtype, size: int) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
        """`rule()` of a subsampled grid whose subsets all have `size` coordinates (no anova, or windows),
        made straight in `dtype` in blocks of points (the same numbers: the draw is point by point), so
        creating a large map holds little besides W: dense without anova, CSR with it."""
        L, P = self.params.points_per_dim, self.n_points
        nodes, scale = rules.hermite_rule(L)[0], math.sqrt(2.0 * self.params.gamma)
        counts = shares(P, len(self.subsets))
        weights = np.concatenate([np.full(count, 1.0 / count) for count in counts])
        if self.params.anova is None:
            W = np.empty((size, P), dtype=dtype).T   # stored d x P, as rff stores its frequencies
        else:
            owners = np.repeat(np.arange(len(self.subsets)), counts)
            columns = np.empty((len(self.subsets), size), dtype=np.int32)
            for position, subset in enumerate(self.subsets):
                columns[position] = subset
            W = sp.csr_matrix((np.empty(P * size, dtype=dtype), np.empty(P * size, dtype=np.int32),
                               np.arange(0, P * size + 1, size, dtype=np.int32)), shape=(P, self.input_dim))
        for rows, words in randomness.row_blocks(self.spec.seed, "quadrature.points", P, size):
            indices = rules.subsample(L, rows.stop - rows.start, size, randomness.uniform_open(words))
            if self.params.anova is None:
                W[rows] = self._per_dimension(nodes[indices] * scale, slice(None))
            else:
                entries = slice(rows.start * size, rows.stop * size)
                W.data[entries] = self._per_dimension((nodes[indices] * scale).ravel(), columns[owners[rows]].ravel())
                W.indices[entries] = columns[owners[rows]].ravel()
        if sp.issparse(W):
            W.sort_indices()
        return W, weights

    def _per_dimension(self, values: np.ndarray, columns) -> np.ndarray:
        """Frequency entries of input coordinates `columns` (a slice: the last axis) divided by their
        lengthscales: the rule of the kernel of u = x / l. Unchanged without lengthscales."""
        if self.params.lengthscales is None:
            return values
        return values / np.asarray(self.params.lengthscales)[columns]

    def points_per_subset(self) -> list[int]:
        """How many of the P points each subset has (known from the spec, before any rule is built)."""
        grid = self.params.grid
        if grid == "subsampled":
            return shares(self.n_points, len(self.subsets))
        if grid == "reweighted":
            if self.params.point_subsets is None:
                return [self.n_points]
            return np.bincount(self.params.point_subsets, minlength=len(self.subsets)).tolist()
        size_parameter = self.params.points_per_dim if grid == "dense" else self.params.level
        return [grid_points(grid, size_parameter, [len(subset)]) for subset in self.subsets]

    def _coordinates_held(self) -> int:
        """Stored entries of W: P x d dense, or sum over points of |S| with anova."""
        if self.params.anova is None:
            return self.n_points * self.input_dim
        return sum(count * len(subset) for count, subset in zip(self.points_per_subset(), self.subsets))
