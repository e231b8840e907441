"""How big a CPU step of an index operation may be and still run on the caller's event loop
(AsyncLSHIndex): a thread hop costs more than a small step does."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

# CPU steps at most this big run on the caller's event loop (AsyncLSHIndex): a thread hop costs
# more than they do. Hashing (nonzero inputs x codes, GCWS ~4 ns each) or comparing this many
# fingerprints takes ~0.1-0.3 ms.
INLINE_ROWS = 8
INLINE_COMPARISONS = 2**18
INLINE_HASH_WORK = 2**16


def _small_input(X, n_codes: int) -> bool:
    """Few rows whose hashing costs less than a thread hop."""
    rows = X.shape[0] if sp.issparse(X) or isinstance(X, np.ndarray) else len(X)
    if rows > INLINE_ROWS:
        return False
    try:
        entries = X.nnz if sp.issparse(X) else np.count_nonzero(np.asarray(X, dtype=np.float64))
    except (TypeError, ValueError):
        return False  # not numbers: the map's check reports it, from the worker thread as usual
    return entries * n_codes <= INLINE_HASH_WORK
