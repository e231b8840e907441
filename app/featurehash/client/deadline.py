"""The total deadline of one HTTP request: connecting, sending and every read of the answer together.

httpx's timeouts bound each socket operation, so a server sending a byte every few seconds is never cut. Here
the client's own transport gets a network backend (httpcore's extension point, the one layer that sees every
socket operation) whose streams give each connect, TLS handshake, write and read only the time left before
the deadline of the request under way: the operation that would run past it fails with httpx's
ConnectTimeout, WriteTimeout or ReadTimeout at the deadline. The deadline lives in a context variable, set
by the driver around one attempt (`within`), so a pooled connection serves each request under that
request's deadline; outside `within` the streams behave as the backend they wrap.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

import httpcore
import httpx

_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("featurehash_client_deadline", default=None)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Run one request attempt under a deadline `seconds` from now."""
    token = _DEADLINE.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def left(timeout: float | None, error: type[Exception]) -> float | None:
    """The time an operation may take: its own timeout, at most what is left before the deadline; `error`
    (an httpcore timeout) once the deadline has passed."""
    current = _DEADLINE.get()
    if current is None:
        return timeout
    remaining = current[0] - time.monotonic()
    if remaining <= 0:
        raise error(message())
    return remaining if timeout is None else min(timeout, remaining)


def passed() -> bool:
    current = _DEADLINE.get()
    return current is not None and time.monotonic() >= current[0]


def message() -> str:
    return f"the request's {_DEADLINE.get()[1]:g} s deadline (connect, send and every read together) passed"


@contextmanager
def _named(error: type[Exception]) -> Iterator[None]:
    """A timeout of an operation the deadline cut short, said to be the deadline's."""
    try:
        yield
    except httpcore.TimeoutException:
        if passed():
            raise error(message()) from None
        raise


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _named(httpcore.ReadTimeout):
            return self._inner.read(max_bytes, left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with _named(httpcore.WriteTimeout):
            self._inner.write(buffer, left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None, timeout: float | None = None):
        with _named(httpcore.ConnectTimeout):
            return _Stream(self._inner.start_tls(ssl_context, server_hostname,
                                                 left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend):
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options=None) -> httpcore.NetworkStream:
        with _named(httpcore.ConnectTimeout):
            return _Stream(self._inner.connect_tcp(host, port, left(timeout, httpcore.ConnectTimeout),
                                                   local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        with _named(httpcore.ConnectTimeout):
            return _Stream(self._inner.connect_unix_socket(path, left(timeout, httpcore.ConnectTimeout),
                                                           socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _AsyncStream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream):
        self._inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _named(httpcore.ReadTimeout):
            return await self._inner.read(max_bytes, left(timeout, httpcore.ReadTimeout))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with _named(httpcore.WriteTimeout):
            await self._inner.write(buffer, left(timeout, httpcore.WriteTimeout))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context, server_hostname: str | None = None, timeout: float | None = None):
        with _named(httpcore.ConnectTimeout):
            return _AsyncStream(await self._inner.start_tls(ssl_context, server_hostname,
                                                            left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _AsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend):
        self._inner = inner

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options=None) -> httpcore.AsyncNetworkStream:
        with _named(httpcore.ConnectTimeout):
            return _AsyncStream(await self._inner.connect_tcp(host, port, left(timeout, httpcore.ConnectTimeout),
                                                              local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        with _named(httpcore.ConnectTimeout):
            return _AsyncStream(await self._inner.connect_unix_socket(
                path, left(timeout, httpcore.ConnectTimeout), socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def transport() -> httpx.HTTPTransport:
    """httpx's transport, its connections kept to the deadline of the request they serve."""
    made = httpx.HTTPTransport()
    # httpx takes no network backend; its pool (httpcore's ConnectionPool) does.
    made._pool._network_backend = _Backend(made._pool._network_backend)
    return made


def async_transport() -> httpx.AsyncHTTPTransport:
    made = httpx.AsyncHTTPTransport()
    made._pool._network_backend = _AsyncBackend(made._pool._network_backend)
    return made
