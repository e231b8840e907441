"""Admission control (service/api/admission.py) on a real `featurehash serve` with a tiny budget: requests past
it are refused at once (503 "load" with Retry-After), small ones are always admitted, one that could
never fit is a 413, and every reservation is given back (after a success, an error, a refusal, a
client gone mid-body), as the featurehash_inflight_bytes gauge shows."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from featurehash.service.api.admission import JSON_BYTES_PER_NUMBER, Admission, Refused, json_decode_bytes
from service_support import NPY, ServiceProcess, npy_bytes, wait_until

BUDGET = 2**20
SMALL = 4096
CHUNK = 16384
STREAM_ALLOWANCE = 5 * CHUNK  # (stream_threads 2 + 3) chunks
SPEC = {"method": "rff", "input_dim": 16, "n_components": 64, "seed": 3, "params": {"gamma": 0.5}}
BIG_ROWS = 4800  # x 16 float64: 614,528 bytes of .npy: one fits the budget, two do not


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = ServiceProcess("admission", tmp_path_factory.mktemp("serve-admission"), inflight_bytes=BUDGET,
                             admit_small_bytes=SMALL, stream_chunk_bytes=CHUNK, max_body_bytes=4 * BUDGET)
    process.start().wait_ready()
    yield process
    assert not process.terminate()


@pytest.fixture(scope="module")
def map_id(server):
    with server.client() as http:
        return http.post("/v1/maps", json=SPEC).json()["id"]


@pytest.fixture(scope="module")
def big_body():
    return npy_bytes(np.random.default_rng(5).uniform(-1, 1, (BIG_ROWS, 16)))


def in_flight(http) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("featurehash_inflight_bytes "):
            return float(line.split()[1])
    raise AssertionError("no featurehash_inflight_bytes in /metrics")


def back_to_zero(http) -> bool:
    return wait_until(lambda: in_flight(http) == 0, timeout=5.0)


class HeldUpload:
    """A request whose body stops after its first bytes: its reservation stays in flight until closed."""

    def __init__(self, server, path: str, body: bytes):
        self.sock = socket.create_connection(("127.0.0.1", server.port))
        head = (f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: {NPY}\r\nAccept: {NPY}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.sock.sendall(head + body[:1000])

    def close(self) -> None:
        self.sock.close()


def _npy_post(http, path: str, body: bytes):
    return http.post(path, content=body, headers={"Content-Type": NPY, "Accept": NPY})


def test_past_the_budget_refused_at_once_small_still_admitted(server, map_id, big_body):
    path = f"/v1/maps/{map_id}/transform"
    with server.client() as http:
        held = HeldUpload(server, path, big_body)
        try:
            assert wait_until(lambda: in_flight(http) >= len(big_body), timeout=5.0)
            start = time.monotonic()
            refused = _npy_post(http, path, big_body)
            assert refused.status_code == 503, refused.text
            assert refused.headers["retry-after"] == "1"
            assert refused.json()["field"] == "load" and refused.json()["detail"].startswith("load: ")
            assert time.monotonic() - start < 5.0  # answered, not queued behind the held request
            # The connection stays usable (the refused body was read and dropped), and small requests
            # are admitted while the budget is taken.
            one = http.post(path, json={"vectors": [[0.25] * 16]})
            assert one.status_code == 200 and len(one.json()["features"][0]) == 64
            one_npy = _npy_post(http, path, npy_bytes(np.full((1, 16), 0.25)))
            assert one_npy.status_code == 200
            # A chunked body (no Content-Length) is refused as its chunks pass the budget.
            chunked = http.post(path, content=(big_body[i:i + 65536] for i in range(0, len(big_body), 65536)),
                                headers={"Content-Type": NPY})
            assert chunked.status_code == 503 and chunked.json()["field"] == "load"
            assert chunked.headers["retry-after"] == "1"
            assert in_flight(http) >= len(big_body)
        finally:
            held.close()  # the client goes away mid-body: its reservation is given back
        assert back_to_zero(http)
        admitted = _npy_post(http, path, big_body)
        assert admitted.status_code == 200 and admitted.content.startswith(b"\x93NUMPY")
        assert back_to_zero(http)


def test_released_after_success_errors_and_chunked_bodies(server, map_id, big_body):
    path = f"/v1/maps/{map_id}/transform"
    X = np.random.default_rng(6).uniform(-1, 1, (BIG_ROWS, 16))
    half_body = npy_bytes(X[:BIG_ROWS // 2])
    with server.client() as http:
        for response in (
                _npy_post(http, path, big_body),                                          # streamed npy answer
                _npy_post(http, path, npy_bytes(np.ones((BIG_ROWS, 17)))),                # 422 input_dim
                _npy_post(http, path, npy_bytes(np.full((BIG_ROWS, 16), np.nan))),       # 422 NaN
                _npy_post(http, "/v1/maps/no-such-map/transform", big_body),               # 404
                http.post(path, content=iter([half_body[:100_000], half_body[100_000:]]),  # chunked (reserved
                          headers={"Content-Type": NPY, "Accept": NPY}),                  # twice), streamed
                http.post(path, json={"vectors": X[:200].tolist()})):                     # JSON in, JSON out
            assert response.status_code in (200, 404, 422), response.text
            assert back_to_zero(http), response.status_code
        assert _npy_post(http, path, big_body).status_code == 200


def test_what_never_fits_is_a_413(server, map_id):
    path = f"/v1/maps/{map_id}/transform"
    with server.client() as http:
        too_big = _npy_post(http, path, npy_bytes(np.ones((9000, 16))))  # 1.1 MiB: within max_body_bytes
        assert too_big.status_code == 413 and too_big.json()["field"] == "body"
        assert "FEATUREHASH_INFLIGHT_BYTES" in too_big.json()["detail"] and "retry-after" not in too_big.headers
        # 128 KiB of JSON, but 33,000 short numbers: decoding them would cost ~1.8 MiB.
        costly = http.post(path, json={"vectors": [[0.5] * 16] * 2060})
        assert costly.status_code == 413 and costly.json()["field"] == "body"
        assert back_to_zero(http)
        assert http.post(path, json={"vectors": [[0.5] * 16] * 10}).status_code == 200


def test_kernel_work_is_reserved(server, map_id):
    with server.client() as http:
        X = np.random.default_rng(7).uniform(-1, 1, (400, 16)).tolist()
        response = http.post(f"/v1/maps/{map_id}/kernel", json={"x": X})  # 400^2 pairs: 2.6 MB of work arrays
        assert response.status_code == 413 and response.json()["field"] == "body", response.text
        assert http.post(f"/v1/maps/{map_id}/kernel", json={"x": X[:50]}).status_code == 200
        assert back_to_zero(http)


# -- the accounting itself ---------------------------------------------------------------------------------

def test_ticket_accounting():
    admission = Admission(budget=1000, small_bytes=100, stream_allowance=200, retry_after_seconds=2)
    big = admission.ticket(600, json_body=False)
    assert admission.in_flight == 800 and big.held == 800  # body and room for a streamed answer
    with pytest.raises(Refused) as refused:
        admission.ticket(300, json_body=False)
    assert (refused.value.status, refused.value.field, refused.value.headers) == (503, "load", {"Retry-After": "2"})
    assert admission.in_flight == 800
    small = admission.ticket(90, json_body=False)  # admitted past the budget
    assert admission.in_flight == 890
    with pytest.raises(Refused) as never:
        admission.ticket(900, json_body=False)
    assert never.value.status == 413 and never.value.field == "body"
    big.answer_needs(150)  # within the room already reserved
    assert big.held == 800
    for ticket in (big, small, big):
        ticket.release()
    assert admission.in_flight == 0


def test_a_small_json_body_is_reserved_with_its_decoding_as_it_arrives():
    """One reservation for a small declared JSON body: its bytes and its first piece's decoding together (it is
    always admitted); later pieces add their decoding; everything goes back on release."""
    import asyncio

    admission = Admission(budget=1000, small_bytes=100, stream_allowance=200, retry_after_seconds=2)
    pieces = [b"[[0.5,1.5],", b"[2.5,3.5]]"]
    ticket = admission.ticket(sum(map(len, pieces)), json_body=True)
    assert admission.in_flight == 0 and ticket.small

    async def receive():
        piece = pieces.pop(0)
        return {"type": "http.request", "body": piece, "more_body": bool(pieces)}

    receiving = ticket.receiving(receive)
    asyncio.run(receiving())
    assert admission.in_flight == ticket.held == 21 + json_decode_bytes(b"[[0.5,1.5],")
    asyncio.run(receiving())
    assert ticket.held == 21 + json_decode_bytes(b"[[0.5,1.5],") + json_decode_bytes(b"[2.5,3.5]]")
    ticket.release()
    assert admission.in_flight == 0
    large = admission.ticket(150, json_body=True)  # not small: its bytes and answer room reserved at once
    assert large.held == 150 + 200
    large.release()


def test_json_decode_cost_counts_numbers_and_objects():
    assert json_decode_bytes(b"[[0.5,1.5],[2.5,3.5]]") == JSON_BYTES_PER_NUMBER * 4
    assert json_decode_bytes(b'{"indices":[1],"values":[0.5]}') > 2 * JSON_BYTES_PER_NUMBER


def test_refused_before_a_100_continue_body_is_sent(server, map_id):
    """A client that waits for "100 Continue" gets the refusal without sending its body."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall((f"POST /v1/maps/{map_id}/transform HTTP/1.1\r\nHost: test\r\nContent-Type: {NPY}\r\n"
                      f"Expect: 100-continue\r\nContent-Length: {2 * BUDGET}\r\n\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413") and b'"field":"body"' in body
