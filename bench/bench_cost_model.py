"""The CPU cost model (featurehash.maps.cost) against measured CPU time, per method over a grid of shapes.

For each spec: creating the map (resolve, fit, materialise; caches cleared, a fresh seed) and transforming
(or hashing) `rows` dense rows, then rows of a CSR matrix at 1% density where the method takes sparse input.
Prints predicted and measured seconds of CPU (time.process_time: all threads of this process) and their
ratio (predicted / measured: the model should be >= 1, within a small factor), then the range of ratios per
kind. Text: the hashing map on documents (bench_text.py's real ASCII and non-ASCII documents, and documents of
2-letter words, the densest tokens), per analyzer and ngram_range, against the `hashing` formula for documents
(the compiled pass), and on token lists (Python's path). Work below MIN_SECONDS is reported but left out of the range (timer and interpreter noise).

    PYTHONPATH=app OPENBLAS_NUM_THREADS=1 python bench/bench_cost_model.py [--quick] [--write]

--write saves the table to bench/results/cost_model.txt. OPENBLAS_NUM_THREADS=1 as the service runs
(settings.blas_threads).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from featurehash.maps import create_map, requested_spec
from featurehash.maps.fourier._spherical_shells import fit_shells
from featurehash.maps.cost import creation_cost, transform_cost

MIN_SECONDS = 0.01
_seed = itertools.count(1000)


def specs(quick: bool) -> list[tuple[dict, int]]:
    """(spec, rows) pairs: each method at small, medium and large shapes."""
    rng = np.random.default_rng(0)
    big = not quick
    out = []
    for d, D in [(32, 1024), (256, 4096)] + ([(1024, 8192)] if big else []):
        for kind in ("iid", "orthogonal", "structured"):
            out.append(({"method": "rff", "input_dim": d, "n_components": D, "params": {"frequencies": kind}}, 2048))
        out.append(({"method": "nrff", "input_dim": d, "n_components": D}, 2048))
        out.append(({"method": "srf", "input_dim": d, "n_components": D}, 2048))
        out.append(({"method": "srf", "input_dim": d, "n_components": D, "params": {"frequencies": "structured"}},
                    2048))
        out.append(({"method": "skewed_chi2", "input_dim": d, "n_components": D}, 1024))
        out.append(({"method": "random_maclaurin", "input_dim": d, "n_components": D // 4}, 1024))
        out.append(({"method": "tensorsketch", "input_dim": d, "n_components": D, "params": {"degree": 8}}, 512))
        out.append(({"method": "gcws", "input_dim": d, "n_components": D // 16}, 512))
        out.append(({"method": "gcws", "input_dim": d, "n_components": D // 16, "params": {"sampler": "dart"}}, 512))
        out.append(({"method": "binning", "input_dim": d, "n_components": D // 16}, 512))
        out.append(({"method": "quadrature", "input_dim": d, "n_components": D}, 2048))
        out.append(({"method": "ssf", "input_dim": d, "n_components": D}, 2048))
        out.append(({"method": "additive_chi2", "input_dim": d, "n_components": 3 * d}, 4096))
        m = min(256, D // 8)
        sample = rng.random((4 * m, d)).round(4).tolist()
        out.append(({"method": "nystroem", "input_dim": d, "n_components": m, "params": {"fit_sample": sample}}, 1024))
    out.append(({"method": "rff", "input_dim": 8, "n_components": 2**16, "params": {"frequencies": "structured"}}, 64))
    out.append(({"method": "tensorsketch", "input_dim": 64, "n_components": 2**16, "params": {"degree": 32}}, 8))
    out.append(({"method": "ssf", "input_dim": 1024, "n_components": 16384}, 256))
    out.append(({"method": "gcws", "input_dim": 4096, "n_components": 4096}, 16))       # no table: drawn
    out.append(({"method": "binning", "input_dim": 8192, "n_components": 4096}, 16))
    sample = rng.random((300, 16)).round(4).tolist()
    for D in (64, 256) + ((512,) if big else ()):
        out.append(({"method": "quadrature", "input_dim": 16, "n_components": D,
                     "params": {"grid": "reweighted", "fit_sample": sample}}, 1024))
    return out


def cpu(fn) -> tuple[float, object]:
    start = time.process_time()
    result = fn()
    return time.process_time() - start, result


def data(rows: int, d: int, method: str) -> tuple[np.ndarray, sp.csr_matrix]:
    rng = np.random.default_rng(1)
    dense = (rng.random((rows, d)) + 0.05).astype(np.float32)
    if method in ("nrff", "srf", "ssf"):
        dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    mask = rng.random((rows, d)) < 0.01
    mask[np.arange(rows), rng.integers(0, d, rows)] = True   # no empty row
    return dense, sp.csr_matrix(np.where(mask, dense, 0).astype(np.float32))


def apply(feature_map, X):
    return feature_map.hash(X) if feature_map.has_hash else feature_map.transform(X)


TEXT_SETTINGS = ({}, {"ngram_range": [1, 2]}, {"ngram_range": [3, 3]}, {"ngram_range": [1, 5]},
                 {"analyzer": "char_wb", "ngram_range": [3, 5]}, {"analyzer": "char", "ngram_range": [1, 1]},
                 {"analyzer": "char", "ngram_range": [2, 6]}, {"token_pattern": r"(?u)\b\w+\b"})


def text_measurements():
    """(label, rows, characters, input kind, predicted, measured) of the hashing map on text, one thread."""
    from threadpoolctl import threadpool_limits
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_text import ascii_paragraphs, documents_of, non_ascii_paragraphs
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    rng = np.random.default_rng(0)
    corpora = {"ASCII": documents_of(ascii_paragraphs(), 1500, seed=1),
               "non-ASCII": documents_of(non_ascii_paragraphs(), 1500, seed=1),
               "2-letter words": [" ".join("".join(rng.choice(letters, 2)) for _ in range(1000)) for _ in range(500)]}
    corpora = {name: documents for name, documents in corpora.items() if len(documents) >= 100}
    with threadpool_limits(limits=1, user_api="blas"):
        for settings in TEXT_SETTINGS:
            feature_map = create_map({"method": "hashing", "n_components": 2**20, "seed": 1, "params": settings})
            for name, documents in corpora.items():
                chars = sum(map(len, documents))
                feature_map.transform(documents[:2])
                measured = min(cpu(lambda: feature_map.transform(documents))[0] for _ in range(3))
                predicted = transform_cost(feature_map.spec, len(documents), chars, text_input="documents")
                yield f"hashing {settings} {name}", len(documents), chars, "documents", predicted, measured
        feature_map = create_map({"method": "hashing", "n_components": 2**20, "seed": 1})
        tokens = {"ASCII words": [d.split() for d in corpora["ASCII"]],
                  "1-character tokens": [list("abcdefghij" * 50) for _ in range(1000)]}
        for name, rows in tokens.items():
            chars = sum(len(t) for row in rows for t in row)
            measured = min(cpu(lambda: feature_map.transform(rows))[0] for _ in range(3))
            predicted = transform_cost(feature_map.spec, len(rows), chars, text_input="tokens")
            yield f"hashing {{}} {name}", len(rows), chars, "token lists", predicted, measured


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller grid (about a minute)")
    parser.add_argument("--write", action="store_true", help="save to bench/results/cost_model.txt")
    args = parser.parse_args()
    lines, ratios = [], {"create": [], "dense": [], "sparse": [], "text": []}

    def report(kind: str, label: str, predicted: float, measured: float) -> None:
        ratio = predicted / measured if measured > 0 else float("inf")
        counted = measured >= MIN_SECONDS
        if counted:
            ratios[kind].append((ratio, label))
        line = f"{kind:7s} {label:62s} predicted {predicted:9.4f} s  measured {measured:9.4f} s  ratio " \
               f"{ratio:7.2f}{'' if counted else '  (too short: not counted)'}"
        lines.append(line)
        print(line, flush=True)

    for raw, rows in specs(args.quick):
        raw = {**raw, "seed": next(_seed)}
        params = {k: (f"{len(v)} rows" if isinstance(v, list) else v) for k, v in raw.get("params", {}).items()}
        label = f"{raw['method']} d={raw['input_dim']} D={raw['n_components']} {params}"
        create_map({**raw, "seed": 1}).materialize()    # warm: compiled kernels loaded, FFT plans made
        fit_shells.cache_clear()
        predicted = creation_cost(requested_spec(raw)).seconds
        measured, feature_map = cpu(lambda: create_map(raw).materialize())
        report("create", label, predicted, measured)
        dense, csr = data(rows, raw["input_dim"], raw["method"])
        apply(feature_map, dense[:2])
        measured, _ = cpu(lambda: apply(feature_map, dense))
        report("dense", f"{label} n={rows}", transform_cost(feature_map.spec, rows), measured)
        if raw["method"] not in ("skewed_chi2", "additive_chi2"):
            apply(feature_map, csr[:2])
            measured, _ = cpu(lambda: apply(feature_map, csr))
            report("sparse", f"{label} n={rows} nnz={csr.nnz}",
                   transform_cost(feature_map.spec, rows, csr.nnz, sparse=True), measured)
    for label, rows, chars, kind, predicted, measured in text_measurements():
        report("text", f"{label} n={rows} characters={chars} ({kind})", predicted, measured)
    print()
    for kind, found in ratios.items():
        if found:
            low, high = min(found), max(found)
            summary = f"{kind}: ratio predicted/measured from {low[0]:.2f} ({low[1]}) to {high[0]:.2f} ({high[1]}) " \
                      f"over {len(found)} measurements >= {MIN_SECONDS} s"
            lines.append(summary)
            print(summary)
    if args.write:
        path = Path(__file__).parent / "results" / "cost_model.txt"
        path.write_text("\n".join(lines) + "\n")
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
