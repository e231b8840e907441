"""Set minhash (method "minhash") against rensa 0.5 and datasketch: speed and estimate quality (issue 44).

Speed, per set, at set sizes 50 / 500 / 5000 and k = 128 / 256, in one interleaved run (the contenders take
turns, round after round; medians of the rounds):
- featurehash `hash_tokens` (pre-hashed uint64 tokens, one flat array and row offsets) against rensa's
  RMinHash.digest_matrix_from_flat_token_hashes (the same input through its API);
- featurehash over Python str token lists (a map with a text stage: `hash(token_lists)`) against rensa's
  RMinHash.digest_matrix_from_token_sets (str sets) and datasketch's MinHash.bulk (UTF-8 bytes tokens, encoded
  before the clock starts, which favours it).
Each figure is CPU time (time.process_time: every thread of the process) and wall time. "one thread" runs in a
child process with RAYON_NUM_THREADS=1 (rensa's pool) and featurehash threads=1; "default threads" in a child
with neither set (featurehash: its row threads, rensa: its rayon pool).

Quality: 200 planted pairs per set size (sets of `size` distinct random tokens sharing m of them, m spread over
[0, size], so J spans [0, 1]), k = 128: RMSE, mean z^2 with z = (estimate - J) / sqrt(J (1 - J) / k), and the bias
(mean of estimate - J) against the exact Jaccard, for each tool; plus C-MinHash (variant "circulant") and the
classical k-permutation on sets dense in a small universe (D = 256, |S| = 96-128), where Li & Li (ICML 2022) claim
a lower variance.

Binary rows: GCWS's two samplers and minhash on the same 0/1 CSR rows of 50 nonzeros (k = 128, one thread), where
GMM is the Jaccard similarity: hashing CPU time a row, and a similarity join's planted pairs with each map.

Bounds: per token of str lists of 5,000 tokens, rensa's and featurehash's str paths beside featurehash's token loop
(str objects to stage columns), that loop over one repeated object (the hashing alone), and the joined pass it
replaced where it can; and GCWS dart at 50 nonzeros beside a loop of only its darts' own work.

Index (--index, needs Redis at REDIS_URL, default redis://127.0.0.1:6379/0): 100,000 sets of 50 tokens (ids of
columns in [0, 2^30)), k = 128, 16 bands of 8 (threshold ~0.7), inserted in batches of 5,000 and queried one set at a
time (200 near copies: 5 of 50 tokens replaced), hashing included on both sides: featurehash's Redis LSH index
(library, layout 3, codes only, and with the near cache) against rensa's in-memory RMinHashLSH (digest matrix
from str token sets, insert_matrix; a query: RMinHash from the set's str tokens, then query). Inserts/s and query
p50 / p99 (wall; CPU of the client process beside it: Redis's own CPU is not in it).

    PYTHONPATH=app python bench/bench_minhash.py [--rounds 5] [--index] [--write]

--write saves the report to bench/results/minhash.txt (the bench only prints otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SHAPES = [(50, 128), (50, 256), (500, 128), (500, 256), (5000, 128), (5000, 256)]
RESULT = Path(__file__).resolve().parent / "results" / "minhash.txt"
SEED = 42


def token_batch(size: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    tokens = np.random.default_rng(seed).integers(0, 2**63, size=n * size, dtype=np.uint64)
    return tokens, np.arange(0, n * size + 1, size, dtype=np.uint64)


def sets_for(size: int) -> int:
    """Sets per call: ~10^6 tokens, at least 200."""
    return max(200, 1_000_000 // size)


def clock(fn) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def speed(rounds: int, one_thread: bool) -> dict:
    """{(size, k): {contender: (cpu us a set, wall us a set)}} measured in this process."""
    import datasketch
    import rensa
    from featurehash import create_map

    threads = 1 if one_thread else None
    out = {}
    for size, k in SHAPES:
        n = sets_for(size)
        tokens, offsets = token_batch(size, n, size + k)
        offsets64 = offsets.astype(np.int64)
        m = create_map({"method": "minhash", "input_dim": 2**30, "n_components": k, "seed": SEED})
        k_perm = create_map({"method": "minhash", "input_dim": 2**30, "n_components": k, "seed": SEED,
                             "params": {"variant": "k_permutation"}})
        text = create_map({"method": "minhash", "n_components": k, "seed": SEED, "input": {"hashing": {}}})
        n_str = max(100, min(n, 200_000 // size))
        str_sets = [[str(t) for t in tokens[r * size:(r + 1) * size]] for r in range(n_str)]
        n_ds = max(20, min(n_str, 20_000 // size))
        byte_sets = [[t.encode() for t in row] for row in str_sets[:n_ds]]
        contenders = {
            "fh u64": (n, lambda: m.hash_tokens(tokens, offsets64, threads=threads)),
            "fh u64 k_perm": (n, lambda: k_perm.hash_tokens(tokens, offsets64, threads=threads)),
            "rensa u64": (n, lambda: rensa.RMinHash.digest_matrix_from_flat_token_hashes(tokens, offsets, k, SEED)),
            "fh str": (n_str, lambda: text.hash(str_sets, threads=threads)),
            "rensa str": (n_str, lambda: rensa.RMinHash.digest_matrix_from_token_sets(str_sets, k, SEED)),
            "datasketch bytes": (n_ds, lambda: datasketch.MinHash.bulk(byte_sets, num_perm=k, seed=SEED)),
        }
        times = {name: [] for name in contenders}
        for name, (_, fn) in contenders.items():
            fn()   # warm-up: compilation, pools
        for _ in range(rounds):
            for name, (count, fn) in contenders.items():
                cpu, wall = clock(fn)
                times[name].append((cpu / count * 1e6, wall / count * 1e6))
        out[f"{size},{k}"] = {name: [float(np.median([t[0] for t in ts])), float(np.median([t[1] for t in ts]))]
                              for name, ts in times.items()}
        print(f"  [{'one' if one_thread else 'default'}] {size},{k} done", file=sys.stderr, flush=True)
    return out


def planted(size: int, pairs: int, universe: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    shared = np.linspace(0, size, pairs).round().astype(np.int64)
    rows, exact = [], np.empty(pairs)
    for p, m in enumerate(shared):
        chosen = rng.choice(universe, size=2 * size - m, replace=False).astype(np.uint64)
        rows += [chosen[:size], np.concatenate([chosen[:m], chosen[size:]])]
        exact[p] = m / (2 * size - m)
    offsets = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int64)
    return np.concatenate(rows), offsets, exact


def figures(estimate: np.ndarray, exact: np.ndarray, k: int) -> dict:
    inner = (exact > 0.01) & (exact < 0.99)
    z = (estimate - exact)[inner] / np.sqrt(exact[inner] * (1 - exact[inner]) / k)
    return {"rmse": float(np.sqrt(np.mean((estimate - exact) ** 2))), "mean_z2": float(np.mean(z ** 2)),
            "bias": float(np.mean(estimate - exact))}


def quality() -> dict:
    import datasketch
    import rensa
    from featurehash import create_map

    k, out = 128, {}
    for size in (50, 500, 5000):
        tokens, offsets, exact = planted(size, 200, 2**62, size)
        rows = {}
        for variant in ("one_permutation", "k_permutation"):
            m = create_map({"method": "minhash", "input_dim": 2**30, "n_components": k, "seed": SEED,
                            "params": {"variant": variant}})
            codes = m.hash_tokens(tokens, offsets)
            rows[f"fh {variant}"] = figures((codes[0::2] == codes[1::2]).mean(axis=1), exact, k)
        digests = np.asarray(rensa.RMinHash.digest_matrix_from_flat_token_hashes(
            tokens, offsets.astype(np.uint64), k, SEED).to_rows())
        rows["rensa"] = figures((digests[0::2] == digests[1::2]).mean(axis=1), exact, k)
        sets = [[str(t).encode() for t in tokens[offsets[r]:offsets[r + 1]]] for r in range(offsets.size - 1)]
        hashes = np.array([h.hashvalues for h in datasketch.MinHash.bulk(sets, num_perm=k, seed=SEED)])
        rows["datasketch"] = figures((hashes[0::2] == hashes[1::2]).mean(axis=1), exact, k)
        out[f"|S| = {size}"] = rows
    # dense sets in a small universe: C-MinHash's case
    D, rows = 256, {}
    tokens, offsets, exact = planted(128, 200, D, 7)
    for variant in ("circulant", "k_permutation"):
        estimates = []
        for seed in range(20):   # 20 independent maps: the variance over (sigma, pi), not one draw's
            m = create_map({"method": "minhash", "input_dim": D, "n_components": k, "seed": seed,
                            "params": {"variant": variant}})
            codes = m.hash_tokens(tokens, offsets)
            estimates.append((codes[0::2] == codes[1::2]).mean(axis=1))
        per_seed = [figures(e, exact, k) for e in estimates]
        rows[f"fh {variant}"] = {key: float(np.mean([f[key] for f in per_seed])) for key in per_seed[0]}
    out["D = 256, |S| = 128 (20 seeds)"] = rows
    return out


def index_bench(n: int = 100_000, size: int = 50, k: int = 128, queries: int = 200) -> dict:
    import redis
    import rensa
    import scipy.sparse as sp
    from featurehash import create_map
    from featurehash.store import LSHIndexes

    rng = np.random.default_rng(5)
    columns = rng.integers(0, 2**30, size=(n, size))
    copies = columns[:queries].copy()
    copies[:, :5] = rng.integers(0, 2**30, size=(queries, 5))
    width = 2**30

    def csr(c):
        X = sp.csr_matrix((np.ones(c.size), c.ravel(), np.arange(0, c.size + 1, c.shape[1])), shape=(len(c), width))
        X.sum_duplicates()
        return X

    X, Q = csr(columns), csr(copies)
    str_sets = [[str(t) for t in row] for row in columns.tolist()]
    str_queries = [[str(t) for t in row] for row in copies.tolist()]
    out = {}
    m = create_map({"method": "minhash", "input_dim": width, "n_components": k, "seed": SEED})
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    prefix = f"bench-minhash-{os.getpid()}:"
    indexes = LSHIndexes(client, key_prefix=prefix)
    try:
        index = indexes.create(m, name="sets", bands=16, rows=8, expected_items=n)
        cpu, wall = time.process_time(), time.perf_counter()
        for start in range(0, n, 5000):
            index.add([str(i) for i in range(start, min(n, start + 5000))], X[start:start + 5000])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        out["featurehash redis index"] = {"inserts_per_s": n / wall, "insert_cpu_us": cpu / n * 1e6}
        for label, handle in (("featurehash redis index", index),
                              ("featurehash + near cache", indexes.open("sets").enable_near_cache())):
            walls, cpus, hits = [], [], 0
            for q in range(queries):
                c0, w0 = time.process_time(), time.perf_counter()
                found = handle.query(Q[q], top_k=1).results[0]
                cpus.append(time.process_time() - c0)
                walls.append(time.perf_counter() - w0)
                hits += bool(found) and found[0][0] == str(q)
            out.setdefault(label, {}).update({"query_p50_us": float(np.median(walls) * 1e6),
                                              "query_p99_us": float(np.percentile(walls, 99) * 1e6),
                                              "query_cpu_p50_us": float(np.median(cpus) * 1e6),
                                              "top1": hits / queries})
        indexes.delete("sets")
    finally:
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.unlink(key)
        client.close()
    lsh = rensa.RMinHashLSH(0.7, k, 16)
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, n, 5000):
        lsh.insert_matrix(rensa.RMinHash.digest_matrix_from_token_sets(str_sets[start:start + 5000], k, SEED),
                          start_key=start)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    walls, cpus, hits = [], [], 0
    for q in range(queries):
        c0, w0 = time.process_time(), time.perf_counter()
        sketch = rensa.RMinHash(k, SEED)
        sketch.update(str_queries[q])
        found = lsh.query(sketch)
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
        hits += q in found
    out["rensa RMinHashLSH (memory)"] = {"inserts_per_s": n / wall, "insert_cpu_us": cpu / n * 1e6,
                                         "query_p50_us": float(np.median(walls) * 1e6),
                                         "query_p99_us": float(np.percentile(walls, 99) * 1e6),
                                         "query_cpu_p50_us": float(np.median(cpus) * 1e6),
                                         "top1": hits / queries}
    return out


def index_report(rows: dict) -> str:
    lines = ["", "Index: 100,000 sets of 50 tokens, k = 128, 16 bands x 8; queries one set at a time (near copies)",
             f"{'':>28} {'inserts/s':>10} {'insert CPU us':>13} {'query p50 us':>13} {'p99 us':>9} "
             f"{'query CPU p50':>13} {'found':>6}"]
    for name, row in rows.items():
        inserts = f"{row['inserts_per_s']:10.0f} {row['insert_cpu_us']:13.1f}" if "inserts_per_s" in row else \
            f"{'':>10} {'':>13}"
        lines.append(f"{name:>28} {inserts} {row['query_p50_us']:13.1f} {row['query_p99_us']:9.1f} "
                     f"{row['query_cpu_p50_us']:13.1f} {row['top1']:6.2f}")
    lines.append("found: the query's original among the answers (featurehash: as its top-1; rensa: among the "
                 "candidates, which it does not rank)")
    return "\n".join(lines) + "\n"


def binary_rows(rounds: int) -> str:
    """GCWS (both samplers) against minhash on the same binary CSR rows of 50 nonzeros (k = 128, one thread,
    interleaved): the hashing CPU time a row, and a similarity join's pairs on planted near-duplicates."""
    import scipy.sparse as sp
    from featurehash import create_map
    from featurehash.dedup import similarity_join

    rng = np.random.default_rng(3)
    n, d, nnz, k = 4000, 100_000, 50, 128
    columns = np.argsort(rng.random((n, 2000)), axis=1)[:, :nnz] * (d // 2000)
    X = sp.csr_matrix((np.ones(n * nnz), columns.ravel(), np.arange(0, n * nnz + 1, nnz)), shape=(n, d))
    X.sort_indices()
    maps = {"gcws icws": create_map({"method": "gcws", "input_dim": d, "n_components": k, "seed": 1}),
            "gcws dart": create_map({"method": "gcws", "input_dim": d, "n_components": k, "seed": 1,
                                     "params": {"sampler": "dart"}}),
            "minhash": create_map({"method": "minhash", "input_dim": d, "n_components": k, "seed": 1})}
    calls = {"gcws icws": lambda: maps["gcws icws"].hash(X), "gcws dart": lambda: maps["gcws dart"].hash(X),
             "minhash": lambda: maps["minhash"].hash(X, threads=1)}
    import threadpoolctl
    times: dict[str, list[float]] = {name: [] for name in calls}
    with threadpoolctl.threadpool_limits(1):
        import numba
        numba.set_num_threads(1)
        for fn in calls.values():
            fn()
        for _ in range(rounds):
            for name, fn in calls.items():
                times[name].append(clock(fn)[0] / n * 1e6)
    lines = ["", f"Binary rows: {n} CSR rows of {nnz} nonzeros, k = {k}, one thread: hashing CPU us a row (median)"]
    base = float(np.median(times["minhash"]))
    for name, values in times.items():
        lines.append(f"{name:>12} {np.median(values):9.2f} us  ({np.median(values) / base:5.1f}x minhash)")
    # planted near-duplicates: 300 rows and a copy of each with 5 of 50 columns moved; joins at J >= 0.7
    base_rows = X[:300]
    moved = columns[:300].copy()
    moved[:, :5] = rng.integers(0, d, (300, 5))
    copies = sp.csr_matrix((np.ones(300 * nnz), moved.ravel(), np.arange(0, 300 * nnz + 1, nnz)), shape=(300, d))
    copies.sum_duplicates()
    copies.data[:] = 1.0
    Y = sp.vstack([base_rows, copies, X[300:1300]]).tocsr()
    found = {}
    for name in ("gcws dart", "minhash"):
        result = similarity_join(Y, maps[name], 0.7, target_recall=0.99)
        found[name] = set(zip(result.i.tolist(), result.j.tolist()))
    planted_pairs = {(i, 300 + i) for i in range(300)}
    lines.append(f"join at J >= 0.7 (target recall 0.99), 300 planted pairs among 1,600 rows: gcws dart found "
                 f"{len(found['gcws dart'] & planted_pairs)}, minhash {len(found['minhash'] & planted_pairs)}; "
                 f"pairs in one answer only: {len(found['gcws dart'] ^ found['minhash'])}")
    return "\n".join(lines) + "\n"


def _dart_floor_kernel():
    """A compiled loop of only the darts' own work: per row, `darts` ranks as running sums of -log of a counter
    uniform, each dart's bucket from a second mix, a minimum per bucket; and `tests` uniforms with a branch on
    each, for the group tests and band starts. No bands, groups, rank limit, state or re-throws."""
    import math

    import numba as nb
    from featurehash.maps.numerics._counter_random import stream_key, uniform, word

    @nb.njit(nogil=True)
    def darts_only(rows, darts, k, key, tests):
        best = np.empty(k)
        total = 0.0
        for row in range(rows):
            best[:] = np.inf
            stream = stream_key(key, row)
            for t in range(tests):   # group tests and band starts: a uniform and a branch on it each
                if uniform(stream, np.uint64(4 * (darts + t) + 1)) < 0.01:
                    total += 1.0
            gamma = 0.0
            for n in range(darts):
                gamma += -math.log(uniform(stream, np.uint64(4 * n)))
                bucket = ((word(stream, np.uint64(4 * n + 2)) >> np.uint64(32)) * np.uint64(k)) >> np.uint64(32)
                best[bucket] = min(best[bucket], gamma)
            total += best[0]
        return total

    return darts_only


def bounds(rounds: int) -> str:
    """What bounds the str path and the dart sampler, one thread, interleaved (medians): per token of the speed
    table's str lists of 5,000 tokens, rensa's str path, featurehash's, its token loop (each str object to its
    stage column), that loop over one str object repeated (MurmurHash3 with no memory traffic), and the joined
    pass it replaced where it can (str.join, then the compiled split-and-hash, by blocks of ~16k tokens); per row
    of 50 nonzeros at k = 128, GCWS dart against a loop of only its darts' own work at T = k (ln k + 2) darts."""
    import math

    import rensa
    from featurehash import create_map
    from featurehash.maps.minhash import _set_kernels, _token_lists
    from featurehash.maps.minhash import minhash as minhash_module

    size, k, n = 5000, 128, 40
    tokens, _ = token_batch(size, n, size + k)
    str_sets = [[str(t) for t in tokens[r * size:(r + 1) * size]] for r in range(n)]
    repeated = [[row[0]] * size for row in str_sets]
    text = create_map({"method": "minhash", "n_components": k, "seed": SEED, "input": {"hashing": {}}})
    text.hash(str_sets[:2], threads=1)
    key, width = np.uint32(text.text_stage._key), text.spec.input_dim
    per_block = max(1, minhash_module.TEXT_BLOCK_TOKENS // size)   # rows joined at once, as the joined pass does
    offsets = np.arange(0, n * size + 1, size, dtype=np.int64)

    def joined_pass(lists):
        for first in range(0, n, per_block):
            block = np.frombuffer("\0".join(map("\0".join, lists[first:first + per_block])).encode("utf-8"),
                                  dtype=np.uint8)
            _set_kernels.separated_token_columns(block, min(per_block, n - first) * size, key, width)

    darts_only = _dart_floor_kernel()
    target = int(k * (math.log(k) + 2.0))
    rows = 4000
    calls = {
        "rensa str path": (n * size, lambda: rensa.RMinHash.digest_matrix_from_token_sets(str_sets, k, SEED)),
        "featurehash str path": (n * size, lambda: text.hash(str_sets, threads=1)),
        "its token loop (str to columns)": (n * size, lambda: _token_lists.token_columns(str_sets, offsets, key,
                                                                                         width)),
        "the loop, one str object repeated": (n * size, lambda: _token_lists.token_columns(repeated, offsets, key,
                                                                                           width)),
        "joined pass (join, split, hash)": (n * size, lambda: joined_pass(str_sets)),
        f"dart floor: {target} darts a row": (rows, lambda: darts_only(rows, target, k, np.uint64(SEED), 0)),
        "and 850 tests": (rows, lambda: darts_only(rows, target, k, np.uint64(SEED), 850)),
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _, fn in calls.values():
        fn()
    for _ in range(rounds):
        for name, (count, fn) in calls.items():
            times[name].append(clock(fn)[0] / count)
    lines = ["", f"Bounds (one thread, CPU, medians of {rounds} interleaved rounds)",
             f"str lists of {size} tokens ({n} sets), ns a token:"]
    for name in list(calls)[:5]:
        lines.append(f"{name:>36} {np.median(times[name]) * 1e9:8.1f}")
    floor, tested = list(calls)[5:7]
    lines.append(f"GCWS dart at 50 nonzeros, k = {k}: {floor}, each a log, two mixes and a minimum: "
                 f"{np.median(times[floor]) * 1e6:.2f} us a row; with 850 uniforms and a branch on each (a binary row's "
                 f"~9 group tests and 8 band starts an element): {np.median(times[tested]) * 1e6:.2f} us a row")
    return "\n".join(lines) + "\n"


def report(one: dict, default: dict, rounds: int, quality_rows: dict) -> str:
    lines = [f"bench/bench_minhash.py: {os.cpu_count()} cores (shared), rounds {rounds}, medians, microseconds a set",
             "CPU = process CPU time (all threads) / sets; wall = elapsed / sets. fh = featurehash minhash",
             "(variant one_permutation unless said), rensa 0.5 RMinHash, datasketch 2.0 MinHash.bulk.", ""]
    for title, data in (("one thread (featurehash threads=1, RAYON_NUM_THREADS=1)", one),
                        ("default threads", default)):
        lines += [title,
                  f"{'size,k':>9} | {'fh u64':>13} {'k_perm':>13} {'rensa u64':>13} {'ratio':>6} | "
                  f"{'fh str':>13} {'rensa str':>13} {'ratio':>6} | {'datasketch':>15} {'ratio':>6}",
                  f"{'':>9} | {'cpu/wall':>13} {'cpu/wall':>13} {'cpu/wall':>13} {'r/fh':>6} | "
                  f"{'cpu/wall':>13} {'cpu/wall':>13} {'r/fh':>6} | {'cpu/wall':>15} {'d/fh':>6}"]
        for shape, row in data.items():
            def cell(name, width=13):
                cpu, wall = row[name]
                return f"{cpu:.2f}/{wall:.2f}".rjust(width)
            wall_or_cpu = 1 if title.startswith("default") else 0   # threads: the wall ratio is the speed-up
            ratio_u64 = row["rensa u64"][wall_or_cpu] / row["fh u64"][wall_or_cpu]
            ratio_str = row["rensa str"][wall_or_cpu] / row["fh str"][wall_or_cpu]
            ratio_ds = row["datasketch bytes"][wall_or_cpu] / row["fh str"][wall_or_cpu]
            lines.append(f"{shape:>9} | {cell('fh u64')} {cell('fh u64 k_perm')} {cell('rensa u64')} "
                         f"{ratio_u64:6.2f} | {cell('fh str')} {cell('rensa str')} {ratio_str:6.2f} | "
                         f"{cell('datasketch bytes', 15)} {ratio_ds:6.1f}")
        lines += [("ratios: CPU time (one thread)" if not title.startswith("default")
                   else "ratios: wall time (default threads); CPU beside it"), ""]
    lines += ["Quality: 200 planted pairs per size, k = 128, against the exact Jaccard",
              f"{'case':>30} {'tool':>20} {'RMSE':>8} {'mean z^2':>9} {'bias':>9}"]
    for case, rows in quality_rows.items():
        for tool, f in rows.items():
            lines.append(f"{case:>30} {tool:>20} {f['rmse']:8.4f} {f['mean_z2']:9.3f} {f['bias']:+9.4f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help=f"save the report to {RESULT}")
    parser.add_argument("--index", action="store_true", help="also the index comparison (needs Redis)")
    parser.add_argument("--child", choices=("one", "default", "bounds"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(bounds(args.rounds) if args.child == "bounds" else speed(args.rounds, args.child == "one")))
        return 0
    results = {}
    for mode in ("one", "default", "bounds"):
        env = dict(os.environ)
        if mode == "default":
            env.pop("RAYON_NUM_THREADS", None)
        else:
            env["RAYON_NUM_THREADS"] = "1"
        done = subprocess.run([sys.executable, __file__, "--child", mode, "--rounds", str(args.rounds)], env=env,
                              capture_output=True, text=True, check=True)
        results[mode] = json.loads(done.stdout)
    text = report(results["one"], results["default"], args.rounds, quality())
    text += binary_rows(args.rounds)
    text += results["bounds"]
    if args.index:
        text += index_report(index_bench())
    print(text)
    if args.write:
        RESULT.write_text(text)
        print(f"wrote {RESULT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
