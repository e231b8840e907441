"""A sharded LSH index on a local Redis Cluster of 3 masters and 3 replicas, against the unsharded layout.

    python bench/bench_sharded_cluster.py [--items 100000] [--queries 300] [--write]

Starts the cluster from the redis-server binary (tests/cluster_support.py), builds one index per layout over the
same items (unsharded: one slot; sharded: S = 1, 3, 12) and prints, per layout: insert items/s (wall and client
CPU), single-row query p50/p99 (the layouts' queries interleaved, round after round), the items each master holds
and the spread (max/min - 1), Redis memory a item (used_memory of the masters before and after), whether every
answer equals the unsharded index's, and the capacity that follows for 3 and 30 masters of 25 GB (items =
masters x 25 GB x USABLE / bytes a item; an unsharded index is one slot, so one master whatever their number).
Then a master fails during writes, twice (a manual CLUSTER FAILOVER, then the master killed with SIGKILL so its
replica takes over after the node timeout): a writer adds batches throughout, retrying a batch until it is
acknowledged, and every acknowledged item is looked up afterwards. `--write` stores the report in
bench/results/sharded_cluster.txt.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import redis
import redis.cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cluster_support import start_cluster, stop_cluster  # noqa: E402

from featurehash.maps import create_map  # noqa: E402
from featurehash.store import LSHIndexes  # noqa: E402
from featurehash.store.index.sharded.placement import shard_of  # noqa: E402
from featurehash.store.lsh_layout import IndexLayout, shard_tags  # noqa: E402
from featurehash.store.redis_steps import run_sync  # noqa: E402

GCWS = {"method": "gcws", "input_dim": 32, "n_components": 128, "seed": 11}
LAYOUTS = [("unsharded", None), ("S=1", 1), ("S=3", 3), ("S=12", 12)]
MASTER_BYTES = 25e9
USABLE = 0.75  # of a master's memory for data: the rest is fork copy-on-write, replication and client buffers
PREFIX = "bench-sharded:"


def corpus(n: int, seed: int = 3) -> tuple[list[str], np.ndarray]:
    """n rows, a fifth of them near copies of others (so queries and buckets have neighbours). Log-normal weights:
    two unrelated rows have a GMM similarity of ~0.1 (uniform ones ~0.5, which would fill every bucket)."""
    rng = np.random.default_rng(seed)
    base = rng.lognormal(0.0, 2.0, (n - n // 5, 32)).astype(np.float32) + 0.01
    copies = base[rng.integers(0, len(base), n // 5)] * (1 + 0.05 * rng.random((n // 5, 32))).astype(np.float32)
    return [f"doc-{i}" for i in range(n)], np.vstack([base, copies])


def masters(cluster) -> list:
    return [node for node in cluster.get_nodes() if node.server_type == "primary"]


def used_memory(cluster) -> dict[str, int]:
    return {node.name: int(cluster.info("memory", target_nodes=node)["used_memory"]) for node in masters(cluster)}


def items_per_master(cluster, name: str, shards: int | None) -> dict[str, int]:
    counts = {node.name: 0 for node in masters(cluster)}
    tags = shard_tags(name, shards) if shards else (name,)
    for tag in tags:
        layout = IndexLayout(PREFIX, tag)
        counts[cluster.get_node_from_key(layout.meta).name] += int(cluster.get(layout.count) or 0)
    return counts


def build(cluster, feature_map, ids, X, label, shards) -> dict:
    before = used_memory(cluster)
    index = LSHIndexes(cluster, PREFIX).create(feature_map, name=f"ix-{label.replace('=', '')}", threshold=0.7,
                                               vectors="float32", expected_items=len(ids), shards=shards)
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(ids), 2000):
        index.add(ids[start:start + 2000], X[start:start + 2000])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = used_memory(cluster)
    spread = items_per_master(cluster, index.name, shards)
    held = [count for count in spread.values() if count]
    tags = shard_tags(index.name, shards) if shards else (index.name,)
    counted = sum(int(cluster.get(IndexLayout(PREFIX, tag).size) or 0) for tag in tags)
    return {"counted": counted, "label": label, "index": index, "shards": shards, "insert_wall": len(ids) / wall,
            "insert_cpu": len(ids) / cpu, "bytes": sum(after.values()) - sum(before.values()),
            "per_master": sorted(spread.values(), reverse=True),
            "imbalance": max(held) / min(held) - 1 if len(held) == len(spread) else None, "latency": []}


def interleaved_queries(built: list[dict], Q: np.ndarray) -> list[list]:
    """Each row queried on every layout in turn (the order rotating): latencies in each layout's list; the answers."""
    answers = [[] for _ in built]
    for row in range(Q.shape[0]):
        order = list(range(len(built)))
        order = order[row % len(order):] + order[:row % len(order)]
        for at in order:
            start = time.perf_counter()
            answers[at].append(built[at]["index"].query(Q[row:row + 1], top_k=10).results[0])
            built[at]["latency"].append(time.perf_counter() - start)
    return answers


def stored(index, ids: list[str]) -> set[str]:
    """The ids the index holds (each shard's id map read directly)."""
    owner = shard_of([item_id.encode() for item_id in ids], index.config.shards)
    found = set()
    for at, shard in enumerate(index.steps.shards):
        mine = [ids[row] for row in np.flatnonzero(owner == at)]
        for start in range(0, len(mine), 2000):
            chunk = mine[start:start + 2000]
            numbers, _ = run_sync(index.redis, shard._numbers_steps([item_id.encode() for item_id in chunk]))
            found.update(item_id for item_id, number in zip(chunk, numbers) if number)
    return found


def replica_of(port: int) -> int | None:
    """The port of the master a node replicates (None: a master, or not answering)."""
    try:
        with redis.Redis(host="127.0.0.1", port=port, socket_timeout=2) as connection:
            info = connection.info("replication")
    except redis.RedisError:
        return None
    return int(info["master_port"]) if info.get("role") == "slave" else None


def failover_during_writes(cluster, nodes, feature_map, kill: bool) -> dict:
    """A writer adds batches of 200 while the master of shard 0 fails over; every acknowledged item checked."""
    name = "failover-kill" if kill else "failover-manual"
    index = LSHIndexes(cluster, PREFIX).create(feature_map, name=name, threshold=0.7, shards=3)
    rng = np.random.default_rng(5)
    acked: list[str] = []
    errors: list[str] = []
    stop = threading.Event()

    def writer():
        batch = 0
        while not stop.is_set():
            ids = [f"w{batch}-{i}" for i in range(200)]
            X = rng.random((200, 32)).astype(np.float32) + 0.01
            while True:  # a batch is retried until acknowledged
                try:
                    index.add(ids, X)
                    acked.extend(ids)
                    break
                except Exception as exc:  # noqa: BLE001 (any failure during the failover: retried)
                    errors.append(type(exc).__name__)
                    time.sleep(0.1)
            batch += 1

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    time.sleep(2.0)
    victim_key = IndexLayout(PREFIX, shard_tags(name, 3)[0]).meta
    master = cluster.get_node_from_key(victim_key)
    started = time.perf_counter()
    if kill:
        process = next(node for node in nodes if node.port == master.port)
        process.proc.kill()
    else:
        replica = next(node for node in nodes if replica_of(node.port) == master.port)
        with redis.Redis(host="127.0.0.1", port=replica.port) as connection:
            connection.execute_command("CLUSTER", "FAILOVER")

    def promoted() -> bool:
        try:
            cluster.nodes_manager.initialize()
            return cluster.get_node_from_key(victim_key).port != master.port
        except redis.RedisError:
            return False

    while not promoted() and time.perf_counter() - started < 60:
        time.sleep(0.2)
    took = time.perf_counter() - started
    time.sleep(3.0)
    stop.set()
    thread.join()
    present = stored(index, acked)
    return {"mode": "master killed (SIGKILL)" if kill else "manual CLUSTER FAILOVER", "acked": len(acked),
            "lost": len(acked) - len(present), "failed_attempts": len(errors),
            "error_kinds": sorted(set(errors)), "promotion_s": took}


def report(built, answers, n, queries, failovers) -> str:
    lines = [f"items {n} (gcws d=32 k=128, threshold 0.7, float32 vectors; log-normal rows, a fifth near copies), "
             f"{queries} single-row queries top_k=10 (half near copies of items, half new rows)",
             "bytes/item: the masters' used_memory grown; counted: what the index's size keys count",
             "cluster: 3 masters + 3 replicas on loopback, one host (2 cores)", "",
             f"{'layout':<10} {'insert/s wall':>13} {'insert/s cpu':>13} {'q p50 ms':>9} {'q p99 ms':>9} "
             f"{'bytes/item':>10} {'counted':>8} {'items per master':>24} {'spread':>7} {'same answers':>12}"]
    for at, row in enumerate(built):
        latency = np.array(row["latency"]) * 1e3
        spread = "-" if row["imbalance"] is None else f"{100 * row['imbalance']:.1f}%"
        lines.append(f"{row['label']:<10} {row['insert_wall']:>13,.0f} {row['insert_cpu']:>13,.0f} "
                     f"{np.percentile(latency, 50):>9.2f} {np.percentile(latency, 99):>9.2f} "
                     f"{row['bytes'] / n:>10.0f} {row['counted'] / n:>8.0f} {str(row['per_master']):>24} {spread:>7} "
                     f"{str(answers[at] == answers[0]):>12}")
    lines += ["", f"capacity (items; {MASTER_BYTES / 1e9:.0f} GB masters, {USABLE:.0%} of it for data):"]
    for row in built:
        per_item = row["bytes"] / n
        for count in (3, 30):
            usable = count if row["shards"] and row["shards"] >= count else (min(count, row["shards"] or 1))
            lines.append(f"  {row['label']:<10} {count:>2} masters: {usable * MASTER_BYTES * USABLE / per_item:>15,.0f}"
                         f"  ({usable} master(s) hold it)")
    sharded = [row for row in built if row["shards"] and row["shards"] > 1]
    if sharded:
        per_item = max(row["bytes"] for row in sharded) / n
        lines.append(f"  sharded with S a multiple of the masters (at {per_item:.0f} bytes/item, the larger sharded "
                     f"figure): 3 masters {3 * MASTER_BYTES * USABLE / per_item:,.0f}, 30 masters "
                     f"{30 * MASTER_BYTES * USABLE / per_item:,.0f}")
    lines += ["", "failover during writes (shard 0's master; writer retries a batch until acknowledged):"]
    for result in failovers:
        lines.append(f"  {result['mode']}: {result['acked']} items acknowledged, {result['lost']} lost, "
                     f"{result['failed_attempts']} failed attempts ({', '.join(result['error_kinds']) or '-'}), "
                     f"new master after {result['promotion_s']:.1f} s")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    ids, X = corpus(args.items)
    feature_map = create_map(GCWS)
    rng = np.random.default_rng(9)
    Q = X[rng.integers(0, len(X), args.queries)] * (1 + 0.03 * rng.random((args.queries, 32))).astype(np.float32)
    Q[::2] = rng.lognormal(0.0, 2.0, (len(Q[::2]), 32)).astype(np.float32) + 0.01  # half the queries new rows
    with tempfile.TemporaryDirectory() as directory:
        nodes = start_cluster(Path(directory), primaries=3, replicas=1)
        try:
            cluster = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port)
            built = [build(cluster, feature_map, ids, X, label, shards) for label, shards in LAYOUTS]
            for row in built:
                row["index"].query(Q[:5], top_k=10)  # warm: scripts loaded, kernels compiled
            answers = interleaved_queries(built, Q)
            for row in built:
                LSHIndexes(cluster, PREFIX).delete(row["index"].name)
            failovers = [failover_during_writes(cluster, nodes, feature_map, kill) for kill in (False, True)]
            text = report(built, answers, args.items, args.queries, failovers)
            cluster.close()
        finally:
            stop_cluster(nodes)
    print(text)
    if args.write:
        Path(__file__).with_name("results").joinpath("sharded_cluster.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
