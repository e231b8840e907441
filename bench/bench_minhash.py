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

    PYTHONPATH=app python bench/bench_minhash.py [--rounds 5] [--write]

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
    parser.add_argument("--child", choices=("one", "default"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(speed(args.rounds, args.child == "one")))
        return 0
    results = {}
    for mode in ("one", "default"):
        env = dict(os.environ)
        if mode == "one":
            env["RAYON_NUM_THREADS"] = "1"
        else:
            env.pop("RAYON_NUM_THREADS", None)
        done = subprocess.run([sys.executable, __file__, "--child", mode, "--rounds", str(args.rounds)], env=env,
                              capture_output=True, text=True, check=True)
        results[mode] = json.loads(done.stdout)
    text = report(results["one"], results["default"], args.rounds, quality())
    print(text)
    if args.write:
        RESULT.write_text(text)
        print(f"wrote {RESULT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
