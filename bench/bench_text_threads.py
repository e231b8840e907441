"""The compiled text pass on the row threads: one thread against the default threads, side by side, on the same
documents in one interleaved run, with the machine's load measured around it.

    python bench/bench_text_threads.py [--documents 3000] [--repeat 9] [--write]

Contenders per workload (the hashing map, sklearn mode, float64, word (1, 1) and char_wb (3, 5); `shingle_hashes`
word 3-shingles; the gcws dart map with a text stage, k = 128, documents to codes):
- "1 thread": the row threads held to one (BLAS limited to 1, which the row threads follow);
- "default": the row threads as the process's cores allow;
- "default, pinned": the same, each thread that takes chunks pinned to a core of its own for the run (the first
  to claim a chunk to the first usable core, the next to the second...), then given its affinity back: the
  scheduler can then neither stack both on one core nor move them.
Columns: medians of wall and CPU seconds, documents/s of each, and the wall speed-up over "1 thread" measured in
the same repeat (each repeat's ratio, then their median; CPU time summed over threads shows no speed-up), then
one default run's work split: the chunks each thread took and its CPU seconds in them, and the CPU outside the
chunks (which no thread count shortens). "1 thread" CPU may include numpy's OpenBLAS pool threads spinning
(~0.1 s) after the default run before it.

Load: the 1-minute load average before and after, and the cores this process could get at those moments: two
threads spinning in a compiled loop without the GIL for ~0.3 s, their CPU seconds over wall seconds (2.0 on two
idle cores). A speed-up can only be read against what the machine gave. Documents as bench_text.py's ASCII set
(real text, 100 to 5,000 characters). `--write` also writes this output to bench/results/text_threads.txt.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numba as nb
import numpy as np

from featurehash import create_map
from featurehash.maps.numerics import _row_threads
from featurehash.maps.text.documents import shingle_hashes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_text import ascii_paragraphs, documents_of, one_thread, run_and_write, timed  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "text_threads.txt"


@nb.njit(nogil=True, cache=True)
def _spin(steps):
    total = 0.0
    for i in range(steps):
        total += (i % 7) * 0.5
    return total


def available_cores(steps: int = 150_000_000) -> float:
    """CPU seconds over wall seconds of two threads spinning without the GIL: the cores the machine gives now."""
    _spin(10)
    wall, cpu = time.perf_counter(), time.process_time()
    spinners = [threading.Thread(target=_spin, args=(steps,)) for _ in range(2)]
    for spinner in spinners:
        spinner.start()
    for spinner in spinners:
        spinner.join()
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


def load() -> str:
    return f"load average {os.getloadavg()[0]:.2f}, cores available {available_cores():.2f} of {os.cpu_count()}"


def pinned(fn):
    """fn run with each row thread that takes a chunk pinned to a core of its own, affinities restored after."""
    cores = sorted(os.sched_getaffinity(0))

    def run():
        original, seen, lock = _row_threads.run_chunks, {}, threading.Lock()

        def run_chunks(work, chunks, threads):
            def pinned_work(chunk):
                thread = threading.get_native_id()
                with lock:
                    if thread not in seen:
                        seen[thread] = os.sched_getaffinity(0)
                        os.sched_setaffinity(0, {cores[(len(seen) - 1) % len(cores)]})   # this thread only
                return work(chunk)
            return original(pinned_work, chunks, threads)

        _row_threads.run_chunks = run_chunks
        try:
            return fn()
        finally:
            _row_threads.run_chunks = original
            for thread, mask in seen.items():
                try:
                    os.sched_setaffinity(thread, mask)
                except OSError:   # a helper thread that has ended
                    pass
    return run


def work_split(fn) -> str:
    """One default run with each thread's chunks and CPU seconds in them counted: whether the work was shared,
    whatever the machine's load did to wall time; the rest of the process's CPU is outside the chunks (encoding
    the batch, assembling the output, a map's kernel after the text stage)."""
    original, threads, lock = _row_threads.run_chunks, {}, threading.Lock()

    def run_chunks(work, chunks, count):
        def counted(chunk):
            start = time.thread_time()
            result = work(chunk)
            with lock:
                done = threads.setdefault(threading.get_native_id(), [0, 0.0])
                done[0] += 1
                done[1] += time.thread_time() - start
            return result
        return original(counted, chunks, count)

    _row_threads.run_chunks = run_chunks
    try:
        _, cpu = timed(fn)
    finally:
        _row_threads.run_chunks = original
    shares = ", ".join(f"{chunks} chunks {seconds:.3f} s" for chunks, seconds in threads.values())
    inside = sum(seconds for _, seconds in threads.values())
    return f"work split of one default run: {shares}; CPU outside the chunks {max(0.0, cpu - inside):.3f} s of {cpu:.3f} s"


def bench(name: str, fn, documents: list[str], repeat: int) -> None:
    contenders = {"1 thread": one_thread(fn), f"default ({_row_threads.thread_count()} threads)": fn,
                  "default, pinned": pinned(fn)}
    for contender in contenders.values():
        contender()   # warm-up: compilation, tables
    runs = {label: [] for label in contenders}
    for _ in range(repeat):
        for label, contender in contenders.items():
            runs[label].append(timed(contender))
    n = len(documents)
    print(f"\n{name} ({n} documents, {sum(map(len, documents)) / n:.0f} characters each on average; medians of "
          f"{repeat})")
    print(f"{'':28s} {'wall s':>7s} {'CPU s':>7s} {'docs/s wall':>11s} {'docs/s CPU':>10s} {'speed-up wall':>13s}")
    single = [wall for wall, _ in runs["1 thread"]]
    for label, times in runs.items():
        wall, cpu = statistics.median(w for w, _ in times), statistics.median(c for _, c in times)
        speedup = statistics.median(s / w for s, (w, _) in zip(single, times))
        print(f"{label:28s} {wall:7.3f} {cpu:7.3f} {n / wall:11.0f} {n / cpu:10.0f} {speedup:12.2f}x")
    print(work_split(fn))


def run(args) -> None:
    documents = documents_of(ascii_paragraphs(), args.documents, seed=1)
    print(f"row threads {_row_threads.thread_count()} on {os.cpu_count()} cores (shared with whatever else runs); "
          f"before: {load()}")
    for analyzer, ngrams in (("word", [1, 1]), ("char_wb", [3, 5])):
        hashing = create_map({"method": "hashing", "n_components": 2**20,
                              "params": {"hash": "sklearn", "analyzer": analyzer, "ngram_range": ngrams}})
        bench(f"hashing map, sklearn mode, {analyzer} {tuple(ngrams)}, float64",
              lambda m=hashing: m.transform(documents, dtype=np.float64), documents, args.repeat)
    bench("shingle_hashes, word 3-shingles", lambda: shingle_hashes(documents, ngram_range=(3, 3)), documents,
          args.repeat)
    gcws = create_map({"method": "gcws", "n_components": 128, "seed": 1, "params": {"sampler": "dart",
                       "empty_rows": "code"}, "input": {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}})
    bench("gcws dart k = 128 + text stage (word 3-shingles), documents to codes", lambda: gcws.hash(documents),
          documents, args.repeat)
    print(f"\nafter: {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--write", action="store_true", help=f"also write the output to {RESULTS}")
    args = parser.parse_args()
    run_and_write(run, args, RESULTS if args.write else None)

if __name__ == "__main__":
    main()
