"""SSF against i.i.d. random features: Gram-matrix error at equal D, index-set energy, and speed.

    python bench/bench_ssf.py [--seeds 5] [--rows 1024] [--repeat 5] [--quick] [--write]

1. Errors (docs/methods/fourier.md, "SSF", the claim to reproduce). Data with unit-norm rows: sklearn's
   load_digits (d = 64) and load_breast_cancer (d = 30, columns standardised first: its raw
   columns differ in scale by 10^4, so unit rows would be nearly parallel). Kernels: Gaussian
   (gamma = 1 / median ||x - y||^2), arc-cosine orders 0 and 1. D in {2d, 4d, 8d}, seeds 0..4.
   Baselines of equal D: `rff` (cos_sin) for the Gaussian, Cho & Saul's sqrt(2/D) step(w.x) (w.x)^b
   with w ~ N(0, I) for the arc-cosine kernels (`featurehash.maps.fourier.ssf.arccos_random_features`).
   Reported: relative Frobenius ||K^ - K||_F / ||K||_F and relative max |K^ - K|_max / |K|_max,
   mean (and sd) over seeds. Two extra columns say where the gain comes from: SSF with a random
   index set instead of the optimised one, and (arc-cosine) i.i.d. directions used with their
   antipodes as SSF uses its own. Text table to stdout; with --write also to
   bench/results/ssf_errors.txt, with a plot in bench/results/ssf_errors.png.
2. Index sets: Riesz log-energy of the seeded random start, of the optimised set, and the mean
   over 10 other random sets; sweeps and convergence; for the sizes above and d = 4096, D = 16384.
3. Speed (n = --rows float32 vectors, D = 4d, d in {256, 1024, 4096}): SSF transform against the
   `rff` transform and the bare product X @ W of the same D, best of --repeat, in the same run.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.spatial.distance import pdist

from featurehash.maps import kernels
from featurehash.maps import create_map
from featurehash.maps.fourier import ssf
from featurehash.maps.fourier import ssf_search
from timing import best_time

RESULTS = Path(__file__).resolve().parent / "results"
KERNELS = ("gaussian", "arccos0", "arccos1")
MULTIPLES = (2, 4, 8)


def load_dataset(name: str) -> np.ndarray:
    from sklearn import datasets

    if name == "digits":
        X = datasets.load_digits().data
    else:
        X = datasets.load_breast_cancer().data
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def median_gamma(X: np.ndarray) -> float:
    return float(1.0 / np.median(pdist(X, "sqeuclidean")))


def gram_errors(K: np.ndarray, estimate: np.ndarray) -> tuple[float, float]:
    difference = estimate - K
    return (float(np.linalg.norm(difference) / np.linalg.norm(K)),
            float(np.abs(difference).max() / np.abs(K).max()))


def exact_gram(X: np.ndarray, kernel: str, gamma: float) -> np.ndarray:
    if kernel == "gaussian":
        return kernels.gaussian(X, X, gamma)
    return kernels.arccos(X, X, ssf.arccos_order(kernel))


def ssf_map(d: int, D: int, seed: int, kernel: str, gamma: float, index_set=None):
    params = {"kernel": kernel, **({"gamma": gamma} if kernel == "gaussian" else {})}
    if index_set is not None:
        params["index_set"] = [int(k) for k in index_set]
    return create_map({"method": "ssf", "input_dim": d, "n_components": D, "seed": seed, "params": params})


def iid_features(X: np.ndarray, D: int, seed: int, kernel: str, gamma: float, *, bidirectional=False):
    if kernel == "gaussian":
        if bidirectional:
            return None
        rff = create_map({"method": "rff", "input_dim": X.shape[1], "n_components": D, "seed": seed,
                          "params": {"gamma": gamma}})
        return rff.transform(X, dtype=np.float64)
    return ssf.arccos_random_features(X, D, ssf.arccos_order(kernel), seed, bidirectional=bidirectional)


def measure_errors(datasets: list[str], seeds: range) -> list[dict]:
    rows = []
    for name in datasets:
        X = load_dataset(name)
        d = X.shape[1]
        gamma = median_gamma(X)
        for kernel in KERNELS:
            K = exact_gram(X, kernel, gamma)
            for multiple in MULTIPLES:
                D = multiple * d
                m, n = ssf.structure(d, D)
                errors: dict[str, list[tuple[float, float]]] = {"ssf": [], "iid": [], "ssf_random_L": [],
                                                                 "iid_antipodal": []}
                for seed in seeds:
                    errors["ssf"].append(gram_errors(K, ssf_map(d, D, seed, kernel, gamma).kernel(X)))
                    Z = iid_features(X, D, seed, kernel, gamma)
                    errors["iid"].append(gram_errors(K, Z @ Z.T))
                    random_L = ssf_search.random_index_set(m, n, 10_000 + seed)
                    errors["ssf_random_L"].append(
                        gram_errors(K, ssf_map(d, D, seed, kernel, gamma, random_L).kernel(X)))
                    Z = iid_features(X, D, seed, kernel, gamma, bidirectional=True)
                    if Z is not None:
                        errors["iid_antipodal"].append(gram_errors(K, Z @ Z.T))
                rows.append({"dataset": name, "d": d, "gamma": gamma, "kernel": kernel, "multiple": multiple,
                             "D": D, **{key: np.array(value) for key, value in errors.items() if value}})
                print(".", end="", flush=True)
    print()
    return rows


def error_table(rows: list[dict], seeds: int) -> str:
    lines = [f"Relative Gram-matrix errors, mean (sd) over {seeds} seeds; ratio = SSF / i.i.d. (below 1: SSF wins)",
             "fro = ||K^ - K||_F / ||K||_F, max = |K^ - K|_max / |K|_max. Extra columns, as fro/max ratios to",
             "i.i.d.: randL = SSF with a random index set instead of the optimised one; iid+- = i.i.d. Gaussian",
             "directions each used with its antipode, as SSF uses its directions (arc-cosine only).",
             ""]
    header = (f"{'dataset':14s} {'kernel':8s} {'D':>8s} | {'SSF fro':>15s} {'iid fro':>15s} {'ratio':>5s} | "
              f"{'SSF max':>15s} {'iid max':>15s} {'ratio':>5s} | {'randL':>9s} | {'iid+-':>9s}")
    lines += [header, "-" * len(header)]

    def cell(values, column):
        return f"{values[:, column].mean():.4f} ({values[:, column].std(ddof=1):.4f})"

    def ratio_pair(values, reference):
        ratio = values.mean(axis=0) / reference.mean(axis=0)
        return f"{ratio[0]:.2f}/{ratio[1]:.2f}"

    for row in rows:
        ssf_errors, iid_errors = row["ssf"], row["iid"]
        ratio = ssf_errors.mean(axis=0) / iid_errors.mean(axis=0)
        antipodal = ratio_pair(row["iid_antipodal"], iid_errors) if "iid_antipodal" in row else "-"
        size = f"{row['multiple']}d={row['D']}"
        lines.append(f"{row['dataset']:14s} {row['kernel']:8s} {size:>8s} | "
                     f"{cell(ssf_errors, 0)} {cell(iid_errors, 0)} {ratio[0]:5.2f} | "
                     f"{cell(ssf_errors, 1)} {cell(iid_errors, 1)} {ratio[1]:5.2f} | "
                     f"{ratio_pair(row['ssf_random_L'], iid_errors):>9s} | {antipodal:>9s}")
    wins = sum(bool(np.all(row["ssf"].mean(axis=0) < row["iid"].mean(axis=0))) for row in rows)
    lines.append(f"\nSSF below i.i.d. on both metrics in {wins} of {len(rows)} cases.")
    for kernel in KERNELS:
        ratios = np.array([row["ssf"].mean(axis=0) / row["iid"].mean(axis=0)
                           for row in rows if row["kernel"] == kernel])
        lines.append(f"  {kernel:8s}: SSF / i.i.d. fro {ratios[:, 0].min():.2f}-{ratios[:, 0].max():.2f}, "
                     f"max {ratios[:, 1].min():.2f}-{ratios[:, 1].max():.2f}")
    gammas = sorted({(row["dataset"], row["gamma"]) for row in rows})
    lines.append("  gamma (Gaussian) = 1/median ||x-y||^2: " + ", ".join(f"{name} {g:.3f}" for name, g in gammas))
    return "\n".join(lines)


def plot_errors(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({row["dataset"] for row in rows})
    figure, axes = plt.subplots(len(datasets), len(KERNELS), figsize=(4.2 * len(KERNELS), 3.4 * len(datasets)),
                                squeeze=False)
    for i, name in enumerate(datasets):
        for j, kernel in enumerate(KERNELS):
            axis = axes[i][j]
            selected = [row for row in rows if row["dataset"] == name and row["kernel"] == kernel]
            D = [row["D"] for row in selected]
            for key, label, colour in (("ssf", "SSF", "tab:blue"), ("iid", "i.i.d.", "tab:orange")):
                for column, style, metric in ((0, "-o", "fro"), (1, "--s", "max")):
                    values = np.array([row[key][:, column] for row in selected])
                    axis.errorbar(D, values.mean(axis=1), yerr=values.std(axis=1, ddof=1), fmt=style,
                                  color=colour, capsize=3, markersize=4, label=f"{label} {metric}")
            axis.set_xscale("log", base=2)
            axis.set_yscale("log")
            axis.set_xticks(D, [f"{row['multiple']}d" for row in selected])
            axis.set_title(f"{name} (d={selected[0]['d']}): {kernel}")
            axis.set_xlabel("D")
            if j == 0:
                axis.set_ylabel("relative Gram error")
            axis.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    figure.suptitle("SSF vs i.i.d. random features at equal D (mean and sd over seeds; solid: Frobenius, dashed: max)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def energy_report(sizes: list[tuple[int, int]]) -> str:
    lines = ["Index sets: Riesz log-energy of the 4n points +-V (the spec's objective), seed 0",
             f"{'m':>5s} {'n':>5s} | {'random start':>16s} {'optimised':>16s} {'drop':>10s} | "
             f"{'10 random sets':>16s} {'sd':>8s} | {'sweeps':>6s} {'swaps':>6s} {'conv':>5s} {'exact':>5s} "
             f"{'time':>7s}"]
    for m, n in sizes:
        ssf_search.optimised_index_set.cache_clear()
        start = time.perf_counter()
        result = ssf_search.optimised_index_set(m, n, 0, ssf_search.SPEC_POINT_SET)
        seconds = time.perf_counter() - start
        others = np.array([ssf_search.riesz_log_energy(ssf_search.random_index_set(m, n, seed), n) for seed in range(1, 11)])
        lines.append(f"{m:5d} {n:5d} | {result.initial_energy:16.3f} {result.final_energy:16.3f} "
                     f"{result.initial_energy - result.final_energy:10.3f} | "
                     f"{others.mean():16.3f} {others.std(ddof=1):8.3f} | "
                     f"{result.sweeps:6d} {result.swaps:6d} {str(result.converged):>5s} {str(result.exact):>5s} "
                     f"{seconds:6.2f}s")
    return "\n".join(lines)




def speed_report(rows: int, repeat: int, dims: tuple[int, ...]) -> str:
    lines = [f"Speed: n={rows} float32 vectors, D = 4d, best of {repeat} (ratio > 1: SSF faster)",
             f"{'d':>5s} {'D':>6s} | {'spec':>7s} | {'ssf gauss':>10s} {'ssf arccos1':>11s} | {'rff':>9s} "
             f"{'X @ W':>9s} | {'rff/ssf':>7s} {'XW/ssf':>7s}"]
    print("\n".join(lines), flush=True)
    rng = np.random.default_rng(0)
    for d in dims:
        D = 4 * d
        X = rng.standard_normal((rows, d)).astype(np.float32)
        ssf_search.optimised_index_set.cache_clear()
        start = time.perf_counter()
        gaussian = create_map({"method": "ssf", "input_dim": d, "n_components": D, "params": {"gamma": 1.0 / d}})
        spec_seconds = time.perf_counter() - start
        arccos1 = create_map({"method": "ssf", "input_dim": d, "n_components": D, "params": {"kernel": "arccos1"}})
        rff = create_map({"method": "rff", "input_dim": d, "n_components": D, "params": {"gamma": 1.0 / d}})
        W = np.ascontiguousarray(rff.materialize()._parameters_for(np.dtype(np.float32))[0].T)
        t_ssf = best_time(lambda: gaussian.transform(X), repeat)
        t_arccos = best_time(lambda: arccos1.transform(X), repeat)
        t_rff = best_time(lambda: rff.transform(X), repeat)
        t_product = best_time(lambda: X @ W, repeat)
        lines.append(f"{d:5d} {D:6d} | {spec_seconds:6.2f}s | {t_ssf * 1e3:8.1f}ms {t_arccos * 1e3:9.1f}ms | "
                     f"{t_rff * 1e3:7.1f}ms {t_product * 1e3:7.1f}ms | {t_rff / t_ssf:7.2f} {t_product / t_ssf:7.2f}")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="breast_cancer only, d <= 1024 for speed")
    parser.add_argument("--write", action="store_true", help="write bench/results/ssf_errors.{txt,png}")
    args = parser.parse_args()

    datasets = ["breast_cancer"] if args.quick else ["digits", "breast_cancer"]
    rows = measure_errors(datasets, range(args.seeds))
    table = error_table(rows, args.seeds)
    print(table)

    sizes = sorted({ssf.structure(row["d"], row["D"]) for row in rows})
    if not args.quick:
        sizes.append((2048, 4096))
    energies = energy_report(sizes)
    print("\n" + energies + "\n")

    speed = speed_report(args.rows, args.repeat, (256, 1024) if args.quick else (256, 1024, 4096))
    if args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        plot_errors(rows, RESULTS / "ssf_errors.png")
        (RESULTS / "ssf_errors.txt").write_text("\n\n".join([table, energies, speed]) + "\n")
        print(f"\nwrote {RESULTS / 'ssf_errors.txt'} and {RESULTS / 'ssf_errors.png'}")


if __name__ == "__main__":
    main()
