"""A lean HTTP/1.1 keep-alive client for latency and load figures (the bench's own cost stays small).

Requests are prebuilt bytes; answers are read by Content-Length (the service and the floor
both send it for these sizes) or chunked encoding, and returned undecoded: both sides of a
ratio pay the same client cost, so the ratios show the servers.
"""

from __future__ import annotations

import asyncio
import io
import socket
import time

import numpy as np


def request_bytes(path: str, body: bytes, content_type: str, accept: str = "*/*") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: {content_type}\r\nAccept: {accept}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _parse_head(head: bytes) -> tuple[int, int | None]:
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, length


class Connection:
    """Blocking, one request at a time; the read buffer is a bytearray consumed from the front."""

    def __init__(self, host: str, port: int):
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()

    def _fill(self) -> None:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buffer += data

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._fill()
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out

    def _line(self, end: bytes = b"\r\n") -> bytes:
        while (at := self.buffer.find(end)) < 0:
            self._fill()
        return self._take(at + len(end))[:-len(end)]

    def request(self, raw: bytes) -> tuple[int, bytes]:
        self.sock.sendall(raw)
        status, length = _parse_head(self._line(b"\r\n\r\n"))
        if length is None:
            return status, self._chunked()
        return status, self._take(length)

    def _chunked(self) -> bytes:
        parts = []
        while True:
            size = int(self._line().split(b";")[0], 16)
            parts.append(self._take(size + 2)[:-2])
            if size == 0:
                return b"".join(parts)

    def request_array(self, raw: bytes) -> tuple[int, np.ndarray | bytes]:
        """Like `request`, for an .npy answer, read as a client that wants the ndarray would: the bytes go
        from the socket straight into the array, allocated once the .npy header is read (no copy of
        the whole body, no numpy.load). Answers other than 200 come back as bytes."""
        self.sock.sendall(raw)
        status, length = _parse_head(self._line(b"\r\n\r\n"))
        body = _Body(self, length)
        if status != 200:
            return status, body.read(body.remaining()) if length is not None else self._chunked()
        lead = body.read(8)  # magic and version; then the header's size in 2 (version 1) or 4 bytes
        size_field = body.read(2 if lead[6] == 1 else 4)
        stream = io.BytesIO(lead + size_field + body.read(int.from_bytes(size_field, "little")))
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}[np.lib.format.read_magic(stream)]
        shape, fortran_order, dtype = read_header(stream)
        array = np.empty(shape, dtype=dtype, order="F" if fortran_order else "C")
        body.read_into(memoryview(array.reshape(-1, order="A")).cast("B"))
        body.finish()
        return status, array

    def _read_into(self, view: memoryview) -> None:
        """Fill `view` from the bytes already read, then from the socket."""
        taken = min(len(view), len(self.buffer))
        view[:taken] = self.buffer[:taken]
        del self.buffer[:taken]
        while taken < len(view):
            received = self.sock.recv_into(view[taken:])
            if not received:
                raise ConnectionError("server closed the connection")
            taken += received

    def close(self) -> None:
        self.sock.close()


class _Body:
    """An answer's body of Content-Length `length`, or chunked (None), read across chunk boundaries."""

    def __init__(self, connection: Connection, length: int | None):
        self.connection, self.chunked = connection, length is None
        self.left = length or 0
        self.first_chunk = True

    def remaining(self) -> int:
        return self.left

    def read(self, n: int) -> bytes:
        out = bytearray(n)
        self.read_into(memoryview(out))
        return bytes(out)

    def read_into(self, view: memoryview) -> None:
        done = 0
        while done < len(view):
            if self.left == 0:
                self._next_chunk()
            step = min(self.left, len(view) - done)
            self.connection._read_into(view[done:done + step])
            done += step
            self.left -= step

    def _next_chunk(self) -> None:
        if not self.chunked:
            raise ConnectionError("the body ended early")
        if not self.first_chunk:
            self.connection._line()  # the CRLF that closes the previous chunk
        self.first_chunk = False
        self.left = int(self.connection._line().split(b";")[0], 16)
        if self.left == 0:
            raise ConnectionError("the body ended early")

    def finish(self) -> None:
        """Read the chunked body's end (the last CRLF, the empty chunk, the empty trailer)."""
        if not self.chunked:
            return
        if not self.first_chunk:
            self.connection._line()
        if int(self.connection._line().split(b";")[0], 16):
            raise ConnectionError("more body than the .npy header announced")
        self.connection._line()


def latencies_us(connection: Connection, requests: list[bytes], count: int) -> np.ndarray:
    samples = np.empty(count)
    clock = time.perf_counter_ns
    for i in range(count):
        start = clock()
        status, _ = connection.request(requests[i % len(requests)])
        samples[i] = clock() - start
        if status != 200:
            raise RuntimeError(f"status {status}")
    return samples / 1e3


async def _client(host: str, port: int, requests: list[bytes], stop_at: float, offset: int) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    done, loop = 0, asyncio.get_running_loop()
    try:
        while loop.time() < stop_at:
            writer.write(requests[(offset + done) % len(requests)])
            head = await reader.readuntil(b"\r\n\r\n")
            status, length = _parse_head(head[:-4])
            if status != 200 or length is None:
                raise RuntimeError(f"status {status}, content-length {length}")
            await reader.readexactly(length)
            done += 1
    finally:
        writer.close()
    return done


def throughput(host: str, port: int, requests: list[bytes], connections: int, seconds: float) -> float:
    """Requests/s over `connections` keep-alive connections, each sending its next request on an answer."""
    async def run() -> float:
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + seconds
        start = time.perf_counter()
        counts = await asyncio.gather(*(_client(host, port, requests, stop_at, c) for c in range(connections)))
        return sum(counts) / (time.perf_counter() - start)
    return asyncio.run(run())
