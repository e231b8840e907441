"""Gaussian-quadrature features against RFF: max kernel error vs region diameter, reweighted-grid RMSE
on held-out data, ANOVA convergence, and transform speed.

    python bench/bench_quadrature.py [--samples 20000] [--seeds 3] [--quick] [--sections reweighted]
        [--datasets digits] [--sizes 64,256]
        [--fit-rows 500] [--anova-sizes 400,1000] [--write]

Prints its tables; --write overwrites bench/results/quadrature_*.

1. Max error vs diameter (the paper's Figure 1a-c; docs/methods/fourier.md, "Gaussian quadrature"). Gaussian kernel with
   gamma = 1/2 (spectrum N(0, I), as in the paper). For each diameter M, --samples points u uniform in
   the d-ball of radius M; error = max_u |k~(u) - exp(-||u||^2 / 2)|, k~(u) = the map's estimate of
   k(u, 0). Rules: d = 25 sparse grid of level 2 (676 points after merging antipodes, D = 1352; the
   paper's 1351 points), d = 25 subsampled grid (D = 1352); d = 3 dense grid L = 10 (D = 1000) and
   d = 4 dense grid L = 6 (D = 1296). Baselines: RFF (cos_sin) at equal D (mean over --seeds), and for
   the sparse grid also RFF with as many frequencies as the paper's unfolded points (1351, D = 2702).
   Table: bench/results/quadrature_max_error.txt; plot: bench/results/quadrature_max_error.png.
2. Reweighted grid (section 3.5). sklearn datasets shipped with the package (no download): diabetes
   (442 x 10), breast_cancer (569 x 30), digits (1797 x 64), each standardised, and usps_like (digits
   upsampled to 16 x 16 in [-1, 1], the USPS format); rows shuffled once; fit_sample = the first --fit-rows
   (500, as the paper) rows, held out = the last 600 others; gamma = 1 / median squared distance. Kernel RMSE
   over all held-out pairs at D in {64, 128, 256, 512}: RFF (5 seeds), subsampled grid (3 seeds), reweighted
   grid (mean over --seeds) with forward selection (new requests), the adaptive l1 path (the default before)
   and the paper's plain l1 path; ratios RFF / reweighted; fit time. Then the paper's TIMIT setting: a sparse
   ANOVA kernel of 50 random 5-coordinate subsets on digits and usps_like (--anova-sizes).
   bench/results/quadrature_reweighted.txt.
3. ANOVA (section 4): sliding windows of 3 over d = 10 (8 subsets), gamma = 1/2, 60 rows N(0, 0.35^2 I):
   max and relative Frobenius error of dense grids (L = 2..8), sparse grids (level 1..4) and subsampled
   grids (mean over seeds) per subset. bench/results/quadrature_anova.txt.
4. Transform speed (n = 4096 float32 rows): quadrature (subsampled) vs RFF at equal D.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.spatial.distance import pdist

from featurehash.maps import kernels
from featurehash.maps import create_map
from featurehash.maps.fourier import _quadrature_rules as rules
from timing import best_time

RESULTS = Path(__file__).resolve().parent / "results"
DIAMETERS = (0.125, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
GAMMA = 0.5


def quadrature(d: int, D: int, seed: int = 0, **params):
    return create_map({"method": "quadrature", "input_dim": d, "n_components": D, "seed": seed, "params": params})


def rff(d: int, D: int, seed: int, gamma: float):
    return create_map({"method": "rff", "input_dim": d, "n_components": D, "seed": seed, "params": {"gamma": gamma}})


def ball(n: int, d: int, radius: float, rng) -> np.ndarray:
    directions = rng.standard_normal((n, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return directions * (radius * rng.random(n) ** (1.0 / d))[:, None]


def max_error(m, U: np.ndarray, chunk: int = 4000) -> float:
    worst, zero = 0.0, np.zeros((1, U.shape[1]))
    for start in range(0, len(U), chunk):
        block = U[start:start + chunk]
        estimate = m.kernel(block, zero)[:, 0]
        worst = max(worst, float(np.abs(estimate - np.exp(-GAMMA * np.einsum("ij,ij->i", block, block))).max()))
    return worst


# -------------------------------------------------------------------------------------------
# 1. max error vs diameter
# -------------------------------------------------------------------------------------------

def max_error_rows(samples: int, seeds: int) -> tuple[list[str], list[dict]]:
    setups = [
        ("d=25 sparse L2", 25, quadrature(25, 1352, grid="sparse", level=2, gamma=GAMMA), 1352, 2702),
        ("d=25 subsampled", 25, None, 1352, None),
        ("d=3 dense L10", 3, quadrature(3, 1000, grid="dense", points_per_dim=10, gamma=GAMMA), 1000, None),
        ("d=4 dense L6", 4, quadrature(4, 1296, grid="dense", points_per_dim=6, gamma=GAMMA), 1296, None),
    ]
    rows = []
    for label, d, m, D, paper_D in setups:
        rng = np.random.default_rng(d)
        subsampled = [quadrature(d, D, seed, gamma=GAMMA) for seed in range(seeds)] if m is None else None
        baselines = [rff(d, D, seed, GAMMA) for seed in range(seeds)]
        paper_baselines = [rff(d, paper_D, seed, GAMMA) for seed in range(seeds)] if paper_D else []
        for M in DIAMETERS:
            U = ball(samples, d, M, rng)
            if m is None:  # subsampled: random too, mean over seeds
                ours = np.mean([max_error(one, U) for one in subsampled])
            else:
                ours = max_error(m, U)
            baseline = [max_error(one, U) for one in baselines]
            paper = np.mean([max_error(one, U) for one in paper_baselines]) if paper_D else None
            rows.append({"setup": label, "D": D, "M": M, "quadrature": ours, "rff": float(np.mean(baseline)),
                         "rff_sd": float(np.std(baseline, ddof=1)) if seeds > 1 else 0.0, "rff_paper": paper,
                         "paper_D": paper_D})
            print(f"  {label:16s} M={M:<6g} quadrature {ours:.3e}  RFF {np.mean(baseline):.3e}", flush=True)
    return [s[0] for s in setups], rows


def max_error_table(rows: list[dict], samples: int, seeds: int) -> str:
    lines = [f"Max kernel error over {samples} points uniform in the ball of radius M (gamma = 1/2, spectrum N(0, I)).",
             f"RFF: cos_sin at the same output dimension D, mean (sd) over {seeds} seeds; RFF(paper D): as many",
             "frequencies as the sparse grid's unfolded points (1351 -> D = 2702), the paper's comparison.",
             "ratio = quadrature / RFF (below 1: quadrature wins).", "",
             f"{'setup':17s} {'D':>5s} {'M':>6s} | {'quadrature':>11s} {'RFF':>11s} {'(sd)':>9s} {'ratio':>9s} | "
             f"{'RFF(paper D)':>12s}", "-" * 95]
    for row in rows:
        paper = f"{row['rff_paper']:.3e}" if row["rff_paper"] is not None else "-"
        lines.append(f"{row['setup']:17s} {row['D']:5d} {row['M']:6g} | {row['quadrature']:11.3e} {row['rff']:11.3e} "
                     f"{row['rff_sd']:9.1e} {row['quadrature'] / row['rff']:9.2e} | {paper:>12s}")
    wins = [row for row in rows if row["quadrature"] < row["rff"]]
    lines += ["", "Largest M with quadrature below RFF: " + "; ".join(
        f"{setup} {max([r['M'] for r in wins if r['setup'] == setup], default=0):g}"
        for setup in dict.fromkeys(row["setup"] for row in rows))]
    return "\n".join(lines) + "\n"


def plot_max_error(setups: list[str], rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    groups = [("d = 25 (Figure 1b, 1c)", [s for s in setups if s.startswith("d=25")]),
              ("d = 3, 4 dense grids", [s for s in setups if not s.startswith("d=25")])]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for axis, (title, names) in zip(axes, groups):
        for name in names:
            mine = [row for row in rows if row["setup"] == name]
            M = [row["M"] for row in mine]
            axis.loglog(M, [max(row["quadrature"], 1e-17) for row in mine], "o-", label=f"{name} (D={mine[0]['D']})")
            if name != "d=25 subsampled":
                axis.loglog(M, [row["rff"] for row in mine], "s--", alpha=0.7, label=f"RFF D={mine[0]['D']}")
            if mine[0]["rff_paper"] is not None:
                axis.loglog(M, [row["rff_paper"] for row in mine], "^:", alpha=0.7, label=f"RFF D={mine[0]['paper_D']}")
        axis.set_xticks(DIAMETERS)
        axis.set_xticklabels([f"{M:g}" for M in DIAMETERS], fontsize=7)
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.set_xlabel("region diameter M")
        axis.set_ylabel("max |k~ - k|")
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


# -------------------------------------------------------------------------------------------
# 2. reweighted grid
# -------------------------------------------------------------------------------------------

def load_dataset(name: str) -> np.ndarray:
    """sklearn's sets (no download), rows shuffled once. diabetes, breast_cancer, digits: standardised.
    usps_like: digits' 8x8 images bilinearly upsampled to 16x16 and scaled to [-1, 1], the USPS format
    (USPS itself ships in no package reachable here)."""
    from scipy import ndimage
    from sklearn import datasets

    if name == "usps_like":
        images = datasets.load_digits().images
        X = ndimage.zoom(images, (1, 2, 2), order=1).reshape(len(images), -1) / 8.0 - 1.0
    else:
        X = {"diabetes": datasets.load_diabetes, "breast_cancer": datasets.load_breast_cancer,
             "digits": datasets.load_digits}[name]().data
        X = (X - X.mean(axis=0)) / np.maximum(X.std(axis=0), 1e-12)
    return X[np.random.default_rng(0).permutation(len(X))]


def participation_ratio(X: np.ndarray) -> float:
    """(sum lambda)^2 / sum lambda^2 of the covariance: the data's effective number of dimensions."""
    eigenvalues = np.linalg.eigvalsh(np.cov(X.T))
    return float(eigenvalues.sum() ** 2 / (eigenvalues**2).sum())


def held_out_rmse(m, held: np.ndarray, exact: np.ndarray) -> float:
    upper = np.triu_indices(len(held), k=1)
    return float(np.sqrt(np.mean((m.kernel(held) - exact)[upper] ** 2)))


REWEIGHTED_VARIANTS = {"forward": {}, "l1_path": {"selection": "l1_path"},
                       "paper_l1": {"penalty": "l1", "diagonal_weight": 0.0}}


def split(X: np.ndarray, fit_rows: int, held_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The first fit_rows rows to fit (at most half the set), the last held_rows (disjoint) held out."""
    fit_rows = min(fit_rows, len(X) // 2)
    held_rows = min(held_rows, len(X) - fit_rows)
    return X[:fit_rows], X[len(X) - held_rows:]


def reweighted_rows(datasets: list[str], sizes: list[int], seeds: int, fit_rows: int) -> list[dict]:
    rows = []
    for name in datasets:
        X = load_dataset(name)
        fit, held = split(X, fit_rows, 600)
        d, gamma = X.shape[1], float(1.0 / np.median(pdist(X, "sqeuclidean")))
        exact = kernels.gaussian(held, held, gamma)
        for D in sizes:
            baseline = [held_out_rmse(rff(d, D, seed, gamma), held, exact) for seed in range(5)]
            subsampled = np.mean([held_out_rmse(quadrature(d, D, seed, gamma=gamma), held, exact) for seed in range(3)])
            row = {"dataset": name, "d": d, "D": D, "fit_rows": len(fit), "rff": float(np.mean(baseline)),
                   "rff_sd": float(np.std(baseline, ddof=1)), "subsampled": float(subsampled),
                   "effective_dim": participation_ratio(X)}
            for variant, options in REWEIGHTED_VARIANTS.items():
                errors, seconds = [], []
                for seed in range(seeds):
                    start = time.perf_counter()
                    m = quadrature(d, D, seed, grid="reweighted", gamma=gamma, fit_sample=fit.tolist(), **options)
                    seconds.append(time.perf_counter() - start)
                    errors.append(held_out_rmse(m, held, exact))
                row[variant], row[f"{variant}_seconds"] = float(np.mean(errors)), float(np.median(seconds))
            rows.append(row)
            print(f"  {name:14s} D={D:<4d} RFF {row['rff']:.4f}  forward {row['forward']:.4f} "
                  f"({row['rff'] / row['forward']:.2f}x, {row['forward_seconds']:.2f}s)  l1 path {row['l1_path']:.4f} "
                  f"({row['rff'] / row['l1_path']:.2f}x, {row['l1_path_seconds']:.2f}s)  paper l1 "
                  f"{row['paper_l1']:.4f} ({row['rff'] / row['paper_l1']:.2f}x)", flush=True)
    return rows


def reweighted_table(rows: list[dict], seeds: int, fit_rows: int) -> str:
    lines = [f"Kernel RMSE over all pairs of up to 600 held-out rows (fit_sample: {fit_rows} other rows, at most half",
             "the set: diabetes 221), Gaussian kernel, gamma = 1 / median squared distance. RFF: mean (sd) over 5 seeds;",
             "subsampled grid: mean over 3;",
             f"reweighted: mean over {seeds} seeds (candidates, fit pairs), fit = median seconds to resolve the spec.",
             "forward = greedy forward selection among 8 candidates per point (new requests' default);",
             "l1 path = adaptive l1 path among 4 per point (the default before; selection 'l1_path');",
             "paper l1 = the paper's plain l1 path on sample pairs alone. ratio = RFF / reweighted (paper: 2-3x, on",
             "TIMIT's ANOVA kernel of 5-coordinate subsets; see the ANOVA table below). eff.d = participation ratio",
             "(sum lambda)^2 / sum lambda^2 of the data's covariance.", "",
             f"{'dataset':14s} {'d':>3s} {'eff.d':>5s} {'D':>4s} | {'RFF':>6s} {'(sd)':>6s} {'subs.':>6s} | "
             f"{'forward':>7s} {'ratio':>5s} {'fit':>5s} | {'l1 path':>7s} {'ratio':>5s} {'fit':>5s} | "
             f"{'paper l1':>8s} {'ratio':>5s}", "-" * 112]
    for row in rows:
        lines.append(
            f"{row['dataset']:14s} {row['d']:3d} {row['effective_dim']:5.1f} {row['D']:4d} | {row['rff']:6.4f} "
            f"{row['rff_sd']:6.4f} {row['subsampled']:6.4f} | {row['forward']:7.4f} {row['rff'] / row['forward']:5.2f} "
            f"{row['forward_seconds']:5.2f} | {row['l1_path']:7.4f} {row['rff'] / row['l1_path']:5.2f} "
            f"{row['l1_path_seconds']:5.2f} | {row['paper_l1']:8.4f} {row['rff'] / row['paper_l1']:5.2f}")
    return "\n".join(lines) + "\n"


def anova_reweighted_table(datasets: list[str], sizes: list[int], seeds: int, fit_rows: int) -> str:
    """The paper's TIMIT setting (section 5): a sparse ANOVA kernel of 50 random subsets of 5 coordinates,
    gamma = 1 / median squared distance within a subset; reweighted (forward) vs the subsampled grid, which
    errs like RFF (Figure 1c)."""
    lines = ["Sparse ANOVA kernel, 50 random subsets of 5 coordinates (the paper's TIMIT kernel), k(x, x) = 50;",
             f"fit_sample {fit_rows} rows, RMSE over held-out pairs. subsampled (~ RFF, Figure 1c): mean over 3 seeds;",
             f"reweighted (forward selection): mean over {seeds} seeds; ratio = subsampled / reweighted.", "",
             f"{'dataset':14s} {'D':>5s} | {'subsampled':>10s} {'reweighted':>10s} {'ratio':>5s} {'fit s':>6s}", "-" * 60]
    for name in datasets:
        X = load_dataset(name)
        fit, held = split(X, fit_rows, 600)
        d = X.shape[1]
        rng = np.random.default_rng(7)
        subsets = [sorted(rng.choice(d, 5, replace=False).tolist()) for _ in range(50)]
        gamma = float(1.0 / np.median([pdist(X[:300][:, subset], "sqeuclidean") for subset in subsets]))
        exact = kernels.gaussian_anova(held, held, gamma, subsets)
        family = {"subsets": subsets}
        for D in sizes:
            base = np.mean([held_out_rmse(quadrature(d, D, seed, gamma=gamma, anova=family), held, exact)
                            for seed in range(3)])
            errors, seconds = [], []
            for seed in range(seeds):
                start = time.perf_counter()
                m = quadrature(d, D, seed, grid="reweighted", gamma=gamma, anova=family, fit_sample=fit.tolist())
                seconds.append(time.perf_counter() - start)
                errors.append(held_out_rmse(m, held, exact))
            ours = float(np.mean(errors))
            lines.append(f"{name:14s} {D:5d} | {base:10.4f} {ours:10.4f} {base / ours:5.2f} {np.median(seconds):6.1f}")
            print("  " + lines[-1], flush=True)
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------------
# 3. ANOVA convergence
# -------------------------------------------------------------------------------------------

def anova_table(seeds: int) -> str:
    X = np.random.default_rng(3).standard_normal((60, 10)) * 0.35
    subsets = [list(range(s, s + 3)) for s in range(8)]
    K = kernels.gaussian_anova(X, X, GAMMA, subsets)

    def errors(m) -> tuple[float, float]:
        difference = m.kernel(X) - K
        return float(np.abs(difference).max()), float(np.linalg.norm(difference) / np.linalg.norm(K))

    lines = ["Sparse ANOVA kernel, windows of 3 over d = 10 (8 subsets, k(x, x) = 8), gamma = 1/2, 60 rows",
             f"N(0, 0.35^2 I). Max |K~ - K| and relative Frobenius error; subsampled: mean over {seeds} seeds.", "",
             f"{'rule per subset':24s} {'D':>6s} {'max error':>11s} {'rel. Frob.':>11s}", "-" * 56]
    for L in range(2, 9):
        D = 2 * 8 * rules.dense_grid_size(L, 3)
        worst, frobenius = errors(quadrature(10, D, grid="dense", points_per_dim=L, gamma=GAMMA, anova={"window": 3}))
        lines.append(f"{f'dense L={L}':24s} {D:6d} {worst:11.3e} {frobenius:11.3e}")
    for level in range(1, 5):
        D = 2 * 8 * rules.sparse_grid_size(level, 3)
        m = quadrature(10, D, grid="sparse", level=level, gamma=GAMMA, anova={"window": 3})
        worst, frobenius = errors(m)
        lines.append(f"{f'sparse level {level}' + ('' if m.is_feature_map else ' (est.)'):24s} {D:6d} "
                     f"{worst:11.3e} {frobenius:11.3e}")
    for D in (128, 512, 2048, 8192):
        values = np.array([errors(quadrature(10, D, seed, gamma=GAMMA, anova={"window": 3})) for seed in range(seeds)])
        lines.append(f"{'subsampled':24s} {D:6d} {values[:, 0].mean():11.3e} {values[:, 1].mean():11.3e}")
    lines.append("(est.) = signed weights: a kernel estimate, no feature map.")
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------------
# 4. speed
# -------------------------------------------------------------------------------------------

def speed_table(repeat: int) -> str:
    def best(fn) -> float:
        return best_time(fn, repeat)

    lines = ["Transform time, n = 4096 float32 rows, best of runs (ms):", "",
             f"{'d':>5s} {'D':>6s} {'quadrature':>11s} {'rff':>8s}", "-" * 34]
    rng = np.random.default_rng(0)
    for d, D in ((64, 1024), (512, 4096)):
        X = rng.standard_normal((4096, d)).astype(np.float32)
        q, r = quadrature(d, D, gamma=1.0 / d), rff(d, D, 0, 1.0 / d)
        ours, theirs = best(lambda: q.transform(X)), best(lambda: r.transform(X))
        lines.append(f"{d:5d} {D:6d} {ours * 1e3:11.1f} {theirs * 1e3:8.1f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="fewer samples, seeds and sizes (a smoke run)")
    parser.add_argument("--sections", default="max_error,reweighted,anova,speed",
                        help="comma-separated subset of max_error,reweighted,anova,speed")
    parser.add_argument("--datasets", default=None, help="reweighted: comma-separated datasets")
    parser.add_argument("--sizes", default=None, help="reweighted: comma-separated D values")
    parser.add_argument("--fit-rows", type=int, default=500, help="reweighted: rows of fit_sample (paper: 500)")
    parser.add_argument("--anova-sizes", default="400,1000", help="reweighted ANOVA: comma-separated D values")
    parser.add_argument("--write", action="store_true", help="overwrite bench/results/quadrature_*")
    args = parser.parse_args(argv)
    samples, seeds = (5000, 2) if args.quick else (args.samples, args.seeds)
    sizes = [64, 256] if args.quick else [64, 128, 256, 512]
    datasets = ["diabetes"] if args.quick else ["diabetes", "breast_cancer", "digits", "usps_like"]
    sizes = [int(D) for D in args.sizes.split(",")] if args.sizes else sizes
    datasets = args.datasets.split(",") if args.datasets else datasets
    sections = set(args.sections.split(","))

    def save(name: str, text: str) -> None:
        if args.write:
            RESULTS.mkdir(exist_ok=True)
            (RESULTS / name).write_text(text)

    if "max_error" in sections:
        print("1. max error vs diameter")
        setups, rows = max_error_rows(samples, seeds)
        text = max_error_table(rows, samples, seeds)
        print(text)
        save("quadrature_max_error.txt", text)
        if args.write:
            plot_max_error(setups, rows, RESULTS / "quadrature_max_error.png")
    if "reweighted" in sections:
        print("2. reweighted grid")
        text = reweighted_table(reweighted_rows(datasets, sizes, seeds, args.fit_rows), seeds, args.fit_rows)
        print(text)
        print("2b. reweighted grid, sparse ANOVA kernel")
        anova_sizes = [int(D) for D in args.anova_sizes.split(",")]
        anova_text = anova_reweighted_table([name for name in datasets if name in ("digits", "usps_like")] or
                                            ["digits"], anova_sizes, min(seeds, 2), args.fit_rows)
        print(anova_text)
        save("quadrature_reweighted.txt", text + "\n" + anova_text)
    if "anova" in sections:
        print("3. ANOVA")
        text = anova_table(seeds)
        print(text)
        save("quadrature_anova.txt", text)
    if "speed" in sections:
        print("4. speed")
        print(speed_table(args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
