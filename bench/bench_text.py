"""Text at compiled speed: the hashing map against scikit-learn's HashingVectorizer, shingle hashing, and documents
to minhash codes against scikit-learn's regex + a Python set + rensa, on real ASCII and non-ASCII documents.

    python bench/bench_text.py [--documents 4000] [--repeat 5] [--write]

Corpus (real text, nothing downloaded): ASCII from /usr/share/common-licenses, /usr/share/doc/*/copyright,
scikit-learn's data set descriptions and standard-library docstrings (tests/text_support.py); non-ASCII from the
Spanish, Japanese, Korean and Chinese translations of Rust by Example shipped with a rustup toolchain, when one
is installed (HTML tags removed), else that section is skipped and said so. Paragraphs are joined into documents
whose lengths are drawn log-uniformly between 100 and 5,000 characters, and repeated with seeded perturbations
(about 5% of the words dropped) up to `--documents` per set.

Every measurement is one interleaved run: the contenders take turns within each repeat, after a warm-up
(compilation, tables); medians of wall and CPU time. "1 thread" holds the row threads to one (BLAS threads
limited to 1, which the row threads follow); "default" lets them use the process's cores. Ratios are
documents/s over the reference's in the same run: CPU time for 1 thread, wall time for default threads (CPU time
summed over threads does not show a speed-up). The machine's other load shows in wall time only.

1. The hashing map (2^20 columns, l2, signed, float64: HashingVectorizer's defaults) in scikit-learn mode,
   checked bit for bit against HashingVectorizer, and in the seeded mode, for word (1, 1), word (1, 2) and
   char_wb (3, 5).
2. Shingle hashing: `shingle_hashes` (word 3- and 5-shingles, flat uint64 + row offsets) against scikit-learn's
   analyzer plus a Python set per document (what a set-based minhash is given).
3. Documents to minhash codes, word 3- and 5-shingles, k = 128 and 256: "sklearn regex + set + rensa"
   (RMinHash.digest_matrix_from_token_sets), rensa alone given those sets, featurehash `shingle_hashes` handed
   to rensa's flat-hash entry (RMinHash.digest_matrix_from_flat_token_hashes), and the gcws map with a text
   stage (dart sampler, binary weights: plain Jaccard).
4. Accuracy of the gcws text codes: Jaccard of 300 pairs (a document and a perturbed copy) against the exact value.
`--write` also writes this output to bench/results/text.txt.

    python bench/bench_text.py --only minhash [--documents 3000] [--repeat 5] [--write]

5. Documents to minhash codes with the `minhash` map (a text stage of word w-shingles; documents go through the
   stage's compiled pass to the minhash kernel), word 3- and 5-shingles, k = 128 and 256, CPU time on one thread
   (row threads, BLAS and rensa's rayon pool held to 1), one interleaved run against (i) "sklearn regex + set +
   rensa": scikit-learn's analyzer, a Python set of shingles, RMinHash.digest_matrix_from_token_sets; (ii)
   "rensa given pre-split tokens": each document's word tokens split beforehand (scikit-learn's regex on the
   lower-cased text, not timed), the w-shingles joined in Python, then rensa; (iii) "sklearn regex + set +
   datasketch": the same sets, encoded as UTF-8, to datasketch's MinHash.bulk; and, for reference, "rensa given the shingle sets"
   (nothing but rensa's hashing timed). The featurehash codes are checked equal to those of the stage's CSR rows.
   `--write` writes this output to bench/results/text_minhash.txt.
"""

from __future__ import annotations

import argparse
import glob
import html
import io
import os
import re
import resource
import statistics
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import sklearn
from sklearn.feature_extraction.text import HashingVectorizer
from threadpoolctl import threadpool_limits

from featurehash import create_map
from featurehash.maps.numerics import _row_threads
from featurehash.maps.text.documents import shingle_hashes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from text_support import real_corpus  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "text.txt"
MINHASH_RESULTS = RESULTS.with_name("text_minhash.txt")
RUST_BY_EXAMPLE = "~/.rustup/toolchains/*/share/doc/rust/html/rust-by-example/{language}/print.html"


def ascii_paragraphs() -> list[str]:
    texts = list(real_corpus())
    for pattern in ("/usr/share/common-licenses/*", "/usr/share/doc/*/copyright"):
        for path in sorted(glob.glob(pattern)):
            try:
                texts.append(open(path, encoding="utf-8").read())
            except (OSError, UnicodeDecodeError):
                continue
    return [part for part in _paragraphs(texts) if part.isascii()]


def non_ascii_paragraphs() -> list[str]:
    texts = []
    for language in ("es", "ja", "ko", "zh"):
        for path in sorted(glob.glob(os.path.expanduser(RUST_BY_EXAMPLE.format(language=language)))):
            page = open(path, encoding="utf-8").read()
            page = re.sub(r"<(script|style|pre|code)\b.*?</\1>", " ", page, flags=re.S)   # prose, not code
            texts.append(html.unescape(re.sub(r"<[^>]+>", "\n", page)))
    return [part for part in _paragraphs(texts) if not part.isascii()]


def _paragraphs(texts: list[str]) -> list[str]:
    found = [" ".join(part.split()) for text in texts for part in re.split(r"\n\s*\n", text)]
    return [part for part in found if len(part) >= 40]


def documents_of(paragraphs: list[str], n: int, seed: int) -> list[str]:
    """n documents of 100..5,000 characters (log-uniform targets): consecutive paragraphs joined, cut at a space,
    each later copy of a base document with ~5% of its words dropped."""
    rng = np.random.default_rng(seed)
    bases, at = [], 0
    while len(bases) < max(50, n // 4) and at < 50 * len(paragraphs):
        target = int(np.exp(rng.uniform(np.log(100), np.log(5000))))
        parts = []
        while sum(map(len, parts)) < target:
            parts.append(paragraphs[at % len(paragraphs)])
            at += 1
        text = " ".join(parts)
        if len(text) > 5000:
            text = text[:text.rfind(" ", 0, 5000)]
        if len(text) >= 100:
            bases.append(text)
    documents = []
    for i in range(n):
        words = bases[i % len(bases)].split(" ")
        if i >= len(bases):
            words = [w for w, keep in zip(words, rng.random(len(words)) >= 0.05) if keep]
        documents.append(" ".join(words))
    return documents


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def one_thread(fn):
    def run():
        with threadpool_limits(limits=1, user_api="blas"):
            return fn()
    return run


def interleaved(contenders: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds per contender, the contenders run in turn within each repeat."""
    for fn in contenders.values():
        fn()   # warm-up: compilation, tables, imports
    runs = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            runs[name].append(timed(fn))
    return {name: (statistics.median(w for w, _ in times), statistics.median(c for _, c in times))
            for name, times in runs.items()}


def report(title: str, medians: dict, n: int, characters: int, reference: str) -> None:
    print(f"\n{title} ({n} documents, {characters / n:.0f} characters each on average; medians)")
    print(f"{'':44s} {'wall s':>7s} {'CPU s':>7s} {'docs/s wall':>11s} {'docs/s CPU':>10s} {'MB/s CPU':>8s} "
          f"{'x ref CPU':>9s} {'x ref wall':>10s}")
    ref_wall, ref_cpu = medians[reference]
    for name, (wall, cpu) in medians.items():
        print(f"{name:44s} {wall:7.3f} {cpu:7.3f} {n / wall:11.0f} {n / cpu:10.0f} {characters / cpu / 1e6:8.2f} "
              f"{ref_cpu / cpu:9.2f} {ref_wall / wall:10.2f}")


def bench_hashing(label: str, documents: list[str], repeat: int) -> None:
    n_features = 2**20
    characters = sum(map(len, documents))
    for name, settings in (("word (1, 1)", {}), ("word (1, 2)", {"ngram_range": (1, 2)}),
                           ("char_wb (3, 5)", {"analyzer": "char_wb", "ngram_range": (3, 5)})):
        params = {key: list(value) if isinstance(value, tuple) else value for key, value in settings.items()}
        compat = create_map({"method": "hashing", "n_components": n_features, "params": {"hash": "sklearn", **params}})
        seeded = create_map({"method": "hashing", "n_components": n_features, "seed": 1, "params": params})
        vectorizer = HashingVectorizer(n_features=n_features, **settings)
        ours, theirs = compat.transform(documents, dtype=np.float64), vectorizer.transform(documents)
        identical = (np.array_equal(ours.indptr, theirs.indptr) and np.array_equal(ours.indices, theirs.indices)
                     and np.array_equal(ours.data, theirs.data))
        medians = interleaved({
            "featurehash hashing sklearn mode, 1 thread": one_thread(lambda: compat.transform(documents, dtype=np.float64)),
            "featurehash hashing sklearn mode, default": lambda: compat.transform(documents, dtype=np.float64),
            "featurehash hashing seeded mode, default": lambda: seeded.transform(documents, dtype=np.float64),
            "HashingVectorizer": lambda: vectorizer.transform(documents)}, repeat)
        report(f"1. {label}: hashing trick, {name}, 2^20 columns, l2, float64; bit-identical to HashingVectorizer: "
               f"{identical}", medians, len(documents), characters, "HashingVectorizer")


def bench_shingles(label: str, documents: list[str], repeat: int) -> None:
    characters = sum(map(len, documents))
    for w in (3, 5):
        analyzer = HashingVectorizer(ngram_range=(w, w)).build_analyzer()
        medians = interleaved({
            "featurehash shingle_hashes, 1 thread": one_thread(lambda: shingle_hashes(documents, ngram_range=(w, w))),
            "featurehash shingle_hashes, default": lambda: shingle_hashes(documents, ngram_range=(w, w)),
            "sklearn analyzer + Python set": lambda: [set(analyzer(d)) for d in documents]}, repeat)
        report(f"2. {label}: shingle hashing, word {w}-shingles", medians, len(documents), characters,
               "sklearn analyzer + Python set")


def bench_minhash(label: str, documents: list[str], repeat: int) -> None:
    from rensa import RMinHash
    characters = sum(map(len, documents))
    for w in (3, 5):
        analyzer = HashingVectorizer(ngram_range=(w, w)).build_analyzer()
        sets = [set(analyzer(d)) for d in documents]
        for k in (128, 256):
            gcws = create_map({"method": "gcws", "n_components": k, "seed": 1,
                               "params": {"sampler": "dart", "empty_rows": "code"},
                               "input": {"hashing": {"ngram_range": [w, w], "weighting": "binary"}}})

            def flat_to_rensa():
                hashes, offsets = shingle_hashes(documents, ngram_range=(w, w))
                return RMinHash.digest_matrix_from_flat_token_hashes(hashes, offsets, k, 1)

            medians = interleaved({
                "sklearn regex + set + rensa": lambda: RMinHash.digest_matrix_from_token_sets(
                    [set(analyzer(d)) for d in documents], k, 1),
                "rensa given the shingle sets": lambda: RMinHash.digest_matrix_from_token_sets(sets, k, 1),
                "featurehash shingle_hashes -> rensa flat": flat_to_rensa,
                "featurehash gcws dart + text stage, 1 thread": one_thread(lambda: gcws.hash(documents)),
                "featurehash gcws dart + text stage, default": lambda: gcws.hash(documents)}, repeat)
            report(f"3. {label}: documents to minhash codes, word {w}-shingles, k = {k}", medians, len(documents),
                   characters, "sklearn regex + set + rensa")


def bench_minhash_map(label: str, documents: list[str], repeat: int) -> None:
    import datasketch
    from rensa import RMinHash
    characters = sum(map(len, documents))
    # the pre-split tokens of (ii): what scikit-learn's analyzer splits, lower-cased, before its n-grams
    splitter = HashingVectorizer().build_tokenizer()
    tokens = [splitter(d.lower()) for d in documents]
    for w in (3, 5):
        analyzer = HashingVectorizer(ngram_range=(w, w)).build_analyzer()
        sets = [set(analyzer(d)) for d in documents]
        assert sets == [set(map(" ".join, zip(*(t[i:] for i in range(w))))) for t in tokens]
        for k in (128, 256):
            m = create_map({"method": "minhash", "n_components": k, "seed": 1,
                            "input": {"hashing": {"ngram_range": [w, w]}, "empty": "code"}})
            same = np.array_equal(m.hash(documents), m.hash(m.text_stage.transform(documents, dtype=np.float64)))
            medians = interleaved({
                "featurehash minhash + text stage, 1 thread": one_thread(lambda: m.hash(documents)),
                "sklearn regex + set + rensa": lambda: RMinHash.digest_matrix_from_token_sets(
                    [set(analyzer(d)) for d in documents], k, 1),
                "rensa given pre-split tokens": lambda: RMinHash.digest_matrix_from_token_sets(
                    [set(map(" ".join, zip(*(t[i:] for i in range(w))))) for t in tokens], k, 1),
                "sklearn regex + set + datasketch": lambda: datasketch.MinHash.bulk(
                    [[s.encode() for s in set(analyzer(d))] for d in documents], num_perm=k, seed=1),
                "rensa given the shingle sets": lambda: RMinHash.digest_matrix_from_token_sets(sets, k, 1)}, repeat)
            report(f"5. {label}: documents to minhash codes, word {w}-shingles, k = {k}; featurehash codes equal "
                   f"the stage's CSR rows' codes: {same}", medians, len(documents), characters,
                   "sklearn regex + set + rensa")
            ours = medians["featurehash minhash + text stage, 1 thread"][1]
            ratios = ", ".join(f"{medians[name][1] / ours:.2f}x {name}" for name in medians if "featurehash" not in name)
            print(f"featurehash minhash, CPU speed (w = {w}, k = {k}): {ratios}")


def run_minhash(args) -> None:
    import datasketch
    import rensa
    print(f"scikit-learn {sklearn.__version__}, rensa {getattr(rensa, '__version__', '0.5')}, datasketch "
          f"{getattr(datasketch, '__version__', '?')}, RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS')}, "
          f"{os.cpu_count()} cores (shared with whatever else runs); CPU time, one thread; ratio = contender's CPU "
          "time / featurehash's")
    for label, paragraphs in {"ASCII": ascii_paragraphs(), "non-ASCII": non_ascii_paragraphs()}.items():
        if len(paragraphs) < 20:
            print(f"\n{label}: no such real text installed here (Rust by Example translations); skipped")
            continue
        documents = documents_of(paragraphs, args.documents, seed=1)
        lengths = np.array([len(d) for d in documents])
        print(f"\n== {label}: {len(paragraphs)} paragraphs -> {len(documents)} documents of {lengths.min()} to "
              f"{lengths.max()} characters (median {int(np.median(lengths))})")
        bench_minhash_map(label, documents, args.repeat)
    print(f"\npeak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def accuracy(documents: list[str]) -> None:
    analyzer = HashingVectorizer(ngram_range=(3, 3)).build_analyzer()
    gcws = create_map({"method": "gcws", "n_components": 128, "seed": 1, "params": {"sampler": "dart"},
                       "input": {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}})
    rng = np.random.default_rng(7)
    left = [documents[i] for i in rng.choice(len(documents), size=300, replace=False)]
    right = []
    for document in left:
        words = document.split(" ")
        drop = rng.random() * 0.3
        right.append(" ".join(w for w, keep in zip(words, rng.random(len(words)) >= drop) if keep))
    pairs = [(a, b) for a, b in zip(left, right) if analyzer(a) and analyzer(b)]
    exact = np.array([len(set(analyzer(a)) & set(analyzer(b))) / len(set(analyzer(a)) | set(analyzer(b)))
                      for a, b in pairs])
    estimate = (gcws.hash([a for a, _ in pairs]) == gcws.hash([b for _, b in pairs])).mean(axis=1)
    sd = np.sqrt(np.maximum(exact * (1 - exact), 1e-12) / 128)
    z = (estimate - exact) / sd
    print(f"\n4. Jaccard of {len(pairs)} pairs, gcws dart text codes, k = 128 (exact: mean {exact.mean():.3f}, range "
          f"{exact.min():.3f}..{exact.max():.3f}): mean error {np.mean(estimate - exact):+.4f}, RMSE "
          f"{np.sqrt(np.mean((estimate - exact) ** 2)):.4f} (binomial {np.sqrt(np.mean(sd ** 2)):.4f}), mean z^2 "
          f"{np.mean(z ** 2):.2f}")


def run(args) -> None:
    import rensa
    print(f"scikit-learn {sklearn.__version__}, rensa {getattr(rensa, '__version__', '0.5')}, row threads "
          f"{_row_threads.thread_count()} on {os.cpu_count()} cores (shared with whatever else runs)")
    sets = {"ASCII": ascii_paragraphs(), "non-ASCII": non_ascii_paragraphs()}
    for label, paragraphs in sets.items():
        if len(paragraphs) < 20:
            print(f"\n{label}: no such real text installed here (Rust by Example translations); skipped")
            continue
        documents = documents_of(paragraphs, args.documents, seed=1)
        lengths = np.array([len(d) for d in documents])
        print(f"\n== {label}: {len(paragraphs)} paragraphs -> {len(documents)} documents of {lengths.min()} to "
              f"{lengths.max()} characters (median {int(np.median(lengths))})")
        bench_hashing(label, documents, args.repeat)
        bench_shingles(label, documents, args.repeat)
        bench_minhash(label, documents, args.repeat)
        if label == "ASCII":
            accuracy(documents)
    print(f"\npeak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=4000, help="documents per set (ASCII, non-ASCII)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", choices=["minhash"], help="section 5 only (documents to codes with the minhash map)")
    parser.add_argument("--write", action="store_true",
                        help=f"also write the output to {RESULTS} ({MINHASH_RESULTS.name} with --only minhash)")
    args = parser.parse_args()
    if args.only == "minhash":
        # one thread for every contender: rensa's rayon pool is sized when rensa is first imported
        os.environ.setdefault("RAYON_NUM_THREADS", "1")
        bench, target = run_minhash, MINHASH_RESULTS
    else:
        bench, target = run, RESULTS
    run_and_write(bench, args, target if args.write else None)


def run_and_write(bench, args, target: Path | None) -> None:
    """bench(args), its output printed as it comes and, with a target, also written there."""
    if target is None:
        bench(args)
        return
    captured = io.StringIO()

    class Tee(io.TextIOBase):
        def write(self, text):
            sys.__stdout__.write(text)
            sys.__stdout__.flush()
            return captured.write(text)

    with redirect_stdout(Tee()):
        bench(args)
    target.write_text(captured.getvalue())


if __name__ == "__main__":
    main()
