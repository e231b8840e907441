"""A featurehash batch alone and right after a multi-threaded numpy product (issue: speed where users call it).

A user's pipeline runs numpy products before featurehash; OpenBLAS's pool threads keep spinning ~100 ms after
a product (measured: a 2-thread GEMM then `time.sleep(0.2)` costs 0.1 s of CPU), and whichever BLAS
featurehash holds to one thread decides whether the chunks' own products fork. For each order, interleaved
round-robin, medians of wall and CPU time per batch: "alone" (the pool asleep: 0.3 s after the last product),
and "after" (straight after a 1024x1024 float32 product on numpy's threads). OPENBLAS_THREAD_TIMEOUT (read
when numpy loads OpenBLAS; 4-30, the spin lasts 2^value cycles, default 28) shortens the spin.

    python bench/bench_after_blas.py [--rounds 15] [--hash-seeds 0,1,2,3,4]
Each hash seed runs in a fresh process (threadpoolctl's order of numpy's and scipy's BLAS followed it).
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
rounds = int(sys.argv[1])
m = create_map({"method": "rff", "input_dim": 64, "n_components": 1024, "seed": 1, "params": {"gamma": 0.5}})
X = np.random.default_rng(0).standard_normal((16384, 64)).astype(np.float32)
A = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
out = np.empty((len(X), m.output_dim), np.float32)
m.features_into(X, out)
times = {"alone": [], "after": []}

def timed(label):
    wall, cpu = time.perf_counter(), time.process_time()
    m.features_into(X, out)
    times[label].append((time.perf_counter() - wall, time.process_time() - cpu))

for _ in range(rounds):
    time.sleep(0.3); timed("alone")
    A @ A; timed("after")
print(json.dumps({k: [float(np.median([w for w, _ in v])), float(np.median([c for _, c in v]))] for k, v in times.items()}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--hash-seeds", default="0,1,2,3,4")
    args = parser.parse_args()
    print(f"rff float32 16384 x 64 -> 1024; medians of {args.rounds} interleaved rounds; wall / CPU ms per batch")
    print(f"OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT', 'unset')}")
    print(f"{'hash seed':>9} {'alone':>15} {'after GEMM':>15} {'after/alone':>11}")
    for seed in args.hash_seeds.split(","):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = json.loads(subprocess.run([sys.executable, "-c", CHILD, str(args.rounds)], env=env, check=True,
                                           capture_output=True, text=True).stdout)
        cells = [f"{1e3 * result[k][0]:6.1f} / {1e3 * result[k][1]:6.1f}" for k in ("alone", "after")]
        print(f"{seed:>9} {cells[0]:>15} {cells[1]:>15} {result['after'][0] / result['alone'][0]:10.2f}x")
    print(f"load average {os.getloadavg()[0]:.2f} at the end ({time.strftime('%H:%M:%S')})")


if __name__ == "__main__":
    main()
