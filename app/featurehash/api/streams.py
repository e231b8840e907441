"""Answers computed and encoded chunk by chunk: a request holds one chunk of its result, not all of it.

A result is a 2-D array of known shape whose rows `compute(rows)` makes on demand. The first chunk
is computed before anything is sent, so bad input still gets its 4xx; an answer of one chunk is an
ordinary response, a longer one streams (chunked transfer encoding), each chunk computed and
encoded in the thread pool while the event loop keeps serving, and while the previous chunk is
being sent (so a request holds at most two chunks: compute and transfer overlap). The bytes are exactly those of
`numpy.save` and of orjson on the whole array: clients cannot tell the difference.
"""

from __future__ import annotations

import asyncio
import functools
import io
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Iterator

import numpy as np
import orjson
from fastapi import Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from .codecs import JSON, NPY

Compute = Callable[[slice], np.ndarray]


@dataclass(frozen=True)
class RowResult:
    """A (rows, width) result of `dtype`, made `chunk_rows` rows at a time by `compute`."""

    rows: int
    width: int
    dtype: np.dtype
    compute: Compute
    chunk_bytes: int

    @property
    def chunk_rows(self) -> int:
        return max(1, self.chunk_bytes // max(1, self.width * np.dtype(self.dtype).itemsize))

    @property
    def chunks(self) -> int:
        return -(-self.rows // self.chunk_rows)

    @property
    def slices(self) -> list[slice]:
        step = self.chunk_rows
        return [slice(start, min(self.rows, start + step)) for start in range(0, self.rows, step)]


@functools.lru_cache(maxsize=256)  # numpy formats and pads it anew each time: many microseconds
def npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """The header `numpy.save` writes for a C-ordered array of this shape and dtype."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                  "fortran_order": False, "shape": tuple(shape)})
    return buffer.getvalue()


def _json_rows(chunk) -> bytes:
    """The rows of a chunk as orjson writes them inside the whole array: `[..],[..]`."""
    return orjson.dumps(chunk, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]


def _chunks(result: RowResult, first: np.ndarray) -> Iterator[np.ndarray]:
    yield first
    for rows in result.slices[1:]:
        yield result.compute(rows)


def npy_answer(result: RowResult, headers: dict[str, str] | None = None) -> Response:
    """The result as an .npy body."""
    slices = result.slices
    first = result.compute(slices[0])
    header = npy_header((result.rows, result.width), result.dtype)
    if len(slices) == 1:
        return Response(b"".join((header, _raw_bytes(first, result.dtype))), media_type=NPY, headers=headers)

    def body() -> Iterator[bytes | memoryview]:
        yield header
        for chunk in _chunks(result, first):
            yield _raw_bytes(chunk, result.dtype)

    return StreamingResponse(_ahead(body()), media_type=NPY, headers=headers)


async def _ahead(parts: Iterator) -> AsyncIterator:
    """The items of `parts`, each made in the thread pool while the previous one is being sent."""
    done = object()
    pending = asyncio.ensure_future(run_in_threadpool(next, parts, done))
    try:
        while (part := await pending) is not done:
            pending = asyncio.ensure_future(run_in_threadpool(next, parts, done))
            yield part
    finally:
        pending.cancel()


def _raw_bytes(chunk: np.ndarray, dtype: np.dtype) -> memoryview:
    """The array's bytes in C order, as a view when it already is C-ordered `dtype` (no copy)."""
    return memoryview(np.ascontiguousarray(chunk, dtype=dtype)).cast("B")


def json_answer(head: dict, key: str, result: RowResult, tail: Callable[[], Iterator[tuple[str, RowResult]]]
                | None = None) -> Response:
    """`{**head, key: result rows, **tail}` as orjson writes it; `tail` yields further (key, result)
    pairs (e.g. LSH band keys after the codes), each streamed after the previous one."""
    slices = result.slices
    first = result.compute(slices[0])
    if len(slices) == 1 and tail is None:
        return Response(orjson.dumps({**head, key: first}, option=orjson.OPT_SERIALIZE_NUMPY), media_type=JSON)
    opening = orjson.dumps({**head, key: []})[:-3]  # ends with "key":

    def body() -> Iterator[bytes]:
        yield opening
        yield from _json_array(result, first)
        for name, more in (tail() if tail is not None else ()):
            yield b"," + orjson.dumps(name) + b":"
            yield from _json_array(more, more.compute(more.slices[0]))
        yield b"}"

    if len(slices) == 1:  # one chunk, but a tail: still small, answered whole
        return Response(b"".join(body()), media_type=JSON)
    return StreamingResponse(_ahead(body()), media_type=JSON)


def _json_array(result: RowResult, first) -> Iterator[bytes]:
    separator = b"["
    for chunk in _chunks(result, first):
        yield separator + _json_rows(chunk)
        separator = b","
    yield b"]"
