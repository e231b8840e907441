"""ASGI middleware: the request id, per-route metrics and the access log, the body-size limit."""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import re
import time
from http import HTTPStatus

import orjson

from ..first_calls import CLOCK as FIRST_CALLS
from ..first_calls import HEADER as COMPILED_HEADER
from ..first_calls import finish, new_clock
from ..first_calls import spent as compile_seconds
from ..first_calls import header_value as compiled_header
from .admission import CURRENT, Admission, Refused, refuse_unread
from .errors import BodyTooLarge, error_response
from .metrics import LATENCY, REQUESTS
from .plain_route import PlainDispatch
from .quotas import LEASE, release_lease

REQUEST_ID_HEADER = b"x-request-id"
# Bodies are read as sent: a compressed one is refused (415) rather than decoded (no decompression
# bombs, no second size limit to keep) or misread as broken JSON.
ACCEPTED_CONTENT_ENCODINGS = (b"", b"identity")
# A caller's id is kept when it is a short token (it ends up in logs and headers); otherwise one is made.
_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:/+=@-]{1,128}")
access_logger = logging.getLogger("featurehash.access")


def configure_access_log(level: str) -> None:
    """JSON lines on stderr at `level` ("off": none); 5xx answers are logged as warnings.
    The logger's level decides what is written; the lines go to stderr in batches (`AccessLines`)."""
    access_logger.propagate = False
    access_logger.setLevel(logging.CRITICAL + 1 if level == "off" else level.upper())


class AccessLines:
    """Access-log lines written to stderr in one write per batch, at most `delay` seconds after the
    first line of the batch (or at `max_lines`, or at exit): a request costs an append of its fields, not a
    LogRecord, a lock and a write system call. The lines are formatted at the write, a batch in one loop (each
    formatted between two requests' code cost about three times as much: the encoder cold every time)."""

    FIELDS = ("time", "method", "route", "status", "duration_ms", "request_id", "tenant", "key_id", "compile_ms")

    def __init__(self, fd: int = 2, delay: float = 0.2, max_lines: int = 256):
        self.fd, self.delay, self.max_lines = fd, delay, max_lines
        self._entries: list[tuple] = []
        self._scheduled = False
        atexit.register(self.flush)

    def add(self, entry: tuple) -> None:
        """One request's values of FIELDS (the duration in seconds, the request id as bytes)."""
        self._entries.append(entry)
        if len(self._entries) >= self.max_lines:
            self.flush()
        elif not self._scheduled:
            try:
                asyncio.get_running_loop().call_later(self.delay, self.flush)
                self._scheduled = True
            except RuntimeError:  # no event loop (called from a thread): write now
                self.flush()

    def flush(self) -> None:
        self._scheduled = False
        if self._entries:
            entries, self._entries = self._entries, []
            try:
                os.write(self.fd, b"".join(map(_line, entries)))
            except OSError:
                pass


def _line(entry: tuple) -> bytes:
    when, method, route, status, seconds, request_id, tenant, key_id, compiling = entry
    fields = {"time": when, "method": method, "route": route, "status": status,
              "duration_ms": round(seconds * 1e3, 3), "request_id": request_id.decode(), "tenant": tenant,
              "key_id": key_id}
    if compiling > 0.0:   # waited for or spent compiling kernels (first_calls): only the lines that did
        fields["compile_ms"] = round(compiling * 1e3, 3)
    return orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE)


access_lines = AccessLines()


class RequestRecorder:
    """Gives every request an id (the caller's X-Request-ID, or a new one), echoes it in the answer, and
    records method, route template, status and duration as metrics and as one access-log line; refuses
    a body over `max_body_bytes` with a 413, by its Content-Length or as it arrives. One middleware,
    one pass over the headers: each layer costs every request a coroutine and a wrapped send."""

    def __init__(self, app, max_body_bytes: int, admission: Admission | None = None):
        self.app = PlainDispatch(app)  # the plain routes straight from here (plain_route.PlainDispatch)
        self.max_body_bytes = max_body_bytes
        self.admission = admission

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = declared = encoding = media_type = None
        for name, value in scope["headers"]:
            if name == REQUEST_ID_HEADER:
                given = value
            elif name == b"content-length":
                declared = value
            elif name == b"content-encoding":
                encoding = value
            elif name == b"content-type":
                media_type = value
        request_id = given if given is not None and _REQUEST_ID.fullmatch(given) else os.urandom(16).hex().encode()
        status = 500
        clock = new_clock()
        FIRST_CALLS.set(clock)   # this request's task: the routes, and the threads they run in its context

        async def send_with_id(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (REQUEST_ID_HEADER, request_id)]
                compiled = compiled_header(clock)
                if compiled is not None:
                    message["headers"].append((COMPILED_HEADER, compiled))
            elif not message.get("more_body") and LEASE in scope.get("state", _NO_STATE):
                # a concurrency lease goes back before the last byte: the client's next request finds it free
                await release_lease(scope)
            await send(message)

        start = time.perf_counter()
        try:
            if encoding is not None and encoding.strip().lower() not in ACCEPTED_CONTENT_ENCODINGS:
                await _encoded_body(encoding)(scope, receive, send_with_id)
            elif declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
                await self._too_large()(scope, receive, send_with_id)
            elif self.admission is None:
                await self.app(scope, self._limited(receive, declared), send_with_id)
            else:
                await self._admitted(scope, receive, send_with_id, declared, media_type)
        finally:
            if LEASE in scope.get("state", _NO_STATE):  # no answer sent through here (a 500, a cut connection)
                await release_lease(scope)
            self._record(scope, status, time.perf_counter() - start, request_id, clock)
            if len(clock) > 2:
                finish(clock)

    async def _admitted(self, scope, receive, send, declared: bytes | None, media_type: bytes | None) -> None:
        """The app, within admission control's budget (service/api/admission.py): refused at once past it."""
        try:
            ticket = self.admission.ticket(int(declared) if declared is not None and declared.isdigit() else None,
                                           media_type is None or b"json" in media_type)
        except Refused as refused:
            await refuse_unread(refused, scope, receive, send)
            return
        token = CURRENT.set(ticket)
        try:
            await self.app(scope, ticket.receiving(self._limited(receive, declared)), send)
        finally:
            CURRENT.reset(token)
            ticket.release()

    def _too_large(self):
        return error_response(413, "body", f"larger than the limit of {self.max_body_bytes} bytes; "
                              "send smaller batches")

    def _limited(self, receive, declared: bytes | None):
        """`receive`, raising BodyTooLarge once the body passes the limit (chunked bodies declare no length); as
        is when the body declared a length within the limit (the HTTP server delivers no more than declared)."""
        if declared is not None and declared.isdigit():
            return receive
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
            return message

        return limited_receive

    @staticmethod
    def _record(scope, status: int, seconds: float, request_id: bytes, clock: list[float]) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        method = scope["method"]
        if method not in METHODS:  # any token is a valid method: a caller must not mint label values
            method = "other"
        # The principal the auth check put at request.state.principal (none before it: a 401, /healthz).
        principal = scope.get("state", _NO_STATE).get("principal")
        tenant = principal.tenant if principal is not None else NO_TENANT
        counter, latency = _children(method, template, status, tenant)
        counter.inc()
        latency.observe(seconds)
        if access_logger.isEnabledFor(logging.WARNING if status >= 500 else logging.INFO):
            access_lines.add((time.time(), method, template, status, seconds, request_id, tenant,
                              principal.key_id if principal is not None else None, compile_seconds(clock)))


def _encoded_body(encoding: bytes):
    return error_response(415, "content-encoding", f"{encoding.decode('latin-1')!r} is not accepted: send the "
                          "body uncompressed (Content-Encoding absent or identity)")


# Every label value is from a fixed set: the method (or "other"), a route template (or "unmatched"), a
# status the application sent (a registered one, or its class: "5xx") and the tenant (one the keys file
# names, as only its keys resolve to a principal; "other" for requests without one), so /metrics stays small
# whatever callers send. The key itself is never a label nor logged (its name, key_id, is logged).
METHODS = frozenset({"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"})
NO_TENANT = "other"
_NO_STATE: dict = {}
_STATUSES = frozenset(int(status) for status in HTTPStatus)
_CHILDREN: dict[tuple[str, str, int, str], tuple] = {}


def _children(method: str, template: str, status: int, tenant: str) -> tuple:
    """The metric children of one (method, route template, status, tenant): labels() looked up once."""
    key = (method, template, status, tenant)
    found = _CHILDREN.get(key)
    if found is None:
        code = str(status) if status in _STATUSES else f"{status // 100}xx"
        found = _CHILDREN[key] = (REQUESTS.labels(method, template, code, tenant),
                                  LATENCY.labels(method, template, tenant))
    return found
