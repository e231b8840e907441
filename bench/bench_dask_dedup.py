"""featurehash.dask's similarity join and clusters on a LocalCluster against featurehash.dedup in process.

    python bench/bench_dask_dedup.py [--rows 200000] [--dim 20000] [--nnz 50] [--threshold 0.7]
                                     [--workers 2] [--chunk-rows 25000] [--repeat 3] [--sampler icws]

Rows: planted sparse near-duplicates (tests/dedup_support.py: groups of 4 perturbed copies, a fifth
of the rows, plus unrelated rows), `--nnz` nonzeros each, GCWS k = 256 (`--sampler`), target_recall 0.95. The rows
are held by the workers first (`client.persist`, chunks of `--chunk-rows`), as a Dask job reading
its input from storage would have them; the in-process runs use the same CSR matrix.
- join: `featurehash.dedup.similarity_join(X, map, t)` against `featurehash.dask.similarity_join(dX,
  spec, t).compute()` (pairs gathered here: they are few);
- clusters: `duplicate_clusters(..., mode="components")` both ways (the Dask one ending with its labels
  computed here).
Median of --repeat after a warm-up run (which builds the maps and loads the compiled kernels on the
workers); wall time, CPU time (this process plus the workers), the ratio Dask / in-process, peak RSS
of this process and of the largest worker, and whether the pairs and labels are equal.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster, wait

import featurehash.dask as fhd
from featurehash import create_map
from featurehash.dedup import duplicate_clusters, similarity_join

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def _worker_cpu() -> float:
    return time.process_time()


def _worker_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(client, fn, repeat: int) -> tuple[float, float, object]:
    """(median wall s, median CPU s of this process and the workers, last result), after a warm-up."""
    result = fn()
    walls, cpus = [], []
    for _ in range(repeat):
        cpu_workers = sum(client.run(_worker_cpu).values())
        cpu, start = time.process_time(), time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu + sum(client.run(_worker_cpu).values()) - cpu_workers)
    return statistics.median(walls), statistics.median(cpus), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=20_000)
    parser.add_argument("--nnz", type=int, default=50)
    parser.add_argument("--threshold", type=float, default=0.7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunk-rows", type=int, default=25_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sampler", default="icws", choices=("icws", "dart"))
    args = parser.parse_args()

    from dedup_support import sparse_planted
    n_groups = args.rows // 20
    X = sparse_planted(n_groups=n_groups, group_size=4, n_background=args.rows - 4 * n_groups, dim=args.dim,
                       nnz=args.nnz, seed=1)
    spec = {"method": "gcws", "input_dim": args.dim, "n_components": 256, "seed": 7,
            "params": {"sampler": args.sampler}}
    feature_map, t = create_map(spec), args.threshold

    # persisting X from this process ships its blocks once, in the graph: dask warns about large graphs
    warnings.filterwarnings("ignore", message=".*large graph.*")
    start = time.perf_counter()
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        startup = time.perf_counter() - start
        dX = client.persist(da.from_array(X, chunks=(args.chunk_rows, args.dim), asarray=False))
        wait(dX)
        print(f"{args.rows} sparse rows (d = {args.dim}, {args.nnz} nonzeros), gcws k = 256 ({args.sampler}), threshold {t}, "
              f"{dX.numblocks[0]} row blocks; {args.workers} worker processes x 1 thread "
              f"(cluster start-up {startup:.1f} s); median of {args.repeat}")
        print(f"{'':10s} {'in-process':>20s} {'dask':>20s} {'ratio':>7s}   equal")
        print(f"{'':10s} {'wall s':>9s} {'CPU s':>10s} {'wall s':>9s} {'CPU s':>10s} {'wall':>7s}")

        local = measure(client, lambda: similarity_join(X, feature_map, t), args.repeat)
        remote = measure(client, lambda: fhd.similarity_join(dX, spec, t).compute(), args.repeat)
        pairs, frame = local[2], remote[2]
        equal = (np.array_equal(frame["i"].to_numpy(), pairs.i) and np.array_equal(frame["j"].to_numpy(), pairs.j)
                 and np.array_equal(frame["similarity"].to_numpy(), pairs.similarity))
        _row("join", local, remote, f"{equal} ({len(pairs)} pairs, {pairs.bands} x {pairs.rows} bands)")

        local = measure(client, lambda: duplicate_clusters(X, feature_map, t), args.repeat)
        remote = measure(client, lambda: _dask_labels(dX, spec, t), args.repeat)
        clusters, (labels, rounds) = local[2], remote[2]
        equal = np.array_equal(labels, clusters.representatives[clusters.labels])
        _row("clusters", local, remote, f"{equal} ({clusters.n_clusters} clusters, {rounds} rounds)")

        here = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS: this process {here:.0f} MB (holds X and the in-process runs), "
              f"largest worker {max(client.run(_worker_peak_mb).values()):.0f} MB")


def _dask_labels(dX, spec, threshold):
    clusters = fhd.duplicate_clusters(dX, spec, threshold)
    return clusters.labels.compute(), clusters.rounds


def _row(name, local, remote, note) -> None:
    print(f"{name:10s} {local[0]:9.2f} {local[1]:10.2f} {remote[0]:9.2f} {remote[1]:10.2f} "
          f"{remote[0] / local[0]:7.2f}   {note}")


if __name__ == "__main__":
    main()
