"""Spark local[1] against local[2] (bench_corpus_dedup.spark_scaling) on a larger unlabelled corpus of
bench_corpus_dedup's kind, with each stage's wall time; appends to bench/results/corpus_dedup_columnar.txt.

    python bench/corpus_spark_scaling.py 300000
"""
import sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
import bench_corpus_dedup as b, corpus_labelled as c
n = int(sys.argv[1])
real = c.unrelated(c.real_paragraphs())
rows = c.build(n, 0.7, real=real, truth=False)[0]
scratch = sys.argv[2] if len(sys.argv) > 2 else __import__("tempfile").mkdtemp(prefix="bench-spark-")
folder = f"{scratch}/in"
mb = c.write_jsonl(rows, folder) / 1e6
s = b.spark_scaling(folder, 0.7, scratch)
w1, w2 = s["local[1]"]["wall_s"], s["local[2]"]["wall_s"]
st = lambda k: ", ".join(f"{name} {v['wall_s']:.1f}" for name, v in s[k]["stages"].items())
line = (f"spark: {len(rows):,} documents, {mb:.1f} MB: local[1] {w1:.1f} s, local[2] {w2:.1f} s, speed-up {w1 / w2:.2f}x "
        f"(kept {s['local[1]']['kept']:,} / {s['local[2]']['kept']:,}); stages wall s local[1]: {st('local[1]')}; local[2]: {st('local[2]')}")
print(line)
with open(str(__import__("pathlib").Path(__file__).resolve().parent / "results" / "corpus_dedup_columnar.txt"), "a") as f:
    f.write(f"\n# the same spark_scaling on a larger input ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): "
            f"bench/corpus_spark_scaling.py {n}\n{line}\n")
