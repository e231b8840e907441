"""Answers computed and encoded chunk by chunk: a request holds one chunk of its result, not all of it.

A result is a 2-D array of known shape whose rows `compute(rows)` makes on demand. The first chunk
is computed before anything is sent, so bad input still gets its 4xx; an answer of one chunk is an
ordinary response, a longer one streams, each later chunk computed and encoded on the stream pool
(from while the first is computed) as the event loop keeps serving and sends the chunks before it.
The pool has `threads` threads per worker process (one BLAS thread each: a large batch uses the cores
without BLAS threads spinning against the event loop), shared by its streams, and a stream queues at
most `threads` + 1 chunks ahead of the one it sends, so a request holds at most that many chunks
(queued, being computed or made), one being sent and the unsent part of it that the transport copied
(asyncio's transport copies what the socket did not take: no buffer is written while the transport
may hold it). An .npy answer's size is known up front (header + rows x width x itemsize): it streams
with a Content-Length, which clients read straight into an array, and its chunks are made into `bytes`
on the pool, which h11 passes on to the socket as they are (it joins the pieces of each event into new
bytes, a copy on the event loop, unless there is just one `bytes`: so no chunked framing either). A
JSON answer streams with chunked transfer encoding. The bytes are exactly those of `numpy.save` and of
orjson on the whole array: clients cannot tell the difference.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import io
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Iterable, Iterator

import numpy as np
import orjson
from fastapi import Response
from fastapi.responses import StreamingResponse

from .admission import JSON_ANSWER_CHARS, reserve_answer
from ...protocol.codecs import JSON, NPY
from .lanes import lower_priority

Compute = Callable[[slice], np.ndarray]


@dataclass(frozen=True)
class RowResult:
    """A (rows, width) result of `dtype`, made `chunk_rows` rows at a time by `compute`."""

    rows: int
    width: int
    dtype: np.dtype
    compute: Compute
    chunk_bytes: int
    threads: int = 1  # chunks computed at once while streaming

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


def _chunk_parts(result: RowResult, encode: Callable[[np.ndarray], bytes | memoryview]) -> Iterator[Callable]:
    """Work for the chunks after the first: each computes and encodes its rows."""
    for rows in result.slices[1:]:
        yield functools.partial(_encoded, result.compute, rows, encode)


def _encoded(compute: Compute, rows: slice, encode):
    return encode(compute(rows))


def npy_answer(result: RowResult, headers: dict[str, str] | None = None) -> Response:
    """The result as an .npy body."""
    slices = result.slices
    header = npy_header((result.rows, result.width), result.dtype)
    if len(slices) == 1:
        first = result.compute(slices[0])
        return Response(b"".join((header, _raw_bytes(first, result.dtype))), media_type=NPY, headers=headers)
    size = len(header) + result.rows * result.width * np.dtype(result.dtype).itemsize
    _reserve_stream(result, np.dtype(result.dtype).itemsize)
    encode = functools.partial(_bytes_of, dtype=result.dtype)
    ahead = _Ahead(_chunk_parts(result, encode), result.threads)
    first = ahead.while_computing(result.compute, slices[0])
    return StreamingResponse(ahead.stream((header, encode(first))), media_type=NPY,
                             headers={**(headers or {}), "Content-Length": str(size)})


def _reserve_stream(result: RowResult, bytes_per_number: int) -> None:
    """Admission control's reservation for the chunks a stream may hold at once (see the module doc)."""
    reserve_answer((result.threads + 3) * result.chunk_rows * result.width * bytes_per_number)


class _Ahead:
    """Parts of an answer made ahead of their turn: bytes as they are, callables on the stream pool, at
    most `threads` + 1 queued or made while one is sent. They go straight to the pool's queue, so a pool
    thread that finishes a chunk takes the next without waiting for the event loop (refilled only when
    the loop came back from a send, the chunks were made in lockstep pairs, the threads idle while each
    pair was sent: rff n=4096, D=4096 over npy, 2 ms gaps between pairs, traced), and the first are
    under way while the request's own thread computes the chunk that leads the answer."""

    def __init__(self, parts: Iterable, threads: int):
        self._parts = iter(parts)
        self._limit = threads + 1
        self._pool = _stream_pool(threads)
        self._pending: collections.deque = collections.deque()

    def _refill(self) -> None:
        while len(self._pending) < self._limit and (part := next(self._parts, _END)) is not _END:
            self._pending.append(self._pool.submit(part) if callable(part) else part)

    def _cancel(self) -> None:
        for part in self._pending:
            if isinstance(part, Future):
                part.cancel()   # queued chunks are dropped; one being made is finished and discarded

    def while_computing(self, compute: Compute, rows: slice) -> np.ndarray:
        """compute(rows), the parts after it under way meanwhile (and dropped if it raises)."""
        self._refill()
        try:
            return compute(rows)
        except BaseException:
            self._cancel()
            raise

    async def stream(self, leading: Iterable[bytes | Pieces]) -> AsyncIterator:
        """The `leading` bytes, then the parts in order; a part made as `Pieces` goes out piece by
        piece, the event loop serving others between two (see `Pieces`)."""
        try:
            for part in leading:
                async for piece in _sent(part):
                    yield piece
            self._refill()
            while self._pending:
                part = self._pending.popleft()
                made = await asyncio.wrap_future(part) if isinstance(part, Future) else part
                self._refill()
                async for piece in _sent(made):
                    yield piece
        finally:
            self._cancel()


@functools.lru_cache(maxsize=None)
def _stream_pool(threads: int) -> ThreadPoolExecutor:
    """The threads that make streamed chunks (one pool per worker process and thread count): all streams
    of a worker share them, so concurrent large answers take turns on `threads` cores rather than
    oversubscribing them."""
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="featurehash-stream", initializer=lower_priority)


_END = object()


class Pieces(tuple):
    """A chunk's bytes as consecutive `bytes` pieces of about SEND_PIECE_BYTES. Written whole, a 4 MiB
    chunk held the event loop for its socket copy, and three streams' chunks in one loop turn kept a
    single vector waiting for milliseconds; piece by piece, the loop serves others between two."""


SEND_PIECE_BYTES = 256 * 1024


async def _sent(part):
    if not isinstance(part, Pieces):
        yield part
        return
    for i, piece in enumerate(part):
        if i:
            await asyncio.sleep(0)
        yield piece


def _bytes_of(chunk: np.ndarray, dtype: np.dtype) -> Pieces:
    """The array's bytes in C order as `bytes` pieces (which h11 sends without joining them into a
    copy), made off the event loop."""
    row_bytes = max(1, chunk.shape[1] * np.dtype(dtype).itemsize) if chunk.ndim == 2 else chunk.nbytes or 1
    rows = max(1, SEND_PIECE_BYTES // row_bytes)
    return Pieces(np.ascontiguousarray(chunk[start:start + rows], dtype=dtype).tobytes()
                  for start in range(0, max(1, chunk.shape[0]), rows))


def _raw_bytes(chunk: np.ndarray, dtype: np.dtype) -> memoryview:
    """The array's bytes in C order, as a view when it already is C-ordered `dtype` (no copy)."""
    return memoryview(np.ascontiguousarray(chunk, dtype=dtype)).cast("B")


def json_answer(head: dict, key: str, result: RowResult, tail: Callable[[], Iterator[tuple[str, RowResult]]]
                | None = None) -> Response:
    """`{**head, key: result rows, **tail}` as orjson writes it; `tail` yields further (key, result)
    pairs (e.g. LSH band keys after the codes), each streamed after the previous one."""
    slices = result.slices
    if len(slices) == 1 and tail is None:  # the single-request case: one encode, nothing else
        return Response(orjson.dumps({**head, key: result.compute(slices[0])}, option=orjson.OPT_SERIALIZE_NUMPY),
                        media_type=JSON)
    opening = orjson.dumps({**head, key: []})[:-3]  # ends with "key":

    def after_first() -> Iterator:
        yield from _chunk_parts(result, _json_more_rows)
        yield b"]"
        for name, more in (tail() if tail is not None else ()):
            yield b"," + orjson.dumps(name) + b":["
            yield functools.partial(_encoded, more.compute, more.slices[0], _json_rows)
            yield from _chunk_parts(more, _json_more_rows)
            yield b"]"
        yield b"}"

    if len(slices) == 1:
        first = result.compute(slices[0])
        # One chunk, but a tail: still small, answered whole.
        parts = (opening, b"[" + _json_rows(first), *after_first())
        return Response(b"".join(part() if callable(part) else part for part in parts), media_type=JSON)
    _reserve_stream(result, JSON_ANSWER_CHARS[np.dtype(result.dtype).kind])
    ahead = _Ahead(after_first(), result.threads)
    first = ahead.while_computing(result.compute, slices[0])
    return StreamingResponse(ahead.stream((opening, b"[" + _json_rows(first))), media_type=JSON)


def _json_more_rows(chunk) -> bytes:
    return b"," + _json_rows(chunk)
