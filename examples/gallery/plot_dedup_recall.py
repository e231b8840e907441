"""
Recall of the near-duplicate join on planted groups
===================================================

`examples/rows.npz` holds 100 seeded sparse rows, each followed by three near-copies. The join bands 256 GCWS
codes so that a pair at the threshold becomes a candidate with probability at least `target_recall`, then
verifies candidates exactly: every pair returned is at or above the threshold (precision 1), and the printed
recall is the share of the planted pairs above the threshold that were found.
"""

from itertools import combinations
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from featurehash import create_map
from featurehash.dedup import similarity_join

X = sp.load_npz(Path(__file__).resolve().parent.parent / "rows.npz")
m = create_map({"method": "gcws", "input_dim": X.shape[1], "n_components": 256, "seed": 1})
planted = [(4 * g + a, 4 * g + b) for g in range(X.shape[0] // 4) for a, b in combinations(range(4), 2)]
exact = np.array([m.exact_kernel(X[i], X[j])[0, 0] for i, j in planted])   # GMM of each planted pair
for threshold in (0.5, 0.7, 0.9):
    pairs = similarity_join(X, m, threshold, target_recall=0.95)
    found = set(zip(pairs.i.tolist(), pairs.j.tolist()))
    above = [pair for pair, s in zip(planted, exact) if s >= threshold]
    recall = np.mean([pair in found for pair in above]) if above else float("nan")
    print(f"threshold {threshold}: {len(pairs)} pairs returned, least similarity "
          f"{pairs.similarity.min():.3f}; recall of the {len(above)} planted pairs above it {recall:.3f}")
