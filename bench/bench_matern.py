"""Matérn random features: held-out kernel error at equal D against BoTorch's, and the bias over seeds.

    python bench/bench_matern.py [--seeds 10] [--bias-seeds 200] [--write]

1. Held-out error. sklearn's breast_cancer (d = 30) and digits (d = 64), standardised columns (digits:
   constant columns dropped), split into a fit half and a held-out half by a fixed permutation. gamma is
   the median rule on the fit half (`gamma: "median"`, fit_sample = the fit rows, so length
   l = median distance); every map is compared on the held-out rows: relative Frobenius error
   ||K - K^||_F / ||K||_F of the held-out Gram matrix (400 rows), K the exact Matérn kernel, checked equal
   to GPyTorch's MaternKernel (and scikit-learn's Matern). Contenders at equal output dimension D
   (cos/sin pairs, D/2 frequencies): featurehash `rff` kernel "matern" with i.i.d. and orthogonal
   frequencies, and BoTorch's `gen_kernel_features(MaternKernel)` (botorch.sampling.pathwise: t frequencies
   as scrambled-Sobol normals times Gamma(nu, nu)^-1/2, torch's sampler). Mean and standard error over
   --seeds seeds, nu in {1/2, 3/2, 5/2}, D in {256, 1024, 4096}.
2. Bias. The estimate at 6 fixed held-out pairs averaged over --bias-seeds seeds (D = 64): the largest
   |mean - k| / (sd / sqrt(S)) over the pairs (Student-t with S - 1 dof when unbiased), for featurehash
   (iid, orthogonal) and BoTorch.
Accuracy only: the CPU time of the transforms is bench_maps.py's business.
Prints tables; --write also writes bench/results/matern.txt.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.gaussian_process.kernels import Matern

from featurehash import create_map

RESULTS = Path(__file__).resolve().parent / "results" / "matern.txt"


def dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    X = (load_breast_cancer() if name == "breast_cancer" else load_digits()).data.astype(np.float64)
    X = X[:, X.std(axis=0) > 0]
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    order = np.random.default_rng(0).permutation(len(X))[:800]
    return X[order[:400]], X[order[400:]]


def featurehash_map(fit: np.ndarray, nu: float, D: int, seed: int, frequencies: str):
    return create_map({"method": "rff", "input_dim": fit.shape[1], "n_components": D, "seed": seed,
                       "params": {"kernel": "matern", "nu": nu, "gamma": "median", "frequencies": frequencies,
                                  "fit_sample": fit.tolist()}})


def botorch_gram(held: np.ndarray, nu: float, lengthscale: float, D: int, seed: int) -> np.ndarray:
    import torch
    from botorch.sampling.pathwise.features.generators import gen_kernel_features
    from gpytorch.kernels import MaternKernel

    torch.manual_seed(seed)
    kernel = MaternKernel(nu=nu).double()
    kernel.lengthscale = torch.tensor(lengthscale, dtype=torch.float64)
    features = gen_kernel_features(kernel, num_inputs=held.shape[1], num_outputs=D)
    with torch.no_grad():
        Z = features(torch.as_tensor(held)).numpy()
    return Z @ Z.T


def gpytorch_exact(held: np.ndarray, nu: float, lengthscale: float) -> np.ndarray:
    import torch
    from gpytorch.kernels import MaternKernel

    kernel = MaternKernel(nu=nu).double()
    kernel.lengthscale = torch.tensor(lengthscale, dtype=torch.float64)
    with torch.no_grad():
        return kernel(torch.as_tensor(held)).to_dense().numpy()


def relative_error(K: np.ndarray, estimate: np.ndarray) -> float:
    return float(np.linalg.norm(K - estimate) / np.linalg.norm(K))


def held_out_errors(seeds: int) -> None:
    print("1. held-out relative Frobenius error of the Matérn Gram matrix, mean +- standard error over "
          f"{seeds} seeds")
    print(f"{'data':>14} {'nu':>4} {'D':>5} {'fh iid':>17} {'fh orthogonal':>17} {'botorch':>17} "
          f"{'orth/botorch':>12}")
    for name in ("breast_cancer", "digits"):
        fit, held = dataset(name)
        for nu in (0.5, 1.5, 2.5):
            reference = featurehash_map(fit, nu, 2, 0, "iid")
            gamma = reference.params.gamma
            lengthscale = 1.0 / math.sqrt(2.0 * gamma)
            K = reference.exact_kernel(held)
            torch_K = gpytorch_exact(held, nu, lengthscale)
            assert np.allclose(K, torch_K, rtol=1e-9, atol=1e-12), np.abs(K - torch_K).max()
            assert np.allclose(K, Matern(lengthscale, nu=nu)(held), rtol=1e-10, atol=1e-14)
            for D in (256, 1024, 4096):
                rows = {}
                for contender in ("iid", "orthogonal", "botorch"):
                    errors = []
                    for seed in range(seeds):
                        if contender == "botorch":
                            estimate = botorch_gram(held, nu, lengthscale, D, seed)
                        else:
                            m = featurehash_map(fit, nu, D, seed, contender)
                            Z = m.transform(held, dtype=np.float64)
                            estimate = Z @ Z.T
                        errors.append(relative_error(K, estimate))
                    rows[contender] = (np.mean(errors), np.std(errors, ddof=1) / math.sqrt(seeds))
                cells = " ".join(f"{m:.4f} +- {s:.4f}" for m, s in rows.values())
                print(f"{name:>14} {nu:>4} {D:>5} {cells} {rows['orthogonal'][0] / rows['botorch'][0]:>12.3f}")


def bias(seeds: int) -> None:
    print(f"\n2. bias over {seeds} seeds at D = 64 (6 held-out pairs of breast_cancer): max |t| of mean(K^ - K)")
    fit, held = dataset("breast_cancer")
    X, Y = held[:3], held[3:5]
    for nu in (0.5, 1.5, 2.5):
        reference = featurehash_map(fit, nu, 2, 0, "iid")
        lengthscale = 1.0 / math.sqrt(2.0 * reference.params.gamma)
        K = reference.exact_kernel(X, Y)
        cells = []
        for contender in ("iid", "orthogonal", "botorch"):
            estimates = []
            for seed in range(seeds):
                if contender == "botorch":
                    Zx = botorch_gram(np.vstack([X, Y]), nu, lengthscale, 64, seed)
                    estimates.append(Zx[:3, 3:])
                else:
                    estimates.append(featurehash_map(fit, nu, 64, 1000 + seed, contender).kernel(X, Y))
            estimates = np.stack(estimates)
            t = (estimates.mean(axis=0) - K) / (estimates.std(axis=0, ddof=1) / math.sqrt(seeds))
            cells.append(f"{contender} max|t| {np.abs(t).max():.2f}")
        print(f"nu {nu}: " + ", ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--bias-seeds", type=int, default=200)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        held_out_errors(args.seeds)
        bias(args.bias_seeds)
    sys.stdout.write(buffer.getvalue())
    if args.write:
        RESULTS.write_text(buffer.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
