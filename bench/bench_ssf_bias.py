"""Bias over seeds of every dense map, and SSF's error against i.i.d. features with and without rotation.

    python bench/bench_ssf_bias.py [--seeds 30] [--error-seeds 5] [--repeat 5] [--skip-bias] [--skip-errors]
                                   [--skip-speed] [--write]

1. Bias. 16 rows of sklearn's load_digits (d = 64) scaled to unit norm, D in {256, 1024}, seeds
   0..--seeds-1. For each map and each of the 120 pairs x != y: e = K^(x, y) - K(x, y) per seed,
   z = mean(e) / (sd(e) / sqrt(S)). Reported: max |z| and mean z^2 over the pairs. For an unbiased
   estimate z is Student-t with S - 1 dof: mean z^2 about (S - 1) / (S - 3) (pairs share rows, so
   its spread is wider than for independent pairs), max |z| mostly below 4.5 (S = 30: a |t| above 5
   has probability ~2e-5 per pair). K is the map's exact kernel, except SRF (its fitted kernel K^,
   what it claims to be unbiased for; its fit error against the exact kernel is bench_srf.py's) and
   the subsampled quadrature grid, which is unbiased for its L-point grid rule, not for the kernel:
   its z against the exact kernel measures the rule's error (the grids' region, README).
   Gaussian maps use gamma = 1 / median ||x - y||^2 of these rows. Also t(avg): the error averaged over
   pairs, per seed, then mean / standard error over seeds, which is Student-t for an unbiased map
   however the pairs correlate (mean z^2 over correlated pairs spreads widely between runs); each
   map is listed with its claim (unbiased; NRFF "consistent, O(1/D) bias", with the t its first-order
   bias -(k - k^5)/(8D) predicts; ...) and unbiased maps get a verdict. Maps without randomness or
   fitted to data are not in it (quadrature dense/sparse, additive_chi2; reweighted quadrature, nystroem).
2. SSF / i.i.d. error at equal D in {2d, 4d, 8d} (D rounded up to a multiple of 4), relative
   Frobenius error of the Gram matrix, mean over --error-seeds seeds, for the Gaussian kernel at
   gamma0 / 4, gamma0, 4 gamma0 (gamma0 = 1 / median ||x - y||^2) and arccos0/1/2, on digits and
   breast_cancer (unit rows as bench_ssf.py), SSF with randomization "signs" and "rotation". i.i.d.:
   `rff` for the Gaussian, Cho & Saul's features for the arc-cosine kernels.
3. Speed: the SSF transform with "rotation" against "signs" and against `rff` at equal D = 4d, for
   1024 float32 rows, d in {256, 1024, 4096}, best of --repeat, interleaved in the same run.
Prints tables; --write also writes bench/results/ssf_bias.txt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from bench_ssf import exact_gram, iid_features, load_dataset, median_gamma
from timing import best_time
from featurehash.maps import create_map

RESULTS = Path(__file__).resolve().parent / "results"
BIAS_WIDTHS = (256, 1024)
BIAS_ROWS = 16


# What each map claims about its mean (README, module docstrings): "unbiased" maps must show no
# systematic error; the others are listed with what they are unbiased for, or how biased they are.
UNBIASED = "unbiased"
NRFF_CLAIM = "consistent, O(1/D) bias"


def bias_requests(gamma: float) -> dict[str, tuple[dict, str]]:
    """label -> (request without input_dim, n_components, seed; claim) for every seeded dense map.
    Not here: maps without randomness or fitted to data (quadrature dense/sparse grids and additive_chi2
    are deterministic: their error is their rule's; the reweighted grid and nystroem are least-squares
    fits, biased by design)."""
    return {
        "rff gaussian cos_sin": ({"method": "rff", "params": {"gamma": gamma}}, UNBIASED),
        "rff gaussian phase": ({"method": "rff", "params": {"gamma": gamma, "variant": "phase"}}, UNBIASED),
        "rff gaussian orthogonal": ({"method": "rff", "params": {"gamma": gamma, "frequencies": "orthogonal"}},
                                    UNBIASED),
        "rff gaussian structured": ({"method": "rff", "params": {"gamma": gamma, "frequencies": "structured"}},
                                    "nearly unbiased"),
        "rff laplacian": ({"method": "rff", "params": {"kernel": "laplacian", "gamma": 0.1}}, UNBIASED),
        "nrff phase": ({"method": "nrff", "params": {"gamma": 1.0}}, NRFF_CLAIM),
        "nrff cos_sin": ({"method": "nrff", "params": {"gamma": 1.0, "variant": "cos_sin"}}, UNBIASED),
        "srf (fitted K^)": ({"method": "srf", "params": {"degree": 3, "bias": 4.0}}, UNBIASED + " for K^"),
        "random_maclaurin": ({"method": "random_maclaurin", "params": {"degree": 3, "coef0": 1.0}}, UNBIASED),
        "tensorsketch": ({"method": "tensorsketch", "params": {"degree": 3, "coef0": 1.0}}, UNBIASED),
        "skewed_chi2": ({"method": "skewed_chi2", "params": {"skewedness": 1.0}}, UNBIASED),
        "quadrature subsampled": ({"method": "quadrature", "params": {"grid": "subsampled", "gamma": gamma}},
                                  "unbiased for its L-rule"),
        **{f"ssf {kernel} {randomization}": (
            {"method": "ssf", "params": {"kernel": kernel, "randomization": randomization,
                                         **({"gamma": gamma} if kernel == "gaussian" else {})}},
            UNBIASED if randomization == "rotation" else "biased (signs)")
           for kernel in ("gaussian", "arccos0", "arccos1", "arccos2") for randomization in ("signs", "rotation")},
    }


def target(feature_map, X):
    if feature_map.method == "srf":
        return feature_map.fitted_kernel(X)
    return feature_map.exact_kernel(X)


def nrff_leading_bias(kernel: np.ndarray, D: int) -> np.ndarray:
    """NRFF (phase) bias to first order in 1/D (app/featurehash/maps/fourier/nrff.py): -(k - k^5) / (8 D)."""
    return -(kernel - kernel**5) / (8.0 * D)


def bias_table(seeds: int) -> str:
    X = load_dataset("digits")[:BIAS_ROWS]
    gamma = median_gamma(X)
    upper = np.triu_indices(BIAS_ROWS, k=1)
    lines = [f"Bias over {seeds} seeds: digits, {BIAS_ROWS} unit rows (d = 64), {upper[0].size} pairs, "
             f"gamma = {gamma:.3f}; z = mean error / its standard error, per pair",
             f"unbiased: mean z^2 ~ {(seeds - 1) / (seeds - 3):.2f} on average (pairs share rows, so one run's mean z^2",
             "spreads widely: NRFF at D = 256 gave 0.51-2.65 over blocks of 100 seeds), max |z| mostly < 4.5;",
             f"t(avg) = the error averaged over pairs, mean over seeds / its standard error from the {seeds} per-seed",
             f"values: Student-t with {seeds - 1} dof for an unbiased map whatever the pairs' correlation (|t| > 4: ~1e-4);",
             "avg err = that mean error (the bias averaged over pairs); nrff phase: in brackets the t its first-order",
             "bias -(k - k^5)/(8D) predicts; verdict: unbiased maps",
             "'ok' if |t(avg)| < 4 and max |z| < 5.", ""]
    header = (f"{'map':26s} {'claim':24s}" + "".join(f" | {'D=' + str(D):>6s} {'max|z|':>6s} {'mz2':>5s} {'t(avg)':>14s} "
                                                   f"{'avg err':>9s} {'rmse':>8s}" for D in BIAS_WIDTHS) + " | verdict")
    lines += [header, "-" * len(header)]
    print("\n".join(lines), flush=True)
    for label, (request, claim) in bias_requests(gamma).items():
        cells, fine = [], True
        for D in BIAS_WIDTHS:
            errors = []
            for seed in range(seeds):
                m = create_map({**request, "input_dim": X.shape[1], "n_components": D, "seed": seed})
                errors.append((m.kernel(X) - target(m, X))[upper])
            errors = np.array(errors)
            z = errors.mean(axis=0) / (errors.std(axis=0, ddof=1) / np.sqrt(seeds))
            averaged = errors.mean(axis=1)
            spread = averaged.std(ddof=1) / np.sqrt(seeds)
            t = averaged.mean() / spread
            shown = f"{t:6.2f}"
            if claim == NRFF_CLAIM:
                predicted = nrff_leading_bias(target(m, X)[upper], D).mean() / spread
                shown += f" ({predicted:5.2f})"
            fine = fine and abs(t) < 4 and np.abs(z).max() < 5
            cells.append(f" | {'':>6s} {np.abs(z).max():6.2f} {np.mean(z**2):5.2f} {shown:>14s} "
                         f"{averaged.mean():+9.1e} {np.sqrt(np.mean(errors**2)):8.2e}")
        verdict = ("ok" if fine else "BIASED") if claim == UNBIASED else "-"
        lines.append(f"{label:26s} {claim:24s}" + "".join(cells) + f" | {verdict}")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def ssf_errors(X, D: int, seed: int, kernel: str, gamma: float, randomization: str, K) -> float:
    params = {"kernel": kernel, "randomization": randomization, **({"gamma": gamma} if kernel == "gaussian" else {})}
    m = create_map({"method": "ssf", "input_dim": X.shape[1], "n_components": D, "seed": seed, "params": params})
    return float(np.linalg.norm(m.kernel(X) - K) / np.linalg.norm(K))


def error_table(seeds: int) -> str:
    lines = [f"SSF / i.i.d. relative Frobenius Gram error at equal D, mean over {seeds} seeds "
             "(signs | rotation; i.i.d. error in brackets)", ""]
    header = f"{'dataset':14s} {'kernel':16s}" + "".join(f" | {m}d: {'signs':>5s} {'rot':>5s} {'(iid)':>8s}"
                                                      for m in (2, 4, 8))
    lines += [header, "-" * len(header)]
    print("\n".join(lines), flush=True)
    for name in ("digits", "breast_cancer"):
        X = load_dataset(name)
        d, gamma0 = X.shape[1], median_gamma(X)
        cases = [(f"gaussian g0/4", "gaussian", gamma0 / 4), ("gaussian g0", "gaussian", gamma0),
                 ("gaussian 4 g0", "gaussian", 4 * gamma0), ("arccos0", "arccos0", None),
                 ("arccos1", "arccos1", None), ("arccos2", "arccos2", None)]
        for label, kernel, gamma in cases:
            K = exact_gram(X, kernel, gamma)
            cells = []
            for multiple in (2, 4, 8):
                D = -(-multiple * d // 4) * 4
                iid = np.mean([np.linalg.norm((Z := iid_features(X, D, seed, kernel, gamma)) @ Z.T - K)
                               / np.linalg.norm(K) for seed in range(seeds)])
                ratios = [np.mean([ssf_errors(X, D, seed, kernel, gamma, randomization, K)
                                   for seed in range(seeds)]) / iid for randomization in ("signs", "rotation")]
                cells.append(f" | {multiple}d: {ratios[0]:5.2f} {ratios[1]:5.2f} ({iid:6.4f})")
            lines.append(f"{name:14s} {label:16s}" + "".join(cells))
            print(lines[-1], flush=True)
    lines.append(f"gamma0 = 1/median ||x-y||^2 of the unit rows: digits {median_gamma(load_dataset('digits')):.3f}, "
                 f"breast_cancer {median_gamma(load_dataset('breast_cancer')):.3f}")
    return "\n".join(lines)


def speed_table(repeat: int) -> str:
    lines = ["Transform time, 1024 float32 rows, D = 4d, best of runs interleaved in the same run", "",
             f"{'d':>6s} {'signs':>9s} {'rotation':>9s} {'rff':>9s} | {'rotation/signs':>14s} {'rotation/rff':>12s}"]
    for d in (256, 1024, 4096):
        X = np.random.default_rng(0).standard_normal((1024, d)).astype(np.float32)
        maps = {name: create_map({"method": "ssf", "input_dim": d, "n_components": 4 * d, "seed": 1,
                                  "params": {"gamma": 0.01, "randomization": name}}).materialize()
                for name in ("signs", "rotation")}
        maps["rff"] = create_map({"method": "rff", "input_dim": d, "n_components": 4 * d, "seed": 1,
                                  "params": {"gamma": 0.01}}).materialize()
        times = {name: np.inf for name in maps}
        for _ in range(repeat):  # interleaved, so a busy moment of the machine hits all three
            for name, m in maps.items():
                times[name] = min(times[name], best_time(lambda: m.transform(X), 1))
        lines.append(f"{d:6d} {times['signs']:9.4f} {times['rotation']:9.4f} {times['rff']:9.4f} | "
                     f"{times['rotation'] / times['signs']:14.2f} {times['rotation'] / times['rff']:12.2f}")
        print(lines[-1] if len(lines) > 4 else "\n".join(lines), flush=True)
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--error-seeds", type=int, default=5)
    parser.add_argument("--skip-bias", action="store_true")
    parser.add_argument("--skip-errors", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="also write bench/results/ssf_bias.txt")
    args = parser.parse_args(argv)
    parts = []
    if not args.skip_bias:
        parts.append(bias_table(args.seeds))
    if not args.skip_errors:
        parts.append(error_table(args.error_seeds))
    if not args.skip_speed:
        parts.append(speed_table(args.repeat))
    if args.write:
        RESULTS.mkdir(exist_ok=True)
        command = " ".join(["python bench/bench_ssf_bias.py", *(sys.argv[1:] if argv is None else argv)])
        (RESULTS / "ssf_bias.txt").write_text(command + "\n\n" + "\n\n".join(parts) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
