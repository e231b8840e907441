"""Spark local[1] against local[2] (bench_corpus_dedup.spark_scaling) on a larger unlabelled corpus of
bench_corpus_dedup's kind, with each stage's wall time.

    python bench/corpus_spark_scaling.py 300000 [--workdir DIR] [--write]
    python bench/corpus_spark_scaling.py --input FOLDER [--write]

`--input`: an existing folder of JSON Lines with "id" and "text" (bench_corpus_dedup's scale-in, to run Spark on
the same input as one machine) instead of a generated corpus. `--write` appends the line to
bench/results/corpus_dedup_columnar.txt.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_corpus_dedup
import corpus_labelled

RESULTS = Path(__file__).resolve().parent / "results" / "corpus_dedup_columnar.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("documents", type=int, nargs="?", default=0)
    parser.add_argument("--input", default=None)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--threshold", type=float, default=0.7)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    scratch = args.workdir or tempfile.mkdtemp(prefix="bench-spark-")
    if args.input:
        folder = args.input
        files = sorted(Path(folder).glob("*.jsonl"))
        mb = sum(file.stat().st_size for file in files) / 1e6
        documents = sum(sum(1 for _ in file.open("rb")) for file in files)
    else:
        real = corpus_labelled.unrelated(corpus_labelled.real_paragraphs())
        rows = corpus_labelled.build(args.documents, args.threshold, real=real, truth=False)[0]
        folder = f"{scratch}/in"
        mb = corpus_labelled.write_jsonl(rows, folder) / 1e6
        documents = len(rows)
    runs = bench_corpus_dedup.spark_scaling(folder, args.threshold, scratch)
    one, two = runs["local[1]"], runs["local[2]"]

    def stages(run: dict) -> str:
        return ", ".join(f"{name} {value['wall_s']:.1f}" for name, value in run["stages"].items())

    line = (f"spark: {documents:,} documents, {mb:.1f} MB: local[1] {one['wall_s']:.1f} s, local[2] "
            f"{two['wall_s']:.1f} s, speed-up {one['wall_s'] / two['wall_s']:.2f}x (kept {one['kept']:,} / "
            f"{two['kept']:,}); stages wall s local[1]: {stages(one)}; local[2]: {stages(two)}")
    print(line)
    if args.write:
        with RESULTS.open("a", encoding="utf-8") as out:
            out.write(f"\n# the same spark_scaling on a larger input ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}):"
                      f" bench/corpus_spark_scaling.py {args.input and '--input ' + args.input or args.documents}\n{line}\n")


if __name__ == "__main__":
    main()
