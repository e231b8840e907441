"""featurehash on Spark (local[2]) against Spark MLlib's MinHashLSH, in one run:

1. the near-duplicate self join: featurehash.spark.similarity_join (GCWS codes, L bands of r codes each
   (AND within a band, OR across bands), exact verification) against MinHashLSH.approxSimilarityJoin
   (one minhash per table, OR across tables, exact Jaccard distance of the candidates), on the same
   DataFrame of binary sparse vectors, where GMM = Jaccard, so both target the same exact pairs (all
   pairs with Jaccard >= t, by a sparse product in process). Wall and CPU time (the driver, the JVM and
   the Python workers), recall of the exact pairs, and the candidates each verified;
2. rows/s of the mapInArrow transformer and the pandas UDF (GCWS codes, RFF features) against the
   in-process hash / transform of the same rows;
3. the first use on a fresh worker: a new Python process importing featurehash, building the map and
   running its first batch, with an empty numba cache (cold: kernels compiled) and with the cache that
   run left (NUMBA_CACHE_DIR, warm: kernels loaded), and the first against the second Spark job of a
   session (the workers' map build and imports, paid once per Python worker).
4. the same self join on Ray Data (featurehash.ray.similarity_join, ray.init(num_cpus=2)), timed in the
   same interleaved rounds as the two Spark joins (Ray is up, idle, while Spark runs and the reverse).

    PYTHONPATH=app python bench/bench_spark.py [--rows 20000] [--repeats 3] [--no-ray] [--write]

--write also writes what is printed to bench/results/spark.txt (the committed run).

Contenders are interleaved, medians printed with CPU time beside wall time; on a shared machine the
wall times are noisy (say how loaded it was). Needs featurehash[spark] and Java 17.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import scipy.sparse as sp

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def binary_planted(n_groups: int, group_size: int, n_background: int, dim: int, nnz: int, seed: int):
    from dedup_support import sparse_planted

    X = sparse_planted(n_groups=n_groups, group_size=group_size, n_background=n_background, dim=dim, nnz=nnz,
                       seed=seed)
    X = sp.csr_matrix(X)
    X.data[:] = 1.0   # sets: GMM = Jaccard
    return X


def exact_pairs(X, threshold: float) -> set:
    """All pairs (i < j) with Jaccard >= threshold, by the sparse product A A^T."""
    inter = sp.triu(X @ X.T, k=1).tocoo()
    sizes = np.asarray(X.sum(axis=1)).ravel()
    jaccard = inter.data / (sizes[inter.row] + sizes[inter.col] - inter.data)
    keep = jaccard >= threshold
    return set(zip(inter.row[keep].tolist(), inter.col[keep].tolist()))


class CpuMeter:
    """CPU seconds of this process and all its descendants (the JVM, the Python workers)."""

    def __init__(self):
        import psutil

        self.root, self.gone = psutil.Process(), psutil.Error

    def read(self) -> float:
        total = 0.0
        for process in [self.root, *self.root.children(recursive=True)]:
            try:
                t = process.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except self.gone:   # a worker that ended between listing and reading
                continue
        return total

    def time(self, fn):
        wall, cpu = time.perf_counter(), self.read()
        result = fn()
        return result, time.perf_counter() - wall, self.read() - cpu


class Tee:
    """Print to the terminal and to a results file."""

    def __init__(self, stream, path: str):
        self.stream, self.file = stream, open(path, "w")   # noqa: SIM115 (open for the whole run)

    def write(self, text: str) -> int:
        self.file.write(text)
        self.file.flush()
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def session(cache: str):
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("bench_spark")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "8")
             .config("spark.executorEnv.NUMBA_CACHE_DIR", cache)   # the executors' compile cache
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def first_use(spec: dict, X) -> dict:
    """Seconds of a fresh Python process: import, map build, first batch; cold and warm numba cache."""
    code = ("import time, sys, pickle; t0 = time.perf_counter(); import featurehash; t1 = time.perf_counter();"
            "spec, X = pickle.load(open(sys.argv[1], 'rb')); m = featurehash.create_map(spec);"
            "m.hash(X[:10]); t2 = time.perf_counter(); m.hash(X); t3 = time.perf_counter();"
            "print(t1 - t0, t2 - t1, t3 - t2)")
    import pickle

    with tempfile.TemporaryDirectory() as cache, tempfile.NamedTemporaryFile(suffix=".pkl") as payload:
        with open(payload.name, "wb") as file:
            pickle.dump((spec, X), file)
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        out = {}
        for label in ("cold", "warm", "warm"):
            line = subprocess.run([sys.executable, "-c", code, payload.name], env=env, capture_output=True,
                                  text=True, check=True).stdout.split()
            out.setdefault(label, []).append([float(v) for v in line])
    return {label: np.median(np.array(v), axis=0) for label, v in out.items()}


def ray_join(X, spec: dict, t: float, meter):
    """Start Ray (2 CPUs) with the rows as a Dataset of {indices, values}; the join as a callable."""
    import featurehash.ray as fhr
    import ray

    _, wall, cpu = meter.time(lambda: ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                                               configure_logging=False))
    ray.data.DataContext.get_current().enable_progress_bars = False
    print(f"  (Ray started in {wall:.1f} s wall, {cpu:.1f} s CPU)")
    items = [{"id": r, "v": {"indices": X.indices[a:b].tolist(), "values": X.data[a:b].tolist()}}
             for r, (a, b) in enumerate(zip(X.indptr[:-1], X.indptr[1:]))]
    ds = ray.data.from_items(items, override_num_blocks=4).materialize()

    def join():
        pairs = fhr.similarity_join(ds, spec, t, column="v", partitions=4).to_pandas()
        return set(zip(pairs["i"].tolist(), pairs["j"].tolist()))

    join()   # warm-up: the workers import featurehash and build the map once
    return join


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threshold", type=float, default=0.7)
    parser.add_argument("--tables", type=int, default=6, help="MinHashLSH numHashTables")
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray Data join")
    parser.add_argument("--write", action="store_true", help="also write the output to bench/results/spark.txt")
    args = parser.parse_args()
    if args.write:
        sys.stdout = Tee(sys.stdout, os.path.join(os.path.dirname(__file__), "results", "spark.txt"))

    import featurehash.spark as fhs
    from featurehash import create_map
    from featurehash.lsh.banding import choose_bands, collision_probability
    from pyspark.ml.feature import MinHashLSH
    from pyspark.ml.linalg import SparseVector
    from pyspark.sql import functions as F

    dim, t = 5000, args.threshold
    n_groups = args.rows // 10
    X = binary_planted(n_groups, 5, args.rows - 5 * n_groups, dim, 40, seed=3)
    spec = {"method": "gcws", "input_dim": dim, "n_components": 128, "seed": 1}
    truth = exact_pairs(X, t)
    bands, r = choose_bands(128, t, 0.95)
    print(f"# {X.shape[0]} binary sparse rows (d={dim}, 40 nonzeros, {n_groups} planted groups of 5), "
          f"{len(truth)} exact pairs with Jaccard >= {t}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores at start")

    print("\n## first use on a fresh Python worker (import, map build + first batch of 10 rows, then all rows)")
    cost = first_use(spec, X[:2000])
    for label, (imp, first, batch) in cost.items():
        print(f"  {label:5s} numba cache: import {imp:.2f} s, map + first batch {first:.2f} s, "
              f"2000 rows after {batch:.3f} s")

    meter = CpuMeter()
    cache = tempfile.mkdtemp(prefix="numba-executors-")   # empty: the executors compile on first use
    spark, start_wall, start_cpu = meter.time(lambda: session(cache))
    print(f"\n## Spark session (local[2]) started in {start_wall:.1f} s wall, {start_cpu:.1f} s CPU")
    rows = [(i, SparseVector(dim, X.indices[a:b].tolist(), X.data[a:b].tolist()))
            for i, (a, b) in enumerate(zip(X.indptr[:-1], X.indptr[1:]))]
    df = spark.createDataFrame(rows, ["id", "v"]).repartition(4).cache()
    df.count()

    def noop(frame):
        frame.write.format("noop").mode("overwrite").save()

    _, first_job, first_cpu = meter.time(lambda: noop(fhs.transform(df, spec, "v", "codes", what="codes")))
    _, second_job, second_cpu = meter.time(lambda: noop(fhs.transform(df, spec, "v", "codes", what="codes")))
    print(f"  first codes job {first_job:.1f} s wall ({first_cpu:.1f} s CPU): Python workers start, import, "
          f"build the map; the same job again {second_job:.1f} s ({second_cpu:.1f} s CPU)")

    def ours():
        pairs = fhs.similarity_join(df, spec, t, column="v").toPandas()
        return set(zip(pairs["i"].tolist(), pairs["j"].tolist()))

    def mllib():
        model = MinHashLSH(inputCol="v", outputCol="h", numHashTables=args.tables, seed=1).fit(df)
        joined = model.approxSimilarityJoin(df, df, 1.0 - t + 1e-12, distCol="d")
        joined = joined.where(F.col("datasetA.id") < F.col("datasetB.id"))
        pairs = joined.select(F.col("datasetA.id").alias("i"), F.col("datasetB.id").alias("j")).toPandas()
        return set(zip(pairs["i"].tolist(), pairs["j"].tolist()))

    contenders = {"featurehash": ours, "mllib": mllib}
    if not args.no_ray:
        contenders["featurehash on Ray"] = ray_join(X, spec, t, meter)

    print(f"\n## self join at Jaccard >= {t}: featurehash (GCWS k=128, L={bands} bands x r={r}, planned recall "
          f"{collision_probability(t, bands, r):.3f} at t) vs MinHashLSH ({args.tables} tables, recall at t "
          f"{1 - (1 - t) ** args.tables:.3f}); medians of {args.repeats}, interleaved")
    results = {name: [] for name in contenders}
    for _ in range(args.repeats):
        for name, fn in contenders.items():
            found, wall, cpu = meter.time(fn)
            results[name].append((wall, cpu, len(found & truth) / max(1, len(truth)), len(found - truth)))
    for name, runs in results.items():
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"  {name:18s} {wall:7.1f} s wall {cpu:7.1f} s CPU  recall {runs[-1][2]:.4f}  false pairs {runs[-1][3]}")
    ratio = statistics.median(r[0] for r in results["mllib"]) / statistics.median(r[0] for r in results["featurehash"])
    print(f"  MinHashLSH / featurehash wall time: {ratio:.2f}x")
    if not args.no_ray:
        import ray

        ray.shutdown()

    print("\n## rows/s: Spark (local[2]) transformers against the in-process map on the same rows")
    dense = np.random.default_rng(0).random((X.shape[0], 64))
    dense_df = spark.createDataFrame([(i, row.tolist()) for i, row in enumerate(dense)], ["id", "x"]).repartition(4).cache()
    dense_df.count()
    rff = {"method": "rff", "input_dim": 64, "n_components": 256, "seed": 1, "params": {"gamma": 0.1}}
    gcws_map, rff_map = create_map(spec), create_map(rff)
    contenders = {
        "gcws codes, mapInArrow": lambda: noop(fhs.transform(df, spec, "v", "codes", what="codes")),
        "gcws codes, pandas UDF": lambda: noop(df.select(fhs.codes_udf(spec)("v"))),
        "gcws codes, in process": lambda: gcws_map.hash(X),
        "rff features, mapInArrow": lambda: noop(fhs.transform(dense_df, rff, "x", "z")),
        "rff features, pandas UDF": lambda: noop(dense_df.select(fhs.features_udf(rff)("x"))),
        "rff features, in process": lambda: rff_map.transform(dense),
    }
    for fn in contenders.values():   # warm-up: workers, maps
        fn()
    timings = {name: [] for name in contenders}
    for _ in range(args.repeats):
        for name, fn in contenders.items():
            _, wall, cpu = meter.time(fn)
            timings[name].append((wall, cpu))
    for name, runs in timings.items():
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"  {name:26s} {X.shape[0] / wall:10.0f} rows/s  ({wall:.2f} s wall, {cpu:.2f} s CPU)")
    spark.stop()

    spark = session(cache)   # a new session, new Python workers, the compile cache the first one wrote
    df = spark.createDataFrame(rows, ["id", "v"]).repartition(4).cache()
    df.count()
    _, warm_job, warm_cpu = meter.time(lambda: noop(fhs.transform(df, spec, "v", "codes", what="codes")))
    print(f"\n## a new session's first codes job with the executors' NUMBA_CACHE_DIR warm: {warm_job:.1f} s wall "
          f"({warm_cpu:.1f} s CPU), against {first_job:.1f} s cold and {second_job:.1f} s once the workers are up")
    spark.stop()
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
