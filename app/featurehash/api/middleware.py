"""ASGI middleware: the request id, per-route metrics and the access log; the body-size limit."""

from __future__ import annotations

import logging
import re
import sys
import time
import uuid

import orjson

from .errors import BodyTooLarge, error_response
from .metrics import LATENCY, REQUESTS

REQUEST_ID_HEADER = b"x-request-id"
# A caller's id is kept when it is a short token (it ends up in logs and headers); otherwise one is made.
_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:/+=@-]{1,128}")
access_logger = logging.getLogger("featurehash.access")


def configure_access_log(level: str) -> None:
    """JSON lines on stderr at `level` ("off": none); 5xx answers are logged as warnings."""
    access_logger.propagate = False
    if level == "off":
        access_logger.setLevel(logging.CRITICAL + 1)
        return
    access_logger.setLevel(level.upper())
    if not access_logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        access_logger.addHandler(handler)


class RequestRecorder:
    """Gives every request an id (the caller's X-Request-ID, or a new one), echoes it in the answer, and
    records method, route template, status and duration as metrics and as one access-log line."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or ()).get(REQUEST_ID_HEADER)
        request_id = given if given is not None and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex.encode()
        status = 500

        async def send_with_id(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (REQUEST_ID_HEADER, request_id)]
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self._record(scope, status, time.perf_counter() - start, request_id.decode())

    @staticmethod
    def _record(scope, status: int, seconds: float, request_id: str) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        REQUESTS.labels(scope["method"], template, str(status)).inc()
        LATENCY.labels(scope["method"], template).observe(seconds)
        level = logging.WARNING if status >= 500 else logging.INFO
        if access_logger.isEnabledFor(level):
            access_logger.log(level, orjson.dumps({
                "time": time.time(), "method": scope["method"], "route": template, "status": status,
                "duration_ms": round(seconds * 1e3, 3), "request_id": request_id}).decode())


class BodyLimit:
    """Refuses a body over `max_body_bytes` with a 413, by its Content-Length or as it arrives."""

    def __init__(self, app, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            response = error_response(413, "body", f"larger than the limit of {self.max_body_bytes} bytes; "
                                      "send smaller batches")
            await response(scope, receive, send)
            return

        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
            return message

        await self.app(scope, limited_receive, send)
