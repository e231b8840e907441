"""Bounded sockets for the web tier: deadlines for a request's headers and body, and a cap on a
worker's open connections.

uvicorn closes idle keep-alive connections but never one that has started a request and stops
sending: ~20,000 clients that sent half a request line kept a worker's file descriptors until
accept() failed with EMFILE, and /healthz with it. Here a connection must send complete headers
within `header_timeout` seconds of being accepted (on a kept-alive connection, of the next
request's first bytes: while idle, uvicorn's keep-alive timeout applies), and a body must make
progress every `body_timeout` seconds while the server is reading it (a 408, then close), and so
must an answer while the server waits for the client to take it (else the connection is reset). At
`max_connections` a new connection is admitted by closing the one that has waited longest for its
request's headers (half-open or idle keep-alive), so a probe still gets in while an attacker holds
many; only when every connection is busy with a request is the new one closed.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import socket
import struct
from collections import OrderedDict
from typing import ClassVar
from weakref import WeakKeyDictionary

import h11
import orjson
from uvicorn.protocols.http.h11_impl import H11Protocol

from .api.metrics import CONNECTIONS_CLOSED

# File descriptors kept out of the connection cap: Redis connections, stream threads, metric files,
# numba's cache, logs.
RESERVED_FDS = 256
# asyncio accepts up to `backlog` sockets per loop pass and a connection closed to make room frees
# its descriptor a pass or two later, so a burst may hold this many backlogs above the cap.
BURST_BACKLOGS = 4
_LINGER_RESET = struct.pack("ii", 1, 0)
_CLOSED_BY_REASON: dict = {}  # labels() once per reason, in the worker (not at import: the supervisor imports this)


def _count_closed(reason: str) -> None:
    counter = _CLOSED_BY_REASON.get(reason)
    if counter is None:
        counter = _CLOSED_BY_REASON[reason] = CONNECTIONS_CLOSED.labels(reason)
    counter.inc()


def raise_open_file_limit() -> int:
    """Raises this process's soft RLIMIT_NOFILE to its hard limit (children inherit it); the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def connection_limits(max_connections: int, backlog: int, open_files: int) -> tuple[int, int]:
    """(connection cap, accept backlog) for a worker allowed `open_files` descriptors: the cap stays
    below it by a burst of accepts and the reserve, so accept() does not fail with EMFILE."""
    backlog = max(16, min(backlog, open_files // (2 * BURST_BACKLOGS)))
    cap = min(max_connections, open_files - BURST_BACKLOGS * backlog - RESERVED_FDS)
    return max(cap, 1), backlog


class ConnectionLimits:
    """One worker's open connections: their count and, oldest first, those waiting for request headers."""

    _of_server: ClassVar[WeakKeyDictionary] = WeakKeyDictionary()

    def __init__(self, cap: int):
        self.cap = cap
        self.open = 0
        self.waiting: OrderedDict[GuardedH11Protocol, None] = OrderedDict()

    @classmethod
    def of(cls, server_state, cap: int) -> ConnectionLimits:
        found = cls._of_server.get(server_state)
        if found is None:  # the worker's first connection: it has started
            # What the worker built to start (modules, the app: ~150k objects) is never garbage; frozen, it is
            # out of every full collection. Under connection churn those ran about twice a second, and each
            # stopped the loop up to 1.2 s with it in, 0.7 s without (10,000 connections, a loaded 2-core host).
            gc.freeze()
            found = cls._of_server[server_state] = cls(cap)
        return found

    def admit(self) -> bool:
        """Counts a new connection; at the cap, makes room by closing the longest-waiting one (False: none waits)."""
        self.open += 1
        if self.open <= self.cap:
            return True
        if not self.waiting:
            return False
        oldest, _ = self.waiting.popitem(last=False)
        oldest.drop("evicted")
        return True


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the header and body deadlines and the connection cap. Needs a config
    with `header_timeout`, `body_timeout` and `max_connections` (featurehash.service.web.TCPListenerConfig)."""

    def __init__(self, config, server_state, app_state, _loop: asyncio.AbstractEventLoop | None = None):
        super().__init__(config, server_state, app_state, _loop)
        self.limits = ConnectionLimits.of(server_state, config.max_connections)
        self.header_timeout, self.body_timeout = config.header_timeout, config.body_timeout
        self.header_timer: asyncio.TimerHandle | None = None
        self.body_timer: asyncio.TimerHandle | None = None
        self.body_progress = 0.0
        self.send_timer: asyncio.TimerHandle | None = None
        self.unsent = 0  # bytes the transport held when last looked at, while writing is paused
        self.counted = False

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.counted = True
        if not self.limits.admit():
            self.drop("refused")
            return
        self._track(request_started=True)  # a new connection owes its headers from now on

    def connection_lost(self, exc: Exception | None) -> None:
        if self.counted:
            self.counted = False
            self.limits.open -= 1
        self.limits.waiting.pop(self, None)
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._track(request_started=True)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # idle keep-alive is uvicorn's timeout_keep_alive; the header deadline starts with the next request's bytes
        self._track(request_started=bool(self.conn.trailing_data[0]))

    def _track(self, request_started: bool) -> None:
        """Follows the peer's state after every event: waiting for headers, sending a body, or neither."""
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            if self not in self.limits.waiting:
                self.limits.waiting[self] = None
            if request_started and self.header_timer is None:
                self.header_timer = self.loop.call_later(self.header_timeout, self._headers_late)
            return
        self.limits.waiting.pop(self, None)
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None
        if state is h11.SEND_BODY:
            self.body_progress = self.loop.time()
            if self.body_timer is None:
                self.body_timer = self.loop.call_later(self.body_timeout, self._body_stalled)
        elif self.body_timer is not None:
            self.body_timer.cancel()
            self.body_timer = None

    def _headers_late(self) -> None:
        self.header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.limits.waiting.pop(self, None)
            self.drop("header_timeout")

    def _body_stalled(self) -> None:
        self.body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        now = self.loop.time()
        cycle = self.cycle
        # Not the client's stall: the application has not read what came, or has not yet asked for the body
        # of an `Expect: 100-continue` request (the client waits for our 100 Continue).
        if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
            self.body_progress = now
        waited = now - self.body_progress
        if waited < self.body_timeout:
            self.body_timer = self.loop.call_later(self.body_timeout - waited, self._body_stalled)
            return
        _count_closed("body_timeout")
        if cycle is not None and not cycle.response_started:
            self._send_408()
        if cycle is not None:  # the application's receive() now answers http.disconnect, its send() is dropped
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.send_timer is None:
            self.unsent = self.transport.get_write_buffer_size()
            self.send_timer = self.loop.call_later(self.body_timeout, self._send_stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.send_timer is not None:
            self.send_timer.cancel()
            self.send_timer = None

    def _send_stalled(self) -> None:
        """The answer waits on the client: fine while it takes bytes (a 4 MiB chunk may take a slow link a
        while), not when it has taken none for `body_timeout` seconds."""
        self.send_timer = None
        if not self.flow.write_paused or self.transport.is_closing():
            return
        unsent = self.transport.get_write_buffer_size()
        if unsent < self.unsent:
            self.unsent = unsent
            self.send_timer = self.loop.call_later(self.body_timeout, self._send_stalled)
            return
        self.drop("send_timeout")

    def _send_408(self) -> None:
        body = orjson.dumps({"detail": f"body: no part of the body arrived for {self.body_timeout:g} s",
                             "field": "body"})
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        try:
            self.transport.write(b"".join((
                self.conn.send(h11.Response(status_code=408, headers=headers, reason=b"Request Timeout")),
                self.conn.send(h11.Data(data=body)), self.conn.send(h11.EndOfMessage()))))
        except h11.LocalProtocolError:
            pass

    def drop(self, reason: str) -> None:
        """Closes at once with a reset: nothing is owed to a peer that has not sent its request (or does
        not read its answer), and neither side keeps the socket in TIME_WAIT or FIN_WAIT."""
        _count_closed(reason)
        self._cancel_timers()
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            except OSError:
                pass
        self.transport.abort()

    def _cancel_timers(self) -> None:
        for timer in (self.header_timer, self.body_timer, self.send_timer):
            if timer is not None:
                timer.cancel()
        self.header_timer = self.body_timer = self.send_timer = None
