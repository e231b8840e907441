"""The kept records of one input file, re-read in order and handed to a ShardWriter: as they were read when the
output keeps the input's format (raw JSON / text lines, CSV values, whole Parquet rows), else converted record
by record (a JSON object, a CSV row or a Parquet row as a dict of its fields; a text line as {"text": line})."""

from __future__ import annotations

import os

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .files import CorpusFile, open_binary
from .records import BadRecord, Fields, csv_header, read
from .vectors import VectorFields, kept_lines
from .writing import ShardWriter

BLOCK = 4096


def output_like(file: CorpusFile, output_format: str | None) -> CorpusFile:
    """What the shards look like: the input's format and compression, or `output_format` uncompressed."""
    if output_format is None or output_format == file.format:
        return file
    return CorpusFile(file.path, output_format, None)


def write_kept(file: CorpusFile, fields: Fields, keep: set, writer: ShardWriter) -> None:
    """Append the records of `file` whose numbers are in `keep` to `writer` (whose format may differ)."""
    same = writer.like.format == file.format
    if file.format == "parquet":
        for table in _parquet_rows(file, keep):
            if same:
                writer.table(table)
            else:
                _converted(writer, table.to_pylist(), fields)
        return
    if same and file.format == "jsonl":
        _copy_lines(file, keep, writer)
        return
    if isinstance(fields, VectorFields):   # no text field to read: the kept lines by number
        good = (r for r in kept_lines(file) if r.number in keep)
    else:
        good = (r for r in read(file, fields, [0]) if not isinstance(r, BadRecord) and r.number in keep)
    header = csv_header(file) if file.format == "csv" else None
    for block in _blocks(good):
        if same and header is not None:
            writer.rows(header, [r.raw for r in block])
        elif same:
            writer.lines([r.raw for r in block])
        else:
            _converted(writer, [_as_dict(file, r, header, fields) for r in block], fields)


def write_whole_files(file: CorpusFile, fields: Fields, keep: set, output: str, index: int) -> list[str]:
    """A kept whole-file document copied as `part-<index>-<its name>` (text with one document per file)."""
    if not keep:
        return []
    name = os.path.join(output, f"part-{index:05d}-{os.path.basename(file.path)}")
    record = next(r for r in read(file, fields, [0]) if not isinstance(r, BadRecord))
    with open(name, "wb") as out:
        out.write(record.raw)
    return [name]


def _copy_lines(file: CorpusFile, keep: set, writer: ShardWriter) -> None:
    """The lines numbered in `keep` copied as they are: a kept number is a good record's, so the lines need no
    parsing again (parsing them was three quarters of the write stage), and finding them needs only the
    newlines, not the read stage's scan."""
    from .columnar import chunks

    wanted = np.sort(np.fromiter(keep, dtype=np.int64, count=len(keep)))
    first = 1
    for chunk in chunks(file):
        ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + 1
        if chunk and chunk[-1] != 10:
            ends = np.append(ends, len(chunk))
        starts = np.concatenate(([0], ends[:-1]))
        low, high = np.searchsorted(wanted, [first, first + ends.size])   # this chunk's kept numbers
        at = wanted[low:high] - first
        first += ends.size
        writer.lines([chunk[start:end] for start, end in zip(starts[at].tolist(), ends[at].tolist())])


def _parquet_rows(file: CorpusFile, keep: set):
    wanted = np.fromiter(keep, dtype=np.int64)
    with open_binary(file.path, None) as stream:
        start = 0
        for batch in pq.ParquetFile(stream).iter_batches(batch_size=65536):
            mask = np.isin(np.arange(start, start + batch.num_rows), wanted)
            start += batch.num_rows
            if mask.any():
                yield pa.Table.from_batches([batch]).filter(pa.array(mask))


def _blocks(items):
    block = []
    for item in items:
        block.append(item)
        if len(block) == BLOCK:
            yield block
            block = []
    if block:
        yield block


def _as_dict(file: CorpusFile, record, header, fields: Fields) -> dict:
    if file.format == "jsonl":
        return orjson.loads(record.raw)
    if header is not None:
        return dict(zip(header, record.raw))
    return {fields.text: record.text}


def _converted(writer: ShardWriter, rows: list[dict], fields: Fields) -> None:
    fmt = writer.like.format
    if fmt == "parquet":
        writer.table(pa.Table.from_pylist(rows))
    elif fmt == "jsonl":
        writer.lines([orjson.dumps(row) for row in rows])
    elif fmt == "csv":
        header = list(rows[0])
        writer.rows(header, [["" if row.get(k) is None else str(row.get(k)) for k in header] for row in rows])
    else:
        writer.lines([str(row.get(fields.text, "")).replace("\n", " ").encode() for row in rows])
