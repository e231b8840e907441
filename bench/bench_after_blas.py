"""A featurehash batch alone and right after a multi-threaded numpy product (issue: speed where users call it).

A user's pipeline runs numpy products before featurehash; OpenBLAS's pool threads keep spinning ~100 ms after
a product (measured: a 2-thread GEMM then `time.sleep(0.2)` costs 0.1 s of CPU), and whichever BLAS
featurehash holds to one thread decides whether the chunks' own products fork. For each order, interleaved
round-robin, medians of wall and CPU time per batch: "alone" (the pool asleep: 0.3 s after the last product),
and "after" (straight after a 1024x1024 float32 product on numpy's threads). OPENBLAS_THREAD_TIMEOUT (read
when numpy loads OpenBLAS; 4-30, the spin lasts 2^value cycles, default 28) shortens the spin.

    python bench/bench_after_blas.py [--rounds 15] [--hash-seeds 0,1,2,3,4] [--order-rounds 11]
Each hash seed runs in a fresh process (threadpoolctl's order of numpy's and scipy's BLAS followed it). Every
measure is taken twice, interleaved round by round: with the chunks on helper threads of featurehash's own
("own", what 0.5.0 did) and on numpy's OpenBLAS pool threads ("pool", the default since).

Then both call orders against the numpy floor doing the same arithmetic (X @ W with D/2 columns, cos and sin
into the two halves, times the weight), at three shapes, default threads and one thread
(OPENBLAS_NUM_THREADS=1, which also keeps featurehash on the calling thread), each in a fresh process: every
round sleeps 0.2 s (the pools go idle), then runs "featurehash then numpy" or "numpy then featurehash"
(alternating rounds), so each contender is timed first (its time alone) and second (right after the other's
call, whose BLAS threads may still spin). Medians of wall and CPU per call; floor / featurehash above 1 =
featurehash faster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
import numpy as np, scipy.linalg  # scipy's OpenBLAS loaded beside numpy's, as in most pipelines
from featurehash import create_map
from featurehash.maps.numerics import _row_threads as row_threads
rounds = int(sys.argv[1])
m = create_map({"method": "rff", "input_dim": 64, "n_components": 1024, "seed": 1, "params": {"gamma": 0.5}})
X = np.random.default_rng(0).standard_normal((16384, 64)).astype(np.float32)
A = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
out = np.empty((len(X), m.output_dim), np.float32)
m.features_into(X, out)
times = {f"{when} {mode}": [] for mode in ("own", "pool") for when in ("alone", "after")}

def timed(label):
    wall, cpu = time.perf_counter(), time.process_time()
    m.features_into(X, out)
    times[label].append((time.perf_counter() - wall, time.process_time() - cpu))

for r in range(2 * rounds):
    mode = ("own", "pool")[r % 2]
    row_threads._USE_BLAS_POOL = mode == "pool"
    time.sleep(0.3); timed(f"alone {mode}")
    A @ A; timed(f"after {mode}")
print(json.dumps({k: [float(np.median([w for w, _ in v])), float(np.median([c for _, c in v]))] for k, v in times.items()}))
"""


ORDERS_CHILD = r"""
import json, sys, time
import numpy as np, scipy.linalg  # scipy's OpenBLAS loaded beside numpy's, as in most pipelines
from featurehash import create_map
from featurehash.maps.numerics import _row_threads as row_threads
n, d, D, dtype, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), np.dtype(sys.argv[4]), int(sys.argv[5])
m = create_map({"method": "rff", "input_dim": d, "n_components": D, "seed": 1, "params": {"gamma": 0.5}})
X = np.random.default_rng(0).standard_normal((n, d)).astype(dtype)
W = np.array(m._parameters_for(dtype)[0].T, order="C")
weight, half = dtype.type(m._feature_weight()), D // 2
out = np.empty((n, D), dtype)

def featurehash():
    m.features_into(X, out)

def numpy_floor():
    P = X @ W
    Z = np.empty((n, D), dtype)
    np.cos(P, out=Z[:, :half])
    np.sin(P, out=Z[:, half:])
    Z *= weight

def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu

featurehash(), numpy_floor()
times = {f"{key} {mode}": [] for key in ("fh_first", "np_second", "np_first", "fh_second") for mode in ("own", "pool")}
for r in range(4 * rounds):
    mode = ("own", "pool")[r % 2]
    row_threads._USE_BLAS_POOL = mode == "pool"
    time.sleep(0.2)
    if (r // 2) % 2 == 0:
        times["fh_first " + mode].append(timed(featurehash)); times["np_second " + mode].append(timed(numpy_floor))
    else:
        times["np_first " + mode].append(timed(numpy_floor)); times["fh_second " + mode].append(timed(featurehash))
medians = {k: [float(np.median([w for w, _ in v])), float(np.median([c for _, c in v]))] for k, v in times.items()}
print(json.dumps(medians))
"""
ORDER_SHAPES = ((16384, 64, 1024, "float32"), (2048, 512, 2048, "float32"), (8192, 32, 1024, "float64"))


def both_orders(rounds: int) -> None:
    print(f"\nBoth orders, rff cos_sin against the numpy floor; medians of {rounds} rounds each; wall / CPU ms "
          "per call; own = helper threads of featurehash's own (before), pool = numpy's OpenBLAS pool threads")
    print(f"{'(n, d, D) dtype':26s} {'threads':>7s} {'mode':>4s} {'fh first':>15s} {'then numpy':>15s} "
          f"{'numpy first':>15s} {'then fh':>15s} {'ratio fh-first':>14s} {'np-first':>9s}")
    for n, d, D, dtype in ORDER_SHAPES:
        for threads in ("default", "1"):
            env = dict(os.environ)
            if threads == "1":
                env["OPENBLAS_NUM_THREADS"] = "1"
            r = json.loads(subprocess.run([sys.executable, "-c", ORDERS_CHILD, str(n), str(d), str(D), dtype,
                                           str(rounds)], env=env, check=True, capture_output=True, text=True).stdout)
            for mode in ("own", "pool"):
                keys = [f"{key} {mode}" for key in ("fh_first", "np_second", "np_first", "fh_second")]
                cells = [f"{1e3 * r[k][0]:6.1f} / {1e3 * r[k][1]:6.1f}" for k in keys]
                # Each order's ratio compares the two calls of that order: the floor's time over featurehash's.
                first, second = r[keys[1]][0] / r[keys[0]][0], r[keys[2]][0] / r[keys[3]][0]
                print(f"{str((n, d, D)) + ' ' + dtype:26s} {threads:>7s} {mode:>4s} {cells[0]:>15s} {cells[1]:>15s} "
                      f"{cells[2]:>15s} {cells[3]:>15s} {first:13.2f}x {second:8.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--hash-seeds", default="0,1,2,3,4")
    parser.add_argument("--order-rounds", type=int, default=11)
    args = parser.parse_args()
    print(f"rff float32 16384 x 64 -> 1024; medians of {args.rounds} interleaved rounds; wall / CPU ms per batch")
    print(f"OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT', 'unset')}")
    print("own = helper threads of featurehash's own (before), pool = numpy's OpenBLAS pool threads; the rounds"
          " alternate the two")
    print(f"{'hash seed':>9} {'mode':>4} {'alone':>15} {'after GEMM':>15} {'after/alone':>11}")
    for seed in args.hash_seeds.split(","):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = json.loads(subprocess.run([sys.executable, "-c", CHILD, str(args.rounds)], env=env, check=True,
                                           capture_output=True, text=True).stdout)
        for mode in ("own", "pool"):
            alone, after = result[f"alone {mode}"], result[f"after {mode}"]
            cells = [f"{1e3 * value[0]:6.1f} / {1e3 * value[1]:6.1f}" for value in (alone, after)]
            print(f"{seed:>9} {mode:>4} {cells[0]:>15} {cells[1]:>15} {after[0] / alone[0]:10.2f}x")
    both_orders(args.order_rounds)
    print(f"load average {os.getloadavg()[0]:.2f} at the end ({time.strftime('%H:%M:%S')})")


if __name__ == "__main__":
    main()
