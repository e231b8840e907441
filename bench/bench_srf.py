"""SRF against Random Maclaurin and TensorSketch: kernel MSE (the paper's Figure 2), the fit, speed.

    python bench/bench_srf.py [--rows 1000] [--seeds 5] [--repeat 5] [--quick] [--write]

1. Kernel MSE (docs/methods/fourier.md, "SRF", the claim to reproduce). sklearn's load_digits (d = 64, shipped
   with scikit-learn), rows scaled to unit norm, --rows of them (a fixed random subset; all 1797
   with --rows 0). Bias a = 4 as in the paper's experiments, p in {3, 7, 10, 20},
   D in {512, 1024, 2048, 4096}, seeds 0..4. All methods are measured against the same kernel,
   SRF's K = alpha (q + <x, y>)^p with q = a^2/2 - 1, alpha = (2/a^2)^p: the baselines get
   coef0 = q, estimate (q + <x, y>)^p, and their estimates are multiplied by alpha (their MSE on
   their own scale is the one reported divided by alpha^2). MSE = mean over all pairs of
   (K^ - K)^2, mean (sd) over seeds; SRF is the paper's "phase" form, with the "cos_sin" variant
   as an extra row. Text table to stdout (with --write also to bench/results/srf_mse.txt, and a plot (MSE against D
   per p, as Figure 2, to bench/results/srf_mse.png).
2. The fit: L (eq. 5) of the shell fit, of the paper's mixture fit and of the single-Gaussian bound (section 4, N = 1),
   and the large-p bound of eq. (6), per p, for d = 64 and 784, a = 2 and 4; fit time for
   d = 784, p = 10, cold and cached.
3. Speed: SRF transform at n = 4096, d = 512, D = 4096 (float32) for p in {3, 10, 20} as a ratio
   to the numpy floor X @ W + b, cos, scale measured in the same run (the floor of
   bench_maps.py; every timing is the best of --repeat, interleaved with the floor's); the
   baselines' transforms for comparison.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

# The working tree this file lives in, ahead of whatever tree an editable install points at
# (CI's `pip install -e` in a clone repoints it), and bench_maps beside it.
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from bench_maps import fourier_floor  # noqa: E402  (the same floor as the other dense maps)
from featurehash.maps import kernels  # noqa: E402
from featurehash.maps.fourier import _spherical_mixture as mixture  # noqa: E402
from featurehash.maps.fourier import _spherical_shells as shells  # noqa: E402
from featurehash.maps import create_map  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DEGREES = (3, 7, 10, 20)
WIDTHS = (512, 1024, 2048, 4096)
BIAS = 4.0
METHODS = ("random_maclaurin", "tensorsketch", "srf", "srf cos_sin")
LABELS = {"random_maclaurin": "RM", "tensorsketch": "TS", "srf": "SRF", "srf cos_sin": "SRF cos_sin"}


def load_digits_unit(rows: int) -> np.ndarray:
    from sklearn.datasets import load_digits

    X = load_digits().data
    if rows:
        X = X[np.random.default_rng(0).choice(len(X), min(rows, len(X)), replace=False)]
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def method_map(method: str, degree: int, D: int, seed: int):
    q = BIAS**2 / 2 - 1
    if method.startswith("srf"):
        variant = "cos_sin" if method.endswith("cos_sin") else "phase"
        params = {"degree": degree, "bias": BIAS, "variant": variant}
        return create_map({"method": "srf", "input_dim": 64, "n_components": D, "seed": seed, "params": params})
    return create_map({"method": method, "input_dim": 64, "n_components": D, "seed": seed,
                       "params": {"degree": degree, "coef0": q}})


def kernel_mse(X: np.ndarray, seeds: int, degrees=DEGREES, widths=WIDTHS) -> dict:
    """{(method, p, D): per-seed MSE array} against alpha (q + <x, y>)^p."""
    results = {}
    for degree in degrees:
        K = kernels.spherical_polynomial(X, X, degree, BIAS)
        alpha = (2 / BIAS**2) ** degree
        for D in widths:
            for method in METHODS:
                factor = 1.0 if method.startswith("srf") else alpha
                errors = []
                for seed in range(seeds):
                    Z = method_map(method, degree, D, seed).transform(X, dtype=np.float64)
                    errors.append(np.mean((factor * (Z @ Z.T) - K) ** 2))
                results[method, degree, D] = np.array(errors)
            print(f"  p={degree} D={D}: " + ", ".join(f"{LABELS[m]} {results[m, degree, D].mean():.2e}"
                                                      for m in METHODS), flush=True)
    return results


def mse_table(results: dict, degrees=DEGREES, widths=WIDTHS) -> str:
    lines = ["Kernel MSE on unit-normalised digits against alpha (q + <x, y>)^p, a = 4 "
             "(mean (sd) over seeds; baselines' estimates times alpha)", ""]
    header = f"{'p':>3} {'method':<12}" + "".join(f"{'D=' + str(D):>22}" for D in widths)
    lines.append(header)
    for degree in degrees:
        for method in METHODS:
            cells = "".join(f"{results[method, degree, D].mean():>12.2e} ({results[method, degree, D].std(ddof=1):.1e})"
                            for D in widths)
            lines.append(f"{degree:>3} {LABELS[method]:<12}{cells}")
        best_baseline = [min(results[m, degree, D].mean() for m in ("random_maclaurin", "tensorsketch"))
                         for D in widths]
        ratios = "".join(f"{b / results['srf', degree, D].mean():>22.1f}" for b, D in zip(best_baseline, widths))
        lines.append(f"{degree:>3} {'best/SRF':<12}{ratios}")
        lines.append("")
    return "\n".join(lines)


def plot_mse(results: dict, path: Path, degrees=DEGREES, widths=WIDTHS) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(degrees), figsize=(4 * len(degrees), 3.4))
    for axis, degree in zip(np.atleast_1d(axes), degrees):
        for method, style in zip(METHODS, ("s-", "^-", "o-", "o--")):
            means = np.array([results[method, degree, D].mean() for D in widths])
            sds = np.array([results[method, degree, D].std(ddof=1) for D in widths])
            axis.errorbar(np.log2(widths), means, yerr=sds, fmt=style, capsize=3, label=LABELS[method])
        axis.set_yscale("log")
        axis.set_title(f"p = {degree}")
        axis.set_xlabel("log2(D)")
        axis.set_xticks(np.log2(widths))
    np.atleast_1d(axes)[0].set_ylabel("kernel MSE")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    figure.suptitle("Unit-normalised digits, a = 4: SRF vs Random Maclaurin (RM) and TensorSketch (TS)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def independent_loss(kernel_values: np.ndarray, z: np.ndarray, weights: np.ndarray, bias: float, degree: int) -> float:
    return float(0.5 * weights @ (kernel_values - mixture.target_kernel(z, bias, degree)) ** 2)


def fit_report() -> str:
    """L (eq. 5, on a 200-node Gauss-Legendre rule independent of both fits) of the shell fit (since 0.2),
    of the paper's N = 10 clipped Gaussian mixture fit (0.1), and of the single-Gaussian bound."""
    nodes, weights = np.polynomial.legendre.leggauss(200)
    z = nodes + 1.0
    lines = ["Fitted spectrum: L (eq. 5) of the shell fit, of the paper's 10-term mixture fit and of the "
             "single-Gaussian bound (N = 1), eq. (6)", ""]
    lines.append(f"{'a':>4} {'d':>5} {'p':>3} {'L shells':>10} {'L mixture':>10} {'shell/mix':>9} {'L N=1':>10} "
                 f"{'eq.(6)':>10} {'shells':>6} {'fit s':>6}")
    for bias in (2.0, 4.0):
        for dim in (64, 784):
            for degree in (1, 3, 7, 10, 20):
                start = time.perf_counter()
                fit = shells.fit_shells(bias, degree, dim)
                seconds = time.perf_counter() - start
                old = mixture.fit_mixture(bias, degree, dim)
                new_loss = independent_loss(shells.shells_kernel(z, fit.radii, fit.masses, dim), z, weights, bias,
                                            degree)
                old_loss = independent_loss(mixture.mixture_kernel(z, old.weights, old.scales, dim), z, weights,
                                            bias, degree)
                eq6 = 105.0 / 4096.0 * np.sqrt(np.pi / 2.0) * bias / degree**2.5
                lines.append(f"{bias:>4g} {dim:>5} {degree:>3} {new_loss:>10.2e} {old_loss:>10.2e} "
                             f"{new_loss / old_loss:>9.3f} {old.single_loss:>10.2e} {eq6:>10.2e} "
                             f"{len(fit.radii):>6} {seconds:>6.2f}")
    shells.fit_shells.cache_clear()
    request = {"method": "srf", "input_dim": 784, "n_components": 1024, "params": {"degree": 10, "bias": BIAS}}
    start = time.perf_counter()
    create_map(request)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    create_map(request)
    cached = time.perf_counter() - start
    lines += ["", f"create_map srf d=784 p=10 (a=4): first {cold:.3f} s (fit), again {cached * 1e3:.2f} ms (cached)"]
    return "\n".join(lines)


def interleaved_best(functions: dict, repeat: int) -> dict:
    """Best time of each function over `repeat` rounds, the functions taking turns (so a busy
    spell on the shared machine hits them all alike)."""
    for fn in functions.values():
        fn()  # warm-up: parameters, caches
    best = {name: np.inf for name in functions}
    for _ in range(repeat):
        for name, fn in functions.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def speed_report(repeat: int) -> str:
    n, d, D = 4096, 512, 4096
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d)).astype(np.float32)
    W = (rng.standard_normal((d, D)) / np.sqrt(d)).astype(np.float32)
    b = rng.uniform(0, 2 * np.pi, D).astype(np.float32)
    scale = np.float32(np.sqrt(2.0 / D))
    functions = {"floor": lambda: fourier_floor(X, W, b, scale)}
    for degree in (3, 10, 20):
        m = create_map({"method": "srf", "input_dim": d, "n_components": D, "params": {"degree": degree}})
        functions[f"srf p={degree}"] = lambda m=m: m.transform(X)
    best = interleaved_best(functions, repeat)
    floor = best["floor"]
    lines = [f"Transform, n={n} d={d} D={D}, float32 in and out: numpy floor (X @ W + b, cos, scale) "
             f"{floor * 1e3:.1f} ms"]
    for name in functions:
        if name != "floor":
            lines.append(f"  {name:<22} {best[name] * 1e3:8.1f} ms  {best[name] / floor:5.3f}x floor")
    baselines = {}
    for method in ("random_maclaurin", "tensorsketch"):
        for degree in (3, 10, 20):
            m = create_map({"method": method, "input_dim": d, "n_components": D,
                            "params": {"degree": degree, "coef0": 1.0}})
            baselines[f"{method} p={degree}"] = lambda m=m: m.transform(X / np.sqrt(d))
    best = interleaved_best(baselines, 1)
    for name, seconds in best.items():
        lines.append(f"  {name:<22} {seconds * 1e3:8.1f} ms  {seconds / floor:5.2f}x floor (one run)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000, help="digits rows used (0: all 1797)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="p in {3, 20}, D in {512, 2048}, 300 rows, 3 seeds")
    parser.add_argument("--write", action="store_true", help="overwrite bench/results/srf_mse.{txt,png}")
    args = parser.parse_args()
    degrees, widths = (DEGREES, WIDTHS) if not args.quick else ((3, 20), (512, 2048))
    rows, seeds = (args.rows, args.seeds) if not args.quick else (300, 3)
    RESULTS.mkdir(parents=True, exist_ok=True)

    X = load_digits_unit(rows)
    print(f"1. Kernel MSE: {len(X)} unit-normalised digits, {seeds} seeds")
    start = time.perf_counter()
    results = kernel_mse(X, seeds, degrees, widths)
    table = mse_table(results, degrees, widths)
    print(f"   ({time.perf_counter() - start:.0f} s)\n")
    print(table)
    if args.write:
        (RESULTS / "srf_mse.txt").write_text(table + "\n")
        plot_mse(results, RESULTS / "srf_mse.png", degrees, widths)
        print(f"wrote {RESULTS / 'srf_mse.txt'} and {RESULTS / 'srf_mse.png'}\n")

    print("2. " + fit_report() + "\n")
    print("3. " + speed_report(args.repeat))


if __name__ == "__main__":
    main()
