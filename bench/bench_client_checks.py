"""What the Python client's checks before sending (featurehash.client.checks.vectors) cost, per batch shape:
the map's own check when its spec is known, the map-free checks when not, and Python rows (JSON rules).
Prints a table; writes nothing. Usage: python bench/bench_client_checks.py [--repeats N]"""

from __future__ import annotations

import argparse
import time

import numpy as np

from featurehash.client.checks import KnownMaps, vectors
from featurehash.maps import create_map


def best_ms(function, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    known = KnownMaps()
    spec = known.learn_map(create_map({"method": "gcws", "input_dim": 64, "n_components": 128, "seed": 1}).describe())
    feature_map = known.for_map(spec["id"])
    print(f"{'batch':<28}{'map known':>12}{'map unknown':>14}   (best of {args.repeats}, ms)")
    for rows, dtype in ((1, np.float32), (1000, np.float32), (100_000, np.float32), (100_000, np.float64),
                        (100_000, np.int64)):
        X = (rng.random((rows, 64)) * 10 + 1).astype(dtype)
        vectors(X, "vectors", feature_map, False)  # compiled passes loaded once
        print(f"{f'{rows} x 64 {np.dtype(dtype).name} (.npy)':<28}"
              f"{best_ms(lambda X=X: vectors(X, 'vectors', feature_map, False), args.repeats):>12.3f}"
              f"{best_ms(lambda X=X: vectors(X, 'vectors', None, False), args.repeats):>14.3f}")
    listed = (rng.random((1000, 64)) + 1).tolist()
    print(f"{'1000 x 64 Python rows':<28}"
          f"{best_ms(lambda: vectors(listed, 'vectors', feature_map, True), args.repeats):>12.3f}"
          f"{best_ms(lambda: vectors(listed, 'vectors', None, True), args.repeats):>14.3f}")


if __name__ == "__main__":
    main()
