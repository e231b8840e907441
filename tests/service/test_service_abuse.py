"""Unauthenticated abuse: half-open connections, stalled bodies, metric series minted by callers.

A one-worker `featurehash serve` with a 1 s header and body timeout and a cap of 50 connections
(featurehash.service.connection_guard). The two-worker case is in test_service_auth_workers.py (its server).
"""

from __future__ import annotations

import random
import socket
import string
import time

import httpx
import numpy as np
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from featurehash.service.api.middleware import METHODS
from featurehash.service.connection_guard import connection_limits
from service_support import ServiceProcess, npy_bytes, start_all, stop_all

CAP = 50
GUARD = {"header_timeout_seconds": 1, "body_timeout_seconds": 1, "max_connections": CAP}
PARTIAL = b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Never: "
SPEC = {"method": "rff", "input_dim": 3, "n_components": 8, "seed": 5}


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    server = start_all([ServiceProcess("guarded-1w", tmp_path_factory.mktemp("guarded-1w"), **GUARD)])[0]
    yield server
    problems = stop_all([server])
    assert not problems, problems


def half_open(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(PARTIAL)
    return sock


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes (FIN or reset) within `seconds`; what it sent first is ignored."""
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        pass
    return False


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    """One response (with Content-Length) from a raw socket: status and body."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            raise ConnectionError("closed before an answer")
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        more = sock.recv(65536)
        if not more:
            raise ConnectionError("closed within an answer")
        body += more
    return int(head.split(b" ", 2)[1]), body


def closed_counts(server: ServiceProcess) -> dict[str, float]:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return {sample.labels["reason"]: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "featurehash_connections_closed_total"}


def test_limits_stay_below_the_open_file_limit():
    assert connection_limits(10_000, 2048, 20_000) == (10_000, 2048)
    assert connection_limits(10_000, 2048, 1024) == (256, 128)  # the accept backlog shrinks with the limit
    cap, backlog = connection_limits(10**6, 2048, 65536)
    assert cap + 4 * backlog < 65536


def test_half_open_connections_make_room_and_time_out(one_worker):
    before = closed_counts(one_worker)
    held = [half_open(one_worker.port) for _ in range(3 * CAP)]
    try:
        start = time.monotonic()
        answer = httpx.get(f"{one_worker.url}/healthz", timeout=10)  # a new connection past the cap gets in
        assert answer.status_code == 200 and time.monotonic() - start < 5.0
        # every held one is closed: the oldest at once, to admit newer ones, the rest at the 1 s header deadline
        assert all(closed_within(sock, 10.0) for sock in held)
    finally:
        for sock in held:
            sock.close()
    after = closed_counts(one_worker)
    evicted = after.get("evicted", 0) - before.get("evicted", 0)
    timed_out = after.get("header_timeout", 0) - before.get("header_timeout", 0)
    assert evicted >= CAP and timed_out >= 1, after  # (a slow host may time some out before they are evicted)
    assert evicted + timed_out >= 3 * CAP, after


def test_a_kept_alive_connection_may_idle_but_must_finish_its_next_headers_in_time(one_worker):
    with socket.create_connection(("127.0.0.1", one_worker.port), timeout=10) as sock:
        for idle in (1.5, 0.0):  # idle past the header timeout, within uvicorn's 5 s keep-alive: still open
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            assert read_answer(sock)[0] == 200
            time.sleep(idle)
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # and never the rest
        start = time.monotonic()
        assert closed_within(sock, 10.0)
        assert time.monotonic() - start > 0.5


def test_a_stalled_body_gets_a_408_and_a_slow_one_is_served(one_worker):
    body = orjson.dumps(SPEC)
    with socket.create_connection(("127.0.0.1", one_worker.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/maps HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body[:5])
        status, content = read_answer(sock)
        assert closed_within(sock, 5.0)
    assert status == 408 and orjson.loads(content)["field"] == "body"

    # a body that keeps coming, a few bytes every 0.3 s for longer than the timeout, is read to the end
    with socket.create_connection(("127.0.0.1", one_worker.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/maps HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        step = len(body) // 6 + 1
        for at in range(0, len(body), step):
            sock.sendall(body[at:at + step])
            time.sleep(0.3)
        assert read_answer(sock)[0] in (200, 201)
    assert closed_counts(one_worker).get("body_timeout", 0) >= 1


def test_an_answer_the_client_does_not_take_is_cut_off(one_worker):
    spec = {"method": "rff", "input_dim": 16, "n_components": 1024, "seed": 7}
    map_id = httpx.post(f"{one_worker.url}/v1/maps", json=spec, timeout=30).json()["id"]
    body = npy_bytes(np.ones((2048, 16)))  # an 8 MiB answer: more than the socket buffers hold
    before = closed_counts(one_worker).get("send_timeout", 0)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", one_worker.port))
        sock.sendall(b"POST /v1/maps/%s/transform HTTP/1.1\r\nHost: test\r\nContent-Type: application/x-npy\r\n"
                     b"Accept: application/x-npy\r\nContent-Length: %d\r\n\r\n" % (map_id.encode(), len(body))
                     + body)
        deadline = time.monotonic() + 20  # and read nothing
        while closed_counts(one_worker).get("send_timeout", 0) == before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert closed_counts(one_worker).get("send_timeout", 0) == before + 1
        assert closed_within(sock, 10.0)

    # a client that reads slowly, pausing 0.5 s after every 2 MiB (the whole answer takes longer than the
    # 1 s timeout), gets all of it
    with socket.create_connection(("127.0.0.1", one_worker.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/maps/%s/transform HTTP/1.1\r\nHost: test\r\nContent-Type: application/x-npy\r\n"
                     b"Accept: application/x-npy\r\nContent-Length: %d\r\n\r\n" % (map_id.encode(), len(body))
                     + body)
        answer, paused_at = b"", 0
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        head, _, content = answer.partition(b"\r\n\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        while len(content) < length:
            more = sock.recv(1 << 20)
            assert more, "the server closed a connection that was reading"
            content += more
            if len(content) - paused_at >= 2 << 20:
                paused_at = len(content)
                time.sleep(0.5)
    assert head.startswith(b"HTTP/1.1 200") and len(content) == len(npy_bytes(np.zeros((2048, 1024), np.float32)))
    assert closed_counts(one_worker).get("send_timeout", 0) == before + 1


def test_connections_busy_with_a_request_are_not_evicted(one_worker):
    """At the cap with every connection inside a request, a new one is refused rather than one of them cut."""
    before = closed_counts(one_worker)
    body = orjson.dumps(SPEC)
    busy = []
    try:
        for _ in range(CAP):
            sock = socket.create_connection(("127.0.0.1", one_worker.port), timeout=10)
            sock.sendall(b"POST /v1/maps HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                         b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
            assert sock.recv(65536).startswith(b"HTTP/1.1 100")  # its headers are in: the body is being read
            sock.sendall(body[:5])
            busy.append(sock)
        try:
            newcomer = socket.create_connection(("127.0.0.1", one_worker.port), timeout=10)
        except ConnectionResetError:
            pass   # refused before connect() returned: on a loaded machine the server's reset can come first
        else:
            with newcomer:
                assert closed_within(newcomer, 10.0)
        assert [read_answer(sock)[0] for sock in busy] == [408] * CAP  # cut at the body timeout, not before
    finally:
        for sock in busy:
            sock.close()
    after = closed_counts(one_worker)
    assert after.get("refused", 0) - before.get("refused", 0) >= 1, after
    assert after.get("body_timeout", 0) - before.get("body_timeout", 0) >= CAP, after


def test_random_method_tokens_add_no_series_and_log_other(one_worker):
    rng = random.Random(27)
    tokens = ["".join(rng.choices(string.ascii_uppercase, k=10)) for _ in range(300)]
    with httpx.Client(base_url=one_worker.url, timeout=10) as http:
        before = http.get("/metrics").text
        for token in tokens:
            assert http.request(token, "/healthz").status_code == 405
        after = http.get("/metrics").text
    methods = {sample.labels["method"] for family in text_string_to_metric_families(after)
               for sample in family.samples if "method" in sample.labels}
    assert methods <= METHODS | {"other"} and "other" in methods
    def series(text: str) -> int:
        return sum(1 for line in text.splitlines() if line and not line.startswith("#"))

    assert series(after) - series(before) <= 40  # one (other, /healthz, 405) counter and histogram, not 300 of each
    logged = [orjson.loads(line) for line in one_worker.log_path.read_text().splitlines() if line.startswith("{")]
    assert not {entry["method"] for entry in logged} - (METHODS | {"other"})
