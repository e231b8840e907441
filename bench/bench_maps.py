"""Speed of the feature maps against a floor measured in the same run.

    python bench/bench_maps.py

Dense Fourier maps (n=4096, d=512, D=4096): time as a ratio to the numpy floor
`X @ W`, add offset, cos, scale (in place, float32), and to scikit-learn's RBFSampler.
GCWS hashing (dense n=200, d=256, k=256; sparse d=100000 at 1% and 10% density)
against datasketch's WeightedMinHashGenerator on the same data, when it is installed.
Ratios, not seconds, are the targets: see DESIGN.md "Performance targets".
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from featurehash.maps import create_map
from timing import best_time




def fourier_floor(X: np.ndarray, W: np.ndarray, b: np.ndarray, scale: np.float32):
    out = X @ W
    out += b
    np.cos(out, out=out)
    out *= scale
    return out


def bench_fourier(repeat: int) -> None:
    n, d, D = 4096, 512, 4096
    rng = np.random.default_rng(0)
    X32 = rng.standard_normal((n, d)).astype(np.float32)
    X64 = X32.astype(np.float64)
    gamma = 1.0 / d
    W = (rng.standard_normal((d, D)) * np.sqrt(2 * gamma)).astype(np.float32)
    b = rng.uniform(0, 2 * np.pi, D).astype(np.float32)
    scale = np.float32(np.sqrt(2.0 / D))
    floor = best_time(lambda: fourier_floor(X32, W, b, scale), repeat)
    print(f"Fourier maps, n={n} d={d} D={D}: numpy floor (float32) {floor * 1e3:.1f} ms")

    rows = []
    for label, method, params in [
        ("rff cos_sin", "rff", {"gamma": gamma}),
        ("rff phase", "rff", {"gamma": gamma, "variant": "phase"}),
        ("nrff phase", "nrff", {"gamma": 1.0}),
    ]:
        m = create_map({"method": method, "input_dim": d, "n_components": D, "params": params})
        rows.append((f"{label} float32 in", best_time(lambda: m.transform(X32), repeat)))
        rows.append((f"{label} float64 in", best_time(lambda: m.transform(X64), repeat)))
    m = create_map({"method": "rff", "input_dim": d, "n_components": D, "params": {"gamma": gamma}})
    rows.append(("rff cos_sin float64 out", best_time(lambda: m.transform(X64, dtype=np.float64), repeat)))

    sklearn_times = {}
    try:
        from sklearn.kernel_approximation import RBFSampler
    except ImportError:
        print("  (scikit-learn not installed: no RBFSampler comparison)")
    else:
        for label, data in (("float32", X32), ("float64", X64)):
            sampler = RBFSampler(gamma=gamma, n_components=D, random_state=0).fit(data)
            sklearn_times[label] = best_time(lambda: sampler.transform(data), repeat)
            rows.append((f"sklearn RBFSampler {label}", sklearn_times[label]))

    for label, seconds in rows:
        line = f"  {label:28s} {seconds * 1e3:8.1f} ms  {seconds / floor:5.2f}x floor"
        reference = sklearn_times.get("float64" if "float64 in" in label or "float64 out" in label else "float32")
        if reference and not label.startswith("sklearn"):
            line += f"  RBFSampler/this {reference / seconds:5.2f}x"
        print(line)


def gcws_datasketch_seconds(X: np.ndarray, k: int, rows: int) -> float | None:
    try:
        from datasketch import WeightedMinHashGenerator
    except ImportError:
        return None
    generator = WeightedMinHashGenerator(X.shape[1], sample_size=k, seed=1)
    start = time.perf_counter()
    for x in X[:rows]:
        generator.minhash(x)
    return (time.perf_counter() - start) / rows


def bench_gcws(repeat: int) -> None:
    rng = np.random.default_rng(0)
    n, d, k = 200, 256, 256
    # datasketch takes nonnegative weights only, so both get the same nonnegative data.
    X = np.abs(rng.standard_normal((n, d)))
    m = create_map({"method": "gcws", "input_dim": d, "n_components": k})
    ours = best_time(lambda: m.hash(X), repeat)
    print(f"GCWS dense n={n} d={d} k={k}: {ours * 1e3:.2f} ms ({ours / n * 1e6:.1f} us/vector, table={m.uses_table})")
    per_vector = gcws_datasketch_seconds(X, k, n)
    if per_vector is None:
        print("  (datasketch not installed: no WeightedMinHashGenerator comparison)")
    else:
        print(f"  datasketch WeightedMinHashGenerator {per_vector * n * 1e3:.1f} ms: ours is "
              f"{per_vector * n / ours:.0f}x faster")

    d = 100_000
    sparse_times = {}
    for density in (0.01, 0.1):
        Xs = sp.random(n, d, density=density, format="csr", random_state=1,
                       data_rvs=lambda size: rng.exponential(size=size))
        m = create_map({"method": "gcws", "input_dim": d, "n_components": k})
        sparse_times[density] = best_time(lambda: m.hash(Xs), max(1, repeat // 2))
        print(f"GCWS sparse n={n} d={d} density={density:.0%} (nnz={Xs.nnz}) k={k}: "
              f"{sparse_times[density] * 1e3:.0f} ms, {sparse_times[density] / Xs.nnz / k * 1e9:.1f} ns per "
              f"(nonzero, sample), table={m.uses_table}")
        if density == 0.01:
            rows = 5
            per_vector = gcws_datasketch_seconds(Xs[:rows].toarray(), k, rows)
            if per_vector is not None:
                print(f"  datasketch on the same rows (densified, O(d k) each): {per_vector * 1e3:.1f} ms/vector, "
                      f"ours {sparse_times[density] / n * 1e3:.2f} ms/vector: "
                      f"{per_vector * n / sparse_times[density]:.0f}x faster")
    print(f"  10x more nonzeros costs {sparse_times[0.1] / sparse_times[0.01]:.1f}x the time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bench_fourier(args.repeat)
    bench_gcws(args.repeat)


if __name__ == "__main__":
    main()
