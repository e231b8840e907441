"""The read stage for corpora that are not text: a record's vector (`--vector-field`) or token list
(`--tokens-field`) in place of a text, with no normalisation, in JSON Lines or Parquet.

A vector is one of: a list of numbers (dense: entry i is column i), an object {"index": weight, ...} (JSON
keys are strings of non-negative integers; a Parquet map<int, double>), or {"indices": [...], "values": [...]}
(a Parquet struct of two lists). Its canonical form is its nonzero entries sorted by index, so a dense list
and the sparse forms of the same vector are one vector. A token list is a list of strings (shingles, words,
ids); as a set its canonical form is its distinct tokens in byte order, weighted (`--weighted`) the distinct
tokens with their counts. The exact stage hashes the canonical form (BLAKE2b-128, as `normalise.hash128`
hashes a text), so two records are exact duplicates exactly when their similarity is 1 by construction.

The read part keeps, in place of `text`: `tokens` (list<string>, as given: the map's text stage reads token
lists and weighs repeats) or `vector` (struct of sorted `indices` list<int64> and `values` list<float64>:
the {indices, values} form every engine's join reads). `length` is the number of tokens (with repeats) or of
nonzero entries: what `longest` / `shortest` compare and the summary's `bytes_in` counts for such corpora."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ...maps.errors import InputError
from .files import CorpusFile, open_binary
from .records import BadRecord, Fields
from .scan import BATCH, NAMED_BAD, ON_ERROR, ScanCounts

_HEAD = [("number", pa.int64()), ("id", pa.string()), ("length", pa.int64()), ("key", pa.float64()),
         ("h0", pa.uint64()), ("h1", pa.uint64())]
VECTOR = pa.struct([("indices", pa.list_(pa.int64())), ("values", pa.list_(pa.float64()))])
SCHEMAS = {"vector": pa.schema(_HEAD + [("vector", VECTOR)]),
           "tokens": pa.schema(_HEAD + [("tokens", pa.list_(pa.string()))])}


@dataclass(frozen=True)
class VectorFields(Fields):
    """Fields of a vector or token corpus: `kind` "vector" or "tokens", `column` the field holding it,
    `weighted` (tokens: whether counts enter the exact hash), `input_dim` and `nonnegative` (vectors: what the
    map reads, so a record it would refuse is named by file and line at the read stage)."""

    kind: str = "vector"
    column: str = "vector"
    weighted: bool = False
    input_dim: int = 2**30
    nonnegative: bool = True


def vector_spec(kind: str, weighted: bool = False, n_components: int = 128) -> dict:
    """The near stage's default map. Tokens: plain-set minhash of the token set (Jaccard), or with `weighted`
    gcws over 1 + log(count) weights (weighted Jaccard), through a text stage that hashes each token whole
    (no shingling: the tokens are the shingles). Vectors: gcws over the values (weighted Jaccard of
    nonnegative vectors, GMM), any index below 2^30."""
    if kind == "tokens":
        hashing = {"analyzer": "word", "ngram_range": [1, 1], "weighting": "sublinear" if weighted else "binary",
                   "alternate_sign": False, "norm": "none", "lowercase": False}
        if weighted:
            return {"method": "gcws", "n_components": n_components, "seed": 1, "params": {"sampler": "dart"},
                    "input": {"hashing": hashing}}
        return {"method": "minhash", "n_components": n_components, "seed": 1, "input": {"hashing": hashing}}
    return {"method": "gcws", "input_dim": 2**30, "n_components": n_components, "seed": 1,
            "params": {"sampler": "dart"}}


def check_map(fields: VectorFields, feature_map) -> VectorFields:
    """`fields` with what the map reads (input_dim, sign); InputError for a map that cannot read the kind."""
    from dataclasses import replace

    if fields.kind == "tokens":
        if feature_map.text_stage is None:
            raise InputError("spec", "token lists need a map with a text stage (\"input\": {\"hashing\": {...}})")
        # the exact hash weighs repeats exactly when the map does, so "exact" keeps meaning similarity 1
        return replace(fields, weighted=feature_map.text_stage.params.weighting != "binary")
    if feature_map.text_stage is not None:
        raise InputError("spec", "vectors need a map without a text stage (its input_dim the vectors' width)")
    return replace(fields, input_dim=feature_map.spec.input_dim, nonnegative=feature_map.spec.method == "gcws")


def scan_vector_batches(file: CorpusFile, fields: VectorFields, on_error: str, counts: ScanCounts, progress=None):
    """Arrow record batches of SCHEMAS[fields.kind], as `scan.scan_batches` for text."""
    if on_error not in ON_ERROR:
        raise InputError("on_error", f"one of {', '.join(ON_ERROR)}")
    if file.format not in ("jsonl", "parquet"):
        raise InputError(file.path, f"{fields.kind} records are read from JSON Lines or Parquet, not {file.format}")
    where = (lambda n: f"{file.path}:{n}") if file.format == "jsonl" else (lambda n: f"{file.path}: row {n}")
    block: list[tuple] = []
    blank = [0]
    rows = _jsonl_rows(file, blank) if file.format == "jsonl" else _parquet_rows(file, fields)
    for number, row in rows:
        try:
            block.append(_record(file, fields, number, row))
        except BadRecord as bad:
            if on_error == "raise":
                raise InputError(where(bad.number), bad.reason) from None
            counts.bad += 1
            if len(counts.named) < NAMED_BAD:
                counts.named.append(f"{where(bad.number)}: {bad.reason}")
            continue
        if len(block) == BATCH:
            yield _batch(block, fields, counts, progress)
            block = []
    if block:
        yield _batch(block, fields, counts, progress)
    counts.blank += blank[0]


def _jsonl_rows(file: CorpusFile, blank: list):
    """(line number, parsed object or BadRecord) of each non-blank line, numbered as `records` numbers them."""
    with open_binary(file.path, file.compression) as stream:
        for number, raw in enumerate(stream, start=1):
            if not raw.strip():
                blank[0] += 1
                continue
            try:
                yield number, orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                yield number, BadRecord(number, f"not JSON ({exc})")


@dataclass
class Line:
    number: int
    raw: bytes


def kept_lines(file: CorpusFile):
    """Each non-blank line of a JSON Lines file with its number, for the write stage to pick the kept ones."""
    with open_binary(file.path, file.compression) as stream:
        for number, raw in enumerate(stream, start=1):
            if raw.strip():
                yield Line(number, raw)


def _parquet_rows(file: CorpusFile, fields: VectorFields):
    import pyarrow.parquet as pq

    with open_binary(file.path, None) as stream:
        parquet = pq.ParquetFile(stream)
        names = parquet.schema_arrow.names
        if fields.column not in names:
            yield 0, BadRecord(0, f"no '{fields.column}' column ({', '.join(names)})")
            return
        wanted = sorted({n for n in (fields.column, fields.id, fields.key) if n and n in names})
        number = 0
        for batch in parquet.iter_batches(batch_size=BATCH, columns=wanted):
            for row in batch.to_pylist():
                yield number, row
                number += 1


def _record(file: CorpusFile, fields: VectorFields, number: int, row) -> tuple:
    """(number, id, key, entries): entries a token list, or (indices, values) of the nonzero entries."""
    if isinstance(row, BadRecord):
        raise row
    if not isinstance(row, dict):
        raise BadRecord(number, f"expected an object with a '{fields.column}' field, got {type(row).__name__}")
    value = row.get(fields.column)
    if value is None:
        raise BadRecord(number, f"no '{fields.column}' field")
    ident = row.get(fields.id) if fields.id else f"{file.path}:{number}"
    if ident is None:
        raise BadRecord(number, f"no '{fields.id}' field (the id)")
    key = float("nan")
    if fields.key and row.get(fields.key) is not None:
        try:
            key = float(row[fields.key])
        except (TypeError, ValueError):
            raise BadRecord(number, f"the key field's value {row[fields.key]!r} is not a number") from None
    entries = _tokens(number, value) if fields.kind == "tokens" else _vector(number, value, fields)
    return number, str(ident), key, entries


def _tokens(number: int, value) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise BadRecord(number, "the tokens are not a list of strings")
    return value


def _vector(number: int, value, fields: VectorFields) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(value, dict) and set(value) == {"indices", "values"}:
        indices, values = value["indices"], value["values"]
    elif isinstance(value, dict):
        indices, values = list(value), list(value.values())
    elif isinstance(value, list) and (not value or not isinstance(value[0], (list, tuple))):
        indices, values = range(len(value)), value   # a dense list; a Parquet map arrives as (key, value) pairs
    elif isinstance(value, list):
        indices, values = [k for k, _ in value], [v for _, v in value]
    else:
        raise BadRecord(number, "the vector is not a list of numbers, an {index: weight} object or "
                                "{indices, values}")
    try:
        idx = np.asarray([int(i) for i in indices], dtype=np.int64)
        val = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise BadRecord(number, "the vector's indices must be integers and its values numbers") from None
    if any(isinstance(v, (bool, str)) for v in values) or val.ndim != 1 or idx.size != val.size:
        raise BadRecord(number, "the vector's values must be numbers, as many as its indices")
    if not np.isfinite(val).all():
        raise BadRecord(number, "the vector has a NaN or infinite value")
    if idx.size and (idx.min() < 0 or idx.max() >= fields.input_dim):
        raise BadRecord(number, f"an index outside [0, {fields.input_dim}) (the map's input_dim)")
    if fields.nonnegative and (val < 0).any():
        raise BadRecord(number, "a negative value (the map's weighted Jaccard reads nonnegative vectors)")
    if np.unique(idx).size != idx.size:
        raise BadRecord(number, "an index given twice")
    nonzero = val != 0
    order = np.argsort(idx[nonzero], kind="stable")
    return idx[nonzero][order], val[nonzero][order]


def _batch(block: list[tuple], fields: VectorFields, counts: ScanCounts, progress) -> pa.RecordBatch:
    numbers, ids, keys, entries = zip(*block)
    if fields.kind == "tokens":
        payload = pa.array(entries, pa.list_(pa.string()))
        lengths = pc.list_value_length(payload).to_numpy(zero_copy_only=False).astype(np.int64)
        hashes = token_hashes(payload, fields.weighted)
    else:
        lengths = np.fromiter((i.size for i, _ in entries), dtype=np.int64, count=len(entries))
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
        indices = np.concatenate([i for i, _ in entries]) if entries else np.zeros(0, np.int64)
        values = np.concatenate([v for _, v in entries]) if entries else np.zeros(0)
        payload = pa.StructArray.from_arrays([pa.ListArray.from_arrays(pa.array(offsets), pa.array(indices)),
                                              pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))],
                                             fields=list(VECTOR))
        hashes = vector_hashes(indices, values, offsets)
    counts.records += len(block)
    if progress is not None:
        progress.update(len(block))
    return pa.RecordBatch.from_arrays(
        [pa.array(numbers, pa.int64()), pa.array(ids, pa.string()), pa.array(lengths, pa.int64()),
         pa.array(np.asarray(keys, dtype=np.float64)), pa.array(hashes[:, 0]), pa.array(hashes[:, 1]), payload],
        schema=SCHEMAS[fields.kind])


def digests(buffer: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """(n, 2) uint64: BLAKE2b-128 of buffer[bounds[d]:bounds[d + 1]] for each document d."""
    view = memoryview(np.ascontiguousarray(buffer, dtype=np.uint8))
    joined = b"".join(hashlib.blake2b(view[s:e], digest_size=16).digest()
                      for s, e in zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    return np.frombuffer(joined, dtype="<u8").reshape(-1, 2)


def vector_hashes(indices: np.ndarray, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The 128-bit hash of each canonical vector (sorted nonzero entries as little-endian (int64, float64)
    pairs; rows of `offsets` already canonical)."""
    entries = np.empty(indices.size, dtype=[("i", "<i8"), ("v", "<f8")])
    entries["i"], entries["v"] = indices, values
    return digests(entries.view(np.uint8), np.asarray(offsets, dtype=np.int64) * 16)


def token_hashes(tokens: pa.ListArray, weighted: bool) -> np.ndarray:
    """The 128-bit hash of each row's canonical token set (distinct tokens sorted bytewise, each as a 4-byte
    length and its UTF-8; weighted: followed by its 4-byte count), in one columnar sort, no loop over tokens."""
    n = len(tokens)
    lengths = pc.list_value_length(tokens).to_numpy(zero_copy_only=False).astype(np.int64)
    doc = np.repeat(np.arange(n, dtype=np.int64), lengths)
    flat = pa.table({"d": doc, "t": tokens.flatten()}).sort_by([("d", "ascending"), ("t", "ascending")])
    d, t = flat["d"].to_numpy(), flat["t"].combine_chunks()
    first = np.ones(d.size, dtype=bool)
    if d.size > 1:
        same = pc.equal(t.slice(1), t.slice(0, d.size - 1)).to_numpy(zero_copy_only=False)
        first[1:] = ~(same & (d[1:] == d[:-1]))
    starts = np.flatnonzero(first)
    count = np.diff(np.append(starts, d.size)).astype("<u4")
    distinct = t.take(pa.array(starts))
    if not isinstance(distinct, pa.StringArray) or distinct.offset:
        distinct = pa.concat_arrays([distinct.cast(pa.string())])
    text_offsets = np.frombuffer(distinct.buffers()[1], dtype=np.int32)[:len(distinct) + 1].astype(np.int64)
    data = np.frombuffer(distinct.buffers()[2] or b"", dtype=np.uint8)[text_offsets[0]:text_offsets[-1]]
    size = np.diff(text_offsets)
    entry = 4 + size + (4 if weighted else 0)
    out_start = np.concatenate(([0], np.cumsum(entry)))
    out = np.empty(int(out_start[-1]), dtype=np.uint8)
    head = out_start[:-1, None] + np.arange(4)
    out[head] = size.astype("<u4").view(np.uint8).reshape(-1, 4)
    out[np.arange(data.size) + np.repeat(out_start[:-1] + 4 - (text_offsets[:-1] - text_offsets[0]), size)] = data
    if weighted:
        out[head + 4 + size[:, None]] = count.view(np.uint8).reshape(-1, 4)
    per_doc = np.bincount(d[starts], minlength=n) if starts.size else np.zeros(n, dtype=np.int64)
    bounds = out_start[np.concatenate(([0], np.cumsum(per_doc)))]
    return digests(out, bounds)

