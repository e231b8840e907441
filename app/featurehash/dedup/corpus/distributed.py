"""What the Spark, Ray and Dask adapters run to deduplicate a corpus, so that every engine decides exactly what
one machine decides: per input file (on the workers) `scan_file` and `write_file`; on the driver `Plan` (the
positions, exact representatives and the rows that enter the near-duplicate join, from the files' small
columns) and `Plan.finish` (clusters, keep policy, the duplicates table and the summary from the verified
pairs). The engine runs the near-duplicate join itself on the rows `Plan.near_rows` names (by position).

Positions are the one-machine positions: files in `expand` order, records in file order. The driver holds the
small columns (number, id, length, key, two hash words; ~60 bytes a document plus the id) and the pairs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from ...maps import create_map
from .decide import decide, exact_representatives
from .kept import output_like, write_kept, write_whole_files
from .normalise import document_rows
from .pipeline import DUPLICATES
from .records import Fields
from .scan import ScanCounts, scan_batches
from .sets import document_columns, takes_sets
from .stages import Workdir, fingerprint, peak_rss
from .writing import ShardWriter

SMALL = ("file", "index", "number", "id", "length", "key", "h0", "h1", "features")


def scan_file(index: int, file, fields: Fields, on_error: str, spec: dict) -> tuple[pa.Table, dict]:
    """The read stage of file `index`: the scan columns plus `file` (its index), `index` (the record's place
    among the file's good records: a position is the file's offset plus it) and `features` (whether the
    document has a nonzero input row: only those enter the join); and the file's counts. For a vector or token
    corpus the `text` column holds the record's vector struct or token list (`vectors`), which the engines'
    joins read as they read texts."""
    from .scan import SCHEMA
    from .vector_near import payload_rows
    from .vectors import SCHEMAS, VectorFields, scan_vector_batches

    counts = ScanCounts()
    if isinstance(fields, VectorFields):
        schema = SCHEMAS[fields.kind]
        table = pa.Table.from_batches(list(scan_vector_batches(file, fields, on_error, counts)), schema=schema)
        table = table.rename_columns(schema.names[:-1] + ["text"])
    else:
        table = pa.Table.from_batches(list(scan_batches(file, fields, on_error, counts)), schema=SCHEMA)
    feature_map = create_map(spec)
    has = np.zeros(table.num_rows, dtype=bool)
    sets = takes_sets(feature_map)
    for start in range(0, table.num_rows, 8192):
        block = table.column("text").slice(start, 8192).combine_chunks()
        if isinstance(fields, VectorFields):
            has[start:start + len(block)] = payload_rows(feature_map, block)[1]
        elif sets:   # the shingles' count says it, with no sparse rows built
            has[start:start + len(block)] = np.diff(document_columns(feature_map, block)[1]) > 0
        else:
            has[start:start + len(block)] = document_rows(feature_map, block.to_pylist())[1]
    table = table.append_column("file", pa.array(np.full(table.num_rows, index, dtype=np.int64)))
    table = table.append_column("index", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    return table.append_column("features", pa.array(has)), counts.as_dict()


class Plan:
    """The driver's view of a scanned corpus: `small` (an Arrow table of SMALL columns in any order) sorted
    into positions; `near_rows` the positions whose rows enter the join (exact representatives with features);
    `reference_files` the leading files that form an already clean corpus."""

    def __init__(self, small: pa.Table, n_files: int, reference_files: int = 0):
        order = np.lexsort((small["index"].to_numpy(), small["file"].to_numpy()))
        self.small = small.take(pa.array(order))
        self.hashes = np.stack([self.small["h0"].to_numpy(), self.small["h1"].to_numpy()], axis=1)
        self.rep = exact_representatives(self.hashes)
        files = self.small["file"].to_numpy()
        self.reference = files < reference_files
        self.reference_files = reference_files
        unique = self.rep == np.arange(self.rep.size)
        self.near_rows = np.flatnonzero(unique & self.small["features"].to_numpy(zero_copy_only=False))
        # a record's position is offsets[file] + index (its place among its file's good records)
        counts = np.bincount(files, minlength=n_files)
        self.offsets = np.concatenate(([0], np.cumsum(counts)))[:-1].astype(np.int64)

    def decide(self, pairs_a, pairs_b, similarity, keep: str):
        return decide(self.hashes, self.small["length"].to_numpy(), self.small["key"].to_numpy(), self.reference,
                      pairs_a, pairs_b, similarity, keep)

    def missing_pairs(self, decision) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indices into the removed, x, y): the removed documents whose similarity to the kept one was not a
        verified pair, with the positions whose texts the engine must bring to `text_similarities`."""
        missing = np.flatnonzero(np.isnan(decision.similarity))
        return missing, self.rep[decision.removed[missing]], self.rep[decision.kept_of[missing]]

    def kept_numbers(self, decision, file_index: int) -> list[int]:
        mask = (self.small["file"].to_numpy() == file_index) & decision.kept
        return self.small["number"].to_numpy()[mask].tolist()

    def finish(self, decision, output: str, counts: list[dict], shards: list[str], new_files: int, options: dict,
               stages: dict) -> dict:
        """Write duplicates.parquet and summary.json (as `dedup_corpus` does) and return the summary."""
        import pyarrow.parquet as pq

        ids = self.small["id"]
        table = pa.table({"id": ids.take(pa.array(decision.removed)), "cluster": pa.array(decision.cluster),
                          "kept_id": ids.take(pa.array(decision.kept_of)),
                          "similarity": pa.array(decision.similarity, pa.float64()),
                          "kind": pa.array(np.where(decision.exact, "exact", "near").tolist(), pa.string())},
                         schema=DUPLICATES)
        pq.write_table(table, os.path.join(output, "duplicates.parquet"))
        length, new = self.small["length"].to_numpy(), ~self.reference
        summary = {"documents_in": int(new.sum()), "exact_duplicates": decision.exact_duplicates,
                   "near_duplicates": decision.near_duplicates, "kept": int((decision.kept & new).sum()),
                   "bytes_in": int(length[new].sum()), "bytes_kept": int(length[decision.kept & new].sum()),
                   "files": new_files, "reference_documents": int(self.reference.sum()),
                   "blank_lines": sum(c["blank_lines"] for c in counts),
                   "bad_records": sum(c["bad_records"] for c in counts),
                   "bad_named": [n for c in counts for n in c["bad_named"]][:20], "shards": sorted(shards),
                   "duplicates": os.path.join(output, "duplicates.parquet"), **options, "stages": stages,
                   "driver_peak_rss_bytes": peak_rss()}
        Path(output, "summary.json").write_text(json.dumps(summary, indent=2))
        return summary


def open_output(output: str, files, options: dict, force: bool) -> Workdir:
    """The output folder, refused as `dedup_corpus` refuses it (a finished output needs `force`)."""
    return Workdir(output, fingerprint(files, {**options, "engine": True}), force)


def text_similarities(spec: dict, texts_x: list, texts_y: list, kind: str = "text") -> np.ndarray:
    """The map's exact similarity of each pair of normalised texts (x[k], y[k]), or of token lists, or (`kind`
    "vector") of {indices, values} vectors."""
    from .near import exact_similarities
    from .vector_near import payload_rows
    from .vectors import VECTOR

    if not texts_x:
        return np.zeros(0)
    feature_map = create_map(spec)
    if kind == "vector":
        rows, _ = payload_rows(feature_map, pa.array(list(texts_x) + list(texts_y), VECTOR))
    else:
        rows, _ = document_rows(feature_map, list(texts_x) + list(texts_y))
    n = len(texts_x)
    return exact_similarities(feature_map, rows, np.arange(n), np.arange(n, 2 * n))


def write_file(index: int, file, fields: Fields, kept_numbers, output: str, shard_rows: int,
               output_format: str | None = None) -> list[str]:
    """The kept records of one input file, as shards `part-<index>-NNNNN<suffix>` (the input's format, or
    `output_format`)."""
    keep = set(kept_numbers)
    if not keep:
        return []
    if fields.text_unit == "file" and file.format == "text":
        return write_whole_files(file, fields, keep, output, index)
    writer = ShardWriter(output, output_like(file, output_format), shard_rows, prefix=f"part-{index:05d}")
    try:
        write_kept(file, fields, keep, writer)
        return writer.close()
    except BaseException:
        writer.abort()
        raise
