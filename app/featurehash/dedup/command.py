"""The body of `featurehash dedup`: a join (and clusters) of one .npy / .npz file (or of documents the command
line read, for a map with a text stage), pairs written to a file.

    featurehash dedup INPUT --spec SPEC --threshold T [--target-recall R] [--verify exact|codes]
        [--memory-budget 2GB] --pairs OUT.npz|OUT.parquet [--clusters OUT.npy]
        [--mode components|representatives] [--progress/--no-progress]

    featurehash dedup PATH... --output DIR [corpus options]   # `run_corpus`: featurehash.dedup.corpus

The pairs go to --pairs as found (`similarity_join(output=...)`); --clusters writes each row's cluster
label (int64, n) as .npy. A summary is printed as JSON on stdout. Bad input raises InputError, which the
command line prints as one line.
"""

from __future__ import annotations

import re
import sys

import numpy as np

from ..maps.errors import InputError
from .clusters import duplicate_clusters
from .join import similarity_join

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_bytes(text: str | None) -> int | None:
    """'2GB' -> 2 * 10^9, '512MiB' -> 512 * 2^20, '1e9' -> 10^9 (None stays None)."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).upper() not in _UNITS or float(match.group(1)) <= 0:
        raise InputError("--memory-budget", f"{text!r}: expected a positive size such as 2GB, 512MiB or 1e9")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def run(feature_map, args, rows=None) -> dict:
    """Run the command for parsed arguments (input, threshold, target_recall, verify, memory_budget,
    pairs, clusters, mode, progress); the summary to print. `rows`: the input's rows when the caller read
    them, else args.input is read (a .txt / .jsonl file by the join, through the map's text stage)."""
    budget = parse_bytes(args.memory_budget)
    if args.clusters is not None and not args.clusters.endswith(".npy"):
        args.clusters = f"{args.clusters}.npy"   # as numpy.save names it
    if rows is None and not args.input.endswith((".npy", ".npz", ".txt", ".jsonl")):
        raise InputError(args.input, "expected an .npy or .npz file (or .jsonl / .txt documents)")
    source = args.input if rows is None else rows
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    options = {"target_recall": args.target_recall, "verify": args.verify, "memory_budget": budget,
               "output": args.pairs, "progress": progress}
    try:
        if args.clusters is None:
            pairs, clusters = similarity_join(source, feature_map, args.threshold, **options), None
        else:
            clusters = duplicate_clusters(source, feature_map, args.threshold, mode=args.mode, **options)
            pairs = clusters.pairs
    except InputError as exc:   # the library's field names, told as the command line's
        names = {"x": args.input, "output": "--pairs", "feature_map": "--spec", "threshold": "--threshold",
                 "target_recall": "--target-recall", "memory_budget": "--memory-budget"}
        field = names.get(exc.field, exc.field)
        raise InputError(field, exc.message) from None
    if clusters is not None:
        np.save(args.clusters, clusters.labels)
    summary = {"id": feature_map.spec.id, "pairs": pairs.path, "count": len(pairs), "candidates": pairs.candidates,
               "rows": pairs.shape[0], "bands": pairs.bands, "rows_per_band": pairs.rows,
               "recall_at_threshold": pairs.recall_at_threshold}
    if clusters is not None:
        summary.update(clusters=args.clusters, n_clusters=clusters.n_clusters, mode=clusters.mode)
    return summary


def check_rows_mode(args) -> None:
    """The row mode's required options (the corpus mode, --output, has defaults for them)."""
    for name, value in (("--pairs", args.pairs), ("--spec", args.spec), ("--threshold", args.threshold)):
        if value is None:
            raise InputError(name, "required (or give --output DIR to deduplicate a corpus of files)")
    if len(args.input) != 1:
        raise InputError("input", "one .npy / .npz / .jsonl / .txt file with --pairs (several with --output)")
    args.input = args.input[0]


def run_corpus(args, spec: dict | None, index=None) -> dict:
    """`featurehash dedup PATH... --output DIR`: `dedup_corpus` with the command line's options; `index` the
    LSH index of --against-index, opened by the caller (dedup knows no Redis)."""
    from .corpus import dedup_corpus

    if args.pairs is not None or args.clusters is not None:
        raise InputError("--output", "writes a corpus, its duplicates table and summary: drop --pairs / --clusters")
    if args.verify != "exact":
        raise InputError("--verify", "a corpus is always verified exactly")
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    names = {"threshold": "--threshold", "spec": "--spec", "keep": "--keep", "target_recall": "--target-recall",
             "memory_budget": "--memory-budget", "on_error": "--on-error", "shard_rows": "--shard-rows",
             "vector_field": "--vector-field", "against_index": "--against-index", "redis_url": "--redis-url",
             "add_to_index": "--add-to-index", "work_dir": "--work-dir", "output_format": "--output-format"}
    try:
        return dedup_corpus(args.input, args.output, threshold=0.7 if args.threshold is None else args.threshold,
                            spec=spec, weighted=args.weighted, target_recall=args.target_recall, keep=args.keep,
                            text_field=args.text_field, id_field=args.id_field, input_format=args.input_format,
                            text_unit=args.text_unit, on_error=args.on_error, output_format=args.output_format,
                            memory_budget=parse_bytes(args.memory_budget), shard_rows=args.shard_rows,
                            reference=args.reference, force=args.force, keep_work=args.keep_work, progress=progress,
                            vector_field=args.vector_field, tokens_field=args.tokens_field,
                            against_index=index, add_to_index=args.add_to_index, work_dir=args.work_dir)
    except InputError as exc:
        raise InputError(names.get(exc.field, exc.field), exc.message) from None
