"""bench/bench_dedup.py's comparison with datasketch and its recall spread over map seeds.

Comparison: on three collections (tests/dedup_truth.py) - planted sparse rows (d = --compare-dim, --nnz
nonzeros), planted dense rows (d = 32) and scikit-learn's digits plus 400 noisy copies (d = 64) - per threshold
each contender (bench/dedup_contenders.py: featurehash's similarity_join, datasketch's MinHashLSH pipeline in
two variants) runs in its own child process, the contenders alternating, --repeat times; wall and CPU seconds are
medians, the peak RSS the largest. Recall and precision are against the exact pairs, found by brute force
(sum min / sum max, tests/dedup_truth.py). Rates per million rows are linear extrapolations from the measured
size; datasketch is measured on the same rows as featurehash (a subset of --rows: --compare-rows) and
featurehash alone also on the sparse set at --rows, which gives its own per-million figures.

Seeds: the found fraction over --seeds map seeds on the test collections (tests/dedup/test_recall.py), beside
the S-curve's expected recall, the sd if pairs were independent and the row-correlation bound the test uses.
"""

from __future__ import annotations

import os
import statistics
import tempfile

import numpy as np
import scipy.sparse as sp

from dedup_contenders import run_child

CONTENDERS = ("featurehash", "datasketch")
MB = 1 << 20


def collections(args):
    """(name, description, X, truth function) of the compared collections."""
    from dedup_truth import dense_gmm_pairs, dense_set, digits_set, sparse_gmm_pairs, sparse_set

    n_groups = args.compare_rows // 20   # 6 rows per group: 30% of the rows have near-duplicates
    sparse = sparse_set(n_groups, args.compare_rows - 6 * n_groups, dim=args.compare_dim, nnz=args.nnz, seed=29)
    dense = dense_set(args.dense_rows // 8, args.dense_rows - 4 * (args.dense_rows // 8), seed=29)
    return [("sparse", (f"planted sparse, dim {args.compare_dim:,}, {args.nnz} nonzeros (datasketch: MinHash.bulk "
                        f"of the nonzero coordinates' set)"), sparse, sparse_gmm_pairs),
            ("dense", "planted dense, dim 32 (datasketch: WeightedMinHashGenerator.minhash_many)", dense,
             dense_gmm_pairs),
            ("digits", ("sklearn digits + 400 noisy copies, dim 64 (datasketch: WeightedMinHashGenerator."
                        "minhash_many)"), digits_set(), dense_gmm_pairs)]


def scores(pairs, truth, threshold: float, n: int) -> tuple[float, float]:
    """(recall, precision) of found pairs (i, j) against the exact pairs at or above threshold."""
    ti, tj, ts = truth
    truth_keys = np.sort(ti[ts >= threshold] * n + tj[ts >= threshold])
    found_keys = pairs[0] * n + pairs[1]
    hits = np.isin(found_keys, truth_keys).sum()
    return hits / max(1, truth_keys.size), hits / max(1, found_keys.size)


def measure(path: str, threshold: float, args, contenders, repeat: int) -> dict:
    """Per variant: medians of wall and CPU, largest peak / ready RSS, the pairs and the banding."""
    runs: dict[str, dict] = {}
    for _ in range(repeat):   # the contenders alternate, so slow phases of a shared machine hit both
        for contender in contenders:
            report, pairs = run_child(contender, path, threshold, args.k, args.compare_sampler)
            for name, info in report["variants"].items():
                entry = runs.setdefault(name, {"wall": [], "cpu": [], "peak": 0, "ready": 0, "pairs": pairs[name],
                                               "bands": info["bands"], "rows": info["rows"],
                                               "candidates": info["candidates"]})
                entry["wall"].append(info["wall"])
                entry["cpu"].append(info["cpu"])
                entry["peak"] = max(entry["peak"], report["peak_rss"])
                entry["ready"] = max(entry["ready"], report["ready_rss"])
    return runs


def row_line(threshold, name, n, runs, truth) -> str:
    from featurehash.lsh.banding import collision_probability

    entry = runs[name]
    recall, precision = scores(entry["pairs"], truth, threshold, n)
    wall, cpu = statistics.median(entry["wall"]), statistics.median(entry["cpu"])
    growth = max(0, entry["peak"] - entry["ready"])
    curve = float(collision_probability(threshold, entry["bands"], entry["rows"]))
    return (f"{threshold:4.2f} {name:<19s} {n:>8,d} {entry['bands']:>3d} x {entry['rows']:<2d} {curve:6.3f} "
            f"{recall:7.4f} {precision:6.4f} {entry['candidates']:>9,d} {wall:8.2f} {cpu:8.2f} {n / cpu:>9,.0f} "
            f"{wall * 1e6 / n:>9,.0f} {entry['peak'] / MB:>7,.0f} {growth / MB:>7,.0f} {growth * 1e6 / n / MB:>8,.0f}")


HEADER = (f"{'t':>4s} {'contender':<19s} {'rows':>8s} {'L x r':>7s} {'S(t)':>6s} {'recall':>7s} {'prec':>6s} "
          f"{'cand':>9s} {'wall s':>8s} {'cpu s':>8s} {'rows/cpu-s':>9s} {'s/1M':>9s} {'peakMB':>7s} "
          f"{'runMB':>7s} {'MB/1M':>8s}")


def compare(args) -> list[str]:
    from dedup_truth import sparse_gmm_pairs, sparse_set

    lines: list[str] = []

    def emit(*new: str) -> None:
        lines.extend(new)
        print("\n".join(new), flush=True)

    emit(f"Comparison with datasketch MinHashLSH (insert all, query each row, verify candidates exactly with "
         f"GMM), num_perm = k = {args.k}; featurehash gcws ({args.compare_sampler}), target_recall 0.95; "
         f"medians of {args.repeat} alternating runs, each in its own process; {os.cpu_count()} CPUs.",
         "S(t): the S-curve 1 - (1 - t^r)^L at the threshold. s/1M: wall seconds per million rows (linear). "
         "peakMB: the child's peak RSS; runMB: peak minus RSS when ready (rows loaded, imports and warm-up "
         "done); MB/1M: runMB per million rows, a linear extrapolation that overstates where runMB is a fixed "
         "cost: minhash_many's work arrays (k x the nonzeros of a 1,000-row chunk) on the dense rows, and "
         "featurehash at small sizes (its runs there stay near the warm-up's peak: runMB ~ 0). featurehash's "
         "marginal MB per million rows is given from its two sparse sizes.")
    sparse_peaks: dict[float, int] = {}
    with tempfile.TemporaryDirectory() as work:
        n_groups = args.rows // 20
        scale = sparse_set(n_groups, args.rows - 6 * n_groups, dim=args.compare_dim, nnz=args.nnz, seed=29)
        for name, description, X, truth_of in collections(args) + [
                ("sparse-scale", "planted sparse as above, featurehash alone at --rows", scale, sparse_gmm_pairs)]:
            if sp.issparse(X):
                path = os.path.join(work, f"{name}.npz")
                sp.save_npz(path, X)
            else:
                path = os.path.join(work, f"{name}.npy")
                np.save(path, X)
            truth = truth_of(X, min(args.thresholds))
            n = X.shape[0]
            true_counts = ", ".join(f"{t}: {(truth[2] >= t).sum():,}" for t in args.thresholds)
            emit("", f"{name}: {description}; {n:,} rows; exact pairs {true_counts}", HEADER, "-" * len(HEADER))
            contenders = ("featurehash",) if name == "sparse-scale" else CONTENDERS
            for threshold in args.thresholds:
                runs = measure(path, threshold, args, contenders, 1 if name == "sparse-scale" else args.repeat)
                emit(*(row_line(threshold, variant, n, runs, truth) for variant in runs))
                if name == "sparse":
                    sparse_peaks[threshold] = runs["featurehash"]["peak"]
                if name == "sparse-scale" and n > args.compare_rows:
                    slope = (runs["featurehash"]["peak"] - sparse_peaks[threshold]) / (n - args.compare_rows)
                    emit(f"{'':4s} featurehash marginal peak RSS: {slope * 1e6 / MB:,.0f} MB per million rows "
                         f"(peak at {n:,} rows minus peak at {args.compare_rows:,}, per row)")
                base = runs["featurehash"]
                for variant in (v for v in runs if v != "featurehash"):
                    wall = statistics.median(runs[variant]["wall"]) / statistics.median(base["wall"])
                    cpu = statistics.median(runs[variant]["cpu"]) / statistics.median(base["cpu"])
                    emit(f"{'':4s} {variant} / featurehash: wall {wall:.1f}x, CPU {cpu:.1f}x")
    return lines


def seeds(args) -> list[str]:
    """Recall over map seeds on the test collections (the claim tests/dedup/test_recall.py rests on)."""
    from dedup_truth import (dense_gmm_pairs, dense_set, digits_set, laplacian_pairs, laplacian_set,
                             sparse_gmm_pairs, sparse_set)
    from featurehash import create_map
    from featurehash.dedup import similarity_join
    from featurehash.lsh.banding import choose_bands, collision_probability

    cases = [("dense", dense_set(), "gcws", dense_gmm_pairs, (0.5, 0.7, 0.9)),
             ("sparse", sparse_set(), "gcws", sparse_gmm_pairs, (0.5, 0.7, 0.9)),
             ("digits", digits_set(), "gcws", dense_gmm_pairs, (0.5, 0.7, 0.9)),
             ("laplacian", laplacian_set(), "binning", lambda X, t: laplacian_pairs(X, 1.0, t), (0.7,))]
    lines = [(f"Recall of similarity_join (k = {args.k}, target_recall 0.95) over {args.seeds} map seeds on the "
              f"test collections; E = mean S-curve over the true pairs, indep sd = sqrt(sum p (1 - p)) / m, "
              f"row sd = the row-correlation bound of tests/dedup/test_recall.py"), "",
             (f"{'set':<10s} {'t':>4s} {'pairs':>7s} {'E':>7s} {'indep sd':>8s} {'row sd':>7s} {'mean':>7s} "
              f"{'sd':>7s} {'min':>7s} {'sd/indep':>8s}")]
    print("\n".join(lines), flush=True)
    for name, X, method, truth_of, thresholds in cases:
        ti, tj, ts = truth_of(X, min(thresholds))
        n = X.shape[0]
        for threshold in thresholds:
            true = ts >= threshold
            keys = ti[true] * n + tj[true]
            bands, rows = choose_bands(args.k, threshold, 0.95)
            p = collision_probability(ts[true], bands, rows)
            sd = np.sqrt(p * (1 - p))
            per_row = np.bincount(ti[true], sd, minlength=n) + np.bincount(tj[true], sd, minlength=n)
            independent, row_sd = np.sqrt((sd ** 2).sum()) / p.size, np.sqrt((per_row ** 2).sum()) / p.size
            recalls = []
            for seed in range(args.seeds):
                spec = {"method": method, "input_dim": X.shape[1], "n_components": args.k, "seed": seed}
                if method == "binning":
                    spec["params"] = {"gamma": 1.0}
                result = similarity_join(X, create_map(spec), threshold, target_recall=0.95)
                recalls.append(np.isin(keys, result.i * n + result.j).mean())
            recalls = np.array(recalls)
            lines.append(f"{name:<10s} {threshold:4.2f} {p.size:7d} {p.mean():7.4f} {independent:8.5f} {row_sd:7.5f} "
                         f"{recalls.mean():7.4f} {recalls.std(ddof=1):7.5f} {recalls.min():7.4f} "
                         f"{recalls.std(ddof=1) / independent:8.1f}")
            print(lines[-1], flush=True)
    return lines
