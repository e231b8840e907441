"""SSF index-set search: "until_small_gain" (what new requests get) against "until_unchanged" (specs stored
before the `search` parameter), interleaved in one process.

    python bench/bench_ssf_search.py [--sizes 512x2048,1024x4096,2048x4096] [--seeds 1,2,3,4] [--random 10] [--write]

For each (m, n) and seed (m = ceil(d/2), n = D/4): final Riesz log-energy difference (new - old) in standard
deviations of the energy over `--random` random index sets (positive = the new set is worse), the gain of the
old search in the same unit, sweeps, CPU and wall time of each search and the CPU ratio old / new. Then
`create_map` at d = 4096, D = 16384 (the issue's case) for both values of `search`, and the maps' Gram error
(relative Frobenius, float64 features) on 300 fixed rows tanh(Z W / 6), Z (300, 40) and W (40, 4096) standard
normal, gamma = 1 / median squared distance. Numba caches are warmed first. Text to stdout; with --write
also to bench/results/ssf_search.txt.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from pathlib import Path

import numpy as np
from featurehash.maps import kernels
from featurehash.maps import create_map
from featurehash.maps.fourier import ssf_search

RESULTS = Path(__file__).resolve().parent / "results" / "ssf_search.txt"
SEARCHES = ("until_unchanged", "until_small_gain")


def timed(call):
    cpu, wall = time.process_time(), time.perf_counter()
    result = call()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def search_table(sizes, seeds, random_sets: int) -> list[str]:
    lines = [(f"{'(m, n)':>12s} {'seed':>4s} {'old gain/sd':>11s} {'(new-old)/sd':>12s} {'sweeps old/new':>14s} "
              f"{'cpu old':>8s} {'cpu new':>8s} {'wall old':>8s} {'wall new':>8s} {'cpu ratio':>9s}")]
    for m, n in sizes:
        energies = [ssf_search.riesz_log_energy(ssf_search.random_index_set(m, n, 10_000 + i), n) for i in range(random_sets)]
        spread = float(np.std(energies, ddof=1))
        for seed in seeds:
            runs = {}
            for search in SEARCHES:
                ssf_search.optimised_index_set.cache_clear()
                runs[search] = timed(functools.partial(ssf_search.optimised_index_set, m, n, seed, ssf_search.SPEC_POINT_SET, search))
            (old, old_cpu, old_wall), (new, new_cpu, new_wall) = runs["until_unchanged"], runs["until_small_gain"]
            lines.append(f"{f'({m}, {n})':>12s} {seed:4d} {(old.initial_energy - old.final_energy) / spread:11.1f} "
                         f"{(new.final_energy - old.final_energy) / spread:+12.3f} {old.sweeps:>7d}/{new.sweeps:<6d} "
                         f"{old_cpu:7.2f}s {new_cpu:7.2f}s {old_wall:7.2f}s {new_wall:7.2f}s "
                         f"{old_cpu / new_cpu:8.1f}x")
            print(lines[-1], flush=True)
    return lines


def gram_rows() -> tuple[np.ndarray, float]:
    rng = np.random.default_rng(0)
    X = np.tanh(rng.standard_normal((300, 40)) @ rng.standard_normal((40, 4096)) / 6)
    squared = ((X[:, None] - X[None]) ** 2).sum(-1)
    return X, 1.0 / float(np.median(squared[squared > 0]))


def create_table(seeds) -> list[str]:
    X, gamma = gram_rows()
    K = kernels.gaussian(X, X, gamma)
    lines = [f"create_map ssf d = 4096, D = 16384 (gamma {gamma:.3g}): CPU / wall seconds, Gram error, id"]
    for seed in seeds:
        for search in SEARCHES:
            ssf_search.optimised_index_set.cache_clear()
            request = {"method": "ssf", "input_dim": 4096, "n_components": 16384, "seed": seed,
                       "params": {"gamma": gamma, "search": search}}
            fitted, cpu, wall = timed(functools.partial(create_map, request))
            features = fitted.transform(X, dtype=np.float64)
            error = np.linalg.norm(features @ features.T - K) / np.linalg.norm(K)
            lines.append(f"  seed {seed:3d} {search:>16s}: {cpu:5.2f} s CPU {wall:5.2f} s wall  Gram {error:.5f}  "
                         f"{fitted.spec.id}")
            print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="512x2048,1024x4096,2048x4096")
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--random", type=int, default=10)
    parser.add_argument("--write", action="store_true", help="also write bench/results/ssf_search.txt")
    args = parser.parse_args(argv)
    sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",")]
    seeds = [int(seed) for seed in args.seeds.split(",")]
    for search in SEARCHES:  # compile / load the numba caches outside the timings
        ssf_search.optimised_index_set(64, 512, 0, ssf_search.SPEC_POINT_SET, search)
    load = "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    print(load, flush=True)
    lines = [__doc__.splitlines()[0], load, *search_table(sizes, seeds, args.random), *create_table([7, 8, 9, 10, 11])]
    lines.append("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(lines[-1])
    if args.write:
        RESULTS.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
