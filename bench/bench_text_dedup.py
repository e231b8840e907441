"""Peak memory of the library's text dedup: `duplicate_clusters` over a .txt file of short documents (one a line),
streamed through a gcws map's text stage in `chunk_rows` blocks inside `memory_budget`.

    python bench/bench_text_dedup.py [--documents 1000000] [--memory-budget 1e9] [--threshold 0.8] [--k 128] [--write]

The documents are 15..100 words drawn from real ASCII text (bench_text.py's corpus, each paragraph once), a third
of them perturbed copies of recent others (~5% of words dropped), written to a temporary file. The dedup runs in a child process
(so its peak RSS is its own: `ru_maxrss` of the child), from the file, with the spill directory beside it; the
child also reports its RSS after the imports and map creation (the floor nothing here can go under) and the peaks of
its anonymous and file-backed resident memory sampled every 50 ms from /proc/self/status (spilled rows and band
keys are memory-mapped files: their resident pages count in RSS but are the kernel's to reclaim). Wall and CPU
time of the child; the pairs and clusters found. `--write` also writes this output to bench/results/text_dedup.txt.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_text import ascii_paragraphs  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "text_dedup.txt"

CHILD = r"""
import json, resource, sys, threading, time
peaks = {"RssAnon": 0, "RssFile": 0, "VmRSS": 0}
def sample():
    # /proc/self/status every 50 ms: anonymous memory (the process's own) apart from file pages mapped in
    # (spilled rows, memory-mapped band keys: clean pages the kernel reclaims under pressure)
    while True:
        with open("/proc/self/status") as status:
            for line in status:
                name = line.split(":")[0]
                if name in peaks:
                    peaks[name] = max(peaks[name], int(line.split()[1]))
        time.sleep(0.05)
threading.Thread(target=sample, daemon=True).start()
from featurehash import create_map
from featurehash.dedup import duplicate_clusters
path, budget, threshold, k, spill = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
feature_map = create_map({"method": "gcws", "n_components": k, "seed": 1, "params": {"sampler": "dart",
                          "empty_rows": "code"}, "input": {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}})
feature_map.hash(["warm up the compiled passes and the tables"])
floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
wall, cpu = time.perf_counter(), time.process_time()
clusters = duplicate_clusters(path, feature_map, threshold, memory_budget=budget, spill_dir=spill)
print(json.dumps({"floor_kib": floor, "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "pairs": len(clusters.pairs), "clusters": int(clusters.n_clusters),
                  "candidates": int(clusters.pairs.candidates), "bands": clusters.pairs.bands,
                  "rows_per_band": clusters.pairs.rows, "peaks_kib": peaks}))
"""


def write_documents(path: Path, n: int, seed: int = 1) -> int:
    """n documents of 15..100 words drawn at random from the corpus's running text (real words at their real
    frequencies, in an order of their own: distinct documents share few 3-shingles), every third one a copy of an
    earlier one with ~5% of its words dropped (the planted near-duplicates)."""
    words = np.array(" ".join(dict.fromkeys(ascii_paragraphs())).split(" "), dtype=object)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(15, 100, size=n)
    characters = 0
    recent: list[list[str]] = []
    with open(path, "w", encoding="utf-8") as out:
        for i in range(n):
            if i % 3 == 2:
                original = recent[int(rng.integers(0, len(recent)))]
                text = " ".join(w for w, keep in zip(original, rng.random(len(original)) >= 0.05) if keep)
            else:
                drawn = words[rng.integers(0, words.size, size=lengths[i])].tolist()
                recent = (recent + [drawn])[-100:]
                text = " ".join(drawn)
            out.write(text + "\n")
            characters += len(text)
    return characters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--memory-budget", dest="budget", type=float, default=1e9)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--k", type=int, default=128)
    parser.add_argument("--write", action="store_true", help=f"also write the output to {RESULTS}")
    args = parser.parse_args()
    lines = io.StringIO()

    def say(text: str) -> None:
        print(text, flush=True)
        lines.write(text + "\n")

    run(args, say)
    if args.write:
        RESULTS.write_text(lines.getvalue())


def run(args, say) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-text-dedup-") as folder:
        path = Path(folder) / "documents.txt"
        characters = write_documents(path, args.documents)
        say(f"{args.documents} documents, {characters / args.documents:.0f} characters each on average, "
              f"{path.stat().st_size / 1e6:.0f} MB; memory_budget {args.budget / 1e9:.2f} GB, threshold "
              f"{args.threshold}, gcws dart k = {args.k}, word 3-shingles")
        env = {**os.environ}
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(args.budget), str(args.threshold),
                               str(args.k), folder], capture_output=True, text=True, env=env)
        if done.returncode:
            say(done.stderr[-3000:])
            raise SystemExit(done.returncode)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        sampled = result["peaks_kib"]
        say(f"peak RSS {peak / 1024:.0f} MiB (after imports and map: {result['floor_kib'] / 1024:.0f} MiB; "
              f"sampled every 50 ms: anonymous {sampled['RssAnon'] / 1024:.0f} MiB, file pages mapped in "
              f"{sampled['RssFile'] / 1024:.0f} MiB at their peaks)")
        say(f"   "
              f"wall {result['wall']:.1f} s, CPU {result['cpu']:.1f} s "
              f"({args.documents / result['cpu']:.0f} documents/s of CPU); {result['bands']} bands of "
              f"{result['rows_per_band']}; {result['candidates']} candidates, {result['pairs']} pairs, "
              f"{result['clusters']} clusters")


if __name__ == "__main__":
    main()
