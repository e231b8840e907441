"""
Near-duplicate documents with GCWS over word shingles
=====================================================

A GCWS map with a text front stage turns each document into codes of its set of word 3-shingles (binary
weights: the kernel is their Jaccard similarity). `similarity_join` bands the codes, groups equal band keys
and verifies every candidate pair with the exact similarity, so only pairs at or above the threshold come
back. The documents are the twelve of `examples/docs.jsonl`; the printed pairs are the near-copies in it.
"""

import json
from pathlib import Path

from featurehash import create_map
from featurehash.dedup import duplicate_clusters, similarity_join

documents = [json.loads(line) for line in (Path(__file__).resolve().parent.parent / "docs.jsonl").open()]
m = create_map({"method": "gcws", "n_components": 128, "seed": 1,
                "input": {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}})
pairs = similarity_join(documents, m, 0.4)
for i, j, s in zip(pairs.i, pairs.j, pairs.similarity):
    print(f"{s:.2f}  {documents[i]!r}\n      {documents[j]!r}")
clusters = duplicate_clusters(documents, m, 0.4)
print(f"{len(pairs)} pairs at Jaccard >= 0.4; {clusters.n_clusters} clusters of {len(documents)} documents")
