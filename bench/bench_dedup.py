"""Near-duplicate join (featurehash.dedup.similarity_join): speed and recall, and against datasketch.

    python bench/bench_dedup.py [--rows 100000] [--dim 20000] [--nnz 50] [--k 256] [--sampler icws]
                                [--thresholds 0.5 0.7 0.9] [--parts table compare] [--compare-rows 10000]
                                [--dense-rows 3000] [--compare-dim 1000000] [--compare-sampler dart]
                                [--repeat 3] [--seeds 20] [--write]

Parts: "table" (below), "compare" (bench/dedup_compare.py: recall, precision, time and peak RSS against a
datasketch MinHashLSH pipeline on planted sparse, planted dense and sklearn-digits rows, exact truth by brute
force) and "seeds" (the recall's spread over map seeds on the collections of tests/dedup/test_recall.py).

The table:
The set (tests/dedup_support.py `sparse_planted`): groups of 4 rows (a base row and 3 copies that move a
fraction ~ U(0, 0.45) of its coordinates and jitter the values) make up 20% of the rows, the rest are unrelated
rows; nonnegative values, `nnz` random coordinates of `dim` per row. Truth: the within-group pairs whose exact
GMM (sum min / sum max, computed here with scipy's sparse minimum / maximum, independently of the library) is
>= the threshold. Unrelated rows share almost no coordinates (GMM ~ 0), so pairs across groups are not
counted; any found there are still verified exactly by the join, and reported as "other".
For each threshold: the banding (L x r), the S-curve's recall at the threshold, the measured recall of the true
pairs, the verified candidates, the wall time of the join (hashing included) and rows/s. The hashing alone is
timed once. Prints the table; --write also writes bench/results/dedup.txt.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from featurehash import create_map
from featurehash.dedup import similarity_join

RESULTS = Path(__file__).resolve().parent / "results" / "dedup.txt"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from dedup_compare import compare, seeds  # after the tests folder is on the path (dedup_truth)


def planted_truth(X, groups):
    """(i, j, exact GMM) of every within-group pair, i < j."""
    order = np.argsort(groups, kind="stable")
    order = order[groups[order] >= 0]
    members = order.reshape(-1, 4)   # groups of 4
    a, b = np.triu_indices(4, 1)
    i, j = members[:, a].ravel(), members[:, b].ravel()
    i, j = np.minimum(i, j), np.maximum(i, j)
    A, B = X[i], X[j]
    low = np.asarray(A.minimum(B).sum(axis=1)).ravel()
    high = np.asarray(A.maximum(B).sum(axis=1)).ravel()
    return i, j, low / high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=20_000)
    parser.add_argument("--nnz", type=int, default=50)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--sampler", default="icws", choices=("icws", "dart"))
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.7, 0.9])
    parser.add_argument("--parts", nargs="+", default=["table", "compare"], choices=("table", "compare", "seeds"))
    parser.add_argument("--compare-rows", type=int, default=10_000, help="sparse rows both contenders join")
    parser.add_argument("--dense-rows", type=int, default=3000, help="planted dense rows both contenders join")
    parser.add_argument("--compare-dim", type=int, default=1_000_000, help="dim of the compared sparse rows")
    parser.add_argument("--compare-sampler", default="dart", choices=("icws", "dart"))
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per contender (medians)")
    parser.add_argument("--seeds", type=int, default=20, help="map seeds of the 'seeds' part")
    parser.add_argument("--write", action="store_true", help=f"also write the report to {RESULTS}")
    args = parser.parse_args()
    lines = table(args) if "table" in args.parts else []
    if "compare" in args.parts:
        lines += [""] + compare(args)
    if "seeds" in args.parts:
        lines += [""] + seeds(args)
    if args.write:
        RESULTS.write_text("\n".join(lines) + "\n")


def table(args) -> list[str]:
    from dedup_support import sparse_planted

    n_groups = args.rows // 20
    X, groups = sparse_planted(n_groups, 4, args.rows - 4 * n_groups, args.dim, args.nnz, seed=29,
                               return_groups=True)
    m = create_map({"method": "gcws", "input_dim": args.dim, "n_components": args.k, "seed": 1,
                    "params": {"sampler": args.sampler}})
    m.hash(X[:16])   # compile and build the table outside the timings
    start = time.perf_counter()
    m.hash(X)
    hash_seconds = time.perf_counter() - start
    ti, tj, ts = planted_truth(X, groups)

    lines = [f"similarity_join, planted sparse set: {X.shape[0]} rows, dim {args.dim}, {X.nnz / X.shape[0]:.1f} "
             f"nonzeros per row, {n_groups} groups of 4; gcws k = {args.k} ({args.sampler}), verify='exact', "
             f"target_recall 0.95; {os.cpu_count()} CPUs",
             f"hashing alone: {hash_seconds:.2f} s ({X.shape[0] / hash_seconds:,.0f} rows/s)", "",
             f"{'t':>4s} {'L x r':>7s} {'S-curve':>8s} {'true':>7s} {'recall':>7s} {'found':>7s} {'other':>6s} "
             f"{'candidates':>11s} {'seconds':>8s} {'rows/s':>9s}", "-" * 84]
    for threshold in args.thresholds:
        start = time.perf_counter()
        result = similarity_join(X, m, threshold, target_recall=0.95)
        seconds = time.perf_counter() - start
        true = ts >= threshold
        n = X.shape[0]
        truth_keys = ti[true] * n + tj[true]
        found_keys = result.i * n + result.j
        hit = np.isin(truth_keys, found_keys)
        other = int((~np.isin(found_keys, ti * n + tj)).sum())
        lines.append(f"{threshold:4.2f} {result.bands:>3d} x {result.rows:<2d} {result.recall_at_threshold:8.3f} "
                     f"{true.sum():7d} {hit.mean():7.4f} {len(result):7d} {other:6d} {result.candidates:11d} "
                     f"{seconds:8.2f} {n / seconds:9,.0f}")
    print("\n".join(lines), flush=True)
    return lines


if __name__ == "__main__":
    main()
