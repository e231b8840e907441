"""The stored-bytes limit on a Redis Cluster (featurehash.store.lsh_accounting): how far concurrent writers to
different indexes of one tenant take it past its limit, and what the check costs a write.

    python bench/bench_cluster_quota.py [--writers 2 4] [--batch 200] [--rounds 5] [--others 0 1 20]

Starts a local three-primary Redis Cluster (tests/cluster_support.py).

1. Overshoot: a tenant limited to 60 batches' bytes; --writers threads, each adding --batch items a call to an
   index of its own (the indexes on several nodes) until refused. Printed per writer count: the tenant's bytes
   at the end / the limit, and the overshoot in batches (the bound is writers - 1 batches), median and max over
   --rounds.
2. Cost: one add of --batch items (GCWS k=64, codes only) to an index of a tenant without a limit (no extra
   read), and of a tenant with a limit (never reached) and --others other indexes (their counts read before
   the batch: two round trips); interleaved round by round; wall-clock and this process's CPU time per add,
   medians, as ratios to no limit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import redis.cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cluster_support import start_cluster, stop_cluster  # noqa: E402

from featurehash.maps import create_map  # noqa: E402
from featurehash.store import LSHIndexes  # noqa: E402
from featurehash.store.lsh_accounting import StoredBytesExceeded  # noqa: E402

GCWS = {"method": "gcws", "input_dim": 24, "n_components": 64, "seed": 5}


def rows(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 24)) + 0.01


def batch_bytes(cluster, gcws, batch: int) -> int:
    probe = LSHIndexes(cluster, f"bench-probe-{uuid.uuid4().hex[:6]}:")
    probe.create(gcws, name="p").add([f"{i:06d}" for i in range(batch)], rows(0, batch))
    return probe.used_bytes()


def overshoot(cluster, gcws, writers: int, batch: int, per_batch: int) -> float:
    limit = 60 * per_batch
    indexes = LSHIndexes(cluster, f"bench-{uuid.uuid4().hex[:8]}:", stored_bytes_limit=limit)
    mine = [indexes.create(gcws, name=f"w{w}") for w in range(writers)]
    X = rows(1, batch)
    start = threading.Barrier(writers)

    def write(index) -> None:
        start.wait()
        for call in range(10**6):
            try:
                index.add([f"{call:03d}{i:03d}" for i in range(batch)], X)
            except StoredBytesExceeded:
                return

    threads = [threading.Thread(target=write, args=(index,)) for index in mine]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (indexes.used_bytes() - limit) / per_batch


def cost(cluster, gcws, batch: int, rounds: int, others: list[int]) -> None:
    X = rows(2, batch)
    cases = {"no limit": LSHIndexes(cluster, f"bench-c-{uuid.uuid4().hex[:6]}:")}
    for count in others:
        cases[f"limit, {count} other indexes"] = LSHIndexes(cluster, f"bench-c-{uuid.uuid4().hex[:6]}:",
                                                            stored_bytes_limit=10**15)
    targets = {}
    for label, indexes in cases.items():
        targets[label] = indexes.create(gcws, name="target")
        for number in range(int(label.split(", ")[1].split()[0]) if "," in label else 0):
            indexes.create(gcws, name=f"other{number}").add(["x"], X[:1])
    wall = {label: [] for label in cases}
    cpu = {label: [] for label in cases}
    for round_number in range(rounds):
        for label, index in targets.items():
            for call in range(5):
                ids = [f"{round_number}-{call}-{i}" for i in range(batch)]
                t0, c0 = time.perf_counter(), time.process_time()
                index.add(ids, X)
                wall[label].append(time.perf_counter() - t0)
                cpu[label].append(time.process_time() - c0)
    base_wall, base_cpu = statistics.median(wall["no limit"]), statistics.median(cpu["no limit"])
    print(f"\ncost of one add of {batch} items ({rounds} rounds x 5 adds, interleaved; medians)")
    for label in cases:
        w, c = statistics.median(wall[label]), statistics.median(cpu[label])
        print(f"  {label:28s} wall {1e3 * w:7.2f} ms ({w / base_wall:4.2f}x)   cpu {1e3 * c:7.2f} ms "
              f"({c / base_cpu:4.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--others", type=int, nargs="+", default=[0, 1, 20])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        nodes = start_cluster(Path(directory))
        try:
            cluster = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port)
            gcws = create_map(GCWS)
            per_batch = batch_bytes(cluster, gcws, args.batch)
            print(f"a batch of {args.batch} items counts {per_batch} bytes; limit = 60 batches")
            for writers in args.writers:
                found = [overshoot(cluster, gcws, writers, args.batch, per_batch) for _ in range(args.rounds)]
                print(f"  {writers} writers on {writers} indexes: overshoot (batches) median "
                      f"{statistics.median(found):.2f}, max {max(found):.2f} (bound {writers - 1}); "
                      f"all: {', '.join(f'{value:.2f}' for value in found)}")
            cost(cluster, gcws, args.batch, args.rounds, args.others)
            cluster.close()
        finally:
            stop_cluster(nodes)


if __name__ == "__main__":
    main()
