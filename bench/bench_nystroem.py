"""scikit-learn's kernel_approximation methods in featurehash: Nystroem accuracy beside every dense map, and
transform speed of nystroem, additive_chi2 and skewed_chi2 against scikit-learn's.

    python bench/bench_nystroem.py [--seeds 5] [--write]

1. Held-out kernel RMSE, Gaussian kernel exp(-gamma ||x - y||^2), at D in {64, 128, 512} on two datasets
   shipped with scikit-learn (no download): digits (1797 x 64; 797 fitting rows, 1000 held out) and
   breast_cancer (569 x 30; 300 fitting rows, 269 held out), each standardised, rows shuffled
   once, gamma = 1 / median squared distance of the fitting rows. RMSE over all held-out pairs; random maps
   averaged over --seeds seeds. Rows: featurehash nystroem (rpcholesky and uniform landmarks), every
   featurehash dense map for the Gaussian kernel (rff cos_sin and phase, ssf, quadrature subsampled and
   reweighted; "-" where the size does not exist), scikit-learn's Nystroem and RBFSampler. Nystroem
   with D above the fitting rows takes every row as a landmark (both libraries: breast_cancer at
   D = 512, where the two are the same estimate). The other dense maps
   target other kernels: a second table at D = 128 compares on digits the polynomial kernel
   (1 + gamma <x, y>)^2 (nystroem, tensorsketch, random_maclaurin, scikit-learn's Nystroem and
   PolynomialCountSketch) and the arc-cosine kernel of order 1 (nystroem, ssf).
2. Transform speed (best of 5, 4096 rows of digits, float64 in and out, as scikit-learn computes;
   featurehash's default float32 output alongside): nystroem (Gaussian, D = 512) vs Nystroem,
   additive_chi2 (2 steps; dense and CSR input) vs AdditiveChi2Sampler, skewed_chi2 (D = 512) vs
   SkewedChi2Sampler. Ratio = scikit-learn time / featurehash time (> 1: featurehash faster).
Prints the tables; --write also writes bench/results/nystroem.txt.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import pdist
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.kernel_approximation import (AdditiveChi2Sampler, Nystroem, PolynomialCountSketch, RBFSampler,
                                          SkewedChi2Sampler)
from sklearn.preprocessing import StandardScaler

from featurehash.maps import kernels
from featurehash.maps import SpecError, create_map
from timing import best_time

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (64, 128, 512)


def dataset(name: str):
    X, fit_rows, held_rows = ((load_digits().data, 797, 1000) if name == "digits"
                              else (load_breast_cancer().data, 300, 269))
    X = StandardScaler().fit_transform(X)
    X = X[np.random.default_rng(0).permutation(len(X))]
    fit, held = X[:fit_rows], X[fit_rows:fit_rows + held_rows]
    return fit, held, 1.0 / float(np.median(pdist(fit, "sqeuclidean")))


def rmse(estimate: np.ndarray, exact: np.ndarray) -> float:
    return float(np.sqrt(np.mean((estimate - exact) ** 2)))


def featurehash_estimate(method: str, params: dict, fit: np.ndarray, held: np.ndarray, D: int, seed: int):
    params = dict(params)
    if params.pop("fitted", False):
        params["fit_sample"] = fit.tolist()
    try:
        m = create_map({"method": method, "input_dim": fit.shape[1], "n_components": D, "seed": seed,
                        "params": params})
    except SpecError:
        return None
    return m.kernel(held)


def sklearn_estimate(make, fit, held):
    Z = make().fit(fit).transform(held)
    return Z @ Z.T


def gaussian_rows(gamma: float) -> dict:
    return {
        "featurehash nystroem (rpcholesky)": ("nystroem", {"gamma": gamma, "fitted": True}),
        "featurehash nystroem (uniform)": ("nystroem", {"gamma": gamma, "sampling": "uniform", "fitted": True}),
        "featurehash rff cos_sin": ("rff", {"gamma": gamma}),
        "featurehash rff phase": ("rff", {"gamma": gamma, "variant": "phase"}),
        "featurehash ssf": ("ssf", {"gamma": gamma}),
        "featurehash quadrature subsampled": ("quadrature", {"gamma": gamma}),
        "featurehash quadrature reweighted": ("quadrature", {"gamma": gamma, "grid": "reweighted", "fitted": True}),
    }


def accuracy_table(name: str, seeds: int) -> list[str]:
    fit, held, gamma = dataset(name)
    exact = kernels.gaussian(held, held, gamma)
    lines = [f"{name}: {fit.shape[1]} features, {len(fit)} fitting rows, {len(held)} held out, gamma = {gamma:.4g}; "
             f"held-out Gaussian kernel RMSE (mean over {seeds} seeds)",
             f"  {'map':40s}" + "".join(f"{'D = ' + str(D):>12s}" for D in SIZES)]
    results: dict[str, list[float | None]] = {}
    for label, (method, params) in gaussian_rows(gamma).items():
        row = []
        for D in SIZES:
            estimates = [featurehash_estimate(method, params, fit, held, D, s) for s in range(seeds)]
            row.append(None if estimates[0] is None else float(np.mean([rmse(e, exact) for e in estimates])))
        results[label] = row
    for label, make in (("scikit-learn Nystroem", lambda D, s: Nystroem(gamma=gamma, n_components=D, random_state=s)),
                        ("scikit-learn RBFSampler", lambda D, s: RBFSampler(gamma=gamma, n_components=D,
                                                                            random_state=s))):
        results[label] = [float(np.mean([rmse(sklearn_estimate(lambda: make(D, s), fit, held), exact)
                                         for s in range(seeds)])) for D in SIZES]
    for label, row in results.items():
        lines.append(f"  {label:40s}" + "".join(f"{'-' if v is None else f'{v:.5f}':>12s}" for v in row))
    ours, theirs = results["featurehash nystroem (rpcholesky)"], results["scikit-learn Nystroem"]
    lines.append(f"  {'sklearn Nystroem / featurehash nystroem':40s}"
                 + "".join(f"{b / a:>12.2f}" for a, b in zip(ours, theirs)))
    return lines


def other_kernels_table(seeds: int) -> list[str]:
    fit, held, _ = dataset("digits")
    D, gamma = 128, 1.0 / fit.shape[1]
    lines = [f"digits, D = {D}, other kernels (mean over {seeds} seeds): held-out RMSE / RMS of the exact kernel"]
    poly = kernels.polynomial(gamma * held, held, 2, 1.0)
    scaled_fit, scaled_held = np.sqrt(gamma) * fit, np.sqrt(gamma) * held
    rows = {
        "featurehash nystroem polynomial": lambda s: featurehash_estimate(
            "nystroem", {"kernel": "polynomial", "gamma": gamma, "degree": 2, "coef0": 1.0, "fitted": True},
            fit, held, D, s),
        "featurehash tensorsketch": lambda s: featurehash_estimate(
            "tensorsketch", {"degree": 2, "coef0": 1.0}, scaled_fit, scaled_held, D, s),
        "featurehash random_maclaurin": lambda s: featurehash_estimate(
            "random_maclaurin", {"degree": 2, "coef0": 1.0}, scaled_fit, scaled_held, D, s),
        "scikit-learn Nystroem poly": lambda s: sklearn_estimate(
            lambda: Nystroem(kernel="poly", gamma=gamma, degree=2, coef0=1.0, n_components=D, random_state=s),
            fit, held),
        "scikit-learn PolynomialCountSketch": lambda s: sklearn_estimate(
            lambda: PolynomialCountSketch(gamma=gamma, degree=2, coef0=1.0, n_components=D, random_state=s),
            fit, held),
    }
    scale = float(np.sqrt(np.mean(poly**2)))
    lines.append("  polynomial (1 + gamma <x, y>)^2, gamma = 1/64")
    for label, estimate in rows.items():
        lines.append(f"    {label:38s}{np.mean([rmse(estimate(s), poly) for s in range(seeds)]) / scale:>12.5f}")
    arccos = kernels.arccos(held, held, 1)
    scale = float(np.sqrt(np.mean(arccos**2)))
    lines.append("  arc-cosine, order 1")
    for label, (method, params) in (("featurehash nystroem arccos1", ("nystroem", {"kernel": "arccos1",
                                                                                   "fitted": True})),
                                    ("featurehash ssf arccos1", ("ssf", {"kernel": "arccos1"}))):
        error = np.mean([rmse(featurehash_estimate(method, params, fit, held, D, s), arccos) for s in range(seeds)])
        lines.append(f"    {label:38s}{error / scale:>12.5f}")
    return lines


def speed_table() -> list[str]:
    digits = load_digits().data
    X = np.tile(digits, (3, 1))[:4096]
    gamma = 1.0 / 64 / X.var()
    fit = X[:1000]
    lines = ["transform speed, 4096 rows of digits (64 features); best of 5; ratio = scikit-learn / featurehash"]

    def row(label, ours, theirs, ours32=None):
        t_ours, t_theirs = best_time(ours, 5), best_time(theirs, 5)
        extra = f", float32 out {t_theirs / best_time(ours32, 5):.2f}" if ours32 else ""
        lines.append(f"  {label:34s} featurehash {1e3 * t_ours:8.2f} ms  scikit-learn {1e3 * t_theirs:8.2f} ms  "
                     f"ratio {t_theirs / t_ours:5.2f}{extra}")

    ours = create_map({"method": "nystroem", "input_dim": 64, "n_components": 512, "seed": 0,
                       "params": {"gamma": gamma, "fit_sample": fit.tolist()}})
    theirs = Nystroem(gamma=gamma, n_components=512, random_state=0).fit(fit)
    row("nystroem gaussian D = 512", lambda: ours.transform(X, dtype=np.float64), lambda: theirs.transform(X),
        lambda: ours.transform(X))
    additive = create_map({"method": "additive_chi2", "input_dim": 64, "n_components": 192})
    sampler = AdditiveChi2Sampler().fit(X)
    row("additive_chi2 2 steps, dense", lambda: additive.transform(X, dtype=np.float64), lambda: sampler.transform(X),
        lambda: additive.transform(X))
    Xs = sp.csr_matrix(X)
    row("additive_chi2 2 steps, CSR in/out", lambda: additive.transform_sparse(Xs, dtype=np.float64),
        lambda: sampler.transform(Xs))
    skewed = create_map({"method": "skewed_chi2", "input_dim": 64, "n_components": 512, "seed": 0})
    sk_skewed = SkewedChi2Sampler(n_components=512, random_state=0).fit(X)
    row("skewed_chi2 D = 512", lambda: skewed.transform(X, dtype=np.float64), lambda: sk_skewed.transform(X),
        lambda: skewed.transform(X))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="write bench/results/nystroem.txt")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="n_components > n_samples")  # scikit-learn's Nystroem, noted above
    started = time.perf_counter()
    lines = [*accuracy_table("digits", args.seeds), "", *accuracy_table("breast_cancer", args.seeds), "",
             *other_kernels_table(args.seeds), "", *speed_table(),
             f"(bench took {time.perf_counter() - started:.0f} s)"]
    print("\n".join(lines))
    if args.write:
        (RESULTS / "nystroem.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
