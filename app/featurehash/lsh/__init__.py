"""LSH over discrete codes, with no I/O: between the maps (which give the codes) and the store and dedup (which
index and join them), both of which call it.

- `banding`: band keys, code fingerprints, band digests, the S-curve and the choice of bands;
- `band_kernels`: the compiled mixer and a layout-3 index's bucket identities;
- `similarity`: the exact similarity the codes estimate, one class per code family
  (`featurehash.maps.base.CodeFamily`), of one query to candidates or of pairs of rows;
- `matches`: the code estimate, the match fraction of fingerprints (full or b-bit);
- `rerank`: the exact re-ranking of candidates from their packed vectors (compiled), and the top matches;
- `clusters`: connected components (union-find) and greedy representatives of verified pairs.

Importing this package imports none of them (the client uses `banding` alone, without numba).
"""
