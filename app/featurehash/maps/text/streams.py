"""Text rows in blocks: a list, an iterator, or a .txt / .jsonl file of documents (token lists, weighted tokens)
read `chunk_rows` rows at a time and hashed by a map's text stage into its sparse input rows, one CSR block each.

This is the one chunked text path of the library: the near-duplicate join and clusters (featurehash.dedup) read
text collections through it, so that their memory is one block of text and its rows (the join keeps the
rows under its `memory_budget`, spilling past it), and the command line's `transform`, `hash` and `dedup` read
text files through it (featurehash.npy.text_stream).

Files: .jsonl, each line a JSON string (a document), a list of strings (tokens) or an object {token: weight};
.txt, each line a document (its end-of-line removed; an empty line is an empty document). A bad line (not UTF-8,
not JSON, a value of another kind, a row the map refuses) is one InputError naming the file and the line (from
1); a bad row of a list or an iterator is named by its index in the whole collection (from 0).

Invariant: the blocks, stacked, are `stage.transform(all rows)`: every row is hashed on its own, so cutting the
collection into blocks changes no number.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator, Mapping

import numpy as np
import orjson

from ..errors import InputError
from .token_rows import is_text_batch

TEXT_SUFFIXES = (".jsonl", ".txt")
DEFAULT_CHUNK_LINES = 4096


def is_text_file(path) -> bool:
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith(TEXT_SUFFIXES)


def _decode(raw: bytes, path: str, number: int, jsonl: bool):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"line {number}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not jsonl:
        return text
    try:
        row = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, f"line {number}: not JSON ({exc})") from None
    if not isinstance(row, (str, list, dict)):
        raise InputError(path, f"line {number}: expected a JSON string (a document), a list of tokens or an "
                               f"object {{token: weight}}, got {type(row).__name__}")
    return row


def text_chunks(path: str, chunk_rows: int) -> Iterator[tuple[int, list]]:
    """(number of the chunk's first line, its rows), every line decoded and checked."""
    jsonl, rows, first = path.endswith(".jsonl"), [], 1
    with open(path, "rb") as file:
        for number, raw in enumerate(file, start=1):
            rows.append(_decode(raw, path, number, jsonl))
            if len(rows) == chunk_rows:
                yield first, rows
                rows, first = [], number + 1
    if rows:
        yield first, rows


def count_lines(path: str) -> int:
    """The lines of a text file; InputError if it is missing or empty."""
    if not os.path.isfile(path):
        raise InputError(path, "no such file" if not os.path.exists(path) else "not a file")
    with open(path, "rb") as file:
        lines = sum(1 for _ in file)
    if lines == 0:
        raise InputError(path, "empty file: no documents")
    return lines


def lines_named(exc: InputError, path: str, first: int) -> InputError:
    """The map's error about rows of a chunk, about the file's lines instead."""
    def line(match: re.Match) -> str:
        return str(first + int(match.group(0)))

    message = re.sub(r"(?<=\brow\(s\) )\d+(?:, \d+)*", lambda m: re.sub(r"\d+", line, m.group(0)), exc.message)
    message = re.sub(r"\brow\(s\) ", "line(s) ", re.sub(r"(?<=\brow )\d+", line, message))
    return InputError(path, re.sub(r"\brow (?=\d)", "line ", message))


def _rows_named(exc: InputError, field: str, first: int) -> InputError:
    """The stage's error about row k of a block, about row first + k of the collection."""
    message = re.sub(r"(?<=\brow )\d+", lambda match: str(first + int(match.group(0))), exc.message)
    return InputError(field, message)


def file_blocks(stage, path: str, chunk_rows: int = DEFAULT_CHUNK_LINES):
    """The lines of a .jsonl / .txt file as `stage`'s rows (float64 CSR blocks of `chunk_rows` lines); the file
    is checked to exist and hold a line before this returns, the blocks are read as iterated."""
    count_lines(path)

    def blocks():
        for first, rows in text_chunks(path, chunk_rows):
            try:
                yield stage.transform(rows, dtype=np.float64)
            except InputError as exc:
                raise lines_named(exc, path, first) from None

    return blocks()


def _is_text_row(row) -> bool:
    return is_text_batch([row])


def text_blocks(stage, X, field: str, chunk_rows: int):
    """X as blocks of `stage`'s rows when X is text, else None: a .txt / .jsonl path, a list or tuple of text
    rows (documents, token lists, weighted tokens), or any other iterable whose first item is a text row
    (a generator of documents, say: read once, `chunk_rows` at a time). Nothing is read before iteration but
    a file's line count and an iterator's first item."""
    if is_text_file(X):
        return file_blocks(stage, os.fspath(X), chunk_rows)
    if isinstance(X, (list, tuple)):
        if not stage.accepts(X):
            return None
        if not X:
            raise InputError(field, "the batch is empty")
        return _blocks(stage, iter(X), field, chunk_rows)
    if isinstance(X, (str, bytes, Mapping, np.ndarray)) or hasattr(X, "shape") or not hasattr(X, "__iter__"):
        return None
    iterator = iter(X)
    try:
        head = next(iterator)
    except StopIteration:
        raise InputError(field, "no rows: the iterable is empty") from None
    if not _is_text_row(head):
        return itertools.chain([head], iterator)   # chunks of numeric rows, handed back whole
    return _blocks(stage, itertools.chain([head], iterator), field, chunk_rows)


def _blocks(stage, rows, field: str, chunk_rows: int):
    first = 0
    while True:
        block = list(itertools.islice(rows, chunk_rows))
        if not block:
            return
        try:
            yield stage.transform(block, dtype=np.float64)
        except InputError as exc:
            raise _rows_named(exc, field, first) from None
        first += len(block)
