"""Small batches (online scoring: one row, a few rows) against the numpy floor doing the same arithmetic.

    python bench/bench_small_batches.py [--rounds 31] [--rows 1,4,16,64,256] [--dims 64,784] [--maps ...]

For n rows of d inputs, D = 1024 outputs, float32 and float64 (the input in the output's precision, as
bench_maps), each map against its floor, the same arithmetic in numpy with the map's own parameters (a copy,
so neither reads the other's W from cache):
- cos_sin maps (rff, rff orthogonal): P = X @ W (D/2 columns), then cos(P), sin(P) into the two halves, times
  the weight;
- phase maps (rff phase): P = X @ W (D columns), + b, cos, times the weight;
- nrff (phase): rows scaled to unit norm, then as phase, then the feature rows scaled to unit norm.
Interleaved round-robin (the order of the two alternates each round), each sample a loop of calls lasting
~0.2 ms, medians of wall and CPU time per call over the rounds; floor / featurehash above 1 = featurehash
faster. Targets (issue 32): n = 1 at d = 64 within 1.2x of the floor's time (ratio >= 0.83), n >= 16 at or
above it (>= 1). Default threads (whatever numpy's BLAS and featurehash pick). featurehash is called as
users call it: `m.transform(X, dtype=...)`; the service calls `features_into` of a checked batch (the row
"service" times that call for float64 input and float32 features, what a JSON request holds).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from featurehash.maps import create_map

D = 1024
MAPS = {
    "rff": ("rff", {"gamma": 0.5}),
    "rff_phase": ("rff", {"gamma": 0.5, "variant": "phase"}),
    "rff_orthogonal": ("rff", {"gamma": 0.5, "frequencies": "orthogonal"}),
    "nrff": ("nrff", {"gamma": 0.5}),
}


def floor_for(m, dtype):
    """The numpy form of map m's features in `dtype` (its parameters copied)."""
    frequencies, offsets = m._parameters_for(np.dtype(dtype))
    W = np.array(frequencies.T, dtype=dtype, order="C")
    b = None if offsets is None else offsets.copy()
    weight = dtype(m._feature_weight())
    half = W.shape[1]
    if m.method == "nrff":
        def features(X):
            U = X / np.sqrt(np.einsum("ij,ij->i", X, X))[:, None]
            P = U @ W
            P += b
            np.cos(P, out=P)
            P /= np.sqrt(np.einsum("ij,ij->i", P, P))[:, None]
            return P
    elif b is not None:
        def features(X):
            P = X @ W
            P += b
            np.cos(P, out=P)
            P *= weight
            return P
    else:
        def features(X):
            P = X @ W
            out = np.empty((X.shape[0], 2 * half), dtype=dtype)
            np.cos(P, out=out[:, :half])
            np.sin(P, out=out[:, half:])
            out *= weight
            return out
    return features


def per_call(fn, calls: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - wall) / calls, (time.process_time() - cpu) / calls


def interleaved(contenders: dict, rounds: int) -> dict:
    """Median wall and CPU seconds per call of each contender, sampled round-robin (order alternating)."""
    for fn in contenders.values():
        fn()
    start = time.perf_counter()
    for fn in contenders.values():
        fn()
    calls = max(1, int(2e-4 / max((time.perf_counter() - start) / len(contenders), 1e-7)))
    samples = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            samples[name].append(per_call(contenders[name], calls))
    return {name: (float(np.median([w for w, _ in s])), float(np.median([c for _, c in s])))
            for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--rows", default="1,4,16,64,256")
    parser.add_argument("--dims", default="64,784")
    parser.add_argument("--maps", default=",".join(MAPS))
    args = parser.parse_args()
    print(f"D = {D}; medians of {args.rounds} interleaved rounds; us per call, wall / CPU; ratio = floor / "
          f"featurehash (wall, CPU); load average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'map':15s} {'d':>4s} {'dtype':8s} {'n':>4s} {'featurehash':>15s} {'floor':>15s} {'ratio':>12s}")
    for name in args.maps.split(","):
        method, params = MAPS[name]
        for d in map(int, args.dims.split(",")):
            m = create_map({"method": method, "input_dim": d, "n_components": D, "seed": 7, "params": params})
            for dtype in (np.float32, np.float64):
                floor = floor_for(m, dtype)
                for n in map(int, args.rows.split(",")):
                    X = np.random.default_rng(n).standard_normal((n, d)).astype(dtype)
                    np.testing.assert_allclose(m.transform(X, dtype=dtype), floor(X), atol=2e-3 if dtype == np.float32
                                               else 1e-9)
                    t = interleaved({"ours": lambda: m.transform(X, dtype=dtype), "floor": lambda: floor(X)},
                                    args.rounds)
                    cells = [f"{1e6 * t[k][0]:7.1f} /{1e6 * t[k][1]:6.1f}" for k in ("ours", "floor")]
                    ratio = f"{t['floor'][0] / t['ours'][0]:5.2f} {t['floor'][1] / t['ours'][1]:5.2f}"
                    print(f"{name:15s} {d:4d} {np.dtype(dtype).name:8s} {n:4d} {cells[0]:>15s} {cells[1]:>15s} "
                          f"{ratio:>12s}", flush=True)
        if name == "rff":
            service_rows(m_for=lambda d: create_map({"method": method, "input_dim": d, "n_components": D,
                                                     "seed": 7, "params": params}), args=args)
    print(f"load average {os.getloadavg()[0]:.2f} at the end ({time.strftime('%H:%M:%S')})")


def service_rows(m_for, args) -> None:
    """The service's call for one JSON request: a checked float64 batch, float32 features (`features_into`)."""
    for d in map(int, args.dims.split(",")):
        m = m_for(d)
        floor = floor_for(m, np.float32)
        for n in map(int, args.rows.split(",")):
            X = m.check(np.random.default_rng(n).standard_normal((n, d)))
            out = np.empty((n, m.output_dim), np.float32)
            t = interleaved({"ours": lambda: m.features_into(X, out),
                             "floor": lambda: floor(X.astype(np.float32))}, args.rounds)
            cells = [f"{1e6 * t[k][0]:7.1f} /{1e6 * t[k][1]:6.1f}" for k in ("ours", "floor")]
            ratio = f"{t['floor'][0] / t['ours'][0]:5.2f} {t['floor'][1] / t['ours'][1]:5.2f}"
            print(f"{'service rff':15s} {d:4d} {'f64->f32':8s} {n:4d} {cells[0]:>15s} {cells[1]:>15s} {ratio:>12s}",
                  flush=True)


if __name__ == "__main__":
    main()
