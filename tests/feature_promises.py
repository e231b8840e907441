"""The documented promise for dense features (docs/exactness.md, "What is exact"), as one assertion the golden
tests share.

Two float32 computations of the same features (another CPU, BLAS kernel, thread count or batch cut)
differ by at most 4 times the float32 error max |z32 - z64| of the same rows plus 64 float32 ulps of the
largest feature (a few rows may have an error below another CPU's rounding of their phases; measured:
2.2 times for Laplacian RFF and 33 ulps for structured RFF on the golden rows, 0.9 times on 1500 rows); float64
features by at most 1e-11 of the largest feature. tests/test_portability.py measures both.
"""

from __future__ import annotations

import numpy as np

FLOAT32_ERROR_FACTOR = 4.0
FLOAT32_ULPS_OF_SCALE = 64
FLOAT64_RELATIVE = 1e-11


def assert_dense_features_match(Z32, Z64, expected32, expected64) -> None:
    expected32 = np.asarray(expected32, dtype=np.float64)
    expected64 = np.asarray(expected64, dtype=np.float64)
    scale = float(np.max(np.abs(expected64), initial=0.0))
    own_error = float(np.max(np.abs(expected32 - expected64), initial=0.0))
    np.testing.assert_allclose(np.asarray(Z64, dtype=np.float64), expected64, rtol=0,
                               atol=FLOAT64_RELATIVE * scale)
    np.testing.assert_allclose(np.asarray(Z32, dtype=np.float64), expected32, rtol=0,
                               atol=FLOAT32_ERROR_FACTOR * own_error + FLOAT32_ULPS_OF_SCALE * 2.0**-24 * scale)
