"""LSH index in Redis: recall@10 against the exact GMM top-10, candidates, latency, throughput, memory.

    python bench/bench_lsh.py [--queries 200] [--datasets planted,digits,digits-shifted] [--no-datasketch]

Starts its own `featurehash serve` (embedded Redis, temporary data directory; REDIS_URL is
removed from its environment), then for each data set of >= 20,000 vectors:

- planted: bag-of-words documents (sklearn's make_multilabel_classification: 500 words,
  ~60 a document), 2,000 families of 10: a document and 9 near duplicates (each word kept
  with probability 0.95, plus 3 random words); queries are fresh duplicates of documents;
- digits: sklearn's load_digits (1,797 8x8 images, the only real data set shipped in a
  package here) and 11 noisy copies of each (Gaussian pixel noise, sd 1 on the 0..16 scale,
  clipped) = 21,564 rows; queries are fresh noisy copies of random digits;
- digits-shifted: the same with each copy also shifted by up to one pixel in x and y
  (queries too): the neighbours of a query are only moderately similar (10th GMM ~0.6).

The exact top-10 of every query is found by brute force over all vectors with the GMM
kernel (blocked, through the identity sum min = (|u| + |v| - |u - v|_1) / 2, checked against
featurehash.kernels.gmm on a slice); ties at the 10th value count as found. Then, per data set:
- HTTP: create the map and the index (bands chosen from its threshold), add all vectors
  as .npy batches of 1,000 (insert throughput, Redis bytes per item from INFO used_memory),
  then query one vector per request, sequentially (p50/p99 latency, recall@10, candidates
  re-ranked per query as a fraction of the index), and all queries in one request;
- library: the same through featurehash.store.LSHIndexes (sync) on the server's Redis socket (a
  second index): insert throughput, per-query latency, and its answers, which must equal
  the HTTP ones;
- brute force: exact GMM search per query in numpy (the L1 identity above) and with
  featurehash.kernels.gmm, for the speed-up;
- datasketch (if installed): MinHashLSH with its Redis storage over the same codes and
  bands (candidates only, no re-ranking): insert throughput, query latency, bytes per item.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import redis
from scipy.spatial.distance import cdist
from sklearn.datasets import load_digits, make_multilabel_classification

from featurehash.client import FeatureHashClient
from featurehash.kernels import gmm
from featurehash.maps import create_map
from featurehash.store import LSHIndexes
from bench_service import SERVER_ENV_DROP, _raise_sigterm, featurehash_command, free_port, stop_server, wait_ready

# (map spec without input_dim, index options) per data set; the index chooses (bands, rows) for the
# threshold (recall_at_threshold 0.9, the default). Why these:
# - planted: a query's top-10 is its family, exact GMM >= 0.72 for 95% of queries, outsiders <= ~0.2.
#   threshold 0.6 at k = 128 gives 17 bands of 4: P(candidate) 0.995 at 0.72, 0.03 at 0.2.
# - digits: the 10th neighbour has GMM 0.82-0.85, but other images of the same digit reach 0.7-0.8.
#   threshold 0.8 at k = 512 gives 33 bands of 12: P = 0.99 at 0.85, 0.37 at 0.7, 0.07 at 0.6.
#   Ranking then limits recall: the top-10 is 10 of ~12 noisy copies within ~0.02 GMM of each
#   other, and the estimate from 512 codes has sd 0.016.
# - digits-shifted: the 10th neighbour has GMM ~0.6, and a large share of the index lies near
#   0.5; 0.67 is the lowest threshold (at k = 512: 56 bands of 8) that keeps candidates under 5%.
SETTINGS = {
    "planted": ({"method": "gcws", "n_components": 128, "seed": 1}, {"threshold": 0.6}),
    "digits": ({"method": "gcws", "n_components": 512, "seed": 1}, {"threshold": 0.8}),
    "digits-shifted": ({"method": "gcws", "n_components": 512, "seed": 1}, {"threshold": 0.67}),
}
INSERT_BATCH = 1000


# -- data -----------------------------------------------------------------------------------

def planted_documents(n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base, _ = make_multilabel_classification(n_samples=2000, n_features=500, n_classes=50, n_labels=3, length=60,
                                             allow_unlabeled=False, random_state=seed)
    base = base.astype(np.float64)

    def duplicate(B):
        copy = rng.binomial(B.astype(np.int64), 0.95).astype(np.float64)
        np.add.at(copy, (np.repeat(np.arange(len(B)), 3), rng.integers(0, B.shape[1], 3 * len(B))), 1.0)
        return copy

    X = np.vstack([base] + [duplicate(base) for _ in range(9)])
    return X, duplicate(base[rng.choice(len(base), n_queries, replace=False)])


def augmented_digits(n_queries: int, shifted: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    digits = load_digits().data

    def copy(images):
        images = images.reshape(-1, 8, 8)
        if shifted:
            dx, dy = rng.integers(-1, 2, size=2)
            images = np.roll(np.roll(images, dx, axis=2), dy, axis=1)
        noisy = np.clip(images + rng.normal(0.0, 1.0, images.shape), 0.0, 16.0).reshape(-1, 64)
        noisy[noisy.sum(axis=1) == 0, 0] = 1.0  # GCWS needs a nonzero entry
        return noisy

    X = np.vstack([digits] + [copy(digits) for _ in range(11)])
    return X, copy(digits[rng.choice(len(digits), n_queries, replace=False)])


DATA = {"planted": lambda n: planted_documents(n),
        "digits": lambda n: augmented_digits(n, shifted=False),
        "digits-shifted": lambda n: augmented_digits(n, shifted=True)}


# -- exact GMM ----------------------------------------------------------------------------------

def _split(X: np.ndarray) -> np.ndarray:
    return np.hstack([np.maximum(X, 0.0), np.maximum(-X, 0.0)])


def exact_gmm(Q: np.ndarray, X: np.ndarray, X_split: np.ndarray | None = None) -> np.ndarray:
    """GMM of every (query, row): sum min / sum max = (S - L1) / (S + L1), S = |u~|_1 + |v~|_1."""
    Qs = _split(Q)
    Xs = _split(X) if X_split is None else X_split
    l1 = cdist(Qs, Xs, "cityblock")
    total = Qs.sum(axis=1)[:, None] + Xs.sum(axis=1)[None, :]
    return (total - l1) / (total + l1)


def exact_top10(Q: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(GMM of every query to every row, the 10th largest per query)."""
    Xs = _split(X)
    G = np.vstack([exact_gmm(Q[start:start + 50], X, Xs) for start in range(0, len(Q), 50)])
    np.testing.assert_allclose(G[:3, :2000], gmm(Q[:3], X[:2000]), rtol=1e-12, atol=1e-12)
    return G, np.sort(G, axis=1)[:, -10]


def recall_at_10(found: list[list[str]], G: np.ndarray, tenth: np.ndarray) -> float:
    """Fraction of the 10 returned per query whose exact GMM reaches the exact 10th value (the
    exact top-10, an item tied with the 10th counting as one of them)."""
    hits = [sum(G[q, int(item_id)] >= tenth[q] - 1e-12 for item_id in ids[:10]) for q, ids in enumerate(found)]
    return float(np.mean(hits)) / 10


def candidate_recall(candidates: list[list[str]], G: np.ndarray, tenth: np.ndarray) -> float:
    """Fraction of the exact top-10 among the candidates (what the buckets found, before ranking)."""
    hits = [min(10, sum(G[q, int(item_id)] >= tenth[q] - 1e-12 for item_id in ids)) for q, ids in enumerate(candidates)]
    return float(np.mean(hits)) / 10


# -- server and measurements ------------------------------------------------------------------------

@contextlib.contextmanager
def running_server():
    """Yield (base URL, embedded Redis socket path) of a fresh `featurehash serve`; SIGTERM it after."""
    with tempfile.TemporaryDirectory(prefix="featurehash-bench-lsh-") as tmp:
        port, data_dir = free_port(), Path(tmp) / "data"
        env = {key: value for key, value in os.environ.items() if key not in SERVER_ENV_DROP}
        command = featurehash_command() + ["serve", "--host", "127.0.0.1", "--port", str(port),
                                           "--data-dir", str(data_dir)]
        with open(Path(tmp) / "server.log", "wb") as log:
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_ready(f"http://127.0.0.1:{port}", process)
            yield f"http://127.0.0.1:{port}", str(data_dir / "redis.sock")
        finally:
            print(stop_server(process))


def used_memory(store: redis.Redis) -> int:
    return int(store.info("memory")["used_memory"])


def percentiles_ms(seconds: list[float]) -> tuple[float, float]:
    return float(np.percentile(seconds, 50) * 1e3), float(np.percentile(seconds, 99) * 1e3)


def memory_breakdown(store: redis.Redis, prefix: bytes, n_items: int) -> dict:
    """Bytes per item by key kind: MEMORY USAGE of 200 records, and of up to 2000 bucket keys
    times the number of bucket keys (SCAN of the index's keys)."""
    records, buckets = [], []
    for key in store.scan_iter(match=prefix + b"*", count=5000):
        kind = key[len(prefix):len(prefix) + 1]
        (records if kind == b"i" else buckets if kind == b"b" else []).append(key)
    record_bytes = np.mean([store.memory_usage(key, samples=0) for key in records[:200]])
    bucket_bytes = np.mean([store.memory_usage(key, samples=0) for key in buckets[:2000]])
    return {"record": float(record_bytes), "buckets": len(buckets) * float(bucket_bytes) / n_items,
            "bucket_keys_per_item": len(buckets) / n_items}


def brute_force_seconds(Q: np.ndarray, X: np.ndarray, repeat: int) -> tuple[float, float]:
    """Median seconds of one exact top-10 search: numpy (L1 identity), and featurehash.kernels.gmm."""
    Xs = _split(X)
    fast, library = [], []
    for q in range(repeat):
        start = time.perf_counter()
        np.argpartition(-exact_gmm(Q[q:q + 1], X, Xs)[0], 10)[:10]
        fast.append(time.perf_counter() - start)
    for q in range(max(1, repeat // 10)):
        start = time.perf_counter()
        np.argpartition(-gmm(Q[q:q + 1], X)[0], 10)[:10]
        library.append(time.perf_counter() - start)
    return float(np.median(fast)), float(np.median(library))


def bench_http(client: FeatureHashClient, store: redis.Redis, spec: dict, options: dict, name: str,
               X, Q, G, tenth) -> dict:
    index = client.create_index(spec["id"], name=name, **options)
    ids = [str(i) for i in range(len(X))]
    before = used_memory(store)
    start = time.perf_counter()
    client.add_items(name, ids, X, binary=True, batch_rows=INSERT_BATCH)
    insert_seconds = time.perf_counter() - start
    memory = (used_memory(store) - before) / len(X)
    breakdown = memory_breakdown(store, index["key_prefix"].encode(), len(X))
    for q in range(min(20, len(Q))):  # warm-up: connection, map cache, numba
        client.query_index(name, Q[q:q + 1], top_k=10)
    latencies, found, candidates = [], [], []
    for q in range(len(Q)):
        start = time.perf_counter()
        answer = client.query_index(name, Q[q:q + 1], top_k=10)
        latencies.append(time.perf_counter() - start)
        found.append([hit["id"] for hit in answer["results"][0]])
        candidates.append(answer["candidates"][0])
    start = time.perf_counter()
    batch = client.query_index(name, Q, top_k=10, binary=True)
    batch_seconds = time.perf_counter() - start
    wide = client.query_index(name, Q, top_k=1000)  # every candidate, ranked: did the buckets find the top-10?
    found_by_buckets = candidate_recall([[hit["id"] for hit in row] for row in wide["results"]], G, tenth)
    return {"index": index, "insert_per_s": len(X) / insert_seconds, "bytes_per_item": memory, "memory": breakdown,
            "latency_ms": percentiles_ms(latencies), "recall": recall_at_10(found, G, tenth),
            "candidate_recall": found_by_buckets, "candidates": float(np.mean(candidates)) / len(X),
            "batch_query_per_s": len(Q) / batch_seconds, "found": found,
            "batch_same": [[hit["id"] for hit in row] for row in batch["results"]] == found}


def bench_library(store: redis.Redis, spec: dict, options: dict, name: str, X, Q) -> dict:
    indexes = LSHIndexes(store, "featurehash:")
    index = indexes.create(create_map(spec), name=name, **options)
    ids = [str(i) for i in range(len(X))]
    start = time.perf_counter()
    for batch in range(0, len(X), 5000):
        index.add(ids[batch:batch + 5000], X[batch:batch + 5000])
    insert_seconds = time.perf_counter() - start
    for q in range(min(20, len(Q))):
        index.query(Q[q:q + 1])
    latencies, found = [], []
    for q in range(len(Q)):
        start = time.perf_counter()
        result = index.query(Q[q:q + 1], top_k=10)
        latencies.append(time.perf_counter() - start)
        found.append([item_id for item_id, _ in result.results[0]])
    indexes.delete(name)
    return {"insert_per_s": len(X) / insert_seconds, "latency_ms": percentiles_ms(latencies), "found": found}


def bench_datasketch(socket_path: str, store: redis.Redis, spec: dict, bands: int, rows: int, X, Q) -> dict | None:
    """datasketch's MinHashLSH with Redis storage over the same codes and bands (candidates only)."""
    try:
        from datasketch import LeanMinHash, MinHashLSH
    except ImportError:
        return None
    m = create_map(spec)
    codes, query_codes = m.hash(X).astype(np.uint64), m.hash(Q).astype(np.uint64)
    basename = b"datasketch-bench"
    lsh = MinHashLSH(num_perm=codes.shape[1], params=(bands, rows), storage_config={
        "type": "redis", "basename": basename, "redis": {"unix_socket_path": socket_path}})
    before = used_memory(store)
    start = time.perf_counter()
    with lsh.insertion_session(buffer_size=INSERT_BATCH) as session:
        for i, row in enumerate(codes):
            session.insert(str(i), LeanMinHash(seed=1, hashvalues=row, scheme="legacy"))
    insert_seconds = time.perf_counter() - start
    memory = (used_memory(store) - before) / len(X)
    latencies = []
    for row in query_codes:
        start = time.perf_counter()
        lsh.query(LeanMinHash(seed=1, hashvalues=row, scheme="legacy"))
        latencies.append(time.perf_counter() - start)
    keys = list(store.scan_iter(match=basename + b"*", count=5000))
    for batch in range(0, len(keys), 5000):
        store.unlink(*keys[batch:batch + 5000])
    return {"insert_per_s": len(X) / insert_seconds, "latency_ms": percentiles_ms(latencies), "bytes_per_item": memory}


# -- the run ------------------------------------------------------------------------------------------

def run(args) -> bool:
    rows, agree = [], True
    with running_server() as (base_url, socket_path), FeatureHashClient(base_url, timeout=600) as client:
        store = redis.Redis(unix_socket_path=socket_path)
        print(f"server {base_url}, embedded Redis {store.info('server')['redis_version']} "
              f"({store.info('memory')['mem_allocator']})")
        for name in args.datasets:
            started = time.perf_counter()
            X, Q = DATA[name](args.queries)
            G, tenth = exact_top10(Q, X)
            map_request, options = SETTINGS[name]
            spec = client.create_map(map_request["method"], X.shape[1], map_request["n_components"],
                                     seed=map_request["seed"])
            print(f"\n{name}: {X.shape[0]} x {X.shape[1]}, {len(Q)} queries; exact 10th-neighbour GMM: median "
                  f"{np.median(tenth):.3f}, 5th percentile {np.percentile(tenth, 5):.3f}")
            http = bench_http(client, store, spec, options, f"bench-{name}", X, Q, G, tenth)
            index = http["index"]
            print(f"  index: k={index['n_codes']}, threshold {index['threshold']} -> bands L={index['bands']} of "
                  f"r={index['rows']} codes; P(candidate) at the threshold "
                  f"{index['collision_probability_at_threshold']:.3f}, half point {index['half_point']:.3f}")
            library = bench_library(store, spec, options, f"bench-{name}-library", X, Q)
            agree &= library["found"] == http["found"] and http["batch_same"]
            brute_fast, brute_library = brute_force_seconds(Q, X, args.brute_force_queries)
            sketch = None if args.no_datasketch else bench_datasketch(socket_path, store, spec, index["bands"],
                                                                       index["rows"], X, Q)
            client.delete_index(f"bench-{name}")
            m = http["memory"]
            print(f"  memory per item: {http['bytes_per_item']:.0f} B (INFO used_memory); record "
                  f"{m['record']:.0f} B + {m['bucket_keys_per_item']:.1f} bucket keys x "
                  f"{m['buckets'] / max(m['bucket_keys_per_item'], 1e-9):.0f} B")
            print(f"  exact top-10 among the candidates: {http['candidate_recall']:.3f} (before re-ranking)")
            if sketch:
                print(f"  datasketch MinHashLSH (Redis storage, same codes and bands, candidates only): insert "
                      f"{sketch['insert_per_s']:.0f}/s, query p50/p99 {sketch['latency_ms'][0]:.2f}/"
                      f"{sketch['latency_ms'][1]:.2f} ms, {sketch['bytes_per_item']:.0f} B/item")
            print(f"  ({time.perf_counter() - started:.0f} s)")
            rows.append((name, http, library, brute_fast, brute_library))
        store.close()

    print("\nrecall@10 vs exact GMM top-10; candidates = items re-ranked per query / index size; latency of one "
          "query vector per request (HTTP: JSON over keep-alive; library: sync LSHIndex over the unix socket)")
    header = (f"{'data set':15s} {'recall@10':>9s} {'cand %':>7s} {'HTTP p50':>9s} {'p99 ms':>7s} {'lib p50':>8s} "
              f"{'p99 ms':>7s} {'brute ms':>9s} {'gmm() ms':>9s} {'speed-up':>8s} {'insert/s HTTP':>13s} "
              f"{'lib':>7s} {'B/item':>7s} {'batch q/s':>9s}")
    print(header)
    for name, http, library, brute_fast, brute_library in rows:
        print(f"{name:15s} {http['recall']:9.3f} {100 * http['candidates']:7.2f} {http['latency_ms'][0]:9.2f} "
              f"{http['latency_ms'][1]:7.2f} {library['latency_ms'][0]:8.2f} {library['latency_ms'][1]:7.2f} "
              f"{brute_fast * 1e3:9.1f} {brute_library * 1e3:9.1f} {brute_fast * 1e3 / http['latency_ms'][0]:7.1f}x "
              f"{http['insert_per_s']:13.0f} {library['insert_per_s']:7.0f} {http['bytes_per_item']:7.0f} "
              f"{http['batch_query_per_s']:9.0f}")
    print("speed-up = numpy brute force (brute ms) / HTTP p50; gmm() ms = the same search with featurehash.kernels.gmm")
    print(f"library answers equal the HTTP answers (and the batch query's): {agree}")
    return agree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200, help="query vectors per data set")
    parser.add_argument("--datasets", default=",".join(DATA), help=f"comma-separated, from {', '.join(DATA)}")
    parser.add_argument("--brute-force-queries", type=int, default=20, help="timed exact searches (numpy)")
    parser.add_argument("--no-datasketch", action="store_true", help="skip the datasketch comparison")
    args = parser.parse_args()
    args.datasets = [name.strip() for name in args.datasets.split(",") if name.strip()]
    unknown = set(args.datasets) - set(DATA)
    if unknown:
        parser.error(f"unknown data sets: {', '.join(sorted(unknown))}")
    signal.signal(signal.SIGTERM, _raise_sigterm)  # unwinds through the finally that stops the server
    start = time.perf_counter()
    ok = run(args)
    print(f"total {time.perf_counter() - start:.0f} s")
    if not ok:
        raise SystemExit("library and HTTP answers differ")


if __name__ == "__main__":
    main()
