"""The records of one corpus file, in order, each with its number (a line from 1 for JSON Lines, CSV and plain
text; a row from 0 for Parquet; 0 for a whole-file document) so that a bad record is named by file and line.

A record is (number, document text, id, key value, the record as the output writes it back: the raw line for
JSON Lines and text, the row's values for CSV, the row index for Parquet). Blank lines are skipped and counted,
never an error. A bad record (not UTF-8, not JSON, not an object, no text field, a text that is not a string)
raises BadRecord; the reader's caller refuses it or skips and counts it (`--on-error`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

from .files import CorpusFile, open_binary

PARQUET_BATCH = 8192


class BadRecord(ValueError):
    def __init__(self, number: int, reason: str):
        super().__init__(reason)
        self.number, self.reason = number, reason


@dataclass(frozen=True)
class Fields:
    """Which fields are the text, the id (None: "<file>:<line>") and the key of a max:/min: keep policy;
    `text_unit` "line" (a document per line of a plain-text file) or "file" (the file is one document)."""

    text: str = "text"
    id: str | None = None
    key: str | None = None
    text_unit: str = "line"


@dataclass
class Record:
    number: int
    text: str
    id: str
    key: float
    raw: object


def read(file: CorpusFile, fields: Fields, blank: list) -> Iterator[Record | BadRecord]:
    """The file's records in order; a BadRecord is yielded (not raised) so the caller may skip it and go on.
    `blank` is a one-item list counting skipped blank lines."""
    reader = {"jsonl": _jsonl, "text": _text, "csv": _csv, "parquet": _parquet}[file.format]
    yield from reader(file, fields, blank)


def _ident(file: CorpusFile, number: int, value) -> str:
    return f"{file.path}:{number}" if value is None else str(value)


def _key(number: int, value) -> float:
    if value is None:
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BadRecord(number, f"the key field's value {value!r} is not a number") from None


def _lines(file: CorpusFile, blank: list) -> Iterator[tuple[int, bytes]]:
    with open_binary(file.path, file.compression) as stream:
        for number, raw in enumerate(stream, start=1):
            if not raw.strip():
                blank[0] += 1
                continue
            yield number, raw


def _utf8(number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRecord(number, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _from_object(file, fields: Fields, number: int, row, raw) -> Record:
    if not isinstance(row, dict):
        raise BadRecord(number, f"expected an object with a '{fields.text}' field, got {type(row).__name__}")
    text = row.get(fields.text)
    if not isinstance(text, str):
        what = "no" if text is None else f"a {type(text).__name__} as its"
        raise BadRecord(number, f"{what} '{fields.text}' field (a string)")
    ident = row.get(fields.id) if fields.id else None
    if fields.id and ident is None:
        raise BadRecord(number, f"no '{fields.id}' field (the id)")
    key = _key(number, row.get(fields.key)) if fields.key else float("nan")
    return Record(number, text, _ident(file, number, ident), key, raw)


def _jsonl(file, fields, blank):
    yield from jsonl_records(file, fields, _lines(file, blank))


def jsonl_records(file: CorpusFile, fields: Fields, lines) -> Iterator[Record | BadRecord]:
    """The records of (number, raw line) pairs of a JSON Lines file, blank lines already skipped."""
    for number, raw in lines:
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            try:
                _utf8(number, raw)
            except BadRecord as bad:
                yield bad
                continue
            yield BadRecord(number, f"not JSON ({exc})")
            continue
        try:
            yield _from_object(file, fields, number, row, raw)
        except BadRecord as bad:
            yield bad


def _text(file, fields, blank):
    if fields.text_unit == "file":
        with open_binary(file.path, file.compression) as stream:
            raw = stream.read()
        try:
            yield Record(0, _utf8(0, raw), file.path, float("nan"), raw)
        except BadRecord as bad:
            yield bad
        return
    for number, raw in _lines(file, blank):
        try:
            text = _utf8(number, raw).rstrip("\r\n")
        except BadRecord as bad:
            yield bad
            continue
        yield Record(number, text, f"{file.path}:{number}", float("nan"), raw)


def _csv(file, fields, blank):
    with open_binary(file.path, file.compression) as stream:
        text = io.TextIOWrapper(stream, encoding="utf-8", errors="strict", newline="")
        reader = csv.reader(text)
        try:
            header = next(reader)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            yield BadRecord(1, f"not UTF-8 ({exc.reason})")
            return
        if fields.text not in header:
            yield BadRecord(1, f"no '{fields.text}' column in the header ({', '.join(header)})")
            return
        start = reader.line_num + 1
        while True:
            try:
                values = next(reader)
            except StopIteration:
                return
            except (UnicodeDecodeError, csv.Error) as exc:
                yield BadRecord(start, f"not a readable CSV row ({exc})")
                return   # the stream's position is lost: the rest of the file cannot be told apart
            number, start = start, reader.line_num + 1
            if not values or all(not v.strip() for v in values):
                blank[0] += 1
                continue
            if len(values) != len(header):
                yield BadRecord(number, f"{len(values)} values for {len(header)} columns")
                continue
            try:
                yield _from_object(file, fields, number, dict(zip(header, values)), values)
            except BadRecord as bad:
                yield bad


def csv_header(file: CorpusFile) -> list[str]:
    with open_binary(file.path, file.compression) as stream:
        return next(csv.reader(io.TextIOWrapper(stream, encoding="utf-8", newline="")), [])


def _parquet(file, fields, blank):
    import pyarrow.parquet as pq

    with open_binary(file.path, None) as stream:
        parquet = pq.ParquetFile(stream)
        names = parquet.schema_arrow.names
        if fields.text not in names:
            yield BadRecord(0, f"no '{fields.text}' column ({', '.join(names)})")
            return
        wanted = [n for n in (fields.text, fields.id, fields.key) if n]
        number = 0
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH, columns=sorted(set(wanted))):
            columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
            for k in range(batch.num_rows):
                row = {name: values[k] for name, values in columns.items()}
                try:
                    yield _from_object(file, fields, number, row, number)
                except BadRecord as bad:
                    yield bad
                number += 1
