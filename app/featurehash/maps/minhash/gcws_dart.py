"""GCWS sampler "dart": k weighted minhashes in expected O(k log k + nnz) per vector.

Reference: T. Christiani, "DartMinHash: Fast Sketching for Weighted Sets", arXiv:2005.11547
(2020). The construction below is derived for this package (scale-free bands, group skipping,
counter-based randomness); the paper's idea is the dart process and the buckets.

Target: the same law as ICWS (gcws.py). With weights w = u~^p (u~ in R^{2d}_{>=0}, the split
vector; p = `power`), GMM / pGMM is the weighted Jaccard similarity
J(w, w') = sum_i min(w_i, w'_i) / sum_i max(w_i, w'_i).

Darts. Throw a Poisson process of unit intensity on {coordinates} x (0, inf) x (0, inf) (element
i, weight y, rank r); a dart hits w if y <= w_i. The hit with the least rank lies in the region
of w u w' (area sum max) and belongs to both with probability sum min / sum max = J, so "same
first dart" has probability exactly J. Give each dart a bucket j = 0..k-1, uniform and
independent: the buckets are k independent Poisson processes (thinning), so the first darts of
the k buckets are k independent weighted minhashes. A code is the first dart's identity:
i* = its element (as ICWS's i*, so 0-bit and b-bit features keep their meaning) and, for full
codes, its band a and index n (below).

Which darts to throw. Only darts with rank <= R matter once every bucket has one: with
R = T / ||w||_1 and T = k (ln k + 2), the expected count is T and some bucket stays empty with
probability <= k e^(-T/k) = e^-2; then R doubles and a second pass throws only the darts of
rank in (R, 2R]: each band resumes at its first dart beyond R (kept from the first pass). The codes never depend on R: the first dart of a bucket is the same for any R that
reaches it, so x and y agree whatever their norms.

Making the darts of one element, scale-free, with no table. Cut the weight axis into bands
[2^a, 2^(a+1)), a in Z. In band a the darts form a Poisson process in rank of rate 2^a; in
"band time" Gamma = r 2^a they are the partial sums of Exp(1) gaps, and a dart's weight is
2^a (1 + U). Element i with w_i = m_i 2^(A_i), m_i in [1, 2), owns every dart of the bands
a < A_i and the darts of band A_i with 1 + U <= m_i. A band a can reach rank R only if its
first gap E <= 2^a R; a 53-bit uniform gives E >= 2^-54, so the bands a < -55 - log2 R are
empty for every vector using that R, and the bands of an element run from there to A_i: about
55 + log2(w_i R) of them, however the data are scaled. Groups of G = 8 bands are skipped at
once: the group's first dart M_g = E_g / sum_(a in g) 2^a ~ Exp(sum 2^a) comes from one uniform;
its band a* has probability 2^a / sum, and given (M_g, a*) the other bands' first darts are
M_g + E'_a / 2^a (memorylessness), which is the law of independent first darts. A group with
M_g > R is skipped after one uniform, so an element costs about (55 + log2(w_i R)) / 8 group
tests plus the bands of its top group and its darts; sum_i w_i R = T.

Ranks are compared as r / 2^B (R = m 2^B, m in [1, 2)): a power-of-two scaling, so the order
of darts is the order of their true ranks on every vector. Every variate is a pure function of
(seed, coordinate, band, dart index) via the counter-based mixer (`_counter_random`): the same
codes for dense and sparse input, in any batch, on any thread count, for coordinates up to 2^31.

LSH band keys stay functions of the k codes (bands of r consecutive codes, lsh.py), so an index
re-ranks candidates by the same codes it buckets. The paper's direct (L, K) construction (L*K
independent hashes in O(LK + nnz)) would only pay when L*K is well below k, which the indexes
here do not use (they take bands * rows <= k and re-rank over all k), so it is not built.

Code layout (int64 >= 0): i* << 32 | dart, with dart = (a + 2048) << 19 | n, exact for
|a| < 2048 and n < 2^19 (a bucket's first dart has n beyond 2^19 with probability about
e^(-2^19 / k)); otherwise bit 31 flags a 31-bit fingerprint of (i*, a, n), which could equal
another dart's with probability 2^-31.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from . import _gcws_dart_kernels
from .. import randomness
from ..errors import InputError
from ..inputs import CSRParts

_EXTRA_DARTS_PER_SAMPLE = 2.0
_LOG2_WEIGHT_LIMIT = 2.0**26  # bands must fit the counter layout of the kernels


class DartSampler:
    """The k weighted minhashes of each row of a canonical CSR matrix, by DartMinHash."""

    nbytes = 0  # no table: every variate is made on demand

    def __init__(self, seed: int, n_components: int, power: float):
        self.key = randomness.counter_key(seed, "gcws.darts")
        self.n_components = n_components
        self.power = float(power)
        self.target = n_components * (math.log(n_components) + _EXTRA_DARTS_PER_SAMPLE)

    def check_weights(self, X, field: str = "vectors") -> None:
        """|x|^power must be a weight whose log2 the band layout can hold (only pGMM powers far
        from 1 on extreme values reach the limit). X: a checked dense array or CSR matrix."""
        if self.power == 1.0:
            return
        values = X.data if sp.issparse(X) else X
        magnitudes = np.abs(values[values != 0])
        with np.errstate(over="ignore", divide="ignore"):
            log2_weights = self.power * np.log2(magnitudes)
        if magnitudes.size and not np.all(np.abs(log2_weights) < _LOG2_WEIGHT_LIMIT):
            raise InputError(field, f"|x|^power leaves the range sampler 'dart' handles (2^-{2**26:.0f} "
                             f"to 2^{2**26:.0f}); use sampler 'icws' or a power nearer 1")

    def samples(self, X: CSRParts, parallel: bool) -> tuple[np.ndarray, np.ndarray]:
        """(i*, dart identity) for every row and bucket: two int64 arrays of shape (n, k)."""
        n, k = X.shape[0], self.n_components
        i_star = np.empty((n, k), dtype=np.int64)
        dart = np.empty((n, k), dtype=np.int64)
        kernel = _gcws_dart_kernels.hash_csr_parallel if parallel else _gcws_dart_kernels.hash_csr_serial
        kernel(X.indptr, X.indices, X.data, self.power, self.key, self.target, i_star, dart)
        if (i_star < 0).any():  # needs 64 doublings of the rank limit: not a chance event
            raise RuntimeError("DartMinHash left a bucket without a dart")
        return i_star, dart
