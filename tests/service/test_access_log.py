"""The access log's batches (service/api/middleware.AccessLines): a request appends its fields; the lines are
formatted and written together, one JSON object a line, at the batch's size, its delay, or at once from a
thread without an event loop."""

from __future__ import annotations

import asyncio
import json
import os

from featurehash.service.api.middleware import AccessLines


def _entry(number: int) -> tuple:
    # the last entry waited for or spent compiling kernels: 2.5 s (service/first_calls)
    return (1795749007.5 + number, "POST", "/v1/maps/{map_id}/transform", 200, 0.0012345, b"id-%d" % number,
            "team-a", None, 2.5 if number == 5 else 0.0)


def _read_all(fd: int) -> list[dict]:
    os.set_blocking(fd, False)
    data = b""
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
    except BlockingIOError:
        pass
    return [json.loads(line) for line in data.splitlines()]


def test_lines_are_written_a_batch_at_a_time():
    read, write = os.pipe()
    lines = AccessLines(fd=write, delay=0.05, max_lines=3)
    try:
        lines.add(_entry(0))  # no event loop here: written at once
        assert _read_all(read) == [{"time": 1795749007.5, "method": "POST", "route": "/v1/maps/{map_id}/transform",
                                    "status": 200, "duration_ms": 1.234, "request_id": "id-0", "tenant": "team-a",
                                    "key_id": None}]

        async def requests():
            for number in range(1, 6):
                lines.add(_entry(number))
            first = _read_all(read)  # the batch of max_lines went out at once, the rest waits for the delay
            await asyncio.sleep(0.2)
            return first, _read_all(read)

        first, later = asyncio.run(requests())
        assert [line["request_id"] for line in first] == ["id-1", "id-2", "id-3"]
        assert [line["request_id"] for line in later] == ["id-4", "id-5"]
        # compile_ms only on the line of a request that compiled
        assert all(set(line) == set(AccessLines.FIELDS) - {"compile_ms"} for line in first + later[:1])
        assert later[1]["compile_ms"] == 2500.0 and set(later[1]) == set(AccessLines.FIELDS)
    finally:
        os.close(read)
        os.close(write)
