"""TensorSketch (Pham & Pagh, "Fast and scalable polynomial kernels via explicit feature maps",
KDD 2013): a baseline for the polynomial kernel, compared with SRF by Pennington et al. (NIPS 2015;
docs/methods/polynomial.md, "The baselines and SRF").

Kernel: (q + <x, y>)^p on the raw inputs (`coef0` q >= 0, `degree` p >= 1), written as
<x', y'>^p = <x'^(p), y'^(p)> with the augmented vectors x' = [sqrt(q), x] and x'^(p) the p-fold
tensor power.

For k = 1..p a count sketch C_k(x') = sum_i s_k(i) x'_i e_{h_k(i)} in R^D (buckets h_k(i)
uniform in [0, D), signs s_k(i) uniform +-1, all independent), and
    TS(x) = IFFT(FFT(C_1(x')) * ... * FFT(C_p(x'))),
the circular convolution of the p sketches: the count sketch of x'^(p) with bucket
sum_k h_k(i_k) mod D and sign prod_k s_k(i_k), whose inner products are unbiased:
E<TS(x), TS(y)> = <x', y'>^p. The variance grows with p.

Cost O(p n (d + D log D)), O(p (nnz + n D log D)) for CSR input: the count sketches are sparse
products that touch each nonzero once, the FFTs are real (scipy.fft). Parameters: one bucket
and one sign per coordinate and factor (tags "tensorsketch.buckets.<k>" and
"tensorsketch.signs.<k>", d + 1 words each, word 0 for the constant coordinate), held as p
sparse (d x D) sketch matrices with one entry per row.
"""

from __future__ import annotations

import numpy as np
import scipy.fft
import scipy.sparse as sp

from .. import randomness
from ._polynomial_sketch import PolynomialSketchMap, random_signs

# Bytes per input coordinate of a float32 sketch matrix: the value and the column (int32), plus
# one row pointer (int32).
_SKETCH_BYTES_PER_COORDINATE = 12


def uniform_buckets(words: np.ndarray, count: int) -> np.ndarray:
    """Buckets in [0, count) by multiply-shift: (w >> 32) * count >> 32, exact in uint64 for
    count < 2^32; each bucket's probability is within 2^-32 of 1 / count."""
    return (((words >> np.uint64(32)) * np.uint64(count)) >> np.uint64(32)).astype(np.int64)


class TensorSketchMap(PolynomialSketchMap):
    method = "tensorsketch"

    def _make_parameters(self, dtype: np.dtype) -> list[tuple[sp.csr_matrix, int, float]]:
        """Per factor: the sketch matrix of the input coordinates, and the bucket and value
        (sqrt(q) times the sign) of the constant coordinate."""
        d, D = self.input_dim, self.spec.n_components
        root_q = float(np.sqrt(self.params.coef0))
        sketches = []
        for k in range(self.params.degree):
            buckets = uniform_buckets(randomness.raw_words(self.spec.seed, f"{self.method}.buckets.{k}", d + 1), D)
            signs = random_signs(randomness.raw_words(self.spec.seed, f"{self.method}.signs.{k}", d + 1))
            matrix = sp.csr_matrix((signs[1:].astype(dtype), buckets[1:].astype(np.int32),
                                    np.arange(d + 1, dtype=np.int32)), shape=(d, D))
            sketches.append((matrix, int(buckets[0]), root_q * float(signs[0])))
        return sketches

    @property
    def planned_nbytes(self) -> int:
        return self.params.degree * (_SKETCH_BYTES_PER_COORDINATE * self.input_dim + 4)

    @property
    def nbytes(self) -> int:
        return sum(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes
                   for sketches in self._parameters.values() for m, _, _ in sketches)

    def count_sketches(self, X, dtype=np.float64) -> list[np.ndarray]:
        """C_k(x') for every row and factor: p dense arrays (n, D). For checking."""
        X = self._working_copy(self.check(X), np.dtype(dtype))
        return [self._count_sketch(X, *sketch) for sketch in self._parameters_for(np.dtype(dtype))]

    @staticmethod
    def _count_sketch(X, matrix: sp.csr_matrix, bucket: int, value: float) -> np.ndarray:
        counts = X @ matrix  # dense X: an ndarray, O(n d); CSR X: sparse, O(nnz)
        counts = counts.toarray() if sp.issparse(counts) else np.ascontiguousarray(counts)
        counts[:, bucket] += counts.dtype.type(value)
        return counts

    def _sketch_into(self, X, out: np.ndarray) -> None:
        spectrum = None
        for sketch in self._parameters_for(out.dtype):
            # rfft keeps float32 in single precision (complex64); the product of the p spectra
            # is the spectrum of the circular convolution of the p sketches.
            factor = scipy.fft.rfft(self._count_sketch(X, *sketch), axis=1)
            if spectrum is None:
                spectrum = factor
            else:
                spectrum *= factor
        out[...] = scipy.fft.irfft(spectrum, n=self.output_dim, axis=1)
