"""LSHIndex.duplicates and query_items on a stored index: time and CPU per item and per candidate pair,
against featurehash.dedup.duplicate_clusters on the same vectors (the contender, measured in the same run).

    python bench/bench_index_duplicates.py [--redis redis://127.0.0.1:6379/0] [--items 20000,50000] [--repeats 3]

Data: sparse bag-of-words families (a document and near copies: each word kept with probability 0.9,
weights jittered 10%), d = 5,000, ~60 words a document; GCWS k = 256, banding choose_bands(256, 0.8,
0.95) for both. Per size and vector storage ("none": codes verification, "sparse": exact): add all items,
then `duplicates(0.8)` `--repeats` times (median wall and CPU seconds of this process; Redis's own CPU from
INFO cpu, used_cpu_user + used_cpu_sys), the candidate pairs, the verified pairs and the clusters, and the
seconds per stored bucket key (items x L) and per candidate pair that the service's cost model uses
(featurehash.store.index.duplicates.duplicates_seconds); peak RSS of this process at the end. Then
dedup.duplicate_clusters (verify "codes" and "exact") on the same rows: median wall, and the ratio.
Keys go under a random prefix, removed at the end (durability "reply": the machine's Redis keeps no AOF).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
import uuid

import numpy as np
import redis
import scipy.sparse as sp

from featurehash.dedup import duplicate_clusters
from featurehash.maps import create_map
from featurehash.lsh.banding import choose_bands
from featurehash.store import LSHIndexes

D, K, THRESHOLD = 5000, 256, 0.8


def documents(n: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    families = n // 4
    rows = []
    for _ in range(families):
        words = rng.choice(D, 60, replace=False)
        weights = rng.random(60) + 0.5
        rows.append((words, weights))
        for _ in range(3):
            kept = rng.random(60) < 0.9
            rows.append((words[kept], weights[kept] * (1 + 0.1 * rng.random(kept.sum()))))
    indptr = np.cumsum([0] + [w.size for w, _ in rows])
    return sp.csr_matrix((np.concatenate([v for _, v in rows]), np.concatenate([w for w, _ in rows]), indptr),
                         shape=(len(rows), D))


def redis_cpu(client) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def timed(function, repeats: int, client=None):
    walls, cpus, servers, result = [], [], [], None
    for _ in range(repeats):
        server = redis_cpu(client) if client is not None else 0.0
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        servers.append(redis_cpu(client) - server if client is not None else 0.0)
    return statistics.median(walls), statistics.median(cpus), statistics.median(servers), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--items", default="20000,50000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    client = redis.Redis.from_url(args.redis)
    prefix = f"bench-dup-{uuid.uuid4().hex[:8]}:"
    feature_map = create_map({"method": "gcws", "input_dim": D, "n_components": K, "seed": 3})
    bands, rows = choose_bands(K, THRESHOLD, 0.95)
    indexes = LSHIndexes(client, prefix, durability="reply")
    print(f"gcws k={K}, d={D}, banding {bands} x {rows}, threshold {THRESHOLD}")
    try:
        for n in (int(size) for size in args.items.split(",")):
            X = documents(n, n)
            ids = [f"doc{i:07d}" for i in range(X.shape[0])]
            for vectors, verify in (("none", "codes"), ("sparse", "exact")):
                index = indexes.create(feature_map, name=f"b{n}-{vectors}", bands=bands, rows=rows, vectors=vectors)
                start = time.perf_counter()
                index.add(ids, X)
                added = time.perf_counter() - start
                wall, cpu, server, found = timed(lambda: index.duplicates(THRESHOLD), args.repeats, client)
                keys = X.shape[0] * bands
                print(f"n={X.shape[0]} vectors={vectors}: add {X.shape[0] / added:,.0f} items/s; duplicates "
                      f"{wall:.2f} s wall, {cpu:.2f} s CPU here + {server:.2f} s Redis CPU; {found.candidates:,} "
                      f"candidate pairs, {found.pairs:,} verified, {len(found.clusters):,} clusters; "
                      f"{1e6 * (cpu + server) / keys:.2f} us CPU per bucket key if all were keys, "
                      f"{1e6 * (cpu + server) / max(1, found.candidates):.1f} us per candidate pair if all were pairs")
                wall_q, cpu_q, _, _ = timed(lambda: index.query_items(ids[:1000], top_k=10), args.repeats)
                print(f"  query_items 1,000 ids: {wall_q * 1e3:.0f} ms wall, {cpu_q * 1e3:.0f} ms CPU")
                wall_d, cpu_d, _, reference = timed(lambda: duplicate_clusters(X, feature_map, THRESHOLD,
                                                                               verify=verify), args.repeats)
                print(f"  dedup.duplicate_clusters (verify={verify}) in process: {wall_d:.2f} s wall, {cpu_d:.2f} s "
                      f"CPU, {int((reference.sizes >= 2).sum()):,} clusters; index / dedup wall ratio "
                      f"{wall / wall_d:.1f}")
                indexes.delete(index.name)
    finally:
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.unlink(key)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
