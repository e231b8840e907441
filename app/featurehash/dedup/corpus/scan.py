"""The read stage of one file: its good records' number, id, text length, key, 128-bit hash of the normalised
text and the normalised text itself, as an Arrow table (also what the Spark, Ray and Dask adapters run per file,
so every engine sees the same columns). Bad records are refused (InputError naming file and line) or skipped and
counted with the first few named, by `on_error`. JSON Lines are read in columns (`columnar`); every format's
texts are normalised and hashed by the compiled pass over their Arrow column (`textpass`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ...maps.errors import InputError
from .columnar import Block, jsonl_blocks
from .files import CorpusFile
from .records import BadRecord, Fields, read
from .textpass import normalise_column

ON_ERROR = ("raise", "skip")
NAMED_BAD = 20   # bad records named in the summary; the rest are counted
SCHEMA = pa.schema([("number", pa.int64()), ("id", pa.string()), ("length", pa.int64()), ("key", pa.float64()),
                    ("h0", pa.uint64()), ("h1", pa.uint64()), ("text", pa.string())])
BATCH = 8192


@dataclass
class ScanCounts:
    records: int = 0
    blank: int = 0
    bad: int = 0
    named: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"records": self.records, "blank_lines": self.blank, "bad_records": self.bad, "bad_named": self.named}


def _line(file: CorpusFile, number: int) -> str:
    return f"{file.path}:{number}" if file.format != "parquet" else f"{file.path}: row {number}"


def scan_batches(file: CorpusFile, fields: Fields, on_error: str, counts: ScanCounts, progress=None):
    """Arrow record batches of SCHEMA, BATCH records each; `progress.update(n)` after each when given."""
    if on_error not in ON_ERROR:
        raise InputError("on_error", f"one of {', '.join(ON_ERROR)}")
    blank = [0]
    columns = _empty()
    source = jsonl_blocks(file, fields, blank) if file.format == "jsonl" else read(file, fields, blank)
    for item in source:
        if isinstance(item, Block):
            if columns["text"]:
                yield _batch(_block(columns), counts, progress)
                columns = _empty()
            yield _batch(item, counts, progress)
            continue
        if isinstance(item, BadRecord):
            if on_error == "raise":
                raise InputError(_line(file, item.number), item.reason)
            counts.bad += 1
            if len(counts.named) < NAMED_BAD:
                counts.named.append(f"{_line(file, item.number)}: {item.reason}")
            continue
        columns["number"].append(item.number)
        columns["id"].append(item.id)
        columns["key"].append(item.key)
        columns["text"].append(item.text)
        if len(columns["text"]) == BATCH:
            yield _batch(_block(columns), counts, progress)
            columns = _empty()
    if columns["text"]:
        yield _batch(_block(columns), counts, progress)
    counts.blank += blank[0]


def scan_table(file: CorpusFile, fields: Fields, on_error: str = "raise") -> tuple[pa.Table, ScanCounts]:
    counts = ScanCounts()
    batches = list(scan_batches(file, fields, on_error, counts))
    return pa.Table.from_batches(batches, schema=SCHEMA), counts


def _empty() -> dict:
    return {"number": [], "id": [], "key": [], "text": []}


def _block(columns: dict) -> Block:
    return Block(np.asarray(columns["number"], dtype=np.int64), pa.array(columns["id"], pa.string()),
                 np.asarray(columns["key"], dtype=np.float64), pa.array(columns["text"], pa.string()))


def _batch(block: Block, counts: ScanCounts, progress) -> pa.RecordBatch:
    texts, hashes, lengths = normalise_column(block.text)
    counts.records += len(texts)
    if progress is not None:
        progress.update(len(texts))
    return pa.RecordBatch.from_arrays(
        [pa.array(block.number, pa.int64()), block.id, pa.array(lengths, pa.int64()), pa.array(block.key),
         pa.array(hashes[:, 0]), pa.array(hashes[:, 1]), texts], schema=SCHEMA)
