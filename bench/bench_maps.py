"""Speed of the feature maps against a floor measured in the same run.

    python bench/bench_maps.py [--repeat 3] [--quick] [--only dense|structured|gram] [--shape n,d,D] [--write]

Dense maps (every dense method and variant of DENSE_METHODS), at the shapes (n, d, D) of SHAPES,
float32 and float64 output (input of the same precision): ratios of contender time to featurehash
time (above 1 = featurehash faster) for scikit-learn's RBFSampler and the numpy floor doing the map's own
arithmetic (phase maps: `X @ W` with D columns, add offset, cos, scale, in place; cos_sin maps and ssf: `X @ W`
with D/2 columns, then cos and sin into the two halves of the output, times the weight), and featurehash time /
GEMM-only time (the map's own product: X W^T with D/2 columns for cos_sin maps, D for phase maps; for ssf,
which has no product, the D-column one). Before 0.6 the floor of every map was the phase floor, twice the
product a cos_sin map computes: its "1.7-2.7x over the floor" was ~1.0x at equal work. All contenders of a shape and dtype are timed round-robin in one process, best of at least
`repeat` rounds (more while they fit in ROUND_ROBIN_SECONDS), so a loaded machine slows them alike;
the load average is printed before and after.
The quadrature rows use the subsampled grid: a dense tensor grid has L^d points (none fits these d),
and every grid without anova (dense, subsampled, reweighted) transforms by the same code.
Only --write writes a file (bench/results/dense_maps.txt; with --only dense, the speed table alone to
bench/results/dense_speed.txt); nothing under version control otherwise.
Gram error of i.i.d. / orthogonal / structured rff, ssf and RBFSampler at equal D on digits and
breast_cancer (unit rows, gamma = 1 / median squared distance), mean over seeds, and transform
times. Structured rff against the dense i.i.d. product at d = 1024, 2048, 4096 (D = 4d, n = 1, 64, 4096):
time ratio and parameter bytes. GCWS hashing (dense n=200, d=256, k=256; sparse d=100000 at 1% and 10% density) against
datasketch's WeightedMinHashGenerator, when it is installed. With --write the dense tables go to
bench/results/dense_maps.txt. Ratios, not seconds, are the targets: DESIGN.md "Performance targets".
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from featurehash.maps import create_map
from timing import best_time

RESULTS = Path(__file__).resolve().parent / "results"
GAMMA = 0.5
ROUND_ROBIN_SECONDS = 4.0
SHAPES = ((1, 784, 4096), (64, 784, 4096), (4096, 512, 4096), (20000, 128, 2048), (1000, 32, 1024),
          (100000, 64, 512))
# Structured against dense frequencies: d >= 1024, D = 4d.
STRUCTURED_DIMS = (1024, 2048, 4096)
STRUCTURED_ROWS = (1, 64, 4096)
QUICK_SHAPES = ((64, 784, 4096), (20000, 128, 2048), (1000, 32, 1024))
DENSE_METHODS = (
    ("rff cos_sin", "rff", {}, True),
    ("rff phase", "rff", {"variant": "phase"}, False),
    ("rff lap cos_sin", "rff", {"kernel": "laplacian"}, True),
    ("rff lap phase", "rff", {"kernel": "laplacian", "variant": "phase"}, False),
    ("rff orthogonal", "rff", {"frequencies": "orthogonal"}, True),
    ("nrff phase", "nrff", {}, False),
    ("srf phase", "srf", {"degree": 3, "bias": 4.0}, False),
    ("quadrature", "quadrature", {"grid": "subsampled"}, True),
    ("ssf gaussian", "ssf", {}, None),
)


def fourier_floor(X: np.ndarray, W: np.ndarray, b: np.ndarray, scale):
    out = X @ W
    out += b
    np.cos(out, out=out)
    out *= scale
    return out


def cos_sin_floor(X: np.ndarray, W_half: np.ndarray, scale):
    """The arithmetic of a cos_sin map: one product with D/2 columns, cos and sin into the two halves."""
    projection = X @ W_half
    half = W_half.shape[1]
    out = np.empty((len(X), 2 * half), dtype=projection.dtype)
    np.cos(projection, out=out[:, :half])
    np.sin(projection, out=out[:, half:])
    out *= scale
    return out


def round_robin(contenders: dict, repeat: int, budget: float = ROUND_ROBIN_SECONDS) -> dict:
    """Best time of each callable over at least `repeat` rounds, one call of each per round after a
    warm-up round, and more rounds (up to 300) while they fit in `budget` seconds: on a loaded machine
    a fast call (whose BLAS threads must all get a core at once) needs many tries for one clean run."""
    start = time.perf_counter()
    for fn in contenders.values():
        fn()
    round_seconds = max(time.perf_counter() - start, 1e-6)
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(max(repeat, min(300, int(budget / round_seconds)))):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def dense_maps(d: int, D: int) -> dict:
    """The maps of DENSE_METHODS for one (d, D), parameters made for both dtypes (not timed)."""
    maps = {}
    for label, method, params, _ in DENSE_METHODS:
        params = {**params, "gamma": GAMMA} if method != "srf" else params
        m = create_map({"method": method, "input_dim": d, "n_components": D, "params": params}).materialize()
        m.transform(np.zeros((1, d)) + 1.0 / d, dtype=np.float64)
        maps[label] = m
    return maps


def dense_shape_rows(n: int, d: int, D: int, dtype, repeat: int, maps: dict) -> list[str]:
    from sklearn.kernel_approximation import RBFSampler

    rng = np.random.default_rng(0)
    X = (rng.standard_normal((n, d)) / np.sqrt(d)).astype(dtype)
    W = (rng.standard_normal((d, D)) * np.sqrt(2 * GAMMA)).astype(dtype)
    half = np.ascontiguousarray(W[:, :D // 2])
    # Its own W: the round-robin calls it right after the floor, which would leave the floor's W in cache
    # for it (at n = 1 the product reads W from memory: 1.2x faster warm).
    W_alone = W.copy()
    b = rng.uniform(0, 2 * np.pi, D).astype(dtype)
    scale = dtype(np.sqrt(2.0 / D))
    sampler = RBFSampler(gamma=GAMMA, n_components=D, random_state=0).fit(X)
    half_floor = np.ascontiguousarray(W[:, D // 2:])   # its own W as well
    contenders = {"floor": lambda: fourier_floor(X, W, b, scale),
                  "floor_cos_sin": lambda: cos_sin_floor(X, half_floor, scale), "gemm": lambda: X @ W_alone,
                  "gemm_half": lambda: X @ half, "sklearn": lambda: sampler.transform(X)}
    for label, m in maps.items():
        contenders[label] = lambda m=m: m.transform(X, dtype=dtype)
    best = round_robin(contenders, repeat)
    rows = []
    for label, _, _, half_product in DENSE_METHODS:
        ours = best[label]
        gemm = best["gemm_half" if half_product else "gemm"]
        floor = best["floor" if half_product is False else "floor_cos_sin"]
        rows.append(f"  {(n, d, D)!s:20s} {np.dtype(dtype).name:8s} {label:16s} {ours * 1e3:9.2f} ms "
                    f"{best['sklearn'] / ours:7.2f}x {floor / ours:7.2f}x {ours / gemm:7.2f}x")
    rows.append(f"  {'':20s} {'':8s} {'(contenders)':16s} floor {best['floor'] * 1e3:.2f} ms phase, "
                f"{best['floor_cos_sin'] * 1e3:.2f} ms cos_sin, RBFSampler "
                f"{best['sklearn'] * 1e3:.2f} ms, GEMM {best['gemm'] * 1e3:.2f} / {best['gemm_half'] * 1e3:.2f} ms "
                "(D / D/2 columns)")
    return rows


def load_average() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg()) + f" on {os.cpu_count()} cores"


def bench_dense(repeat: int, shapes) -> str:
    lines = [f"Dense maps ({load_average()} at the start): RBFSampler / ours, floor / ours (above 1 = ours "
             "faster; the floor does the map's arithmetic: phase maps D columns and cos, cos_sin maps and ssf D/2 "
             "columns and cos and sin), ours / GEMM-only",
             (f"  {'(n, d, D)':20s} {'output':8s} {'method':16s} {'time':>12s} {'RBFSamp':>8s} {'floor':>8s} "
              f"{'GEMM':>8s}")]
    print("\n".join(lines), flush=True)
    for n, d, D in shapes:
        maps = dense_maps(d, D)
        for dtype in (np.float32, np.float64):
            rows = dense_shape_rows(n, d, D, dtype, repeat, maps)
            print("\n".join(rows), flush=True)
            lines += rows
    lines.append(f"  ({load_average()} at the end)")
    print(lines[-1], flush=True)
    return "\n".join(lines)


def structured_rows(n: int, d: int, D: int, repeat: int) -> list[str]:
    """rff "structured" (O(D log d) projection, `_structured_projection`) against the dense i.i.d. product,
    cos_sin and phase, float32, timed round-robin in one run."""
    X = (np.random.default_rng(0).standard_normal((n, d)) / np.sqrt(d)).astype(np.float32)
    maps, contenders = {}, {}
    for variant in ("cos_sin", "phase"):
        for kind in ("iid", "structured"):
            m = create_map({"method": "rff", "input_dim": d, "n_components": D,
                            "params": {"gamma": 0.5, "variant": variant, "frequencies": kind}}).materialize()
            maps[variant, kind] = m
            contenders[variant, kind] = lambda m=m: m.transform(X)
    best = round_robin(contenders, repeat)
    rows = []
    for variant in ("cos_sin", "phase"):
        dense, fast = best[variant, "iid"], best[variant, "structured"]
        rows.append(f"  {(n, d, D)!s:20s} {variant:8s} {dense * 1e3:10.2f} ms {fast * 1e3:10.2f} ms {dense / fast:8.2f}x "
                    f"{maps[variant, 'iid'].nbytes / 2**20:9.1f} MiB {maps[variant, 'structured'].nbytes / 2**10:8.1f} KiB")
    return rows


def bench_structured(repeat: int, quick: bool) -> str:
    lines = ["Structured rff (O(D log d), no dense W) against the dense i.i.d. product, float32 transform: time, "
             "dense / structured (above 1 = structured faster), parameter bytes",
             (f"  {'(n, d, D)':20s} {'variant':8s} {'dense':>13s} {'structured':>13s} {'ratio':>9s} "
              f"{'dense W':>13s} {'structured':>12s}")]
    print("\n".join(lines), flush=True)
    for d in STRUCTURED_DIMS[:1] if quick else STRUCTURED_DIMS:
        for n in STRUCTURED_ROWS:
            rows = structured_rows(n, d, 4 * d, repeat)
            print("\n".join(rows), flush=True)
            lines += rows
    return "\n".join(lines)


def gram_error_rows(name: str, D: int, seeds: int, repeat: int) -> list[str]:
    from bench_ssf import load_dataset, median_gamma
    from featurehash.maps import kernels
    from sklearn.kernel_approximation import RBFSampler

    X = load_dataset(name)
    d = X.shape[1]
    gamma = median_gamma(X)
    K = kernels.gaussian(X, X, gamma)
    makers = {f"rff {kind}": (lambda seed, kind=kind: create_map(
        {"method": "rff", "input_dim": d, "n_components": D, "seed": seed,
         "params": {"gamma": gamma, "frequencies": kind}})) for kind in ("iid", "orthogonal", "structured")}
    makers["ssf"] = lambda seed: create_map({"method": "ssf", "input_dim": d, "n_components": D, "seed": seed,
                                             "params": {"gamma": gamma}})
    makers["RBFSampler"] = lambda seed: RBFSampler(gamma=gamma, n_components=D, random_state=seed).fit(X)
    rows = []
    for label, make in makers.items():
        errors, seconds = [], []
        for seed in range(seeds):
            m = make(seed)
            Z = m.transform(X).astype(np.float64)
            errors.append(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))
            seconds.append(best_time(lambda m=m: m.transform(X), repeat))
        rows.append(f"  {name:14s} d={d:<4d} D={D:<5d} {label:16s} {np.mean(errors):.4f} "
                    f"(+- {np.std(errors):.4f})  {min(seconds) * 1e3:7.2f} ms")
    return rows


def bench_gram(seeds: int, repeat: int, quick: bool) -> str:
    lines = [(f"Gram relative error ||ZZ^T - K||_F / ||K||_F, mean (+- sd) over {seeds} seeds; transform time "
              "of all rows (featurehash float32, RBFSampler float64)")]
    print(lines[0], flush=True)
    for name in ("digits", "breast_cancer"):
        for D in ((256, 1024) if quick else (256, 1024, 4096)):
            rows = gram_error_rows(name, D, seeds, repeat)
            print("\n".join(rows), flush=True)
            lines += rows
    return "\n".join(lines)


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
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="three shapes, D <= 1024 for the Gram errors")
    parser.add_argument("--write", action="store_true", help="write bench/results/dense_maps.txt")
    parser.add_argument("--skip-gcws", action="store_true")
    parser.add_argument("--only", choices=("dense", "structured", "gram"), help="run one table (no GCWS)")
    parser.add_argument("--dense-only", action="store_true", help="only the dense speed table (= --only dense)")
    parser.add_argument("--shape", action="append", help="n,d,D instead of the default shapes (repeatable)")
    args = parser.parse_args()
    if args.dense_only:
        args.only = "dense"
    if args.write and (args.quick or args.shape or args.only not in (None, "dense")):
        parser.error("--write keeps the tables of one whole run: drop --quick and --shape (--only dense writes "
                     "bench/results/dense_speed.txt alone)")
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.shape:
        shapes = [tuple(int(v) for v in shape.split(",")) for shape in args.shape]
    run = (lambda name: args.only in (None, name))
    dense = bench_dense(args.repeat, shapes) if run("dense") else ""
    structured = bench_structured(args.repeat, args.quick) if run("structured") else ""
    gram = bench_gram(args.seeds, args.repeat, args.quick) if run("gram") else ""
    if args.write and args.only == "dense":
        # the speed table alone, re-measured without the Gram errors (deterministic) and the structured table
        (RESULTS / "dense_speed.txt").write_text(dense + "\n")
        print(f"wrote {RESULTS / 'dense_speed.txt'}")
    elif args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "dense_maps.txt").write_text("\n\n".join(filter(None, (dense, structured, gram))) + "\n")
        print(f"wrote {RESULTS / 'dense_maps.txt'}")
    if not args.skip_gcws and args.only is None:
        bench_gcws(args.repeat)


if __name__ == "__main__":
    main()
