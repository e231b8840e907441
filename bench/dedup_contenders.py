"""The contenders of bench/bench_dedup.py's comparison, each run in its own child process so that its peak RSS
is its own: the child reports its peak RSS (VmHWM of /proc/self/status) when ready (rows loaded, imports and
warm-up done: `ready_rss`) and at the end (`peak_rss`); peak - ready is what the run itself added. Not
getrusage's ru_maxrss: Linux carries into it the parent's RSS at fork (kept across exec), which here holds the
collections and their truth.

    python bench/dedup_contenders.py {featurehash,datasketch} ROWS THRESHOLD K SAMPLER PAIRS_OUT

ROWS is a .npy (dense) or scipy .npz (sparse) file of nonnegative rows. Prints one JSON line: per variant the
wall and CPU seconds of the whole pipeline (hashing included), its banding and candidates; PAIRS_OUT gets
the verified pairs (i < j) of each variant (.npz, arrays `<variant>_i`, `<variant>_j`).

featurehash: `similarity_join(X, gcws map, threshold, target_recall=0.95, verify="exact")`.
datasketch (2.0), the pipeline its users write: a MinHash per row, insert all into a MinHashLSH, query each row,
then verify each candidate exactly with the same kernel (featurehash.lsh.similarity.ExactPairs, GMM), so both
sides return pairs with precision 1.0 and only the candidate stage differs.
- sparse rows: `MinHash.bulk` over each row's set of nonzero coordinates (bytes), num_perm = k: Jaccard of the
  supports, the set view users take of sparse data (the weights are ignored until verification). A planted
  copy keeps most of its base's coordinates with jittered values, so its supports' Jaccard exceeds its GMM
  and the default banding finds more of the GMM pairs than its S-curve at the threshold says;
- dense rows: `WeightedMinHashGenerator(d, k).minhash_many` (Ioffe's ICWS, which estimates the weighted
  Jaccard = GMM) in chunks of rows; it holds k x d float32 tables and k x nnz work arrays, so it is used at
  small d only (its per-row `minhash` is ~10x slower still).
Two LSH variants share the MinHashes (hashing is timed once and charged to each): "default" (MinHashLSH's own
(b, r) for the threshold, equal false-positive / false-negative weights) and "matched" (params = the (L, r)
featurehash chose for target_recall 0.95, so both sides aim at the same recall). The child's peak RSS covers both.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp

WMH_CHUNK_ROWS = 1000


def peak_rss() -> int:
    """Bytes: the high-water RSS of this process's own address space (VmHWM); ru_maxrss where there is none."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def load_rows(path: str):
    return sp.load_npz(path).tocsr() if path.endswith(".npz") else np.load(path)


def gcws_map(dim: int, k: int, sampler: str):
    from featurehash import create_map

    return create_map({"method": "gcws", "input_dim": dim, "n_components": k, "seed": 1,
                       "params": {"sampler": sampler}})


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def run_featurehash(X, threshold: float, k: int, sampler: str):
    from featurehash.dedup import similarity_join

    m = gcws_map(X.shape[1], k, sampler)
    m.hash(X[:16])   # compile / load the kernels and build the tables outside the timing
    ready = peak_rss()
    result, wall, cpu = timed(lambda: similarity_join(X, m, threshold, target_recall=0.95, verify="exact"))
    info = {"wall": wall, "cpu": cpu, "bands": result.bands, "rows": result.rows,
            "candidates": result.candidates}
    return {"featurehash": info}, {"featurehash": (result.i, result.j)}, ready


def datasketch_minhashes(X, k: int):
    from datasketch import MinHash, WeightedMinHashGenerator

    if sp.issparse(X):
        sets = [[column.to_bytes(4, "little") for column in X.indices[X.indptr[row]:X.indptr[row + 1]].tolist()]
                for row in range(X.shape[0])]
        return MinHash.bulk(sets, num_perm=k, seed=1)
    generator = WeightedMinHashGenerator(X.shape[1], sample_size=k, seed=1)
    hashes = []
    for start in range(0, X.shape[0], WMH_CHUNK_ROWS):
        hashes.extend(generator.minhash_many(X[start:start + WMH_CHUNK_ROWS]))
    return hashes


def datasketch_pairs(hashes, threshold: float, k: int, params, score):
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=k, params=params)
    with lsh.insertion_session() as session:
        for key, minhash in enumerate(hashes):
            if minhash is not None:   # minhash_many gives None for an all-zero row
                session.insert(key, minhash, check_duplication=False)
    left, right = [], []
    for key, minhash in enumerate(hashes):
        if minhash is None:
            continue
        for other in lsh.query(minhash):
            if other > key:   # each pair once (it comes back from both rows' queries)
                left.append(key)
                right.append(other)
    i, j = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    similarity = score(i, j)
    keep = similarity >= threshold
    return i[keep], j[keep], (lsh.b, lsh.r, int(i.size))


def run_datasketch(X, threshold: float, k: int, sampler: str):
    from featurehash.lsh.banding import choose_bands
    from featurehash.lsh.similarity import ExactPairs, similarity_of

    score = ExactPairs(similarity_of(gcws_map(X.shape[1], k, sampler)), X)
    datasketch_minhashes(X[:4], k)   # imports and first-call costs outside the timing
    score(np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64))
    ready = peak_rss()
    hashes, hash_wall, hash_cpu = timed(lambda: datasketch_minhashes(X, k))
    infos, pairs = {}, {}
    for variant, params in (("default", None), ("matched", choose_bands(k, threshold, 0.95))):
        (i, j, (bands, rows, candidates)), wall, cpu = timed(
            lambda params=params: datasketch_pairs(hashes, threshold, k, params, score))
        infos[f"datasketch {variant}"] = {"wall": hash_wall + wall, "cpu": hash_cpu + cpu, "bands": bands,
                                          "rows": rows, "candidates": candidates}
        pairs[f"datasketch {variant}"] = (i, j)
    return infos, pairs, ready


def child_main(argv: list[str]) -> None:
    contender, path, threshold, k, sampler, out = argv
    X = load_rows(path)
    run = run_featurehash if contender == "featurehash" else run_datasketch
    infos, pairs, ready = run(X, float(threshold), int(k), sampler)
    np.savez(out, **{f"{name}_{axis}": array for name, (i, j) in pairs.items()
                     for axis, array in (("i", i), ("j", j))})
    print(json.dumps({"variants": infos, "ready_rss": ready,
                      "peak_rss": peak_rss()}))


def run_child(contender: str, path: str, threshold: float, k: int, sampler: str) -> tuple[dict, dict]:
    """(report, pairs) of one contender run in a child process (it inherits PYTHONPATH)."""
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "pairs.npz")
        command = [sys.executable, os.path.abspath(__file__), contender, path, str(threshold), str(k), sampler, out]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdout, stderr = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"{contender} failed ({child.returncode}): {stderr.decode()[-2000:]}")
        report = json.loads(stdout.decode().strip().splitlines()[-1])
        with np.load(out) as saved:
            pairs = {name: (saved[f"{name}_i"], saved[f"{name}_j"]) for name in report["variants"]}
    return report, pairs


if __name__ == "__main__":
    child_main(sys.argv[1:])
