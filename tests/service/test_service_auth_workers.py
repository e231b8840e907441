"""A server with an API key, a keys file and two uvicorn workers (featurehash.service.web) (one server for all).

/v1 routes need `Authorization: Bearer <key>`; /healthz, /readyz and /metrics stay open.
With --workers 2 the launcher gives the workers a Prometheus multiprocess directory and
/metrics adds up both workers' counts, and its files stay small whatever methods callers send.
SIGHUP makes both workers re-read the keys file in place (none restarts, no request is dropped) once the
launcher has validated it; a bad file restarts nothing, and a worker started while it is bad serves the last
good keys.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import socket
import string
import threading

import httpx
import numpy as np
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from featurehash.service.api.middleware import METHODS
from featurehash.client import FeatureHashAPIError, FeatureHashClient
from featurehash.maps import create_map
from service_support import (NPY, ServiceProcess, children, cmdline, list_all, load_npy, npy_bytes, start_all,
                             wait_until)

# Its servers start once, on one xdist worker (module fixtures are per worker).
pytestmark = pytest.mark.xdist_group("service_auth_workers")

KEY = "secret"
AUTH = {"Authorization": f"Bearer {KEY}"}
SPEC = {"method": "nrff", "input_dim": 5, "n_components": 24, "seed": 21, "params": {"gamma": 1.5}}


def _keys_document(key: str) -> bytes:
    """A keys file of one reader key; every key's document has the same size (the digest is what differs)."""
    return orjson.dumps({"keys": [{"name": "reader", "tenant": "team-a", "scopes": ["read"],
                                   "sha256": hashlib.sha256(key.encode()).hexdigest()}]})


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-keyed")
    keys_file = root / "keys.json"
    keys_file.write_bytes(_keys_document("reader-0"))
    # a 1 s header deadline: test_two_workers_bound_metrics_and_connections checks both workers apply it
    server = ServiceProcess("keyed-2-workers", root / "data", workers=2, api_key=KEY, header_timeout_seconds=1,
                            keys_file=str(keys_file))
    server.keys_file = keys_file
    start_all([server])
    yield server
    problems = server.terminate()
    assert not problems, problems


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEY}"},
                                     {"Authorization": KEY}, {"Authorization": "Bearer"},
                                     {"Authorization": f"Bearer {KEY.upper()}"}, {"X-API-Key": KEY}],
                         ids=["none", "wrong_key", "basic_scheme", "no_scheme", "empty_key", "key_case",
                              "other_header"])
def test_v1_routes_need_the_key(keyed_server, headers):
    with keyed_server.client() as http:
        with keyed_server.client(headers=AUTH) as authed:
            before = list_all(authed)
        responses = {
            "list": http.get("/v1/maps", headers=headers),
            "create": http.post("/v1/maps", json=SPEC, headers=headers),
            "get": http.get("/v1/maps/nrff-v1-000000000000000000000000", headers=headers),
            "delete": http.delete("/v1/maps/nrff-v1-000000000000000000000000", headers=headers),
            "transform": http.post("/v1/maps/x/transform", json={"vectors": [[1.0] * 5]}, headers=headers),
            "hash": http.post("/v1/maps/x/hash", json={"vectors": [[1.0] * 5]}, headers=headers),
            "kernel": http.post("/v1/maps/x/kernel", json={"x": [[1.0] * 5]}, headers=headers),
        }
        for name, response in responses.items():
            assert response.status_code == 401, (name, response.text)
            assert response.headers.get("WWW-Authenticate", "").startswith("Bearer"), name
        with keyed_server.client(headers=AUTH) as authed:
            assert list_all(authed) == before  # the refused create stored nothing


def test_the_key_opens_v1_and_probes_stay_open(keyed_server):
    with keyed_server.client() as http:
        for path in ("/healthz", "/readyz", "/metrics"):
            assert http.get(path).status_code == 200, path
        created = http.post("/v1/maps", json=SPEC, headers=AUTH)
        assert created.status_code in (200, 201), created.text
        assert http.get("/v1/maps", headers=AUTH).status_code == 200
        assert http.get(f"/v1/maps/{created.json()['id']}", headers=AUTH).json() == created.json()

    with FeatureHashClient(keyed_server.url, api_key=KEY) as fh:
        spec = fh.create_map("nrff", 5, 24, seed=21, params={"gamma": 1.5})
        X = np.random.default_rng(1).normal(size=(3, 5))
        np.testing.assert_array_equal(fh.transform(spec["id"], X, binary=True), create_map(SPEC).transform(X))
    with FeatureHashClient(keyed_server.url, api_key="wrong") as fh, pytest.raises(FeatureHashAPIError) as refused:
        fh.list_maps()
    assert refused.value.status == 401


def _count(text: str, name: str, **labels: str) -> float:
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()))


def test_two_workers_serve_and_metrics_add_up(keyed_server):
    uvicorn = [pid for pid in children(keyed_server.pid) if "featurehash.service.web" in cmdline(pid)]
    assert len(uvicorn) == 1, {pid: cmdline(pid) for pid in children(keyed_server.pid)}
    workers = [pid for pid in children(uvicorn[0]) if "multiprocessing.spawn" in cmdline(pid)
               or "multiprocessing-fork" in cmdline(pid)]
    assert len(workers) == 2, {pid: cmdline(pid) for pid in children(uvicorn[0])}

    X = np.random.default_rng(2).normal(size=(4, 5))
    expected = create_map(SPEC).transform(X)
    route = {"method": "POST", "route": "/v1/maps/{map_id}/transform", "status": "200"}
    with keyed_server.client(headers=AUTH) as http:
        map_id = http.post("/v1/maps", json=SPEC).json()["id"]
        before = http.get("/metrics").text
    for _ in range(12):  # a new connection each time, so both workers get some
        with keyed_server.client(headers=AUTH) as http:
            response = http.post(f"/v1/maps/{map_id}/transform", content=npy_bytes(X),
                                 headers={"Content-Type": NPY, "Accept": NPY})
            assert response.status_code == 200, response.text
            np.testing.assert_array_equal(load_npy(response.content), expected)
    with keyed_server.client() as http:
        metrics = http.get("/metrics")
    assert metrics.status_code == 200
    text = metrics.text
    assert "featurehash_requests_total" in text and "featurehash_batch_rows" in text
    assert _count(text, "featurehash_requests_total", **route) - _count(before, "featurehash_requests_total",
                                                                      **route) == 12
    assert _count(text, "featurehash_batch_rows_sum", operation="transform") \
        - _count(before, "featurehash_batch_rows_sum", operation="transform") == 12 * 4
    # multiprocess mode: the workers write their samples to files in the launcher's metrics directory
    assert list((keyed_server.data_dir / "metrics").glob("counter_*.db"))


def test_two_workers_bound_metrics_and_connections(keyed_server):
    files = keyed_server.data_dir / "metrics"
    with keyed_server.client() as http:
        http.get("/healthz")
    size = sum(path.stat().st_size for path in files.iterdir())
    rng = random.Random(28)
    for _ in range(30):  # new connections, so both workers get some
        with keyed_server.client() as http:
            for _ in range(10):
                method = "".join(rng.choices(string.ascii_uppercase, k=10))
                assert http.request(method, "/healthz").status_code == 405
    # a method token is no label value: before, 300 of them grew the files by ~1 MB (5,000: 15 MB)
    assert sum(path.stat().st_size for path in files.iterdir()) <= size + 65536
    with keyed_server.client() as http:
        text = http.get("/metrics").text
    assert not {sample.labels["method"] for family in text_string_to_metric_families(text)
                for sample in family.samples if "method" in sample.labels} - (METHODS | {"other"})

    # both workers run featurehash.service.connection_guard: half-open connections close at the header deadline
    held = []
    for _ in range(6):
        sock = socket.create_connection(("127.0.0.1", keyed_server.port), timeout=10)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n")
        held.append(sock)
    try:
        for sock in held:
            sock.settimeout(10)
            try:
                assert sock.recv(65536) == b""
            except ConnectionResetError:
                pass
    finally:
        for sock in held:
            sock.close()
    closed = _count(httpx.get(f"{keyed_server.url}/metrics", timeout=10).text, "featurehash_connections_closed_total",
                    reason="header_timeout")
    assert closed >= 6


# -- the keys file: SIGHUP, a bad file, a worker started while it is bad -------------------------------------------

def _workers(server) -> list[int]:
    (uvicorn,) = [pid for pid in children(server.pid) if "featurehash.service.web" in cmdline(pid)]
    return sorted(pid for pid in children(uvicorn) if "multiprocessing.spawn" in cmdline(pid)
                  or "multiprocessing-fork" in cmdline(pid))


def _log(server) -> str:
    return server.log_path.read_text(errors="replace")


def _in_place(path, document: bytes) -> None:
    """The file rewritten with its size, mtime and inode kept: only a SIGHUP makes the service read it."""
    before = os.stat(path)
    assert len(document) == before.st_size
    with open(path, "r+b") as file:
        file.write(document)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _everywhere(server, key: str, status: int, timeout: float = 5.0) -> bool:
    """`status` for `key` on 12 new connections in a row (both workers answer some), within `timeout`."""
    def all_agree() -> bool:
        for _ in range(12):
            with server.client(timeout=5.0, headers={"Authorization": f"Bearer {key}"}) as http:
                if http.get("/v1/maps", params={"limit": 1}).status_code != status:
                    return False
        return True
    return wait_until(all_agree, timeout, interval=0.1)


class RequestStream:
    """Clients sending requests back to back until stopped: two on kept-alive connections, one on a new connection
    per request; every answer that is not a 2xx, and every connection error, is kept."""

    def __init__(self, server, key: str, map_id: str):
        self.url, self.stop, self.sent, self.failures = server.url, threading.Event(), 0, []
        self.request = {"method": "POST", "url": f"/v1/maps/{map_id}/transform", "json": {"vectors": [[0.5] * 5]},
                        "headers": {"Authorization": f"Bearer {key}"}}
        self.threads = [threading.Thread(target=self._send, args=(keep_alive,)) for keep_alive in (True, True, False)]

    def __enter__(self) -> "RequestStream":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _send(self, keep_alive: bool) -> None:
        client = httpx.Client(base_url=self.url, timeout=10.0)
        while not self.stop.is_set():
            try:
                status = client.request(**self.request).status_code
                if status >= 300:
                    self.failures.append(status)
            except httpx.HTTPError as exc:
                self.failures.append(repr(exc))
            self.sent += 1
            if not keep_alive:
                client.close()
                client = httpx.Client(base_url=self.url, timeout=10.0)
        client.close()


def test_sighup_reloads_both_workers_in_place_and_drops_no_request(keyed_server):
    """Before, uvicorn's supervisor restarted both workers on SIGHUP (dropping a request now and then)."""
    workers = _workers(keyed_server)
    assert len(workers) == 2
    with keyed_server.client(headers=AUTH) as http:
        map_id = http.post("/v1/maps", json=SPEC).json()["id"]
    try:
        with RequestStream(keyed_server, KEY, map_id) as stream:
            for generation in (1, 2):
                _in_place(keyed_server.keys_file, _keys_document(f"reader-{generation}"))
                keyed_server.proc.send_signal(signal.SIGHUP)
                assert _everywhere(keyed_server, f"reader-{generation}", 200), keyed_server.log_tail()
        assert stream.sent > 30 and stream.failures == [], (stream.sent, stream.failures[:5])
        assert _everywhere(keyed_server, "reader-1", 401, timeout=1.0)
        assert _workers(keyed_server) == workers  # none restarted
        assert _log(keyed_server).count("featurehash: SIGHUP: keys file") == 2
    finally:
        _in_place(keyed_server.keys_file, _keys_document("reader-0"))
        keyed_server.proc.send_signal(signal.SIGHUP)
        assert _everywhere(keyed_server, "reader-0", 200)


def test_a_bad_file_on_sighup_restarts_nothing_and_a_worker_started_then_serves_the_last_good_keys(keyed_server):
    """Before, the SIGHUP restarted workers with the bad file (half of them, if it was fixed meanwhile), and a
    worker started while it was bad could not start, which stopped the service."""
    workers, path = _workers(keyed_server), keyed_server.keys_file
    try:
        for bad, problem in ((b"", "not JSON"), (b'{"keys": []}', "keys: no key: every request would get 401")):
            path.write_bytes(bad)
            keyed_server.proc.send_signal(signal.SIGHUP)
            line = f"featurehash: SIGHUP: keys file {path}: {problem}"
            assert wait_until(lambda: line in _log(keyed_server), 5.0), keyed_server.log_tail()
            assert _log(keyed_server).count(line) == 1
        assert _log(keyed_server).count("no worker re-reads it, the 2 keys in force stay") == 2
        assert _workers(keyed_server) == workers
        assert _everywhere(keyed_server, "reader-0", 200, timeout=1.0)

        started = _log(keyed_server).count("Application startup complete.")
        os.kill(workers[0], signal.SIGKILL)  # as the out-of-memory killer would
        assert wait_until(lambda: _log(keyed_server).count("Application startup complete.") > started, 60.0), \
            keyed_server.log_tail()
        assert _workers(keyed_server) != workers and len(_workers(keyed_server)) == 2
        warning = f"keys file {path}: keys: no key: every request would get 401; list at least one key; serving " \
                  "the last keys file featurehash serve validated (2 keys of 2 tenants) until this one does"
        assert _log(keyed_server).count(warning) == 1, keyed_server.log_tail()
        assert _everywhere(keyed_server, "reader-0", 200, timeout=1.0)
        assert _everywhere(keyed_server, KEY, 200, timeout=1.0)  # FEATUREHASH_API_KEY beside the copy, as before
        assert keyed_server.running()
    finally:
        path.write_bytes(_keys_document("reader-0"))
