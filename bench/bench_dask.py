"""featurehash.dask on a LocalCluster of worker processes against the in-process transform of the same rows.

    python bench/bench_dask.py [--rows 200000] [--workers 2] [--repeat 3]

X (--rows x 64, float64) is generated on the workers (dask.array's seeded generator) and persisted
there; the same rows are computed locally for the in-process runs. For RFF features (D = 512) and
GCWS codes (k = 128), best of --repeat (after a warm-up, which builds the maps on the workers):
- in-process: `create_map(spec).transform(X)` / `.hash(X)` on the whole array in this process;
- dask on workers: `featurehash.dask.transform(dX, spec)` computed on the workers and reduced there
  (`.sum()`), nothing big gathered: how a batch job writing zarr/parquet from the workers uses it;
- dask compute: the same, gathered into this process as one ndarray.
Prints seconds, ratios to in-process, the cluster's start-up time, and checks the results are equal
(codes bitwise). Workers have 1 thread each; the in-process run uses the machine's BLAS threads.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import dask.array as da
from dask.distributed import Client, LocalCluster, wait

import featurehash.dask as fhd
from featurehash import create_map
from timing import best_time

SPECS = {
    "rff D=512 transform": ({"method": "rff", "input_dim": 64, "n_components": 512, "seed": 1,
                             "params": {"gamma": 0.02}}, "transform"),
    "gcws k=128 hash": ({"method": "gcws", "input_dim": 64, "n_components": 128, "seed": 2}, "hash"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    start = time.perf_counter()
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        startup = time.perf_counter() - start
        dX = da.random.default_rng(0).standard_normal((args.rows, 64), chunks=(args.rows // (4 * args.workers), 64))
        dX = client.persist(dX)
        wait(dX)
        X = dX.compute()
        print(f"{args.rows} x 64 rows, {args.workers} worker processes x 1 thread; cluster start-up {startup:.2f} s")
        print(f"{'':22s} {'in-process':>10s} {'dask workers':>13s} {'dask compute':>13s}   (seconds, ratio)")
        for name, (spec, operation) in SPECS.items():
            feature_map = create_map(spec)
            local = best_time(lambda: getattr(feature_map, operation)(X), args.repeat)
            lazy = getattr(fhd, operation)(dX, spec)
            persisted = best_time(lambda: lazy.sum().compute(), args.repeat)
            gathered = best_time(lambda: lazy.compute(), args.repeat)
            expected, computed = getattr(feature_map, operation)(X), lazy.compute()
            if operation == "hash":
                np.testing.assert_array_equal(computed, expected)
                agreement = "codes bitwise equal"
            else:
                agreement = f"max |dask - in-process| = {np.abs(computed - expected).max():.1e}"
            print(f"{name:22s} {local:10.3f} {persisted:8.3f} ({persisted / local:4.2f}) "
                  f"{gathered:8.3f} ({gathered / local:4.2f})   {agreement}")


if __name__ == "__main__":
    main()
