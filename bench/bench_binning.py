"""Random binning (Laplacian kernel): code match fraction against the exact kernel, and hashing speed.

    python bench/bench_binning.py [--repeat 3] [--write]

1. Agreement. 100 pairs (tests/maps/minhash/test_binning.py's `dense_pairs`: kernel values 0.005..1, d = 12,
   gamma = 1/2) at P in {256, 1024, 4096} grids: the match fraction's deviation from
   exp(-gamma ||x - y||_1) in binomial standard deviations sqrt(k (1 - k) / P) (floored at 1/P):
   worst pair, mean z^2 (1 for a correct sampler; the pairs share the grids, so it scatters more than
   for independent pairs), and the common bias in standard errors, measured grid by grid (the number of
   matching pairs per grid is i.i.d. over the grids).
2. Speed, best of --repeat: codes per second and (nonzero, grid) terms per second for dense rows
   (n = 4096, d = 64, P = 1024; table and on-demand variates) and sparse rows (d = 100000 at 1%,
   P = 256, on demand), against a vectorised numpy implementation of the same bins (floor of a
   broadcast product) and an additive 64-bit hash in numpy, on the dense case.
Prints the table; --write also writes bench/results/binning.txt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from featurehash.maps import create_map
from timing import best_time

RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
# test_binning (its pairs) sits in the folder that mirrors the package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "maps" / "minhash"))




def agreement_lines() -> list[str]:
    from test_binning import dense_pairs

    U, V = dense_pairs()
    K = np.exp(-0.5 * np.abs(U - V).sum(axis=1))
    lines = ["Match fraction vs exp(-gamma ||x - y||_1), 100 pairs (k from %.3f to %.3f), gamma = 1/2, d = 12:" %
             (K.min(), K.max()), "", f"{'P':>6s} {'worst |z|':>10s} {'mean z^2':>9s} {'bias z':>8s}", "-" * 36]
    for grids in (256, 1024, 4096):
        m = create_map({"method": "binning", "input_dim": 12, "n_components": grids, "seed": 7,
                        "params": {"gamma": 0.5}})
        matches = m.hash(U) == m.hash(V)
        F = matches.mean(axis=1)
        sd = np.maximum(np.sqrt(K * (1 - K) / grids), 1.0 / grids)
        z = (F - K) / sd
        inner = (K > 0.01) & (K < 0.99)
        per_grid = matches.sum(axis=0)
        bias = (per_grid.mean() - K.sum()) / (per_grid.std(ddof=1) / np.sqrt(grids))
        lines.append(f"{grids:6d} {np.abs(z).max():10.2f} {np.mean(z[inner] ** 2):9.2f} {bias:8.2f}")
    return lines


def numpy_codes(X: np.ndarray, inverse_pitch: np.ndarray, shift: np.ndarray, salts: np.ndarray) -> np.ndarray:
    """The same bins by broadcasting, and an additive hash of them in numpy (not the map's hash: a speed
    reference for 'vectorised numpy' only)."""
    bins = np.floor(X[:, :, None] * inverse_pitch[None] - shift[None]).astype(np.int64)  # (n, d, P)
    words = (bins.view(np.uint64) + salts[None]) * np.uint64(0x9E3779B97F4A7C15)
    words ^= words >> np.uint64(31)
    return (words.sum(axis=1, dtype=np.uint64) & np.uint64(2**63 - 1)).view(np.int64)


def speed_lines(repeat: int) -> list[str]:
    rng = np.random.default_rng(0)
    dense = rng.standard_normal((4096, 64))
    sparse = sp.random(4096, 100_000, density=0.01, random_state=1, format="csr")
    lines = ["", "Hashing speed (best of runs):", "",
             f"{'case':44s} {'seconds':>8s} {'rows/s':>10s} {'M terms/s':>10s}", "-" * 76]

    def row(label, seconds, X):
        nnz = X.nnz if sp.issparse(X) else X.size
        lines.append(f"{label:44s} {seconds:8.3f} {X.shape[0] / seconds:10.0f} {nnz * grids / seconds / 1e6:10.0f}")

    grids = 1024
    table = create_map({"method": "binning", "input_dim": 64, "n_components": grids}).materialize()
    on_demand = create_map({"method": "binning", "input_dim": 64, "n_components": grids}, table_budget_bytes=0)
    row("dense 4096 x 64, P = 1024, table", best_time(lambda: table.hash(dense), repeat), dense)
    row("dense 4096 x 64, P = 1024, on demand", best_time(lambda: on_demand.hash(dense), repeat), dense)
    inverse_pitch, shift = table.grid_constants()
    salts = np.arange(64, dtype=np.uint64)[:, None] * np.uint64(grids) + np.arange(grids, dtype=np.uint64)
    block = dense[:256]
    seconds = best_time(lambda: numpy_codes(block, inverse_pitch, shift, salts), repeat) * (4096 / 256)
    row("dense, same bins in vectorised numpy (est.)", seconds, dense)
    grids = 256
    wide = create_map({"method": "binning", "input_dim": 100_000, "n_components": grids})
    row("sparse 4096 x 1e5 at 1%, P = 256, on demand", best_time(lambda: wide.hash(sparse), repeat), sparse)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="also write bench/results/binning.txt")
    args = parser.parse_args(argv)
    text = "\n".join(agreement_lines() + speed_lines(args.repeat)) + "\n"
    print(text)
    if args.write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "binning.txt").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
