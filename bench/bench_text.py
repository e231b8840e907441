"""Text: the hashing map against scikit-learn's HashingVectorizer, and GCWS codes of word 3-shingles against
datasketch's MinHash.

    python bench/bench_text.py [--documents 50000] [--repeat 5] [--minhash-documents 3000] [--k 128,256] [--write]

`--write` also overwrites bench/results/text.txt with what was printed (never without it).

Corpus: real text shipped in packages (scikit-learn's data set descriptions and standard-library docstrings, as
tests/text_support.py `real_corpus`), cut into paragraphs, then repeated with seeded perturbations
(about 10% of the words dropped, one word of the copy's own) up to `--documents` documents.

1. Documents/s of `hashing` (n_components 2^20, word unigrams, l2, signed, float64: HashingVectorizer's
   defaults) in the default mode (murmur3, seeded) and the compatibility mode (hash "sklearn", checked equal to
   HashingVectorizer's matrix), against HashingVectorizer(n_features=2^20).transform, interleaved per repeat;
   medians of wall and CPU time.
2. Codes of word 3-shingle sets: gcws with the text stage (ngram_range (3, 3), binary weighting: GMM = plain
   Jaccard), k = 128, sampler "dart", against datasketch MinHash(num_perm=128) with `update` per shingle and
   with its bulk path (`MinHash.bulk`), both including the shingling (HashingVectorizer's analyzer for
   datasketch), on `--minhash-documents` documents with at least one shingle. Then both estimates of the
   Jaccard of 300 pairs (a paragraph and a perturbed copy): mean error and z (binomial sd sqrt(J(1-J)/k)).
   Run for every k of `--k`: datasketch's cost grows with k as ours does, but not in the same proportion.
   "speed" is the reference's time / the contender's (the "0.9x HashingVectorizer" of the docs), "ratio" its
   inverse.
Peak RSS at the end. Ratios are within this run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
import resource
import statistics
import time

import numpy as np

import sklearn
from datasketch import MinHash
from sklearn.feature_extraction.text import HashingVectorizer

from featurehash import create_map

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from text_support import real_corpus  # noqa: E402

OUTPUT = Path(__file__).resolve().parent / "results" / "text.txt"
_printed: list[str] = []


def say(line: str = "") -> None:
    """Print, and keep the line for --write."""
    print(line, flush=True)
    _printed.append(line)


def paragraphs() -> list[str]:
    found = [part.strip() for text in real_corpus() for part in text.split("\n\n")]
    return [part for part in found if len(part.split()) >= 8]


def perturbed(base: list[str], n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    documents = []
    for i in range(n):
        words = base[i % len(base)].split()
        kept = [word for word, keep in zip(words, rng.random(len(words)) >= 0.1) if keep]
        kept.insert(int(rng.integers(0, len(kept) + 1)), f"variant{i}")
        documents.append(" ".join(kept))
    return documents


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved(contenders: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds per contender, the contenders run in turn within each repeat."""
    for fn in contenders.values():
        fn()   # warm-up: compilation, imports
    runs = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            runs[name].append(timed(fn))
    return {name: (statistics.median(w for w, _ in times), statistics.median(c for _, c in times))
            for name, times in runs.items()}


def report(title: str, medians: dict, n: int, reference: str) -> None:
    say(f"\n{title} ({n} documents; medians; ratio = contender time / {reference} time, speed = its inverse)")
    # gcws's kernels use every core and datasketch one: the CPU speed says what the wall speed costs
    say(f"{'':30s} {'wall s':>8s} {'CPU s':>8s} {'docs/s':>10s} {'ratio':>7s} {'speed':>7s} {'CPU speed':>9s}")
    for name, (wall, cpu) in medians.items():
        ratio = wall / medians[reference][0]
        say(f"{name:30s} {wall:8.3f} {cpu:8.3f} {n / wall:10.0f} {ratio:7.2f} {1 / ratio:7.2f} "
            f"{medians[reference][1] / cpu:9.2f}")


def bench_hashing(documents: list[str], repeat: int) -> None:
    n = 2**20
    default = create_map({"method": "hashing", "input_dim": 1, "n_components": n, "seed": 1, "params": {}})
    compat = create_map({"method": "hashing", "input_dim": 1, "n_components": n, "params": {"hash": "sklearn"}})
    vectorizer = HashingVectorizer(n_features=n)
    reference = vectorizer.transform(documents[:2000])
    assert (compat.transform(documents[:2000], dtype=np.float64) != reference).nnz == 0
    # HashingVectorizer answers float64; the map's default float32 rounds the l2-normalised values.
    as_float32 = compat.transform(documents[:2000])
    say(f"hash 'sklearn' vs HashingVectorizer on 2000 documents: dtype float64 equal bit for bit: True; "
        f"default dtype {as_float32.dtype}: same nonzeros {(as_float32 != 0).nnz == reference.nnz}, "
        f"largest difference {abs(as_float32.astype(np.float64) - reference).max():.1e}")
    medians = interleaved({"featurehash hashing (murmur3)": lambda: default.transform(documents, dtype=np.float64),
                           "featurehash hashing (sklearn)": lambda: compat.transform(documents, dtype=np.float64),
                           "HashingVectorizer": lambda: vectorizer.transform(documents)}, repeat)
    report("1. Hashing trick, word unigrams, 2^20 columns, l2, float64", medians, len(documents), "HashingVectorizer")


def bench_minhash(documents: list[str], base: list[str], repeat: int, K: int) -> None:
    shingle = HashingVectorizer(ngram_range=(3, 3)).build_analyzer()
    documents = [document for document in documents if shingle(document)]
    gcws = create_map({"method": "gcws", "n_components": K, "seed": 1, "params": {"sampler": "dart"},
                       "input": {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}})

    def per_shingle():
        for document in documents:
            minhash = MinHash(num_perm=K, seed=1)
            for item in set(shingle(document)):
                minhash.update(item.encode("utf-8"))

    def bulk():
        MinHash.bulk([[item.encode("utf-8") for item in set(shingle(document))] for document in documents],
                     num_perm=K, seed=1)

    medians = interleaved({"featurehash gcws dart (codes)": lambda: gcws.hash(documents),
                           "datasketch MinHash.bulk": bulk, "datasketch MinHash update": per_shingle}, repeat)
    report(f"2. Codes of word 3-shingle sets, k = {K}", medians, len(documents), "datasketch MinHash.bulk")

    rng = np.random.default_rng(7)
    picked = rng.choice(len(base), size=300, replace=False)
    left = [base[i] for i in picked]
    right = perturbed([base[i] for i in picked], 300, seed=11)
    pairs = [(a, b, set(shingle(a)), set(shingle(b))) for a, b in zip(left, right)]
    pairs = [pair for pair in pairs if pair[2] and pair[3]]
    exact = np.array([len(x & y) / len(x | y) for _, _, x, y in pairs])
    codes_left, codes_right = gcws.hash([a for a, *_ in pairs]), gcws.hash([b for _, b, *_ in pairs])
    ours = (codes_left == codes_right).mean(axis=1)
    minhashes = [MinHash.bulk([[s.encode() for s in x], [s.encode() for s in y]], num_perm=K, seed=1)
                 for _, _, x, y in pairs]
    theirs = np.array([first.jaccard(second) for first, second in minhashes])
    sd = np.sqrt(np.maximum(exact * (1 - exact), 1e-12) / K)
    say(f"\n   Jaccard of {len(pairs)} pairs (exact: mean {exact.mean():.3f}, range {exact.min():.3f}..{exact.max():.3f})")
    for name, estimate in (("featurehash gcws dart", ours), ("datasketch MinHash", theirs)):
        z = (estimate - exact) / sd
        say(f"   {name:24s} mean error {np.mean(estimate - exact):+.4f}  RMSE {np.sqrt(np.mean((estimate - exact) ** 2)):.4f}"
              f"  (binomial {np.sqrt(np.mean(sd ** 2)):.4f})  mean z^2 {np.mean(z ** 2):.2f}  "
              f"common bias z {z.mean() * np.sqrt(z.size):+.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=50_000)
    parser.add_argument("--minhash-documents", dest="minhash_documents", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--k", default="128,256", help="codes per document for the minhash table (comma list)")
    parser.add_argument("--write", action="store_true", help="overwrite bench/results/text.txt")
    args = parser.parse_args()
    base = paragraphs()
    documents = perturbed(base, args.documents, seed=1)
    characters = sum(map(len, documents))
    say(f"corpus: {len(base)} paragraphs -> {len(documents)} documents, {characters / len(documents):.0f} "
          f"characters each on average; scikit-learn {sklearn.__version__}; load average "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores at the start")
    bench_hashing(documents, args.repeat)
    for k in (int(part) for part in args.k.split(",")):
        bench_minhash(documents[:args.minhash_documents], base, args.repeat, k)
    say(f"\npeak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if args.write:
        OUTPUT.write_text("\n".join(_printed) + "\n")
        print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
