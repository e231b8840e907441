"""The short path of small batches for the Fourier maps whose features are one product and one compiled pass
(rff, nrff, srf, quadrature): `DenseFeatureMap.short_path` (issue 32: a single row cost 0.5-0.7x numpy's time
doing the same arithmetic, most of it the layers around the kernels: the input check's Python half,
np.errstate, wrappers).

One compiled scan of X (`largest_row_l1`: NaN, infinities and all-zero rows, and the largest l1 norm, which
with the frequencies' bound |w . x| <= ||x||_1 max|w| proves that no product or feature can overflow, so no
np.errstate), the working copy, then the full path's own product and compiled pass (so the same bits). Anything
else (a bad row, a bound that fails, an argument beyond the compiled reduction) answers False: the full path
checks, recomputes and raises as before.
"""

from __future__ import annotations

import numpy as np

from ..inputs import largest_row_l1

# The bound on projections and features: as `refuse_overflow`'s.
FLOAT_LIMITS = {np.dtype(np.float32): float(np.finfo(np.float32).max) / 16,
                np.dtype(np.float64): float(np.finfo(np.float64).max) / 16}


class ShortFourierPath:
    """`_short_features` for a DenseFeatureMap with `_pass_for(dtype)`, `_projector(dtype)`,
    `_largest_weight(dtype)` (max |w|) and `_working_copy`; `_short_paths` is a dict of the instance."""

    def _short_path_available(self, dtype: np.dtype) -> bool:
        """False where the map's features in `dtype` are not this product and pass (the full path decides)."""
        return True

    def _short_l1(self, largest_l1: float, zero_rows: int) -> float:
        """The largest l1 norm of the rows the projection reads, from the raw rows' (inf if one is not finite)
        and their count of all-zero rows."""
        return largest_l1

    def _short_features(self, X, out: np.ndarray) -> bool:
        if type(X) is not np.ndarray or X.shape[1] != self.input_dim or not X.flags.c_contiguous:
            return False
        dtype = out.dtype
        path = self._short_paths.get(dtype, False)
        if path is False:
            path = None
            if dtype in FLOAT_LIMITS and self._short_path_available(dtype):
                with np.errstate(over="ignore", invalid="ignore"):   # once per dtype: frequencies that overflow
                    path = (self._pass_for(dtype), self._projector(dtype),   # are a SpecError, as on the full path
                            self._largest_weight(dtype), FLOAT_LIMITS[dtype])
            self._short_paths[dtype] = path
        if path is None or X.dtype not in FLOAT_LIMITS:
            return False
        fourier_pass, project, largest_weight, limit = path
        l1 = self._short_l1(*largest_row_l1(X))
        if not l1 * largest_weight + 2.0 * np.pi < limit:   # `_magnitude_bound`: nan (a bad row) or an overflow
            return False
        return fourier_pass.run(project, self._working_copy(X, dtype), out, reduce_any=False)
