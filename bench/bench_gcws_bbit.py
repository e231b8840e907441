"""Linear SVMs on b-bit GCWS features (Li, KDD 2017, section 1.4 and its tables; docs/methods/minhash.md).

    python bench/bench_gcws_bbit.py [--sampler icws] [--zero-bit] [--seed 1] [--quick] [--write]

Data shipped with scikit-learn, all nonnegative (where the old "index" bits lose their lowest bit):
digits (1797 x 64, 10 classes) and breast cancer (569 x 30, 2 classes; columns scaled to [0, 1] so
no feature dominates the GMM sums). One stratified 50/50 split (random_state 0). As in the paper,
each cell is the best test accuracy of sklearn's LinearSVC over the C grid, here on the b-bit
one-hot features (CSR, n_components << bits columns) of a GCWS map fitted on nothing but the seed.

Rows: bit_source ("mixed_code", what new requests get; "index", the low bits of i* of older specs)
x b in {1, 2, 4, 8}; columns k in {16, 64, 256, 1024}. References in the same run: LinearSVC on the
original features (min-max scaled) over the same C grid, and an SVC with the exact GMM kernel
(precomputed) over the same grid. Chance is the largest class share of the test set.
Prints the tables; --write also writes bench/results/gcws_bbit.txt (gcws_bbit_dart.txt, ..._zero_bit.txt
for the other variants).
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC, LinearSVC

from featurehash import create_map
from featurehash.maps import kernels

RESULTS = Path(__file__).resolve().parent / "results"
C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
BITS = (1, 2, 4, 8)
SAMPLES = (16, 64, 256, 1024)
SOURCES = ("mixed_code", "index")


def datasets() -> dict[str, tuple[np.ndarray, ...]]:
    out = {}
    for name, loader, scale in (("digits", load_digits, False), ("breast_cancer", load_breast_cancer, True)):
        X, y = loader(return_X_y=True)
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)
        if scale:
            scaler = MinMaxScaler().fit(X_train)
            X_train, X_test = (np.clip(scaler.transform(part), 0, None) for part in (X_train, X_test))
        out[name] = (X_train, X_test, y_train, y_test)
    return out


def best_accuracy(make, Z_train, Z_test, y_train, y_test) -> float:
    best = 0.0
    for C in C_GRID:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = make(C).fit(Z_train, y_train)
        best = max(best, float((model.predict(Z_test) == y_test).mean()))
    return best


def linear_svm(C):
    return LinearSVC(C=C, max_iter=5000)


def gcws_accuracy(data, k: int, bits: int, source: str, sampler: str, seed: int, zero_bit: bool) -> float:
    X_train, X_test, y_train, y_test = data
    m = create_map({"method": "gcws", "input_dim": X_train.shape[1], "n_components": k, "seed": seed,
                    "params": {"bits": bits, "sampler": sampler, "bit_source": source,
                                                        "zero_bit": zero_bit}})
    Z_train, Z_test = m.transform(X_train).to_csr(), m.transform(X_test).to_csr()
    return best_accuracy(linear_svm, Z_train, Z_test, y_train, y_test)


def table(name: str, data, sampler: str, seed: int, samples, bits_list, zero_bit: bool) -> str:
    X_train, X_test, y_train, y_test = data
    chance = np.bincount(y_test).max() / y_test.size
    linear = best_accuracy(linear_svm, *_scaled(X_train, X_test), y_train, y_test)
    gram = kernels.gmm(X_train, X_train, 1.0)
    cross = kernels.gmm(X_test, X_train, 1.0)
    kernel = max(float((SVC(C=C, kernel="precomputed").fit(gram, y_train).predict(cross) == y_test).mean())
                 for C in C_GRID)
    lines = [f"{name}: n_train {X_train.shape[0]}, d {X_train.shape[1]}, sampler {sampler}, zero_bit {zero_bit}, seed {seed}; "
             f"chance {100 * chance:.1f}%, linear SVM {100 * linear:.2f}%, GMM-kernel SVM {100 * kernel:.2f}%",
             f"{'bit_source':>11} {'b':>2} " + " ".join(f"{'k=' + str(k):>8}" for k in samples)]
    print("\n".join(lines), flush=True)
    for source in SOURCES:
        for bits in bits_list:
            cells = [gcws_accuracy(data, k, bits, source, sampler, seed, zero_bit) for k in samples]
            lines.append(f"{source:>11} {bits:>2} " + " ".join(f"{100 * a:7.2f}%" for a in cells))
            print(lines[-1], flush=True)
    return "\n".join(lines)


def _scaled(X_train, X_test):
    scaler = MinMaxScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sampler", choices=("icws", "dart"), default="icws")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--zero-bit", action="store_true", help="features from i* alone (0-bit codes)")
    parser.add_argument("--quick", action="store_true", help="k in {16, 256}, b in {1, 4}")
    parser.add_argument("--write", action="store_true", help="also write bench/results/gcws_bbit*.txt")
    args = parser.parse_args(argv)
    samples, bits_list = ((16, 256), (1, 4)) if args.quick else (SAMPLES, BITS)
    tables = []
    for name, data in datasets().items():
        print(f"-- {name}", flush=True)
        tables.append(table(name, data, args.sampler, args.seed, samples, bits_list, args.zero_bit))
    if args.write:
        RESULTS.mkdir(exist_ok=True)
        header = ("Best test accuracy of LinearSVC (C in " + ", ".join(map(str, C_GRID)) + ") on b-bit GCWS "
                  f"features; python bench/bench_gcws_bbit.py --sampler {args.sampler}"
                  f"{' --zero-bit' if args.zero_bit else ''} --write\n\n")
        suffix = ("" if args.sampler == "icws" else f"_{args.sampler}") + ("_zero_bit" if args.zero_bit else "")
        (RESULTS / f"gcws_bbit{suffix}.txt").write_text(header + "\n\n".join(tables) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
