"""featurehash against scikit-learn on scikit-learn's own maps: Nystroem fit and transform, skewed chi2,
additive chi2 and TensorSketch (PolynomialCountSketch), CPU time and wall time.

    python bench/bench_sklearn_parity.py [--rounds 15] [--fit-rounds 5] [--quick] [--before APP_DIR] [--write]

--before APP_DIR runs the same table first for the featurehash under APP_DIR (e.g. /work/main/app, in a
subprocess with that PYTHONPATH) and prints it as BEFORE, then this checkout's as AFTER; --write writes what
was printed (both tables with their load averages) to bench/results/sklearn_parity.txt, which nothing else
writes.

Data: the digits (1797 x 64, nonnegative), tiled to 4096 rows plus a uniform [0, 0.01) jitter so that no
two rows are equal. Contenders of one row of the table are called round-robin (one call of each per
round, after a warm-up call), so a loaded machine slows them alike; each call's CPU time
(time.process_time: every thread of this process) and wall time are recorded, and the table gives
the medians. Ratio = scikit-learn / featurehash (above 1: featurehash faster), of CPU time (the
target) and of wall time. Each row is run twice: with one thread (threadpoolctl's limits, which
featurehash's row threads follow) and with the default threads.

- Nystroem fit, Gaussian kernel, gamma = 1 / (d var X): featurehash.sklearn.NystroemFeatures(m).fit
  (spec validation, randomly pivoted Cholesky in a fixed order of operations, the stored spec) against
  sklearn.kernel_approximation.Nystroem(m).fit (uniform landmarks, SVD), on the first 2000 rows,
  m = 256, 512, 1024 ("refused" where featurehash's fit limits refuse the size).
- Transforms of 4096 rows, float64 and float32 (input of the same dtype; featurehash returns the input's
  dtype, as scikit-learn): nystroem Gaussian m = 512 (both fitted on the first 1000 rows), skewed_chi2
  D = 512, additive_chi2 2 steps (D = 192), tensorsketch degree 2, coef0 1, D = 512 (PolynomialCountSketch
  gamma 1, degree 2, coef0 1). featurehash maps are called directly (map.transform(X, dtype=X.dtype)).
With the default threads a call's CPU time also counts SETTLE_SECONDS after it returns (slept, not in its
wall time): OpenBLAS's threads spin for ~0.1 s after each threaded product (30-40 ms of CPU after a
1000 x 1000 GEMM, measured), and without the wait that CPU was charged to whichever call came next, the
other contender's. Under threadpoolctl's one-thread limit no BLAS thread spins, and no wait is added.
The load average is printed before and after: the figures are only comparable within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import (AdditiveChi2Sampler, Nystroem, PolynomialCountSketch,
                                          SkewedChi2Sampler)
from threadpoolctl import threadpool_limits

import featurehash
from featurehash.maps import SpecError, create_map
from featurehash.sklearn import NystroemFeatures

ROWS = 4096
FIT_ROWS = 2000
FIT_SIZES = (256, 512, 1024)
SETTLE_SECONDS = 0.2
RESULTS = Path(__file__).resolve().parent / "results" / "sklearn_parity.txt"


def data() -> np.ndarray:
    digits = load_digits().data
    X = np.tile(digits, (-(-ROWS // len(digits)), 1))[:ROWS]
    return X + np.random.default_rng(0).uniform(0.0, 0.01, X.shape)


def round_robin(contenders: dict, rounds: int, settle: float = 0.0) -> dict:
    """Median (cpu, wall) seconds of each callable, called round-robin after one warm-up call each; a call's
    CPU time includes `settle` seconds slept after it (its BLAS threads' spinning), its wall time does not."""
    for fn in contenders.values():
        fn()
    time.sleep(settle)
    samples = {name: ([], []) for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            cpu, wall = time.process_time(), time.perf_counter()
            fn()
            samples[name][1].append(time.perf_counter() - wall)
            time.sleep(settle)
            samples[name][0].append(time.process_time() - cpu)
    return {name: (statistics.median(c), statistics.median(w)) for name, (c, w) in samples.items()}


def settle_for(threads: str) -> float:
    return 0.0 if threads == "1" else SETTLE_SECONDS


def line(label: str, threads: str, ours, theirs) -> str:
    if ours is None:
        return (f"  {label:34s} {threads:8s} {'refused':>10s} {1e3 * theirs[0]:10.2f} {'-':>7s}  "
                f"{'-':>10s} {1e3 * theirs[1]:10.2f} {'-':>7s}")
    return (f"  {label:34s} {threads:8s} {1e3 * ours[0]:10.2f} {1e3 * theirs[0]:10.2f} {theirs[0] / ours[0]:6.2f}x  "
            f"{1e3 * ours[1]:10.2f} {1e3 * theirs[1]:10.2f} {theirs[1] / ours[1]:6.2f}x")


def fit_rows(X: np.ndarray, rounds: int, threads: str) -> list[str]:
    sample = X[:FIT_ROWS]
    gamma = 1.0 / (sample.shape[1] * sample.var())
    lines = []
    for m in FIT_SIZES:
        ours = NystroemFeatures(n_components=m, gamma=gamma, fit_rows=FIT_ROWS, random_state=0)
        theirs = Nystroem(gamma=gamma, n_components=m, random_state=0)
        try:
            ours.fit(sample)
        except SpecError:
            ours = None
        contenders = {"sklearn": lambda: theirs.fit(sample)}
        if ours is not None:
            contenders["ours"] = lambda: ours.fit(sample)
        best = round_robin(contenders, rounds, settle_for(threads))
        lines.append(line(f"nystroem fit m={m}, {FIT_ROWS} rows", threads, best.get("ours"), best["sklearn"]))
        print(lines[-1], flush=True)
    return lines


def transform_pairs(X: np.ndarray, dtype) -> dict:
    """label -> (featurehash call, scikit-learn call) for X in `dtype`."""
    X = X.astype(dtype)
    d = X.shape[1]
    fit = X[:1000]
    gamma = 1.0 / (d * float(fit.var()))
    nystroem = create_map({"method": "nystroem", "input_dim": d, "n_components": 512, "seed": 0,
                           "params": {"gamma": gamma, "fit_sample": fit.astype(np.float64).tolist()}})
    sk_nystroem = Nystroem(gamma=gamma, n_components=512, random_state=0).fit(fit)
    skewed = create_map({"method": "skewed_chi2", "input_dim": d, "n_components": 512, "seed": 0})
    sk_skewed = SkewedChi2Sampler(n_components=512, random_state=0).fit(X)
    additive = create_map({"method": "additive_chi2", "input_dim": d, "n_components": 3 * d})
    sk_additive = AdditiveChi2Sampler(sample_steps=2).fit(X)
    sketch = create_map({"method": "tensorsketch", "input_dim": d, "n_components": 512, "seed": 0,
                         "params": {"degree": 2, "coef0": 1.0}})
    sk_sketch = PolynomialCountSketch(gamma=1.0, degree=2, coef0=1.0, n_components=512, random_state=0).fit(X)
    return {
        "nystroem gaussian m=512": (lambda: nystroem.transform(X, dtype=dtype), lambda: sk_nystroem.transform(X)),
        "skewed_chi2 D=512": (lambda: skewed.transform(X, dtype=dtype), lambda: sk_skewed.transform(X)),
        "additive_chi2 2 steps (D=192)": (lambda: additive.transform(X, dtype=dtype),
                                          lambda: sk_additive.transform(X)),
        "tensorsketch p=2 D=512": (lambda: sketch.transform(X, dtype=dtype), lambda: sk_sketch.transform(X)),
    }


def transform_rows(X: np.ndarray, rounds: int, threads: str) -> list[str]:
    lines = []
    for dtype in (np.float64, np.float32):
        for label, (ours, theirs) in transform_pairs(X, dtype).items():
            best = round_robin({"ours": ours, "sklearn": theirs}, rounds, settle_for(threads))
            lines.append(line(f"{label} {np.dtype(dtype).name}", threads, best["ours"], best["sklearn"]))
            print(lines[-1], flush=True)
    return lines


def load_average() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg()) + f" on {os.cpu_count()} cores"


def table(args) -> list[str]:
    """The table for the featurehash this process imports, printed as it goes; its lines."""
    warnings.filterwarnings("ignore", message="n_components > n_samples")
    X = data()
    lines = [f"featurehash from {os.path.dirname(featurehash.__file__)}; {load_average()} at the start",
             f"  {'':34s} {'threads':8s} {'CPU ms: featurehash':>21s} {'ratio':>7s}  {'wall ms: featurehash':>21s} "
             f"{'ratio':>7s}\n  {'':34s} {'':8s} {'':>10s} {'sklearn':>10s} {'':7s}  {'':>10s} {'sklearn':>10s}"]
    print("\n".join(lines), flush=True)
    for threads in (("1", "default") if not args.quick else ("1",)):
        if threads == "1":
            with threadpool_limits(1):
                lines += fit_rows(X, args.fit_rounds, threads)
                lines += transform_rows(X, args.rounds, threads)
        else:
            lines += fit_rows(X, args.fit_rounds, threads)
            lines += transform_rows(X, args.rounds, threads)
    lines.append(f"  ({load_average()} at the end)")
    print(lines[-1], flush=True)
    return lines


def before(args, app_dir: str) -> list[str]:
    """The table of the featurehash under `app_dir`, run in a subprocess (its lines, also printed)."""
    command = [sys.executable, __file__, "--rounds", str(args.rounds), "--fit-rounds", str(args.fit_rounds)]
    command += ["--quick"] if args.quick else []
    done = subprocess.run(command, env={**os.environ, "PYTHONPATH": app_dir}, stdout=subprocess.PIPE, text=True,
                          check=True)
    print(done.stdout, end="", flush=True)
    return done.stdout.rstrip("\n").split("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="round-robin rounds per transform row")
    parser.add_argument("--fit-rounds", type=int, default=5, help="round-robin rounds per fit row")
    parser.add_argument("--quick", action="store_true", help="one thread only")
    parser.add_argument("--before", metavar="APP_DIR", help="first run the table for the featurehash under APP_DIR")
    parser.add_argument("--write", action="store_true", help=f"write the tables to {RESULTS}")
    args = parser.parse_args(argv)
    sections = []
    if args.before:
        print("BEFORE", flush=True)
        sections.append(("BEFORE", before(args, args.before)))
        print("\nAFTER", flush=True)
    sections.append(("AFTER" if args.before else "", table(args)))
    if args.write:
        header = (f"bench/bench_sklearn_parity.py{' --before ' + args.before if args.before else ''}, one run: "
                  f"{'the featurehash under ' + args.before + ' (BEFORE) then ' if args.before else ''}"
                  f"{os.path.dirname(os.path.dirname(featurehash.__file__))}"
                  f"{' (AFTER)' if args.before else ''}; medians of interleaved rounds ({args.rounds} transform, "
                  f"{args.fit_rounds} fit), CPU = time.process_time (with the default threads including "
                  f"{SETTLE_SECONDS} s after each call: the BLAS threads' spinning), ratio = scikit-learn / featurehash.")
        body = "\n\n".join("\n".join(([name] if name else []) + lines) for name, lines in sections)
        RESULTS.write_text(header + "\n\n" + body + "\n")
        print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
