"""What an answer must be, known from its request before it is sent (`Expect`), and the checks that hold a
2xx answer to it: content type, size, rows, width and dtype of arrays, field types of JSON documents.

An answer that is not what its request asked for raises AnswerMismatch (a FeatureHashAPIError) naming what was
expected and what came, and is never returned. JSON documents are validated by the protocol's response models
(featurehash.protocol.schemas), strictly (a number as a string, a bool as a number are refused), as TypedDicts
made from them: the client returns plain dicts, as the server wrote them, unknown fields kept.

Sizes: an .npy answer is exactly its header and rows x width x itemsize bytes; a JSON answer of numbers at most
NUMBER_BYTES a number plus JSON_HEADROOM; the width is the map's, or for a map the client has not seen the widest
any map has (MAX_WIDTH: every map's output_dim, one-hot indices and codes are at most n_components wide); an
answer the request does not bound (a map's spec, pages of them, duplicates) at most UNSIZED_ANSWER_BYTES; an
error answer is read up to ERROR_ANSWER_BYTES.
"""

from __future__ import annotations

import functools
import reprlib
import types
from dataclasses import dataclass
from typing import Any, Callable, Union, get_args, get_origin

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from typing_extensions import NotRequired, TypedDict

from ..maps.spec import MAX_COMPONENTS
from ..store.lsh_layout import MAX_ITEM_ID_BYTES
from .results import AnswerMismatch

JSON = "application/json"
KIB, MIB = 1024, 1024 * 1024
NUMBER_BYTES = 25  # the longest number orjson writes (-1.2345678901234567e-308, an int64) and its comma
JSON_HEADROOM = 64 * KIB  # field names, brackets, the fields that are not rows
NPY_HEADER_BYTES = 4096  # numpy pads its header to 64 bytes; a 2-D shape's never needs more
UNSIZED_ANSWER_BYTES = 256 * MIB  # four times the service's default body limit, which bounds a spec
ERROR_ANSWER_BYTES = 1 * MIB
NEIGHBOUR_BYTES = 2 * MAX_ITEM_ID_BYTES + 48  # {"id":"..","similarity":..}, the id's quotes escaped at worst
INDEX_INFO_BYTES = 8 * KIB
NONZEROS_PER_CHARACTER = 192  # up to 64 n-gram sizes, each word padded by two (char_wb)
MAX_WIDTH = MAX_COMPONENTS


@dataclass(frozen=True)
class NpyLayout:
    """An .npy answer's array: `rows` x `width` (None: not known to the client) of `dtype`."""

    rows: int
    width: int | None
    dtype: np.dtype


@dataclass(frozen=True)
class Expect:
    """What the answer to a call must be: its content type (None: no body, as a delete's 204), at most how
    many bytes (None: not bounded by the request), and for .npy the array's layout (`one_hot_npy`: the layout
    when the answer carries X-Feature-Dim, for a map the client has not seen)."""

    content_type: str | None = JSON
    max_bytes: int | None = JSON_HEADROOM
    npy: NpyLayout | None = None
    one_hot_npy: NpyLayout | None = None


UNSIZED = Expect(max_bytes=None)
NO_BODY = Expect(content_type=None, max_bytes=0)


def json_bytes(numbers: int, rows: int = 0) -> int:
    return numbers * NUMBER_BYTES + rows * 4 + JSON_HEADROOM


def npy_bytes(layout: NpyLayout) -> int:
    return NPY_HEADER_BYTES + layout.rows * (layout.width or MAX_WIDTH) * layout.dtype.itemsize


def mismatch(status: int, expected: str, got: str) -> AnswerMismatch:
    return AnswerMismatch(status, expected, got)


def layout_check(layout: NpyLayout, status: int, limit: int) -> Callable[[tuple[int, ...], np.dtype], None]:
    """The check of an .npy header against the layout the request implies (run before allocating)."""
    def check(shape: tuple[int, ...], dtype: np.dtype) -> None:
        wanted = (layout.rows, "n" if layout.width is None else layout.width)
        if len(shape) != 2 or shape[0] != layout.rows or layout.width not in (None, shape[1]):
            raise mismatch(status, f"an array of shape ({wanted[0]}, {wanted[1]}) (the request's rows x the map's "
                           "width)", f"shape {shape}")
        if (dtype.kind, dtype.itemsize) != (layout.dtype.kind, layout.dtype.itemsize):
            raise mismatch(status, f"dtype {layout.dtype.name}", f"dtype {dtype}")
        if shape[0] * shape[1] * dtype.itemsize > limit:
            raise mismatch(status, f"at most {limit} bytes", f"an array of {shape[0] * shape[1] * dtype.itemsize}")
    return check


# -- JSON documents by the protocol's models -------------------------------------------------------------

def document(status: int, content: bytes, model: type[BaseModel], parsed: Any = None) -> dict[str, Any]:
    """The answer's JSON validated by `model` (strict), as a plain dict."""
    try:
        parsed = orjson.loads(content) if parsed is None else parsed
    except orjson.JSONDecodeError as error:
        raise mismatch(status, f"a JSON {model.__name__} document", f"no JSON ({error})") from None
    try:
        return _adapter(model).validate_python(parsed, strict=True)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise mismatch(status, f"a JSON {model.__name__} document",
                       f"{where}: {first['msg'].lower()} ({reprlib.repr(first.get('input'))})") from None


@functools.cache
def _adapter(model: type[BaseModel]) -> TypeAdapter:
    return TypeAdapter(_typed_dict(model))


def _typed_dict(model: type[BaseModel]) -> type:
    """The model as a TypedDict (a field with a default may be absent, unknown fields are kept): validated
    without a model instance per object (a query answer holds one per neighbour), it gives back plain dicts."""
    fields = {name: _plain(info.annotation) if info.is_required() else NotRequired[_plain(info.annotation)]
              for name, info in model.model_fields.items()}
    made = TypedDict(model.__name__, fields)
    made.__pydantic_config__ = ConfigDict(extra="allow")
    return made


def _plain(annotation: Any) -> Any:
    """The annotation with every model in it a TypedDict (the response models use list, dict, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _typed_dict(annotation)
    origin = get_origin(annotation)
    if origin in (list, dict):
        return origin[tuple(_plain(arg) for arg in get_args(annotation))]
    if origin in (Union, types.UnionType):
        return Union[tuple(_plain(arg) for arg in get_args(annotation))]
    return annotation


# -- arrays of numbers ----------------------------------------------------------------------------------

def matrix(status: int, values: list, rows: int, width: int | None, dtype, what: str) -> np.ndarray:
    """`values` (validated lists of numbers) as a rows x width array, or AnswerMismatch."""
    if len(values) != rows:
        raise mismatch(status, f"{rows} rows of {what} (the request's)", f"{len(values)}")
    try:
        array = np.asarray(values, dtype=dtype)
    except ValueError:
        raise mismatch(status, f"{what} rows of one length", "rows of different lengths") from None
    if rows == 0:
        array = array.reshape(0, width or 0)
    if array.ndim != 2 or width not in (None, array.shape[1]):
        got = array.shape[1] if array.ndim == 2 else "none"
        raise mismatch(status, f"{what} rows of width {width} (the map's)", f"width {got}")
    return array


def row_lengths(status: int, rows: list, expected: int, what: str) -> None:
    if len(rows) != expected:
        raise mismatch(status, f"{expected} {what} (one per request row)", f"{len(rows)}")
