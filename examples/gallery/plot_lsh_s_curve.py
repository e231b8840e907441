"""
The LSH S-curve: how bands and rows turn similarity into candidate probability
===============================================================================

With k codes cut into L bands of r, a pair whose codes agree with probability s shares at least one band
with probability 1 - (1 - s^r)^L. `choose_bands` picks (L, r) so that a pair at the threshold is found with
at least the asked recall; this prints the planned curve beside the share of 2,000 simulated pairs per
similarity that shared a band (codes agreeing independently with probability s, as GCWS codes do).
"""

import numpy as np

from featurehash.lsh.banding import choose_bands

k, threshold = 128, 0.7
bands, rows = choose_bands(k, threshold, 0.95)
print(f"k = {k}, threshold {threshold}: L = {bands} bands of r = {rows}")
rng = np.random.default_rng(0)
print(f"{'s':>5s} {'planned':>8s} {'simulated':>10s}")
for s in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9):
    agree = rng.random((2000, bands * rows)) < s
    shared = agree.reshape(2000, bands, rows).all(axis=2).any(axis=1).mean()
    print(f"{s:5.2f} {1 - (1 - s ** rows) ** bands:8.3f} {shared:10.3f}")
