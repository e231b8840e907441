"""Random Maclaurin features (Kar & Karnick, "Random feature maps for dot product kernels",
AISTATS 2012): a baseline for the polynomial kernel, compared with SRF by Pennington et al. (NIPS 2015;
docs/methods/polynomial.md, "The baselines and SRF").

Kernel: (q + <x, y>)^p on the raw inputs (`coef0` q >= 0, `degree` p >= 1).

Random Maclaurin approximates a dot-product kernel f(<x, y>) = sum_n a_n <x, y>^n with features
sqrt(a_N / P(N)) prod_{k=1..N} <w_k, x>, N drawn from a law P over the degrees and the w_k
Rademacher vectors (E[w w^T] = I). On the augmented vectors x' = [sqrt(q), x] the kernel is the
single monomial <x', y'>^p (a_p = 1, every other a_n = 0), so P is the point mass at p, and
    z_j(x) = D^(-1/2) prod_{k=1..p} <w_jk, x'>,   w_jk uniform in {-1, +1}^(d+1),
the form the SRF paper compares against ("<x, y>^p approximated by prod <w_i, x> prod <w_i, y>").
E<z(x), z(y)> = <x', y'>^p exactly: the product of p independent unbiased factors. Its
variance grows geometrically with p, which is what SRF improves on.

Cost: p products with (d+1) x D sign matrices, O(p n d D), or O(p nnz D) for CSR input. The
signs of factor k come from their own stream (tag "random_maclaurin.signs.<k>", (d+1) x D
words, row 0 for the constant coordinate), so the first p factors of a map of degree p + 1 are
those of degree p. Held as p (d + 1) D numbers in the working precision.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import randomness
from ._polynomial_sketch import PolynomialSketchMap, random_signs


class RandomMaclaurinMap(PolynomialSketchMap):
    method = "random_maclaurin"

    def _make_parameters(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """Sign matrices of the input coordinates, shape (p, d, D), and sqrt(q) times the signs
        of the constant coordinate, shape (p, D)."""
        d, D, p = self.input_dim, self.spec.n_components, self.params.degree
        projections = np.empty((p, d, D), dtype=dtype)
        constants = np.empty((p, D), dtype=dtype)
        root_q = np.sqrt(self.params.coef0)
        for k in range(p):
            # Row 0 of the (d + 1) x D signs is the constant coordinate's; made in row blocks, so the
            # temporaries are one block, not the matrix.
            for rows, words in randomness.row_blocks(self.spec.seed, f"{self.method}.signs.{k}", d + 1, D):
                signs = random_signs(words).reshape(-1, D)
                if rows.start == 0:
                    constants[k] = root_q * signs[0]
                    signs = signs[1:]
                projections[k, max(rows.start - 1, 0):rows.stop - 1] = signs
        return projections, constants

    @property
    def planned_nbytes(self) -> int:
        return 4 * self.params.degree * (self.input_dim + 1) * self.spec.n_components

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for pair in self._parameters.values() for a in pair)

    def _sketch_into(self, X, out: np.ndarray) -> None:
        projections, constants = self._parameters_for(out.dtype)
        factor = np.empty_like(out)
        for k in range(self.params.degree):
            target = out if k == 0 else factor
            if sp.issparse(X):
                target[...] = X @ projections[k]
            else:
                np.matmul(X, projections[k], out=target)
            target += constants[k]
            if k > 0:
                out *= factor
        out *= out.dtype.type(1.0 / np.sqrt(self.output_dim))
