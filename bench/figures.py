"""Write the figure tables of the README and the docs from the committed bench results.

    python bench/figures.py            # rewrite the tables in README.md and docs/methods/index.md
    python bench/figures.py --check    # exit 1, naming the page, if a table is not what the results give

The "which map for which kernel and data" table is one table, printed in README.md and docs/methods/index.md
(they had drifted apart: other chi2 and Nystroem ratios on each page). Its measured cells are computed here
from bench/results/ (the file of each row in its source column: text.txt and text_minhash.txt from
bench_text.py, minhash.txt from bench_minhash.py); the rest of the row is text. The first-call
table of docs/getting-started.md comes from startup.txt and first_calls.txt. A table sits between
`<!-- figures-table: NAME -->` and `<!-- /figures-table -->`. tests/docs/test_figures.py runs
--check, and checks every other ratio of the docs against the result file its paragraph names.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
END = "<!-- /figures-table -->"


def read(name: str) -> str:
    return (RESULTS / name).read_text(encoding="utf-8")


def span(values: list[float], digits: int = 1) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}x" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else f"{low:.{digits}f}-{high:.{digits}f}x"


def dense_speed(method: str, dtype: str) -> dict[int, float]:
    """n -> RBFSampler time / ours, for one method and output dtype (bench_maps.py --only dense)."""
    found = {}
    for n, _, _, kind, name, ratio in re.findall(r"\((\d+), (\d+), (\d+)\)\s+(float\d+)\s+(.+?)\s+[\d.]+ ms\s+([\d.]+)x",
                                                 read("dense_speed.txt")):
        if kind == dtype and name.strip() == method:
            found[int(n)] = float(ratio)
    return found


def parity(name: str, threads: str = "1") -> float:
    """scikit-learn wall time / ours, in the AFTER run of bench_sklearn_parity.py (one thread unless asked)."""
    after = read("sklearn_parity.txt").split("\nAFTER\n", 1)[1]
    for line in after.splitlines():
        if line.strip().startswith(name) and re.search(rf"\s{threads}\s", line[len(name) + 2:len(name) + 20]):
            return float(re.findall(r"([\d.]+)x", line)[-1])
    raise KeyError(name)


def text_tables(name: str = "text.txt") -> dict[str, dict[str, tuple[float, ...]]]:
    """title -> {contender -> (docs/s CPU, x ref CPU, x ref wall)} of every table bench_text.py printed (a title
    is its heading up to the parenthesis: "1. ASCII: hashing trick, word (1, 1), 2^20 columns, l2, float64; ...")."""
    tables = {}
    for block in read(name).split("\n\n"):
        title, _, body = block.strip("\n").partition("\n")
        rows = re.findall(r"^(\S.*?)\s+[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+[\d.]+\s+([\d.]+)\s+([\d.]+)$", body, re.M)
        if rows:
            tables[title] = {row.strip(): (float(rate), float(cpu), float(wall)) for row, rate, cpu, wall in rows}
    return tables


def text_ratios(name: str, heading: str, contender: str) -> list[float]:
    """`contender`'s CPU-time ratio to its table's reference in every table whose title holds `heading`."""
    found = [table[contender][1] for title, table in text_tables(name).items() if heading in title]
    if not found:
        raise KeyError(f"{name}: no table {heading!r} with {contender!r}")
    return found


def minhash_documents() -> dict[str, list[float]]:
    """contender -> featurehash minhash's CPU speed over it, for every (set, w, k) of bench_text.py --only minhash."""
    found: dict[str, list[float]] = {}
    for line in re.findall(r"^featurehash minhash, CPU speed \(w = \d+, k = \d+\): (.*)$", read("text_minhash.txt"), re.M):
        for ratio, name in re.findall(r"([\d.]+)x ([^,]+)", line):
            found.setdefault(name.strip(), []).append(float(ratio))
    return found


def minhash_sets() -> dict[tuple[int, int], tuple[float, ...]]:
    """(set size, k) -> (featurehash uint64 CPU us, rensa / featurehash on uint64, rensa / featurehash on str,
    datasketch / featurehash) of bench_minhash.py's one-thread table."""
    section = read("minhash.txt").split("one thread", 1)[1].split("default threads", 1)[0]
    found = {}
    for size, k, fh, r_u64, r_str, d in re.findall(
            r"^\s+(\d+),(\d+) \|\s+([\d.]+)/[\d.]+\s+[\d.]+/[\d.]+\s+[\d.]+/[\d.]+\s+([\d.]+) \|"
            r"\s+[\d.]+/[\d.]+\s+[\d.]+/[\d.]+\s+([\d.]+) \|\s+[\d.]+/[\d.]+\s+([\d.]+)$", section, re.M):
        found[int(size), int(k)] = (float(fh), float(r_u64), float(r_str), float(d))
    return found


def gram(dataset: str, D: int, name: str) -> float:
    match = re.search(rf"{dataset}\s+d=\d+\s+D={D}\s+{re.escape(name)}\s+([\d.]+)", read("dense_maps.txt"))
    return float(match.group(1))


def thousands(value: float) -> str:
    return f"{round(value, -2):,.0f}"


def cells() -> dict[str, str]:
    rff = dense_speed("rff cos_sin", "float32")
    ssf = dense_speed("ssf gaussian", "float32")
    hashing = {analyzer: text_ratios("text.txt", f"hashing trick, {analyzer},",
                                     "featurehash hashing sklearn mode, 1 thread")
               for analyzer in ("word (1, 1)", "word (1, 2)", "char_wb (3, 5)")}
    gcws = {k: text_ratios("text.txt", f"k = {k} ", "featurehash gcws dart + text stage, 1 thread") for k in (128, 256)}
    sets = minhash_sets()
    documents = minhash_documents()
    fit = [parity(f"nystroem fit m={m}, 2000 rows") for m in (256, 512, 1024)]
    return {
        "rff_speed": f"float32: {span([v for n, v in rff.items() if n >= 4096])} scikit-learn's RBFSampler at n ≥ "
                     f"4,096 rows, {span([v for n, v in rff.items() if n <= 64])} at n ≤ 64 (all shapes: "
                     f"{span(list(rff.values()))})",
        "rff_error": f"Gram rel. error {gram('digits', 1024, 'rff iid'):.3f} at D = 1024 on digits (RBFSampler "
                     f"{gram('digits', 1024, 'RBFSampler'):.3f})",
        "structured_error": f"{gram('digits', 1024, 'rff structured'):.3f} at D = 1024 on digits (i.i.d. "
                            f"{gram('digits', 1024, 'rff iid'):.3f})",
        "ssf_speed": f"float32: {span(list(ssf.values()))} RBFSampler",
        "nystroem_speed": f"transform {span([parity('nystroem gaussian m=512 float32'), parity('nystroem gaussian m=512 float64')], 2)} "
                          f"scikit-learn's Nystroem (float32-float64, one thread), fit {span(fit, 2)} its speed at "
                          "m = 256-1,024",
        "chi2_speed": f"{span([parity('additive_chi2 2 steps (D=192) float32'), parity('additive_chi2 2 steps (D=192) float64')], 2)}"
                      f" / {span([parity('skewed_chi2 D=512 float32'), parity('skewed_chi2 D=512 float64')], 2)} "
                      "scikit-learn's samplers (float32-float64, one thread)",
        "gcws_speed": f"documents to codes (word 3- and 5-shingles, one thread): k = 128 {span(gcws[128])}, k = 256 "
                      f"{span(gcws[256])} scikit-learn's regex + a Python set + rensa per CPU second",
        "hashing_speed": f"{span(hashing['word (1, 1)'])} HashingVectorizer's documents per CPU second for word "
                         f"(1, 1), {span(hashing['word (1, 2)'])} for (1, 2), {span(hashing['char_wb (3, 5)'])} "
                         "for char_wb (3, 5) (scikit-learn mode, float64, one thread, ASCII and non-ASCII)",
        "minhash_speed": f"{sets[50, 128][0]:.1f} µs a set of 50 tokens, {sets[5000, 128][0]:.0f} µs of 5,000 (k = 128, "
                         f"one thread): {span([v[1] for v in sets.values()], 2)} rensa 0.5 from pre-hashed uint64; "
                         f"from str lists {span([v[2] for v in sets.values()], 2)} rensa, "
                         f"{span([v[3] for v in sets.values()], 0)} datasketch; documents to codes (word 3- and "
                         f"5-shingles, k = 128 and 256, one thread): {span(documents['sklearn regex + set + rensa'])} "
                         f"scikit-learn's regex + a Python set + rensa, {span(documents['rensa given pre-split tokens'])} "
                         f"rensa given pre-split tokens, {span(documents['sklearn regex + set + datasketch'], 0)} "
                         "datasketch's MinHash.bulk",
    }


ROWS = [
    ("Gaussian, Laplacian (L1), Matérn (ν > 0), per-dimension lengthscales", "dense rows, any d",
     "`rff` (default `cos_sin`)", "dense features", "no", "{rff_speed}", "{rff_error}",
     ["dense_speed.txt", "dense_maps.txt"]),
    ("Gaussian", "dense, d ≥ 1024", '`rff`, `frequencies: "structured"`', "dense", "no",
     "3.5-16x the dense product at d = 1024-4096; W 56 KiB instead of 128 MiB", "{structured_error}",
     ["dense_maps.txt"]),
    ("Gaussian, arc-cosine 0/1/2", "dense", "`ssf`", "dense", "index set searched at creation", "{ssf_speed}",
     "Gaussian: 0.53-0.66x i.i.d. features' error; arccos1: 0.08-0.23x", ["ssf_errors.txt", "dense_speed.txt"]),
    ("Gaussian, Laplacian, chi², polynomial, GMM, arc-cosine", "dense, a sample to fit", "`nystroem`", "dense",
     "yes (`fit_sample`)", "{nystroem_speed}", "held-out RMSE 0.015 at D = 128 on digits (rff 0.076)",
     ["sklearn_parity.txt", "nystroem.txt"]),
    ("Gaussian, sparse ANOVA", "dense, low effective dimension", "`quadrature` (`reweighted` grid)", "dense", "yes",
     "like rff", "1.4-5.1x lower RMSE than RFF at equal D", ["quadrature_reweighted.txt"]),
    ("Gaussian of the angle", "dense, direction matters", "`nrff`", "dense, unit norm", "no", "like rff's `phase`",
     "bias at most 0.067/D, always low (`nrff.py`)", ["dense_maps.txt"]),
    ("Laplacian", "dense or sparse", '`binning` (or `rff` `kernel: "laplacian"`)', "discrete codes, one-hot", "no",
     "48,000 rows/s (4096 x 64, P = 1024)", "match fraction within its sampling error (mean z² 0.83-1.08)",
     ["binning.txt"]),
    ("Jaccard of plain sets", "token / shingle sets, documents (text dedup), binary rows, pre-hashed uint64 tokens",
     "`minhash` (`hash_tokens(tokens, offsets)` for your own token hashes)", "discrete codes, b-bit one-hot", "no",
     "{minhash_speed}", "mean z² 0.96-1.13 (binomial 1); C-MinHash 0.57 on dense sets",
     ["minhash.txt", "text_minhash.txt"]),
    ("GMM / pGMM (weighted Jaccard)", "nonnegative or signed, sparse, histograms, bags of words",
     '`gcws` (`sampler: "dart"` for long rows)', "discrete codes, b-bit one-hot", "no", "{gcws_speed}",
     "LinearSVC on 8-bit features of k = 256: 97.3% on digits (GMM-kernel SVM 98.3%)",
     ["text.txt", "gcws_bbit_dart.txt"]),
    ("polynomial on the unit sphere", "dense", "`srf`", "dense", "spectrum fitted at creation", "like rff",
     "MSE 2.3e-4 at D = 1024, p = 3 (Random Maclaurin 1.4e-3); 15-27x below the best baseline at p = 20",
     ["srf_mse.txt"]),
    ("polynomial (q + ⟨x, y⟩)^p", "raw inputs", "`tensorsketch`, `random_maclaurin`", "dense", "no", "baselines",
     "TensorSketch 0.30 rel. RMSE at D = 128 (scikit-learn's PolynomialCountSketch 0.37)", ["nystroem.txt"]),
    ("additive / skewed chi²", "histograms (x ≥ 0 / x > -c)", "`additive_chi2`, `skewed_chi2`", "dense (CSR for CSR)",
     "no", "{chi2_speed}", "= AdditiveChi2Sampler to rounding", ["sklearn_parity.txt"]),
    ("linear, on tokens (hashing trick)", "documents, tokens", "`hashing`", "sparse CSR", "no", "{hashing_speed}",
     'collisions only; `"hash": "sklearn"` equals HashingVectorizer bit for bit with `dtype=float64` (float32, '
     "the default, rounds the values: 3e-8 at most)", ["text.txt"]),
]


def which_map(target: str) -> str:
    values = cells()
    lines = ["| kernel | data | method | output | fitted | speed | error | source |", "|---|---|---|---|---|---|---|---|"]
    for *text, sources in ROWS:
        if target == "readme":
            named = ", ".join(f"`{name}`" for name in sources)
        else:
            named = ", ".join(f"[{name}](../benchmarks/results/{name})" for name in sources)
        lines.append("| " + " | ".join(cell.format(**values) for cell in text) + f" | {named} |")
    return "\n".join(lines)


def first_calls(target: str) -> str:
    """A fresh process's first call of every method (bench_startup.py: cold and warm numba cache), and over
    HTTP the first transforms before and after the service compiled a map's kernels in the background
    (bench_first_calls.py)."""
    startup = {}
    for method, kind, wall, cpu, *_ in re.findall(r"^(\w+)\s+(cold|warm)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                                                r"\s+([\d.]+)", read("startup.txt"), re.M):
        startup[method, kind] = (float(wall), float(cpu))
    http: dict[str, dict[str, tuple[float, ...]]] = {}
    text = read("first_calls.txt")
    for label, heading in (("before", "\nbefore:"), ("after", "\nafter:"), ("idle", "\nafter, first transform")):
        if heading not in text:
            continue
        section = text.split(heading, 1)[1].split("\n\n", 1)[0]
        http[label] = {method: tuple(map(float, numbers)) for method, *numbers in
                       re.findall(r"^  (\w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", section, re.M)}
    methods = sorted({method for method, _ in startup})
    idle = re.search(r"first transform ([\d.]+) s after the creation", text)
    lines = ["| method | fresh process, empty cache: CPU s (wall s) | warm cache: CPU s (wall s) | HTTP before: create + "
             "first float64 + first float32 call, s | HTTP after (background compile), at once, s | HTTP after, "
             f"first call {idle.group(1) if idle else '-'} s after creation, s |", "|---|---|---|---|---|---|"]
    for method in methods:
        cold, warm = startup.get((method, "cold")), startup.get((method, "warm"))
        row = [f"`{method}`", f"{cold[1]:.1f} ({cold[0]:.1f})" if cold else "-",
               f"{warm[1]:.1f} ({warm[0]:.1f})" if warm else "-"]
        for label in ("before", "after", "idle"):
            found = http.get(label, {}).get(method)
            row.append(" + ".join(f"{value:.2f}" for value in found[:3]) if found else "-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


TABLES = {
    "which-map": (which_map, {"README.md": "readme", "docs/methods/index.md": "docs"}),
    "first-calls": (first_calls, {"docs/getting-started.md": "docs"}),
}


def rewritten(page: str) -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    for name, (render, pages) in TABLES.items():
        if page not in pages:
            continue
        begin = f"<!-- figures-table: {name} -->"
        before, rest = text.split(begin, 1)
        _, after = rest.split(END, 1)
        text = f"{before}{begin}\n{render(pages[page])}\n{END}{after}"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page's table differs")
    args = parser.parse_args()
    stale = []
    for page in sorted({page for _, pages in TABLES.values() for page in pages}):
        new = rewritten(page)
        if new != (ROOT / page).read_text(encoding="utf-8"):
            stale.append(page)
            if not args.check:
                (ROOT / page).write_text(new, encoding="utf-8")
                print(f"wrote the table of {page}")
    if args.check and stale:
        print(f"not what bench/results gives: {', '.join(stale)} (run python bench/figures.py)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
