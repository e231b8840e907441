"""ASGI middleware: the body-size limit and per-route request metrics."""

from __future__ import annotations

import time

from .errors import BodyTooLarge, error_response
from .metrics import LATENCY, REQUESTS


class BodyLimitAndMetrics:
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
            self._record(scope, 413, 0.0)
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

        status = 500

        async def send_with_status(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, limited_receive, send_with_status)
        finally:
            self._record(scope, status, time.perf_counter() - start)

    @staticmethod
    def _record(scope, status: int, seconds: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        REQUESTS.labels(scope["method"], template, str(status)).inc()
        LATENCY.labels(scope["method"], template).observe(seconds)
