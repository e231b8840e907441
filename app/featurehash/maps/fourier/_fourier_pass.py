"""Dense Fourier features of a row chunk in one blocked pass, for any projection.

    phase:   out = w cos(P + b)                  (P of width m = output width)
    cos_sin: out = [w_j cos(P_j), w_j sin(P_j)]  (P of width m = half the output width)
where P = project(X) is whatever the map computes (a dense or sparse product X W^T, a structured
transform, an FFT): `project(rows, into)` writes the projection of `rows` into the C-contiguous block
`into`. phase: the whole chunk is projected straight into the output (one product packs W once), then offset,
cos, weight (and nrff's row normalisation) are applied in place, row by row. cos_sin: the chunk goes by blocks
(`block_rows`: at least PRODUCT_BLOCK_ROWS rows for a BLAS product, which packs W anew for each, else about
BLOCK_ELEMENTS projections), each projected into a scratch block that stays in cache and turned into its cos and sin
columns of the output. Memory traffic is at most one more read and write of the output,
against the numpy one-shot form's product written out, read and written again by each of its
elementwise passes.

cos and sin are the compiled portable passes of `_fourier_kernels` (same bits on every CPU for a given
projection; float32 features in float32 arithmetic; speeds in docs/benchmarks.md, "Compiled passes and
threads"). Arguments beyond the compiled reduction range (or inf/nan) make the block go through
numpy's cos and sin, which reduce any argument, and a final NaN check.
"""

from __future__ import annotations

import numpy as np

from . import _fourier_kernels as kernels

BLOCK_ELEMENTS = 2**16
MIN_BLOCK_ROWS = 64
# A BLAS product packs all of W (d x m) for each block of rows, whatever the rows: 512-row blocks amortise
# the packing (16% of the product's time at 128 rows; docs/benchmarks.md, "Compiled passes and threads");
# a block is never wider than its chunk (base.CHUNK_ELEMENTS).
PRODUCT_BLOCK_ROWS = 512


def block_rows(input_dim: int, width: int, block_scale: int = 1, product: bool = True) -> int:
    """Rows of a cos_sin block: `block_scale` BLOCK_ELEMENTS projections, but at least input_dim / 4 rows and
    PRODUCT_BLOCK_ROWS for a BLAS product (`product`), MIN_BLOCK_ROWS for another projection. A
    projection with a fixed cost per call (SSF's FFTs: ~10 numpy and scipy calls) takes larger blocks
    (`block_scale`) but no product's minimum: 512-row blocks made SSF 1.2-1.5x slower (measured)."""
    fewest = PRODUCT_BLOCK_ROWS if product else MIN_BLOCK_ROWS
    return max(block_scale * BLOCK_ELEMENTS // max(1, width), fewest, input_dim // 4)


class FourierPass:
    """The elementwise half of a dense Fourier map in one working precision: offsets b (phase variant)
    or None (cos_sin), weights (one per projection column, float64; all equal in most maps) and
    whether rows are normalised to unit l2 norm afterwards (nrff)."""

    def __init__(self, dtype: np.dtype, weights: np.ndarray, offsets: np.ndarray | None = None,
                 normalize: bool = False, block_scale: int = 1, product: bool = True):
        self.dtype = np.dtype(dtype)
        single = self.dtype == np.float32
        self.weights = np.ascontiguousarray(weights, dtype=np.float64)
        self.width = self.weights.size
        uniform = self.weights.size and np.all(self.weights == self.weights[0])
        self.weight = float(self.weights[0]) if uniform else None
        self._cast_weight = self.dtype.type(self.weight) if uniform else None
        self._cast_weights = self.weights.astype(self.dtype)
        self.offsets = None if offsets is None else np.ascontiguousarray(offsets, dtype=self.dtype)
        self.normalize = normalize
        self.block_scale = block_scale
        self.product = product
        self._shifted_cos = kernels.shifted_cos_float32 if single else kernels.shifted_cos_inplace
        self._cos_sin_into = kernels.cos_sin_into_float32 if single else kernels.cos_sin_into

    def run(self, project, X, out: np.ndarray, reduce_any: bool = True) -> bool:
        """Features of the rows X into `out` (out.dtype == self.dtype). Returns True when every feature
        is known to be finite (else the caller checks). With `reduce_any` False, only the compiled passes run
        (no numpy call, so nothing can warn): False when an argument was beyond their reduction, and then
        `out` is partly written and the caller recomputes it with `reduce_any` (the same blocks, so the
        features of both calls are the same bits)."""
        if self.offsets is not None:
            # The product is written where the features go, so the block need not fit a cache: one
            # product over the chunk packs W once (blocks of 128 rows made the product 1.3x slower at
            # d = 512, D = 4096), and the in-place pass then streams it.
            project(X, out)
            return self._phase(out, project, X, reduce_any)
        n_rows, m = X.shape[0], self.width
        if n_rows <= MIN_BLOCK_ROWS:   # one block, whatever the rule (a single vector: no slicing)
            projection = np.empty((n_rows, m), dtype=self.dtype)
            project(X, projection)
            return self._cos_sin(projection, out, reduce_any)
        step = min(n_rows, block_rows(X.shape[1], m, self.block_scale, self.product))
        scratch = np.empty((step, m), dtype=self.dtype)
        finite = True
        for start in range(0, n_rows, step):
            stop = min(n_rows, start + step)
            rows = X[start:stop] if step < n_rows else X
            projection = scratch[:stop - start]
            project(rows, projection)
            finite &= self._cos_sin(projection, out[start:stop], reduce_any)
            if not (finite or reduce_any):
                return False
        return bool(finite)

    def _phase(self, block: np.ndarray, project, rows, reduce_any: bool = True) -> bool:
        if self._shifted_cos(block, self.offsets, self.weight, self.normalize) == 0:
            return True
        if not reduce_any:
            return False
        project(rows, block)   # an argument beyond the compiled reduction: numpy reduces any argument
        block += self.offsets
        np.cos(block, out=block)
        if self._cast_weight != 1:
            block *= self._cast_weight
        if self.normalize:
            kernels.normalize_rows(block)
        return not np.isnan(block.max())   # cos of a finite number is finite; of inf or nan, nan

    def _cos_sin(self, projection: np.ndarray, block: np.ndarray, reduce_any: bool = True) -> bool:
        if self._cos_sin_into(projection, self._cast_weights, block, self.normalize) == 0:
            return True
        if not reduce_any:
            return False
        m = self.width
        cosines, sines = block[:, :m], block[:, m:]
        np.cos(projection, out=cosines)
        np.sin(projection, out=sines)
        if self.weight is None:
            cosines *= self._cast_weights
            sines *= self._cast_weights
        elif self.weight != 1:
            block *= self._cast_weight
        if self.normalize:
            kernels.normalize_rows(block)
        return not np.isnan(cosines.max())


def project_into(X, frequencies: np.ndarray, out: np.ndarray) -> None:
    """out = X W^T for dense or CSR X (W = frequencies, one row per frequency), written in place."""
    if isinstance(X, np.ndarray):
        np.matmul(X, frequencies.T, out=out)
    else:
        out[...] = X @ frequencies.T
