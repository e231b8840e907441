"""A corpus deduplicated from files to a clean corpus: featurehash (`featurehash dedup DIR --output OUT`) against
rensa's and datasketch's pipelines on the same JSON Lines files in the same run.

    python bench/bench_corpus_dedup.py [--docs 200000[,1000000...]] [--threshold 0.7] [--memory-budget 2GB]
        [--no-datasketch] [--no-quality] [--rensa-bands 8,32] [--spark 50000] [--workdir DIR] [--write]

Corpora (bench/corpus_labelled.py): a labelled one of real texts only (licences, copyright files, standard
library docstrings: ~5,700 unrelated paragraphs, half of them with 1-3 planted copies at word-edit rates 0-30%)
for quality, and one of `--docs` documents (each size of the comma-separated list in turn) (the same plus bases of those texts' words drawn by frequency) for
scale. Both written as 8 JSON Lines files {"id", "text"}.

Pipelines, each in a child process (its own CPU time and peak RSS):
- featurehash: the CLI, default settings (plain-set minhash k=128 over word 3-shingles, Jaccard, bands chosen
  for recall 0.95 at the threshold, exact verification, keep first), with `--memory-budget`; its summary gives wall and CPU
  time per stage (read = parse + normalise + 128-bit hash; near = shingling + signatures + bands + candidates
  + verification; clusters; write) and its peak RSS;
- rensa 0.5 (README: RMinHash num_perm=128 seed=42, RMinHashLSH num_bands=8 at the threshold): orjson read,
  the same shingles (lower case, r"(?u)\\b\\w\\w+\\b" tokens, word 3-grams), `RMinHash.from_token_sets`, then in
  corpus order: query the LSH, a candidate with estimated Jaccard >= threshold makes the document a duplicate,
  else it is inserted (its README's deduplicator). "rensa-32" is the same with num_bands=32 (4 rows a band),
  whose S-curve reaches about featurehash's recall at the threshold;
- datasketch 2.0 (quality corpus only): MinHash.bulk(num_perm=128), MinHashLSH(threshold, num_perm=128)
  with its own banding, the same streaming rule.
MB/s per core = bytes of the input files / CPU seconds (all threads). Quality: precision, recall and F1 of the
removed documents against the truth of corpus_labelled.py (components of exact Jaccard >= threshold).
`--spark N`: featurehash.spark.dedup_corpus on the first N documents with local[1] and local[2] (wall time).
Prints; `--write` also writes bench/results/corpus_dedup.txt (`--results NAME`: another name; `--append`: adds
to it). `--length-scale`: the generated documents' lengths times this (unlabelled scale runs only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpus_labelled

TOKEN = re.compile(r"(?u)\b\w\w+\b")


def peak_rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def read_batches(folder: str, size: int = 50_000):
    """The documents of the folder's JSON Lines files, in order, `size` at a time (memory: one batch)."""
    import orjson

    batch = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        with open(path, "rb") as file:
            for line in file:
                if line.strip():
                    batch.append(orjson.loads(line))
                    if len(batch) == size:
                        yield batch
                        batch = []
    if batch:
        yield batch


def doc_shingles(text: str) -> list[str]:
    tokens = TOKEN.findall(" ".join(text.lower().split()))
    return [" ".join(tokens[k:k + 3]) for k in range(len(tokens) - 2)]


def child_rensa(folder: str, threshold: float, bands: int, out: str) -> dict:
    """In batches of 50,000 documents: read and shingle, `RMinHash.from_token_sets`, then each document in
    order against the LSH of the kept ones (kept sketches stay in memory, as rensa's deduplicator keeps them)."""
    from rensa import RMinHash, RMinHashLSH

    clock = {name: {"cpu_s": 0.0, "wall_s": 0.0} for name in ("read+shingle", "minhash", "lsh")}
    lsh = RMinHashLSH(threshold=threshold, num_perm=128, num_bands=bands)
    kept, removed, seen = {}, [], 0
    started = time.process_time(), time.perf_counter()
    for rows in read_batches(folder):
        shingled = [doc_shingles(r["text"]) for r in rows]
        started = _add(clock["read+shingle"], started)
        hashes = RMinHash.from_token_sets(shingled, num_perm=128, seed=42)
        started = _add(clock["minhash"], started)
        for k, (row, m) in enumerate(zip(rows, hashes)):
            if not shingled[k]:
                continue
            if any(kept[c].jaccard(m) >= threshold for c in lsh.query(m)):
                removed.append(row["id"])
            else:
                kept[seen + k] = m
                lsh.insert(seen + k, m)
        seen += len(rows)
        started = _add(clock["lsh"], started)
    Path(out).write_text(json.dumps(removed))
    return {"stages": clock, "peak_rss_bytes": peak_rss()}


def _add(total: dict, started) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    total["cpu_s"] += cpu - started[0]
    total["wall_s"] += wall - started[1]
    return cpu, wall


def child_datasketch(folder: str, threshold: float, out: str) -> dict:
    from datasketch import MinHash, MinHashLSH

    clock = {}
    t = time.process_time(), time.perf_counter()
    rows = [row for batch in read_batches(folder) for row in batch]
    shingled = [[s.encode() for s in doc_shingles(r["text"])] for r in rows]
    clock["read+shingle"] = _lap(t)
    t = time.process_time(), time.perf_counter()
    hashes = MinHash.bulk(shingled, num_perm=128)
    clock["minhash"] = _lap(t)
    t = time.process_time(), time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=128)
    removed = []
    for k, (row, m) in enumerate(zip(rows, hashes)):
        if not shingled[k]:
            continue
        if any(hashes[c].jaccard(m) >= threshold for c in lsh.query(m)):
            removed.append(row["id"])
        else:
            lsh.insert(k, m)
    clock["lsh"] = _lap(t)
    Path(out).write_text(json.dumps(removed))
    return {"stages": clock, "peak_rss_bytes": peak_rss(), "bands": lsh.b, "rows": lsh.r}


def _lap(started) -> dict:
    cpu, wall = started
    return {"cpu_s": round(time.process_time() - cpu, 3), "wall_s": round(time.perf_counter() - wall, 3)}


def run_child(argv: list[str]) -> tuple[dict, float, float]:
    """(its JSON line, wall, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed: {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), wall, cpu


def featurehash(folder: str, out: str, threshold: float, budget: str) -> dict:
    summary, wall, cpu = run_child([sys.executable, "-m", "featurehash.cli", "dedup", folder, "--output", out,
                                    "--id-field", "id", "--threshold", str(threshold), "--memory-budget", budget,
                                    "--no-progress", "--force"])
    import pyarrow.parquet as pq

    removed = pq.read_table(f"{out}/duplicates.parquet", columns=["id"])["id"].to_pylist()
    return {"name": "featurehash", "wall_s": wall, "cpu_s": cpu, "stages": summary["stages"],
            "peak_rss_bytes": summary["peak_rss_bytes"], "removed": removed, "summary": summary}



def contender(kind: str, folder: str, threshold: float, bands: int | None, scratch: str) -> dict:
    out = f"{scratch}/{kind}-{bands}.json"
    args = [sys.executable, __file__, "--child", kind, folder, str(threshold), out]
    if bands is not None:
        args.append(str(bands))
    result, wall, cpu = run_child(args)
    name = kind if kind == "datasketch" else f"rensa-{bands}" if bands != 8 else "rensa"
    return {"name": name, "wall_s": wall, "cpu_s": cpu, "stages": result["stages"],
            "peak_rss_bytes": result["peak_rss_bytes"], "removed": json.loads(Path(out).read_text()),
            "banding": result.get("bands") and f"{result['bands']}x{result['rows']}"}


def quality(removed: list[str], truth: set[str], rates: dict) -> dict:
    got = set(removed)
    tp = len(got & truth)
    p = tp / len(got) if got else 1.0
    r = tp / len(truth) if truth else 1.0
    by_rate = {}
    for rate in corpus_labelled.EDIT_RATES:
        ids = {i for i, x in rates.items() if x == rate} & truth
        if ids:
            by_rate[rate] = round(len(got & ids) / len(ids), 3)
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(2 * p * r / (p + r) if p + r else 0, 4),
            "recall_by_edit_rate": by_rate}


# The driver collects the documents' small columns (ids, hashes, lengths): with Spark's default 1g the
# 5,007,268-document input's run stalled in that collect (no task running for 10 minutes); this bench gives 4g.
DRIVER_MEMORY = "4g"


def spark_scaling(folder: str, threshold: float, scratch: str) -> dict:
    out = {}
    for cores in (1, 2):
        code = (f"import json,time;from pyspark.sql import SparkSession;import featurehash.spark as fhs\n"
                f"s=SparkSession.builder.master('local[{cores}]').config('spark.ui.enabled','false')"
                f".config('spark.sql.shuffle.partitions','{2 * cores}').config('spark.driver.memory','{DRIVER_MEMORY}')"
                f".getOrCreate();s.sparkContext.setLogLevel('ERROR')\n"
                f"t=time.perf_counter();r=fhs.dedup_corpus(s,{folder!r},{scratch + f'/spark{cores}'!r},id_field='id',"
                f"threshold={threshold},force=True)\n"
                f"print(json.dumps({{'wall_s':time.perf_counter()-t,'kept':r['kept'],'stages':r['stages']}}))")
        result, wall, cpu = run_child([sys.executable, "-c", code])
        out[f"local[{cores}]"] = {**result, "driver_cpu_s": cpu}
    return out


def table(runs: list[dict], mb: float, truth: set[str] | None, rates: dict) -> list[str]:
    lines = [f"{'pipeline':<12} {'wall s':>8} {'CPU s':>8} {'MB/s/core':>10} {'peak RSS MB':>12}   "
             f"{'P':>6} {'R':>6} {'F1':>6}  recall by edit rate"]
    for run in runs:
        q = quality(run["removed"], truth, rates) if truth is not None else None
        run["quality"] = q
        scores = (f"{q['precision']:6.3f} {q['recall']:6.3f} {q['f1']:6.3f}  "
                  + " ".join(f"{k:g}:{v:.2f}" for k, v in q["recall_by_edit_rate"].items())) if q else \
            f"{'-':>6} {'-':>6} {'-':>6}  removed {len(run['removed']):,}"
        lines.append(f"{run['name']:<12} {run['wall_s']:8.1f} {run['cpu_s']:8.1f} {mb / run['cpu_s']:10.2f} "
                     f"{run['peak_rss_bytes'] / 1e6:12.0f}   {scores}")
    base = next((r for r in runs if r["name"] == "rensa"), None)
    for run in runs:
        ratio = f", {run['cpu_s'] and base['cpu_s'] / run['cpu_s']:.2f}x rensa's MB/s/core" if base else ""
        # core-hours per TB = CPU seconds / MB of text x 10^6 MB per TB / 3600 s per hour
        lines.append(f"  {run['name']}: {run['cpu_s'] / mb * 1e6 / 3600:.1f} core-hours per TB{ratio}")
    for run in runs:
        stages = "; ".join(f"{name} {s['cpu_s']:.1f} s CPU, {s.get('wall_s', 0):.1f} s wall "
                           f"({mb / s['cpu_s']:.1f} MB/s/core)" if s.get("cpu_s")
                           else f"{name} {s.get('wall_s', 0):.1f} s" for name, s in run["stages"].items())
        lines.append(f"  {run['name']}: {stages}" + (f" [banding {run['banding']}]" if run.get("banding") else ""))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", default="200000", help="scale corpus sizes, comma-separated")
    parser.add_argument("--threshold", type=float, default=0.7)
    parser.add_argument("--memory-budget", default="2GB")
    parser.add_argument("--no-datasketch", action="store_true")
    parser.add_argument("--no-quality", action="store_true", help="only the scale corpus")
    parser.add_argument("--no-truth", action="store_true", help="scale corpus unlabelled (no P/R/F1: at 5M "
                        "documents the labels cost minutes of Python shingling)")
    parser.add_argument("--length-scale", type=float, default=1.0, help="generated documents' lengths times this "
                        "(1.4: ~1,060 bytes a document, 5M documents ~5.3 GB)")
    parser.add_argument("--rensa-bands", default="8,32", help="rensa variants (bands), comma-separated")
    parser.add_argument("--spark", type=int, default=0, help="documents for the local[1] / local[2] run (0: none)")
    parser.add_argument("--workdir")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--append", action="store_true", help="with --write: add to the results file")
    parser.add_argument("--results", default="corpus_dedup.txt", help="the results file's name in bench/results")
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        kind, folder, threshold, out, *rest = args.child
        result = (child_rensa(folder, float(threshold), int(rest[0]), out) if kind == "rensa"
                  else child_datasketch(folder, float(threshold), out))
        print(json.dumps(result))
        return
    scratch = args.workdir or tempfile.mkdtemp(prefix="bench-corpus-")
    lines = [f"bench_corpus_dedup: threshold {args.threshold}, {os.cpu_count()} cores, "
             f"memory budget {args.memory_budget}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    real = corpus_labelled.unrelated(corpus_labelled.real_paragraphs())
    corpora = [("quality (real texts only)", 2 * len(real))] * (not args.no_quality) + \
        [("scale", int(n)) for n in args.docs.split(",")]
    for title, n in corpora:
        labelled = title.startswith("quality") or not args.no_truth
        rows, truth, rates, n_real = corpus_labelled.build(n, args.threshold, real=real, truth=labelled,
                                                           length_scale=1.0 if labelled else args.length_scale)
        folder = f"{scratch}/{title.split()[0]}-in"
        shutil.rmtree(folder, ignore_errors=True)
        size = corpus_labelled.write_jsonl(rows, folder)
        mb, n_rows = size / 1e6, len(rows)
        del rows   # the children read the files; at 5M documents the list is ~8 GB of this process
        lines += ["", f"{title}: {n_rows:,} documents, {mb:.1f} MB, {n_real:,} real bases, "
                      + (f"{len(truth):,} duplicates to remove" if truth is not None else "unlabelled")]
        runs = [featurehash(folder, f"{scratch}/{title.split()[0]}-out", args.threshold, args.memory_budget)]
        runs += [contender("rensa", folder, args.threshold, int(bands), scratch) for bands in args.rensa_bands.split(",")]
        if title.startswith("quality") and not args.no_datasketch:
            runs.append(contender("datasketch", folder, args.threshold, None, scratch))
        lines += table(runs, mb, truth, rates)
        fh = runs[0]["summary"]
        lines.append(f"  featurehash peak anonymous RSS {fh['peak_anonymous_bytes'] / 1e6:.0f} MB (VmHWM above also "
                     "counts read-back pages of memory-mapped spill files)")
        lines.append("  featurehash anonymous growth by stage (MB): " + ", ".join(
            f"{name} {st['stage_anonymous_growth_bytes'] / 1e6:.0f}" for name, st in fh["stages"].items()
            if "stage_anonymous_growth_bytes" in st))
        lines.append(f"  featurehash summary: kept {fh['kept']:,}, exact {fh['exact_duplicates']:,}, near "
                     f"{fh['near_duplicates']:,}; near stage {json.dumps({k: v for k, v in fh['stages']['near'].items() if k not in ('wall_s', 'cpu_s')})}")
        print("\n".join(lines[-(len(runs) * 3 + 5):]), flush=True)
    if args.spark:
        rows = corpus_labelled.build(args.spark, args.threshold, real=real)[0]
        folder = f"{scratch}/spark-in"
        shutil.rmtree(folder, ignore_errors=True)
        mb = corpus_labelled.write_jsonl(rows, folder) / 1e6
        spark = spark_scaling(folder, args.threshold, scratch)
        w1, w2 = spark["local[1]"]["wall_s"], spark["local[2]"]["wall_s"]
        lines += ["", f"spark: {len(rows):,} documents, {mb:.1f} MB: local[1] {w1:.1f} s, local[2] {w2:.1f} s, "
                      f"speed-up {w1 / w2:.2f}x (kept {spark['local[1]']['kept']:,} / {spark['local[2]']['kept']:,})"]
    text = "\n".join(lines)
    print(text)
    if args.write:
        (HERE / "results").mkdir(exist_ok=True)
        with open(HERE / "results" / args.results, "a" if args.append else "w") as results:
            results.write(("\n" if args.append else "") + text + "\n")


if __name__ == "__main__":
    main()
