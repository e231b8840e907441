"""JSON Lines read in columns: the file in chunks of whole lines, each parsed by pyarrow's JSON reader into Arrow
columns of the text, id and key fields only (the other fields are parsed, not built), with the records' line
numbers, blank lines and anything the reader might accept where `records` refuses from one compiled pass over
the chunk's bytes. A chunk that is not plainly good (a bad record, a field of another type, a line the pass
flags and orjson refuses) is read by `records` line by line instead, so bad records are named by file and line
and `--on-error` applies exactly as there; the columns of a good chunk equal what `records` gives.

The pass flags a line orjson may refuse and pyarrow's reader accept: outside strings, a byte no JSON value of
objects, arrays, numbers, true, false and null holds (NaN, Infinity, comments, single quotes) or a run of more
than 18 digits (orjson refuses integers past 64 bits); more or less than one top-level object; inside strings, a
surrogate escape (orjson refuses a lone one). Flagged lines are checked with orjson, the rest are left to
pyarrow's reader, and the chunk's UTF-8 is checked whole (the reader does not check the fields it skips)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numba as nb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from .files import CorpusFile, open_binary
from .records import Fields, jsonl_records

CHUNK = 16 << 20
_BLANK = np.zeros(256, dtype=np.bool_)
_BLANK[list(b" \t\n\r\x0b\x0c")] = True   # bytes.strip()'s white space
_PLAIN = np.zeros(256, dtype=np.bool_)   # bytes a valid line holds outside strings
_PLAIN[list(b" \t\r{}[],:0123456789-+.eEtruefalsn")] = True


@dataclass
class Block:
    """Columns of consecutive good records: `number` (line), `id`, `key` (NaN: none) and `text` (string)."""

    number: np.ndarray
    id: pa.Array
    key: np.ndarray
    text: pa.Array


@nb.njit(nogil=True, cache=True)
def scan_lines(chunk, blank_bytes, plain):
    """(starts, ends, blank, flagged) of the chunk's lines (split at b"\\n", the newline kept in the line)."""
    n = chunk.size
    count = 0
    for p in range(n):
        if chunk[p] == 10:
            count += 1
    if n and chunk[n - 1] != 10:
        count += 1
    starts = np.empty(count, dtype=np.int64)
    ends = np.empty(count, dtype=np.int64)
    blank = np.ones(count, dtype=np.bool_)
    flagged = np.zeros(count, dtype=np.bool_)
    line, start = 0, 0
    in_string, escape, depth, objects, digits, bad = False, False, 0, 0, 0, False
    for p in range(n):
        c = chunk[p]
        if not blank_bytes[c]:
            blank[line] = False
        if in_string:
            if escape:
                escape = False
                if c == 117 and p + 2 < n and (chunk[p + 1] == 100 or chunk[p + 1] == 68) and (
                        56 <= chunk[p + 2] <= 57 or 97 <= chunk[p + 2] <= 102 or 65 <= chunk[p + 2] <= 70):
                    bad = True   # \uD800-\uDFFF
            elif c == 92:
                escape = True
            elif c == 34:
                in_string = False
            elif c == 10:
                bad = True
        elif c == 34:
            in_string = True
            digits = 0
        elif c != 10:
            if not plain[c]:
                bad = True
            if 48 <= c <= 57:
                digits += 1
                if digits > 18:
                    bad = True
            else:
                digits = 0
            if c == 123 or c == 91:
                if depth == 0:
                    objects += 1
                    if c != 123:
                        bad = True
                depth += 1
            elif c == 125 or c == 93:
                depth -= 1
            elif depth == 0 and not blank_bytes[c]:
                bad = True   # a value outside the top-level object
        if c == 10 or p == n - 1:
            starts[line], ends[line] = start, p + 1
            flagged[line] = bad or in_string or depth != 0 or (objects != 1 and not blank[line])
            line += 1
            start = p + 1
            in_string, escape, depth, objects, digits, bad = False, False, 0, 0, 0, False
    return starts, ends, blank, flagged


def chunks(file: CorpusFile, size: int | None = None) -> Iterator[bytes]:
    """The decompressed file in pieces of whole lines (the last may lack its newline), of about `size` bytes
    (CHUNK)."""
    size, rest = size or CHUNK, b""
    with open_binary(file.path, file.compression) as stream:
        while True:
            data = stream.read(size)
            if not data:
                break
            data = rest + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            rest = data[cut:]
            yield data[:cut]
    if rest:
        yield rest


def jsonl_blocks(file: CorpusFile, fields: Fields, blank: list):
    """The file's records in order as Blocks (chunks read in columns) and, for chunks that were not, the
    Records and BadRecords of `records`. `blank` is a one-item list counting skipped blank lines."""
    first = 1
    for chunk in chunks(file):
        data = np.frombuffer(chunk, dtype=np.uint8)
        starts, ends, is_blank, flagged = scan_lines(data, _BLANK, _PLAIN)
        numbers = first + np.flatnonzero(~is_blank)
        block = _columns(file, fields, chunk, starts, ends, is_blank, flagged, numbers)
        if block is not None:
            blank[0] += int(is_blank.sum())
            if numbers.size:
                yield block
        else:
            lines = ((first + k, chunk[starts[k]:ends[k]]) for k in range(starts.size))
            yield from jsonl_records(file, fields, _skip_blank(lines, blank))
        first += starts.size


def _skip_blank(lines, blank):
    for number, raw in lines:
        if not raw.strip():
            blank[0] += 1
            continue
        yield number, raw


def _columns(file, fields, chunk, starts, ends, is_blank, flagged, numbers) -> Block | None:
    """The chunk's Block, or None where `records` must read it."""
    names = [n for n in (fields.text, fields.id, fields.key) if n]
    if len(set(names)) < len(names):
        return None
    try:
        chunk.decode("utf-8")
        for k in np.flatnonzero(flagged & ~is_blank):
            orjson.loads(chunk[starts[k]:ends[k]])
    except (UnicodeDecodeError, orjson.JSONDecodeError):
        return None
    table = None
    for id_type in (pa.string(), pa.int64()) if fields.id else (None,):
        schema = [(fields.text, pa.string())] + [(fields.id, id_type)] * bool(fields.id) + \
            [(fields.key, pa.float64())] * bool(fields.key)
        try:
            table = pj.read_json(pa.py_buffer(chunk), read_options=pj.ReadOptions(use_threads=False,
                                                                                  block_size=len(chunk) + 1),
                                 parse_options=pj.ParseOptions(explicit_schema=pa.schema(schema),
                                                               unexpected_field_behavior="ignore"))
            break
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    if table is None or table.num_rows != numbers.size:
        return None
    text = table.column(fields.text).combine_chunks()
    if text.null_count:
        return None
    if fields.id:
        ids = table.column(fields.id).combine_chunks()
        if ids.null_count:
            return None
        ids = ids.cast(pa.string())
    else:
        ids = pc.binary_join_element_wise(f"{file.path}:", pa.array(numbers).cast(pa.string()), "")
    if fields.key:
        key = table.column(fields.key).combine_chunks().fill_null(np.nan).to_numpy(zero_copy_only=False)
    else:
        key = np.full(numbers.size, np.nan)
    return Block(numbers, ids, np.asarray(key, dtype=np.float64), text)
