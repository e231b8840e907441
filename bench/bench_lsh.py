"""LSH index in Redis: recall@10 against the exact GMM top-10, candidates, latency, throughput, memory.

    python bench/bench_lsh.py [--queries 200] [--datasets planted,digits,digits-shifted,bow] [--no-datasketch]
                              [--no-library] [--write]

Starts its own `featurehash serve` (embedded Redis, temporary data directory; REDIS_URL is
removed from its environment), then for each data set of >= 20,000 vectors:

- planted: bag-of-words documents (sklearn's make_multilabel_classification: 500 words,
  ~60 a document), 2,000 families of 10: a document and 9 near duplicates (each word kept
  with probability 0.95, plus 3 random words); queries are fresh duplicates of documents;
- digits: sklearn's load_digits (1,797 8x8 images, the only real data set shipped in a
  package here) and 11 noisy copies of each (Gaussian pixel noise, sd 1 on the 0..16 scale,
  clipped) = 21,564 rows; queries are fresh noisy copies of random digits;
- digits-shifted: the same with each copy also shifted by up to one pixel in x and y
  (queries too): the neighbours of a query are only moderately similar (10th GMM ~0.6);
- bow: a sparse bag-of-words set made here (no download): 20,000 documents over a 5,000-word
  vocabulary, each from one of 200 topics (60% of its 60-140 words drawn from the topic's 30
  core words, the rest from a Zipf background), ~54 distinct words a document; queries are
  new documents: the 10th neighbour's GMM is ~0.36 against a background of ~0.07-0.1.

The exact top-10 of every query is found by brute force over all vectors with the GMM
kernel (blocked, through the identity sum min = (|u| + |v| - |u - v|_1) / 2, checked against
featurehash.maps.kernels.gmm on a slice); ties at the 10th value count as found. Then, per data set:
- HTTP, codes only: create the map and the index (bands chosen from its threshold), add all
  vectors as .npy batches of 1,000 (insert throughput, Redis bytes per item from INFO
  used_memory), then query one vector per request, sequentially (p50/p99 latency, recall@10,
  candidates re-ranked per query as a fraction of the index), and all queries in one request;
- HTTP, exact: the same banding, the items' vectors stored (sparse or float16) and a forest of
  shorter band prefixes; queries plain (recall@10 against the S-curve's prediction, the mean
  over each query's exact top-10 of 1 - (1 - s^r)^L), then with target_recall 0.9 (recall,
  candidates, estimated recall, p50/p99); memory per item split into records, band buckets
  and forest buckets, and the bytes a vector takes in each encoding;
- library: the same through featurehash.store.LSHIndexes (sync) on the server's Redis socket (a
  second index): insert throughput, per-query latency, and its answers, which must equal
  the HTTP ones;
- brute force: exact GMM search per query in numpy (the L1 identity above) and with
  featurehash.maps.kernels.gmm, for the speed-up;
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
import scipy.sparse as sp
from scipy.spatial.distance import cdist
from sklearn.datasets import load_digits, make_multilabel_classification

from featurehash.client import FeatureHashClient
from featurehash.maps.kernels import gmm
from featurehash.maps import create_map
from featurehash.lsh.banding import collision_probability
from featurehash.lsh.similarity import GMM
from featurehash.store import LSHIndexes
from featurehash.store.lsh_vectors import VectorCodec
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
# - bow: 10th neighbour ~0.30-0.41, background ~0.07-0.1: threshold 0.3 at k = 256.
SETTINGS = {
    "planted": ({"method": "gcws", "n_components": 128, "seed": 1}, {"threshold": 0.6}),
    "digits": ({"method": "gcws", "n_components": 512, "seed": 1}, {"threshold": 0.8}),
    "digits-shifted": ({"method": "gcws", "n_components": 512, "seed": 1}, {"threshold": 0.67}),
    "bow": ({"method": "gcws", "n_components": 256, "seed": 1}, {"threshold": 0.3}),
}
# The exact index per data set: how vectors are kept, and the forest a target recall widens to
# (prefix lengths below the planned rows, reaching P >= 0.9 at the low tail of the 10th similarity).
EXACT = {
    "planted": {"vectors": "sparse", "forest_rows": [3, 2]},
    "digits": {"vectors": "float16", "forest_rows": [10, 8, 6]},
    "digits-shifted": {"vectors": "float16", "forest_rows": [6, 5, 4]},
    "bow": {"vectors": "sparse", "forest_rows": [2]},
}
TARGET_RECALL = 0.9
INSERT_BATCH = 1000
RESULTS = Path(__file__).parent / "results" / "lsh.txt"


# -- data -----------------------------------------------------------------------------------

def planted_documents(n_queries: int, seed: int = 0, n_items: int = 20_000) -> tuple[np.ndarray, np.ndarray]:
    """n_items / 10 bag-of-words documents (500 words, ~60 a document) and 9 near duplicates of each (each word
    kept with probability 0.95, plus 3 random words); queries are further near duplicates."""
    rng = np.random.default_rng(seed)
    base, _ = make_multilabel_classification(n_samples=n_items // 10, n_features=500, n_classes=50, n_labels=3, length=60,
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


def bag_of_words(n_queries: int, seed: int = 0, n_docs: int = 20_000, vocabulary: int = 5000,
                 topics: int = 200) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    background = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    background /= background.sum()
    cores = rng.random((topics, vocabulary)).argsort(axis=1)[:, :30]

    def documents(n: int) -> sp.csr_matrix:
        lengths = rng.integers(60, 140, n)
        owners = np.repeat(np.arange(n), lengths)
        topical = rng.random(owners.size) < 0.6
        words = np.where(topical, cores[rng.integers(0, topics, n)[owners], rng.integers(0, 30, owners.size)],
                         rng.choice(vocabulary, owners.size, p=background))
        counts = sp.csr_matrix((np.ones(owners.size), (owners, words)), shape=(n, vocabulary))
        counts.sum_duplicates()
        return counts

    return documents(n_docs), documents(n_queries)


DATA = {"planted": lambda n: planted_documents(n),
        "digits": lambda n: augmented_digits(n, shifted=False),
        "digits-shifted": lambda n: augmented_digits(n, shifted=True),
        "bow": lambda n: bag_of_words(n)}


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


def exact_top10(Q, X) -> tuple[np.ndarray, np.ndarray]:
    """(GMM of every query to every row, the 10th largest per query). Sparse sets go through
    featurehash.lsh.similarity's GMM query (O(nnz) a row), dense ones through the L1 identity."""
    if sp.issparse(X):
        G = np.vstack([GMM(1.0).query(Q[q].toarray().ravel(), X) for q in range(Q.shape[0])])
        np.testing.assert_allclose(G[:3, :500], gmm(Q[:3].toarray(), X[:500].toarray()), rtol=1e-12, atol=1e-12)
    else:
        Xs = _split(X)
        G = np.vstack([exact_gmm(Q[start:start + 50], X, Xs) for start in range(0, len(Q), 50)])
        np.testing.assert_allclose(G[:3, :2000], gmm(Q[:3], X[:2000]), rtol=1e-12, atol=1e-12)
    return G, np.sort(G, axis=1)[:, -10]


def s_curve_prediction(G: np.ndarray, tenth: np.ndarray, bands: int, rows: int) -> float:
    """Mean over queries of the mean candidate probability 1 - (1 - s^r)^L of the exact top-10
    (ties at the 10th included): the recall@10 that exact re-ranking should give."""
    return float(np.mean([collision_probability(G[q][G[q] >= tenth[q] - 1e-12], bands, rows).mean()
                          for q in range(len(G))]))


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
    """Bytes per item by key kind: MEMORY USAGE of 200 records, and of up to 2000 keys of each bucket
    kind (b: band buckets, p: forest prefix buckets) times the number of such keys (SCAN)."""
    keys: dict[bytes, list[bytes]] = {b"i": [], b"b": [], b"p": []}
    for key in store.scan_iter(match=prefix.replace(b"{", b"\\{").replace(b"}", b"\\}") + b"*", count=5000):
        keys.get(key[len(prefix):len(prefix) + 1], []).append(key)

    def per_item(kind: bytes, sample: int) -> float:
        found = keys[kind]
        return len(found) * float(np.mean([store.memory_usage(key, samples=0) for key in found[:sample]])) / n_items \
            if found else 0.0

    return {"record": per_item(b"i", 200) * n_items / max(1, len(keys[b"i"])), "buckets": per_item(b"b", 2000),
            "forest": per_item(b"p", 2000), "bucket_keys_per_item": len(keys[b"b"]) / n_items}


def brute_force_seconds(Q, X, repeat: int) -> tuple[float, float]:
    """Median seconds of one exact top-10 search: numpy (L1 identity; for sparse sets
    GMM.query), and featurehash.maps.kernels.gmm (dense sets only: nan for sparse)."""
    fast, library = [], []
    if sp.issparse(X):
        for q in range(repeat):
            start = time.perf_counter()
            np.argpartition(-GMM(1.0).query(Q[q].toarray().ravel(), X), 10)[:10]
            fast.append(time.perf_counter() - start)
        return float(np.median(fast)), float("nan")
    Xs = _split(X)
    for q in range(repeat):
        start = time.perf_counter()
        np.argpartition(-exact_gmm(Q[q:q + 1], X, Xs)[0], 10)[:10]
        fast.append(time.perf_counter() - start)
    for q in range(max(1, repeat // 10)):
        start = time.perf_counter()
        np.argpartition(-gmm(Q[q:q + 1], X)[0], 10)[:10]
        library.append(time.perf_counter() - start)
    return float(np.median(fast)), float(np.median(library))


def timed_queries(query, Q, rows: int) -> tuple[list[float], list[dict]]:
    """Seconds and answers of one query vector per request, after a 20-query warm-up."""
    for q in range(min(20, rows)):  # warm-up: connection, map cache, numba
        query(Q[q:q + 1])
    latencies, answers = [], []
    for q in range(rows):
        start = time.perf_counter()
        answers.append(query(Q[q:q + 1]))
        latencies.append(time.perf_counter() - start)
    return latencies, answers


def bench_http(client: FeatureHashClient, store: redis.Redis, spec: dict, options: dict, name: str,
               X, Q, G, tenth) -> dict:
    """Codes-only index (options without vectors) or exact one (with vectors and forest_rows: also
    queried with TARGET_RECALL)."""
    index = client.create_index(spec["id"], name=name, **options)
    n = X.shape[0]
    ids = [str(i) for i in range(n)]
    before = used_memory(store)
    start = time.perf_counter()
    client.add_items(name, ids, X, binary=True, batch_rows=INSERT_BATCH)
    insert_seconds = time.perf_counter() - start
    memory = (used_memory(store) - before) / n
    breakdown = memory_breakdown(store, index["key_prefix"].encode(), n)
    latencies, answers = timed_queries(lambda row: client.query_index(name, row, top_k=10), Q, Q.shape[0])
    found = [[hit["id"] for hit in answer["results"][0]] for answer in answers]
    start = time.perf_counter()
    batch = client.query_index(name, Q, top_k=10, binary=not sp.issparse(Q))
    batch_seconds = time.perf_counter() - start
    wide = client.query_index(name, Q, top_k=1000)  # every candidate, ranked: did the buckets find the top-10?
    result = {"index": index, "insert_per_s": n / insert_seconds, "bytes_per_item": memory, "memory": breakdown,
              "latency_ms": percentiles_ms(latencies), "recall": recall_at_10(found, G, tenth),
              "candidate_recall": candidate_recall([[hit["id"] for hit in row] for row in wide["results"]], G, tenth),
              "candidates": float(np.mean([a["candidates"][0] for a in answers])) / n,
              "batch_query_per_s": Q.shape[0] / batch_seconds, "found": found,
              "batch_same": [[hit["id"] for hit in row] for row in batch["results"]] == found,
              "predicted": s_curve_prediction(G, tenth, index["bands"], index["rows"])}
    if index["forest_rows"]:
        latencies, answers = timed_queries(
            lambda row: client.query_index(name, row, target_recall=TARGET_RECALL, top_k=10, binary=False), Q, Q.shape[0])
        result["target"] = {
            "latency_ms": percentiles_ms(latencies),
            "recall": recall_at_10([[hit["id"] for hit in a["results"][0]] for a in answers], G, tenth),
            "candidates": float(np.mean([a["candidates"][0] for a in answers])) / n,
            "estimated_recall": float(np.mean([a["estimated_recall"][0] for a in answers])),
            "rows_probed": np.bincount([a["rows_probed"][0] for a in answers], minlength=index["rows"] + 1)}
    return result


def bench_library(store: redis.Redis, spec: dict, options: dict, name: str, X, Q) -> dict:
    indexes = LSHIndexes(store, "featurehash:")
    index = indexes.create(create_map(spec), name=name, **options)
    ids = [str(i) for i in range(X.shape[0])]
    start = time.perf_counter()
    for batch in range(0, X.shape[0], 5000):
        index.add(ids[batch:batch + 5000], X[batch:batch + 5000])
    insert_seconds = time.perf_counter() - start
    latency_ms, found = timed_queries(index, Q)
    indexes.delete(name)
    return {"insert_per_s": X.shape[0] / insert_seconds, "latency_ms": latency_ms, "found": found}


def timed_queries(index, Q) -> tuple[tuple[float, float], list[list[str]]]:
    """p50/p99 ms of one-row top-10 queries (after 20 warm-up queries), and each query's result ids."""
    for q in range(min(20, Q.shape[0])):
        index.query(Q[q:q + 1])
    latencies, found = [], []
    for q in range(Q.shape[0]):
        start = time.perf_counter()
        result = index.query(Q[q:q + 1], top_k=10)
        latencies.append(time.perf_counter() - start)
        found.append([item_id for item_id, _ in result.results[0]])
    return percentiles_ms(latencies), found


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
    memory = (used_memory(store) - before) / X.shape[0]
    latencies = []
    for row in query_codes:
        start = time.perf_counter()
        lsh.query(LeanMinHash(seed=1, hashvalues=row, scheme="legacy"))
        latencies.append(time.perf_counter() - start)
    keys = list(store.scan_iter(match=basename + b"*", count=5000))
    for batch in range(0, len(keys), 5000):
        store.unlink(*keys[batch:batch + 5000])
    return {"insert_per_s": X.shape[0] / insert_seconds, "latency_ms": percentiles_ms(latencies), "bytes_per_item": memory}


# -- the run ------------------------------------------------------------------------------------------

def vector_bytes(X) -> str:
    """Bytes a stored vector takes in each encoding (mean over the data set's first 1,000 rows)."""
    sample = X[:1000]
    return ", ".join(f"{kind} {np.mean([len(blob) for blob in VectorCodec(kind, X.shape[1]).pack(sample)]):.0f}"
                     for kind in ("sparse", "float32", "float16"))


def run(args, say) -> bool:
    rows, agree = [], True
    with running_server() as (base_url, socket_path), FeatureHashClient(base_url, timeout=600) as client:
        store = redis.Redis(unix_socket_path=socket_path)
        say(f"server {base_url}, embedded Redis {store.info('server')['redis_version']} "
            f"({store.info('memory')['mem_allocator']})")
        for name in args.datasets:
            started = time.perf_counter()
            X, Q = DATA[name](args.queries)
            G, tenth = exact_top10(Q, X)
            map_request, options = SETTINGS[name]
            spec = client.create_map(map_request["method"], X.shape[1], map_request["n_components"],
                                     seed=map_request["seed"])
            say(f"\n{name}: {X.shape[0]} x {X.shape[1]}{' sparse' if sp.issparse(X) else ''}, {Q.shape[0]} queries; "
                f"exact 10th-neighbour GMM: median {np.median(tenth):.3f}, 5th percentile {np.percentile(tenth, 5):.3f}")
            http = bench_http(client, store, spec, options, f"bench-{name}", X, Q, G, tenth)
            index = http["index"]
            say(f"  index: k={index['n_codes']}, threshold {index['threshold']} -> bands L={index['bands']} of "
                f"r={index['rows']} codes; P(candidate) at the threshold "
                f"{index['collision_probability_at_threshold']:.3f}, half point {index['half_point']:.3f}")
            library = None
            if not args.no_library:
                library = bench_library(store, spec, options, f"bench-{name}-library", X, Q)
                agree &= library["found"] == http["found"]
            agree &= http["batch_same"]
            client.delete_index(f"bench-{name}")
            exact = bench_http(client, store, spec, {**options, **EXACT[name], "bands": index["bands"],
                                                     "rows": index["rows"]}, f"bench-{name}-exact", X, Q, G, tenth)
            agree &= exact["batch_same"]
            client.delete_index(f"bench-{name}-exact")
            brute_fast, brute_library = brute_force_seconds(Q, X, args.brute_force_queries)
            sketch = None if args.no_datasketch else bench_datasketch(socket_path, store, spec, index["bands"],
                                                                       index["rows"], X, Q)
            for label, result in (("codes only", http), (f"exact ({EXACT[name]['vectors']} vectors, forest "
                                                         f"{EXACT[name]['forest_rows']})", exact)):
                m = result["memory"]
                say(f"  memory per item, {label}: {result['bytes_per_item']:.0f} B (INFO used_memory) = record "
                    f"{m['record']:.0f} B + {m['bucket_keys_per_item']:.1f} band bucket keys {m['buckets']:.0f} B"
                    + (f" + forest buckets {m['forest']:.0f} B" if m["forest"] else ""))
            say(f"  a stored vector, bytes by encoding: {vector_bytes(X)}")
            say(f"  exact top-10 among the candidates (before re-ranking): {http['candidate_recall']:.3f}; S-curve "
                f"prediction {http['predicted']:.3f}; recall@10 codes-only {http['recall']:.3f}, exact "
                f"{exact['recall']:.3f} ({exact['recall'] / http['predicted']:.3f}x the prediction)")
            target = exact["target"]
            say(f"  target_recall {TARGET_RECALL}: recall@10 {target['recall']:.3f}, estimated {target['estimated_recall']:.3f}, "
                f"candidates {100 * target['candidates']:.2f}% (plain {100 * exact['candidates']:.2f}%), "
                f"p50/p99 {target['latency_ms'][0]:.2f}/{target['latency_ms'][1]:.2f} ms; last level probed (rows: "
                f"queries) { {r: int(c) for r, c in enumerate(target['rows_probed']) if c} }")
            if sketch:
                say(f"  datasketch MinHashLSH (Redis storage, same codes and bands, candidates only): insert "
                    f"{sketch['insert_per_s']:.0f}/s, query p50/p99 {sketch['latency_ms'][0]:.2f}/"
                    f"{sketch['latency_ms'][1]:.2f} ms, {sketch['bytes_per_item']:.0f} B/item")
            say(f"  ({time.perf_counter() - started:.0f} s)")
            rows.append((name, http, exact, library, brute_fast, brute_library))
        store.close()

    say("\nrecall@10 vs exact GMM top-10; cand % = items re-ranked per query / index size; latency of one query "
        "vector per request over HTTP (JSON, keep-alive); S-curve = the recall exact re-ranking should give")
    say(f"{'data set':15s} {'S-curve':>7s} | {'codes: recall':>13s} {'cand %':>6s} {'p50':>5s} {'p99':>5s} "
        f"{'B/item':>6s} {'ins/s':>6s} | {'exact: recall':>13s} {'/pred':>5s} {'p50':>5s} {'p99':>5s} {'B/item':>6s} "
        f"{'ins/s':>6s} | {'target 0.9: recall':>18s} {'est':>5s} {'cand %':>6s} {'p50':>5s} {'p99':>5s} | "
        f"{'brute ms':>8s}")
    for name, http, exact, library, brute_fast, brute_library in rows:
        target = exact["target"]
        say(f"{name:15s} {http['predicted']:7.3f} | {http['recall']:13.3f} {100 * http['candidates']:6.2f} "
            f"{http['latency_ms'][0]:5.2f} {http['latency_ms'][1]:5.2f} {http['bytes_per_item']:6.0f} "
            f"{http['insert_per_s']:6.0f} | {exact['recall']:13.3f} {exact['recall'] / http['predicted']:5.3f} "
            f"{exact['latency_ms'][0]:5.2f} {exact['latency_ms'][1]:5.2f} {exact['bytes_per_item']:6.0f} "
            f"{exact['insert_per_s']:6.0f} | {target['recall']:18.3f} {target['estimated_recall']:5.3f} "
            f"{100 * target['candidates']:6.2f} {target['latency_ms'][0]:5.2f} {target['latency_ms'][1]:5.2f} | "
            f"{brute_fast * 1e3:8.1f}")
    if not args.no_library:
        say(f"{'data set':15s} {'lib p50':>8s} {'p99 ms':>7s} {'lib insert/s':>12s} {'gmm() ms':>9s} {'batch q/s':>9s}")
        for name, http, exact, library, brute_fast, brute_library in rows:
            say(f"{name:15s} {library['latency_ms'][0]:8.2f} {library['latency_ms'][1]:7.2f} "
                f"{library['insert_per_s']:12.0f} {brute_library * 1e3:9.1f} {http['batch_query_per_s']:9.0f}")
    say("brute ms = exact top-10 by numpy over the whole set, one query; gmm() ms = with featurehash.maps.kernels.gmm")
    say(f"library answers equal the HTTP answers (and the batch queries'): {agree}")
    return agree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200, help="query vectors per data set")
    parser.add_argument("--datasets", default=",".join(DATA), help=f"comma-separated, from {', '.join(DATA)}")
    parser.add_argument("--brute-force-queries", type=int, default=20, help="timed exact searches (numpy)")
    parser.add_argument("--no-datasketch", action="store_true", help="skip the datasketch comparison")
    parser.add_argument("--no-library", action="store_true", help="skip the library (sync LSHIndex) comparison")
    parser.add_argument("--write", action="store_true", help=f"also write the report to {RESULTS}")
    args = parser.parse_args()
    args.datasets = [name.strip() for name in args.datasets.split(",") if name.strip()]
    unknown = set(args.datasets) - set(DATA)
    if unknown:
        parser.error(f"unknown data sets: {', '.join(sorted(unknown))}")
    signal.signal(signal.SIGTERM, _raise_sigterm)  # unwinds through the finally that stops the server
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    start = time.perf_counter()
    ok = run(args, say)
    say(f"total {time.perf_counter() - start:.0f} s")
    if args.write:
        RESULTS.write_text("\n".join(lines) + "\n")
    if not ok:
        raise SystemExit("library and HTTP answers differ")


if __name__ == "__main__":
    main()
