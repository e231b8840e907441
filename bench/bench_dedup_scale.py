"""Near-duplicate join at scale: a million sparse rows joined under a memory budget, and without one.

    python bench/bench_dedup_scale.py [--rows 1000000] [--dim 1000000] [--nnz 50] [--k 256] [--sampler icws]
                                      [--threshold 0.7] [--budgets 2GB 256MB] [--workdir DIR] [--write]

The set (tests/dedup_support.py `sparse_planted`, seed 29): groups of 4 near-duplicates (a base row and 3
copies moving a fraction ~ U(0, 0.45) of its coordinates) make up 20% of the rows, the rest are unrelated;
`nnz` coordinates of `dim` per row. It is written once to `workdir` as an uncompressed scipy .npz, which the
join memory-maps (so the rows count in the peak RSS only as the pages it reads). Truth: the within-group
pairs whose exact GMM (scipy's sparse minimum / maximum, independently of the library) is >= the threshold.

Each run is a fresh child process (`--child`), so its peak RSS (resource.getrusage ru_maxrss, which counts
mapped file pages while resident) is its own: the join with `memory_budget` (pairs written to an .npz as
found; one run per budget) and the in-memory join (no budget), on the same file. At 1M rows and L = 35 bands
the keys take 280 MB, under half of 2 GB, so that budget keeps them in memory; a smaller one (256MB) makes
them spill to hash partitions. Printed per run: wall and CPU seconds of the
join (hashing included, numba compiled beforehand), peak RSS, verified candidates, pairs, the banding, and the
recall of the true planted pairs; then the ratios of each budgeted run to the in-memory one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

RESULTS = Path(__file__).resolve().parent / "results" / "dedup_scale.txt"
SEED = 29


def make_set(args, folder: Path) -> tuple[Path, Path]:
    """The rows (.npz, uncompressed) and the truth keys i * n + j (.npy), made once per parameters."""
    stem = folder / f"planted-{args.rows}-{args.dim}-{args.nnz}"
    rows, truth = Path(f"{stem}.npz"), Path(f"{stem}-truth-{args.threshold}.npy")
    if rows.exists() and truth.exists():
        return rows, truth
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from dedup_support import sparse_planted

    n_groups = args.rows // 20
    X, groups = sparse_planted(n_groups, 4, args.rows - 4 * n_groups, args.dim, args.nnz, seed=SEED,
                               return_groups=True)
    sp.save_npz(rows, X, compressed=False)
    order = np.argsort(groups, kind="stable")
    members = order[groups[order] >= 0].reshape(-1, 4)
    a, b = np.triu_indices(4, 1)
    i, j = members[:, a].ravel(), members[:, b].ravel()
    i, j = np.minimum(i, j), np.maximum(i, j)
    A, B = X[i], X[j]
    gmm = np.asarray(A.minimum(B).sum(axis=1)).ravel() / np.asarray(A.maximum(B).sum(axis=1)).ravel()
    keep = gmm >= args.threshold
    np.save(truth, i[keep] * args.rows + j[keep])
    return rows, truth


def child(args) -> None:
    """One join in this process; prints its figures as JSON."""
    from featurehash import create_map
    from featurehash.dedup import similarity_join

    m = create_map({"method": "gcws", "input_dim": args.dim, "n_components": args.k, "seed": 1,
                    "params": {"sampler": args.sampler}})
    from featurehash.dedup.sources import open_rows

    m.hash(open_rows(args.rows_file, "x")[:16])   # compile outside the timing
    budget = None if args.budget == "none" else args.budget_bytes
    output = None if budget is None else str(Path(args.workdir) / f"pairs-{args.budget}.npz")
    cpu, wall = time.process_time(), time.perf_counter()
    result = similarity_join(args.rows_file, m, args.threshold, memory_budget=budget, output=output,
                             spill_dir=args.workdir)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    n = result.shape[0]
    found = np.concatenate([np.asarray(i, dtype=np.int64) * n + j for i, j, _ in result.blocks()] or [np.empty(0)])
    truth = np.load(args.truth_file)
    from featurehash.dedup.spill import (
        plan_spill,  # the join's rule: keys spill past half the budget
    )

    spilled = budget is not None and n * 8 * result.bands > budget / 2
    files = plan_spill(n, result.bands, budget).files if spilled else 0
    print(json.dumps({"wall": wall, "cpu": cpu, "peak_rss": peak, "candidates": result.candidates,
                      "pairs": len(result), "bands": result.bands, "r": result.rows,
                      "recall": float(np.isin(truth, found).mean()), "true": int(truth.size),
                      "files": files}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=1_000_000)
    parser.add_argument("--nnz", type=int, default=50)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--threshold", type=float, default=0.7)
    parser.add_argument("--sampler", default="icws", choices=("icws", "dart"))
    parser.add_argument("--budgets", nargs="+", default=["2GB", "256MB"])
    parser.add_argument("--budget", default="none", help=argparse.SUPPRESS)   # a child's
    parser.add_argument("--workdir", default="/tmp/featurehash-dedup-scale")
    parser.add_argument("--write", action="store_true", help=f"also write the report to {RESULTS}")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rows-file", dest="rows_file", help=argparse.SUPPRESS)
    parser.add_argument("--truth-file", dest="truth_file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from featurehash.dedup.command import parse_bytes

    args.budget_bytes = None if args.budget == "none" else parse_bytes(args.budget)
    if args.child:
        child(args)
        return
    folder = Path(args.workdir)
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows, truth = make_set(args, folder)
    print(f"set: {rows} ({time.perf_counter() - start:.0f} s to make or find)", file=sys.stderr)
    runs = {}
    for budget in [*args.budgets, "none"]:
        command = [sys.executable, __file__, "--child", "--rows-file", str(rows), "--truth-file", str(truth),
                   "--budget", budget, "--workdir", str(folder)] + [f"--{name}={getattr(args, name)}" for name in
                                                                     ("rows", "dim", "nnz", "k", "threshold", "sampler")]
        done = subprocess.run(command, capture_output=True, text=True, env=os.environ, check=False)
        if done.returncode:
            sys.exit(f"child failed ({budget}):\n{done.stderr}")
        runs[budget] = json.loads(done.stdout.strip().splitlines()[-1])
    title = (f"similarity_join at scale: {args.rows:,} sparse rows, dim {args.dim:,}, {args.nnz} nonzeros, "
             f"gcws k = {args.k} ({args.sampler}), threshold {args.threshold}, target_recall 0.95, verify='exact'; "
             f"rows memory-mapped from an uncompressed .npz; {os.cpu_count()} CPUs; one child process per run")
    header = (f"{'budget':>8s} {'wall s':>8s} {'cpu s':>8s} {'peak RSS':>10s} {'L x r':>7s} {'candidates':>11s} "
              f"{'pairs':>9s} {'true':>8s} {'recall':>7s} {'spill files':>11s}")
    lines = [title, "", header, "-" * 98]
    for budget, run in runs.items():
        lines.append(f"{budget:>8s} {run['wall']:8.1f} {run['cpu']:8.1f} {run['peak_rss'] / 2**20:8.0f}MB "
                     f"{run['bands']:>3d} x {run['r']:<2d} {run['candidates']:11,d} {run['pairs']:9,d} "
                     f"{run['true']:8,d} {run['recall']:7.4f} {run['files']:11d}")
    free = runs["none"]
    for budget in args.budgets:
        run = runs[budget]
        lines.append(f"{budget} / in memory: wall {run['wall'] / free['wall']:.2f}x, peak RSS "
                     f"{run['peak_rss'] / free['peak_rss']:.2f}x; same pairs: {run['pairs'] == free['pairs']}, "
                     f"same candidates: {run['candidates'] == free['candidates']}")
    print("\n".join(lines))
    if args.write:
        RESULTS.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
