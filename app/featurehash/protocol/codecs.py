"""Request bodies: JSON (orjson) and .npy, turned into arrays one way (the service decodes with these, and
the client checks its requests with the same functions, so both refuse the same bodies).

JSON bodies carry dense rows under a key (e.g. "vectors") or sparse rows under
"sparse_<key>" as [{"indices": [...], "values": [...]}, ...]; an `application/x-npy`
body is one 2-D numeric array. Every problem is an InputError naming the field.
"""

from __future__ import annotations

import functools
import io
import json
import math
import re
from typing import Any

import numpy as np
import orjson
import scipy.sparse as sp
from pydantic import BaseModel, ValidationError

from ..npy import header as npy_header
from ..maps import FeatureHashError, InputError

NPY = "application/x-npy"
JSON = "application/json"


def parse_body(raw: bytes, content_type: str | None) -> dict[str, Any] | np.ndarray:
    """A JSON object, or the array of an .npy body."""
    media_type = (content_type or JSON).split(";")[0].strip().lower()
    if media_type == NPY:
        return _parse_npy(raw)
    if media_type not in (JSON, "text/json") and not media_type.endswith("+json"):
        raise UnsupportedMediaType(media_type)
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        document = _parse_lenient_json(raw)
    if not isinstance(document, dict):
        raise InputError("body", "expected a JSON object")
    return document


def _parse_lenient_json(raw: bytes) -> Any:
    # Python's json writes NaN and Infinity; accept them here so the finite check can
    # name the problem instead of reporting a syntax error.
    if isinstance(raw, memoryview):
        raw = bytes(raw)
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError("body", f"invalid JSON ({exc})") from None
    except RecursionError:
        raise InputError("body", "invalid JSON: nested too deeply") from None
    if _SURROGATE_ESCAPE.search(raw):  # the walk only where one may be (NaN bodies can be large)
        _refuse_lone_surrogates(document)
    return document


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _refuse_lone_surrogates(document: Any) -> None:
    """Python's json (unlike orjson, which refuses them) decodes an escaped lone surrogate ("\\ud800")
    into a string that cannot be encoded as UTF-8 (for Redis, a header or the answer): refused here,
    naming where it is, e.g. "map_id" or "ids[2]"."""
    pending: list[tuple[Any, str]] = [(document, "")]
    while pending:
        node, where = pending.pop()
        if isinstance(node, str):
            if not _encodes(node):
                raise InputError(where or "body", "holds a lone UTF-16 surrogate (\\ud800-\\udfff escape "
                                 "without its pair): not a Unicode string")
        elif isinstance(node, dict):
            for key, value in node.items():
                if not _encodes(key):
                    raise InputError(where or "body", "a key holds a lone UTF-16 surrogate: not a Unicode string")
                pending.append((value, f"{where}.{key}" if where else key))
        elif isinstance(node, list):
            pending.extend((value, f"{where}[{i}]") for i, value in enumerate(node))


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _parse_npy(raw: bytes) -> np.ndarray:
    """The array of an .npy body as a read-only view of the body's bytes (no copy) when its header is
    version 1 or 2 and its dtype holds no objects; otherwise (version 3) numpy.load's copy."""
    if raw[:len(npy_header.MAGIC)] != npy_header.MAGIC:  # (raw may be a memoryview: service/api/admission.read_body)
        raise InputError("body", "not an .npy file (no NPY header); write it with numpy.save")
    try:
        header = _npy_header_bytes(raw)
        if header is None:
            array = np.load(io.BytesIO(raw), allow_pickle=False)
        else:
            shape, fortran_order, dtype = _npy_layout(header)
            _check_data_size(len(raw) - len(header), npy_header.data_bytes(shape, dtype), shape, dtype)
            array = np.frombuffer(raw, dtype=dtype, count=math.prod(shape), offset=len(header))
            array = array.reshape(shape[::-1]).T if fortran_order else array.reshape(shape)
    except InputError:
        raise
    except Exception as exc:  # numpy raises several types for malformed files
        raise InputError("body", f"not a readable .npy array ({type(exc).__name__}: {exc})") from None
    if not isinstance(array, np.ndarray):
        raise InputError("body", "expected one .npy array")
    if header is None:  # numpy.load ignores bytes after the data: the header's length field says where it ends
        _check_data_size(len(raw) - _version3_header_bytes(raw), array.nbytes, array.shape, array.dtype)
    return array


def _check_data_size(sent: int, needed: int, shape, dtype) -> None:
    """A body whose data is longer or shorter than its header's shape and dtype say is refused: a
    truncated upload or a wrong header, not an array to guess at."""
    if sent != needed:
        raise InputError("body", f"the .npy header's shape {tuple(shape)} and dtype {dtype} need {needed} bytes "
                         f"of data, the body holds {sent}")


def _version3_header_bytes(raw: bytes) -> int:
    return 12 + int.from_bytes(raw[8:12], "little")


def _npy_header_bytes(raw: bytes) -> bytes | None:
    """The magic, version and header of a version 1 or 2 .npy file (None for other versions)."""
    length_bytes = npy_header.length_field_bytes(raw) if len(raw) > 7 else None
    if length_bytes is None:
        return None
    start = 8 + length_bytes
    return bytes(raw[:start + int.from_bytes(raw[8:start], "little")])  # hashable (the body may be a bytearray)


# numpy parses a header with ast.literal_eval, which costs more than transforming a vector, and clients
# send the same few headers again and again.
_npy_layout = functools.lru_cache(maxsize=256)(npy_header.layout)


def parse_model(raw: bytes, content_type: str | None, model: type[BaseModel],
                error: type[FeatureHashError] = InputError) -> BaseModel:
    """A small JSON body validated by a pydantic model; the first problem names its field."""
    body = parse_body(raw, content_type)
    if not isinstance(body, dict):
        raise UnsupportedMediaType(NPY)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise error(".".join(str(part) for part in first["loc"]) or "body", first["msg"]) from None


class UnsupportedMediaType(Exception):
    def __init__(self, media_type: str):
        super().__init__(media_type)
        self.media_type = media_type


def vectors_from(body: dict[str, Any] | np.ndarray, key: str, input_dim: int, *, required: bool = True):
    """The rows under `key` (dense) or `sparse_<key>` (sparse), or the .npy array itself."""
    if isinstance(body, np.ndarray):
        return body
    sparse_key = f"sparse_{key}"
    if key in body and sparse_key in body:
        raise InputError(key, f"send either '{key}' or '{sparse_key}', not both")
    if sparse_key in body:
        return _sparse_rows(body[sparse_key], sparse_key, input_dim)
    if key not in body:
        if not required:
            return None
        raise InputError(key, f"missing: send '{key}' (a list of rows) or '{sparse_key}'")
    return _dense_rows(body[key], key)


def _dense_rows(rows: Any, field: str) -> np.ndarray:
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise InputError(field, "expected a list of rows (lists of numbers)")
    if not rows:
        return np.empty((0, 0))
    lengths = {len(row) for row in rows}
    if len(lengths) > 1:
        raise InputError(field, f"ragged rows: lengths {sorted(lengths)[:5]} differ")
    array = _numbers(rows, field, "rows must contain numbers only")
    if array.ndim != 2:
        raise InputError(field, "rows must be flat lists of numbers")
    return array


def _numbers(values: list, field: str, message: str, kinds: str = "fiub") -> np.ndarray:
    """A numeric array, refusing what numpy would otherwise coerce or wrap: strings,
    nulls and integers too large for a float come out as non-numeric dtypes."""
    try:
        array = np.array(values)
    except (TypeError, ValueError, OverflowError, RecursionError):
        raise InputError(field, message) from None
    if array.size and array.dtype.kind not in kinds:
        raise InputError(field, message)
    return array


def _sparse_rows(rows: Any, field: str, input_dim: int) -> sp.csr_matrix:
    if not isinstance(rows, list):
        raise InputError(field, "expected a list of {\"indices\": [...], \"values\": [...]} objects")
    index_parts, value_parts, lengths = [], [], []
    for r, row in enumerate(rows):
        where = f"{field}[{r}]"
        if not isinstance(row, dict) or not isinstance(row.get("indices"), list) \
                or not isinstance(row.get("values"), list):
            raise InputError(where, "expected {\"indices\": [...], \"values\": [...]}")
        if len(row["indices"]) != len(row["values"]):
            raise InputError(where, "indices and values differ in length")
        indices = _numbers(row["indices"], f"{where}.indices", "indices must be integers", kinds="iu")
        values = _numbers(row["values"], f"{where}.values", "values must be numbers")
        if indices.ndim != 1 or values.ndim != 1:
            raise InputError(where, "indices and values must be flat lists")
        indices, values = indices.astype(np.int64), values.astype(np.float64)
        if indices.size and (indices.min() < 0 or indices.max() >= input_dim):
            raise InputError(f"{where}.indices", f"out of range: indices must lie in [0, {input_dim})")
        index_parts.append(indices)
        value_parts.append(values)
        lengths.append(indices.size)
    indptr = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    indices = np.concatenate(index_parts) if index_parts else np.empty(0, np.int64)
    values = np.concatenate(value_parts) if value_parts else np.empty(0)
    return sp.csr_matrix((values, indices, indptr), shape=(len(rows), input_dim))


def wants_npy(accept: str | None) -> bool:
    return bool(accept) and NPY in accept

