"""GCWS samplers: collision law of "dart" and "icws", and per-vector hashing time against datasketch.

    python bench/bench_gcws.py [--repeat 3] [--threads 1] [--skip-law] [--crossover]

1. Collision law (the 100-pair families of tests/maps/minhash/test_gcws.py, k = 4096): per family and sampler,
   the largest |z| of a pair's match fraction against the exact GMM / pGMM (binomial sd), the mean
   z^2 (1 +- 4 sqrt(2/n) expected) and the standardised common bias.
2. Time per vector at (nnz, k): sparse rows with nnz nonzeros (Exp(1) weights), timed in batches of
   8 rows on `--threads` numba threads (1: the per-vector cost on one core, as datasketch runs):
   - "dart" and "icws" in a d = 100,000 input space (ICWS's table of 2d x k constants would pass the
     256 MiB budget, so its variates come on demand, as for any large or hashed index space);
   - "icws table": the same rows compacted to d = 2 nnz, where the table fits the budget (its fast
     path; "-" where it does not);
   - datasketch's WeightedMinHashGenerator (ICWS in numpy; `minhash` on dense rows of d = nnz + 64,
     one Python loop over the k samples, as `minhash_many` needs k x nnz x batch temporaries).
   Ratios are taken within the same run. Goal: dart >= 5x icws at (1000, 1024) and (10000, 4096),
   and not slower than icws (either path) at the small sizes.
3. With --crossover: icws-table / dart time for small nnz, per k: where an "auto" choice would switch.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp

from featurehash import create_map
from timing import best_time

SIZES = [(64, 256), (256, 256), (1000, 1024), (10000, 256), (10000, 4096)]
BIG_DIM = 100_000
ROWS = 8


def sparse_rows(nnz: int, d: int, rng: np.random.Generator) -> sp.csr_matrix:
    indices = np.concatenate([np.sort(rng.choice(d, nnz, replace=False)) for _ in range(ROWS)])
    return sp.csr_matrix((rng.exponential(size=ROWS * nnz), indices, np.arange(0, ROWS * nnz + 1, nnz)),
                         shape=(ROWS, d))


def gcws(d: int, k: int, sampler: str):
    return create_map({"method": "gcws", "input_dim": d, "n_components": k, "seed": 1,
                       "params": {"sampler": sampler}})


def datasketch_seconds(X: sp.csr_matrix, k: int) -> float | None:
    try:
        from datasketch import WeightedMinHashGenerator
    except ImportError:
        return None
    columns = np.unique(X.indices)
    dense = np.zeros((X.shape[0], columns.size + 64), dtype=np.float32)
    dense[:, :columns.size] = X[:, columns].toarray()
    generator = WeightedMinHashGenerator(dense.shape[1], sample_size=k, seed=1)
    rows = 2 if columns.size * k > 10**7 else X.shape[0]
    start = time.perf_counter()
    for row in dense[:rows]:
        generator.minhash(row)
    return (time.perf_counter() - start) / rows


def bench_time(repeat: int) -> None:
    rng = np.random.default_rng(0)
    print(f"\nper-vector hash time, batches of {ROWS} rows, {numba.get_num_threads()} numba thread(s)")
    print(f"{'nnz':>6} {'k':>5} | {'dart':>9} {'icws':>9} {'icws tbl':>9} {'datasketch':>10} | "
          f"{'icws/dart':>9} {'tbl/dart':>8} {'dsk/dart':>8}")
    for nnz, k in SIZES:
        X = sparse_rows(nnz, BIG_DIM, rng)
        seconds = {}
        for sampler in ("dart", "icws"):
            m = gcws(BIG_DIM, k, sampler)
            slow = nnz * k > 10**6 and sampler == "icws"
            seconds[sampler] = best_time(lambda: m.hash(X), 1 if slow else repeat) / ROWS
        columns, compact = np.unique(X.indices, return_inverse=True)
        Xc = sp.csr_matrix((X.data, compact, X.indptr), shape=(ROWS, max(2 * nnz, columns.size)))
        table = gcws(Xc.shape[1], k, "icws")
        seconds["table"] = best_time(lambda: table.hash(Xc), repeat) / ROWS if table.uses_table else None
        seconds["datasketch"] = datasketch_seconds(X, k)

        def cell(value, scale=1e3, width=9):
            return f"{value * scale:{width}.3f}" if value is not None else f"{'-':>{width}}"

        def ratio(value, width=8):
            return f"{value / seconds['dart']:{width}.1f}x" if value is not None else f"{'-':>{width + 1}}"

        print(f"{nnz:6d} {k:5d} | {cell(seconds['dart'])} {cell(seconds['icws'])} {cell(seconds['table'])} "
              f"{cell(seconds['datasketch'], width=10)} | {ratio(seconds['icws'])} {ratio(seconds['table'], 7)} "
              f"{ratio(seconds['datasketch'], 7)}")
    print("(times in ms per vector; ratios > 1: dart is faster)")


def bench_crossover(repeat: int) -> None:
    """Where ICWS's table path (d = 2 nnz, table within budget) stops beating dart, per k."""
    rng = np.random.default_rng(1)
    print("\ncrossover against the ICWS table path (d = 2 nnz): icws tbl / dart time per vector")
    for k in (64, 256, 1024):
        cells = []
        for nnz in (16, 64, 128, 256, 512, 1024):
            X = sparse_rows(nnz, 2 * nnz, rng)
            table, darts = gcws(2 * nnz, k, "icws"), gcws(2 * nnz, k, "dart")
            if not table.uses_table:
                continue
            ratio = best_time(lambda: table.hash(X), repeat) / best_time(lambda: darts.hash(X), repeat)
            cells.append(f"nnz {nnz}: {ratio:4.2f}")
        print(f"  k={k:5d}  " + "  ".join(cells))


def bench_law() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "maps" / "minhash"))
    from test_gcws import K, binomial_sd, dense_pairs, pair_gmm, pair_match, sparse_pairs

    print(f"collision law, 100 pairs per family, k = {K}: max |z|, mean z^2 (n pairs with 0.01 < GMM < 0.99), "
          "common bias z")
    families = {"dense": dense_pairs(), "sparse": sparse_pairs()}
    for sampler in ("dart", "icws"):
        for name, (U, V) in families.items():
            for power in (1.0, 0.5, 2.0):
                m = create_map({"method": "gcws", "input_dim": U.shape[1], "n_components": K, "seed": 7,
                                "params": {"power": power, "sampler": sampler}})
                G = pair_gmm(U, V, power)
                F = pair_match(m.hash(U), m.hash(V))
                z = (F - G) / binomial_sd(G, K)
                inner = (G > 0.01) & (G < 0.99)
                bias = (F - G).sum() * K / np.sqrt((G * (1 - G) * K).sum())
                print(f"  {sampler:4s} {name:6s} p={power:<3} max|z| {np.abs(z).max():4.2f}  mean z^2 "
                      f"{np.mean(z[inner] ** 2):5.3f} (n={inner.sum()}, 1 +- {4 * np.sqrt(2 / inner.sum()):.2f})"
                      f"  bias {bias:+5.2f}  exact at GMM 0 and 1: {F[G == 1].min() == 1 and F[G == 0].max() == 0}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-law", action="store_true")
    parser.add_argument("--crossover", action="store_true", help="also scan nnz for the icws-table crossover")
    args = parser.parse_args()
    numba.set_num_threads(args.threads)
    if not args.skip_law:
        bench_law()
    bench_time(args.repeat)
    if args.crossover:
        bench_crossover(args.repeat)


if __name__ == "__main__":
    main()
