"""Admission control: each worker's budget of request memory in flight (`FEATUREHASH_INFLIGHT_BYTES`).

A request reserves what it may hold before its body is read: its Content-Length (a chunked body
reserves as its chunks arrive), plus, for a JSON body, what decoding it costs (counted per chunk from
its numbers and objects, `json_decode_bytes`), plus, once its body passes `small_bytes`, room for a
streamed answer (`stream_allowance`); a streamed JSON answer, whose encoded chunks are larger than the
array's, tops that up when it starts, and /kernel reserves its work arrays. Everything is given back
when the response has been sent (or the request failed, or the client went away). Past the budget a
request is answered at once with a 503 naming "load", with Retry-After, instead of waiting; one that
could never fit (its own cost over the whole budget) gets a 413 naming "body". A request whose body
is at most `small_bytes` (a few vectors: online scoring) is always admitted, so a worker busy with
large batches never sheds it; its reservation still counts (a small JSON body reserves its bytes with its
first piece, together with that piece's decoding: one reservation a request).

The compute and index routes read a body into one buffer of its declared size (`read_body`): starlette's
`Request.body()` joins the received pieces into a second copy, briefly holding the body twice (a
chunked body, whose size is not known up front, is read so and reserves twice its bytes).
"""

from __future__ import annotations

import contextvars
import threading

import numpy as np
import orjson
from prometheus_client import Gauge

INFLIGHT = Gauge("featurehash_inflight_bytes", "Request bytes reserved by admission control in this worker",
                 multiprocess_mode="livesum")
REFUSED_LOAD = "load"

# What decoding a JSON body costs beyond the body, per number: a float object (24 bytes) and its list
# slot (8; lists over-allocate), the rows' lists, the float64 array, allocator slack. Measured in a
# worker (bench/bench_admission.py): a 58 MiB body of 3.07 M full-precision floats peaked 274 MiB over
# idle, 196 MiB besides the body and the answer's chunks: 67 bytes per number; 2-decimal numbers: 55.
JSON_BYTES_PER_NUMBER = 72
# Per JSON object (a sparse row: a dict, two lists, two small arrays and the CSR assembly): measured
# ~800 bytes with its two numbers outside a worker (x1.3 inside one, as for dense rows).
JSON_BYTES_PER_OBJECT = 1024
# Longest JSON text of one number in a streamed answer, with its comma.
JSON_ANSWER_CHARS = {"f": 25, "i": 21, "u": 21}


def json_decode_bytes(chunk: bytes) -> int:
    """What decoding these bytes of a JSON body may cost, beyond the bytes: numbers are separated by
    commas (a body of n numbers has about n - 1), so the count errs high by one per row or object."""
    return JSON_BYTES_PER_NUMBER * (chunk.count(b",") + 1) + JSON_BYTES_PER_OBJECT * chunk.count(b"{")


class Refused(Exception):
    """A request admission control turned away: a 503 ("load", with Retry-After) or a 413 ("body")."""

    def __init__(self, status: int, field: str, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.field, self.message = status, field, message
        self.headers = {"Retry-After": str(retry_after)} if retry_after is not None else None


class Admission:
    """One worker's budget. Reservations come from the event loop and from request threads (a
    streamed answer, /kernel's work), so the count is kept under a lock."""

    def __init__(self, budget: int, small_bytes: int, stream_allowance: int, retry_after_seconds: int):
        self.budget, self.small_bytes, self.stream_allowance = budget, small_bytes, stream_allowance
        self.retry_after_seconds = retry_after_seconds
        self.in_flight = 0
        self._lock = threading.Lock()

    def _take(self, nbytes: int, always: bool) -> bool:
        with self._lock:
            if not always and self.in_flight + nbytes > self.budget:
                return False
            self.in_flight += nbytes
        INFLIGHT.inc(nbytes)
        return True

    def _give(self, nbytes: int) -> None:
        with self._lock:
            self.in_flight -= nbytes
        INFLIGHT.dec(nbytes)

    def ticket(self, declared: int | None, json_body: bool) -> "Ticket":
        """A request's reservation: its declared body reserved now (raises Refused past the budget)."""
        ticket = Ticket(self, json_body)
        if declared is None:
            return ticket
        if json_body and declared <= self.small_bytes:  # always admitted: reserved with its decoding, as it arrives
            ticket.body_bytes = ticket.pending = declared
            ticket.declared = True
        else:
            ticket.body_arrives(declared, declared=True)
        return ticket


class Ticket:
    """What one request holds of the budget."""

    __slots__ = ("admission", "json_body", "held", "body_bytes", "declared", "pending", "answer_room")

    def __init__(self, admission: Admission, json_body: bool):
        self.admission, self.json_body = admission, json_body
        self.held = 0
        self.body_bytes = 0      # declared, or received so far when undeclared
        self.declared = False
        self.pending = 0         # a small declared JSON body's bytes, reserved with its first piece
        self.answer_room = 0     # reserved for a streamed answer

    @property
    def small(self) -> bool:
        return self.body_bytes <= self.admission.small_bytes

    def reserve(self, nbytes: int, *, always: bool = False) -> None:
        if nbytes <= 0:
            return
        admission = self.admission
        if self.held + nbytes > admission.budget and not always:
            hint = " (decoding JSON costs several times its size; .npy costs about its size)" if self.json_body else ""
            raise Refused(413, "body", f"this request needs about {self.held + nbytes} bytes of memory, more than "
                          f"this worker's budget of {admission.budget} (FEATUREHASH_INFLIGHT_BYTES); send fewer "
                          f"rows per request{hint}")
        if not admission._take(nbytes, always):
            raise Refused(503, REFUSED_LOAD, f"this worker has {admission.in_flight} of its {admission.budget} bytes "
                          f"of requests in flight and this one needs {nbytes} more; retry after "
                          f"{admission.retry_after_seconds} s", retry_after=admission.retry_after_seconds)
        self.held += nbytes

    def body_arrives(self, nbytes: int, *, declared: bool = False, chunk: bytes | None = None) -> None:
        """Reserve body bytes (all of them when declared up front, else as they arrive) and, for JSON, the
        decoding of `chunk`; room for a streamed answer once the body is not small."""
        if not self.declared:
            self.body_bytes += nbytes
            self.declared = declared
            body_cost = nbytes if declared else 2 * nbytes  # undeclared: starlette joins the pieces
        else:
            body_cost, self.pending = self.pending, 0
        cost = body_cost + (json_decode_bytes(chunk) if self.json_body and chunk else 0)
        if not self.small and not self.answer_room:
            self.answer_room = self.admission.stream_allowance
            cost += self.answer_room
        self.reserve(cost, always=self.small)

    def receiving(self, receive):
        """`receive`, reserving the body as it arrives (undeclared bodies) and a JSON body's decoding.
        Refused mid-body, the rest of the body is read and dropped first, so the client, still sending,
        gets the answer on a connection it can keep."""
        if self.declared and not self.json_body:
            return receive

        async def reserving_receive():
            message = await receive()
            if message["type"] == "http.request":
                chunk = message.get("body", b"")
                try:
                    self.body_arrives(len(chunk), chunk=chunk)
                except Refused:
                    if message.get("more_body", False):
                        await _drain(receive)
                    raise
            return message

        return reserving_receive

    def answer_needs(self, nbytes: int) -> None:
        """A streamed answer may hold `nbytes`: reserve what the body did not already."""
        more = nbytes - self.answer_room
        if more > 0:
            self.reserve(more)
            self.answer_room = nbytes

    def release(self) -> None:
        if self.held:
            self.admission._give(self.held)
            self.held = 0


CURRENT: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar("featurehash_admission", default=None)


def reserve_answer(nbytes: int) -> None:
    """The current request's streamed answer may hold `nbytes` (raises Refused past the budget)."""
    ticket = CURRENT.get()
    if ticket is not None:
        ticket.answer_needs(nbytes)


def reserve_work(nbytes: int) -> None:
    """The current request needs `nbytes` of work arrays besides its body (raises Refused)."""
    ticket = CURRENT.get()
    if ticket is not None:
        ticket.reserve(nbytes)


async def read_body(request) -> bytes | memoryview:
    """The request's body: one buffer of its declared size, filled as the pieces arrive (a memoryview
    of it), or for a chunked body (no Content-Length) starlette's joined bytes. The buffer is numpy's:
    `bytearray(n)` zeroes its n bytes at once, holding the GIL (60-110 ms for 60 MiB on a busy 2-core
    host, every small request waiting), where numpy's pages are faulted in piece by piece."""
    declared = request.headers.get("content-length")
    if declared is None or not declared.isdigit():
        return await request.body()
    size = int(declared)
    if size <= SMALL_BODY_COPY:
        return await request.body()
    view, filled = memoryview(np.empty(size, dtype=np.uint8)), 0
    async for piece in request.stream():
        view[filled:filled + len(piece)] = piece
        filled += len(piece)
    return view[:filled].toreadonly()  # (the server enforces the declared length)


SMALL_BODY_COPY = 1 << 20  # below: starlette's body (its joined copy is small)


async def _drain(receive) -> None:
    """Read and drop the rest of a request's body."""
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return


async def refuse_unread(refused: Refused, scope, receive, send) -> None:
    """Answer `refused` before reading the body. The answer goes out at once; then the body is read and
    dropped (a client that sends its whole body before reading would otherwise meet a reset connection
    instead of the answer), unless the client waits for "100 Continue" and so has sent none of it."""
    body = orjson.dumps({"detail": f"{refused.field}: {refused.message}", "field": refused.field})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *((name.lower().encode(), value.encode()) for name, value in (refused.headers or {}).items())]
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    expects_continue = any(name == b"expect" and value.lower() == b"100-continue" for name, value in scope["headers"])
    if expects_continue:
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.body", "body": body, "more_body": True})
    await _drain(receive)
    await send({"type": "http.response.body", "body": b""})
