"""A worker's memory under concurrent large requests, and single-vector latency beside large batches.

    python bench/bench_admission.py [--app PATH] [--only memory|latency] [--latency-seconds S]
                                    [--batch-client-niceness N] [--server-env NAME=VALUE ...]

Starts a real `featurehash serve` (one worker, embedded Redis, default settings) with PYTHONPATH=--app
(default: this checkout's app/; pass /work/main/app for the code before admission control), then:

1. Memory: the worker's peak RSS above its idle RSS (VmHWM after resetting it through
   /proc/<pid>/clear_refs, cross-checked by polling VmRSS every 2 ms; also the whole server tree's
   polled peak) while it answers one, then 8 concurrent, 60 MiB .npy transforms (rff d=128 -> D=256,
   float64 body of 61,440 rows, float32 .npy answer of 60 MiB), and one ~60 MiB JSON transform
   (full-precision float64 numbers: 58 and 43.5 MiB; 2-decimal ones: 40.6 MiB). Refused requests are
   counted; a refusal's answer is shown.
2. Latency: single-vector JSON transforms (rff d=16 -> D=256) on one keep-alive connection, p50 and
   p99, idle and while 4 clients stream 60 MiB .npy batches (rff d=128 -> D=256) in a loop (a
   refused batch waits its Retry-After and tries again), as ratios to the idle figures. The batch
   clients share the server's cores: --batch-client-niceness 19 keeps them from taking CPU the server
   would have (as clients on other machines would not).

The machine's other load shows in the latency figures: run it more than once.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from raw_http import Connection, request_bytes  # noqa: E402

MIB = 2**20
HERE = Path(__file__).resolve().parent
BIG_SPEC = {"method": "rff", "input_dim": 128, "n_components": 256, "seed": 1, "params": {"gamma": 0.01}}
SMALL_SPEC = {"method": "rff", "input_dim": 16, "n_components": 256, "seed": 2, "params": {"gamma": 0.1}}
BIG_ROWS = 61_440  # x 128 float64 = 60 MiB
NPY, JSON = "application/x-npy", "application/json"


# -- the server ------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status_field(pid: int, name: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    found, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                if ppid == parent:
                    found.append(int(name))
                    frontier.append(int(name))
    return found


class Server:
    def __init__(self, app_path: str, env_extra: dict[str, str]):
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-admission-"))
        self.port = _free_port()
        env = {key: value for key, value in os.environ.items()
               if not key.startswith("FEATUREHASH_") and key != "REDIS_URL"}
        env.update(PYTHONPATH=app_path, FEATUREHASH_ACCESS_LOG_LEVEL="off", **env_extra)
        self.log = open(self.tmp / "server.log", "wb")
        self.process = subprocess.Popen([sys.executable, "-m", "featurehash.cli", "serve", "--port", str(self.port),
                                         "--data-dir", str(self.tmp / "data")], env=env, stdout=self.log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready()
        self.tree = _tree(self.process.pid)
        self.worker = next(pid for pid in self.tree
                           if b"featurehash.service.web" in Path(f"/proc/{pid}/cmdline").read_bytes())

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                status, _ = self.get("/readyz")
                if status == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError((self.tmp / "server.log").read_text()[-2000:])
            time.sleep(0.2)
        raise RuntimeError("server not ready")

    def connect(self) -> Connection:
        return Connection("127.0.0.1", self.port)

    def get(self, path: str) -> tuple[int, bytes]:
        connection = self.connect()
        try:
            connection.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
            from raw_http import _parse_head
            status, length = _parse_head(connection._line(b"\r\n\r\n"))
            return status, connection._take(length or 0)
        finally:
            connection.close()

    def create_map(self, spec: dict) -> str:
        connection = self.connect()
        try:
            status, body = connection.request(request_bytes("/v1/maps", orjson.dumps(spec), JSON))
            assert status in (200, 201), body
            return orjson.loads(body)["id"]
        finally:
            connection.close()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


@contextmanager
def running(app_path: str, env_extra: dict[str, str] | None = None):
    server = Server(app_path, env_extra or {})
    try:
        yield server
    finally:
        server.stop()


class PeakWatch:
    """The worker's VmHWM reset at the start (clear_refs 5), and the polled peak of VmRSS, worker and tree."""

    def __init__(self, server: Server):
        self.server = server

    def __enter__(self):
        self.idle = _status_field(self.server.worker, "VmRSS")
        self.idle_tree = sum(_status_field(pid, "VmRSS") for pid in self.server.tree)
        Path(f"/proc/{self.server.worker}/clear_refs").write_text("5")
        self.polled = self.polled_tree = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._done.is_set():
            self.polled = max(self.polled, _status_field(self.server.worker, "VmRSS"))
            self.polled_tree = max(self.polled_tree, sum(_status_field(pid, "VmRSS") for pid in self.server.tree))
            self._done.wait(0.002)

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.hwm = _status_field(self.server.worker, "VmHWM")

    def line(self) -> str:
        return (f"worker peak above idle {(self.hwm - self.idle) / MIB:7.0f} MiB (VmHWM; polled "
                f"{(self.polled - self.idle) / MIB:.0f}), tree {(self.polled_tree - self.idle_tree) / MIB:.0f} MiB "
                f"(idle worker {self.idle / MIB:.0f} MiB)")


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _one_request(server: Server, raw: bytes, results: list, index: int) -> None:
    connection = server.connect()
    start = time.perf_counter()
    try:
        status, answer = connection.request_array(raw)
        results[index] = (status, time.perf_counter() - start, answer if status != 200 else b"")
    except OSError as exc:
        results[index] = (type(exc).__name__, time.perf_counter() - start, b"")
    finally:
        connection.close()


def _concurrent(server: Server, raw: bytes, count: int) -> list:
    results: list = [None] * count
    threads = [threading.Thread(target=_one_request, args=(server, raw, results, i)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _summary(results: list) -> str:
    statuses: dict = {}
    for status, _, _ in results:
        statuses[status] = statuses.get(status, 0) + 1
    seconds = [s for _, s, _ in results]
    refused = next((answer for status, _, answer in results if status != 200), b"")
    text = ", ".join(f"{status}: {n}" for status, n in sorted(statuses.items(), key=str))
    return f"statuses {text}; {min(seconds):.2f}-{max(seconds):.2f} s" + (
        f"; refusal {refused[:160].decode(errors='replace')}" if refused else "")


def memory(server: Server) -> None:
    map_id = server.create_map(BIG_SPEC)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(BIG_ROWS, BIG_SPEC["input_dim"]))
    path = f"/v1/maps/{map_id}/transform"
    big = request_bytes(path, npy_bytes(X), NPY, accept=NPY)
    warm = request_bytes(path, npy_bytes(X[:4096]), NPY, accept=NPY)
    for _ in range(3):
        _concurrent(server, warm, 2)
    time.sleep(1)
    print(f"body {len(big) / MIB:.1f} MiB (.npy float64 {X.shape}); answer {BIG_ROWS * 256 * 4 / MIB:.0f} MiB")
    for count in (1, 8):
        time.sleep(1)
        with PeakWatch(server) as watch:
            results = _concurrent(server, big, count)
        print(f"{count} concurrent npy transforms: {watch.line()}\n    {_summary(results)}")
    for label, values in (("float64 repr", X[:24_000]), ("float64 repr", X[:18_000]), ("2 decimals", np.round(X, 2))):
        body = orjson.dumps({"vectors": values}, option=orjson.OPT_SERIALIZE_NUMPY)
        raw = request_bytes(path, body, JSON, accept=NPY)
        time.sleep(1)
        with PeakWatch(server) as watch:
            results = _concurrent(server, raw, 1)
        print(f"1 JSON transform, {label}, {len(body) / MIB:.1f} MiB ({values.shape[0]} rows): {watch.line()}; "
              f"x body {(watch.hwm - watch.idle) / len(body):.1f}\n    {_summary(results)}")


def _percentiles(samples_us: np.ndarray) -> tuple[float, float]:
    return float(np.percentile(samples_us, 50)), float(np.percentile(samples_us, 99))


def _single_vector_latencies(server: Server, raw: bytes, seconds: float) -> np.ndarray:
    connection = server.connect()
    samples = []
    try:
        for _ in range(200):
            connection.request(raw)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            start = time.perf_counter_ns()
            status, body = connection.request(raw)
            samples.append((time.perf_counter_ns() - start) / 1e3)
            assert status == 200, body
            time.sleep(0.002)  # an online scorer's request now and then, not a saturating loop
    finally:
        connection.close()
    return np.array(samples)


def _batch_client(port: int, raw: bytes, stop: threading.Event, counts: dict, lock: threading.Lock) -> None:
    connection = Connection("127.0.0.1", port)
    try:
        while not stop.is_set():
            status, answer = connection.request_array(raw)
            with lock:
                counts[status] = counts.get(status, 0) + 1
            if status != 200:
                stop.wait(1.0)  # Retry-After
    finally:
        connection.close()


def _batch_clients(port: int, map_id: str, clients: int, seconds: float, results, niceness: int) -> None:
    """`clients` connections streaming 60 MiB .npy batches for `seconds` (a process of its own: the
    latency client's measurements must not wait for this process's GIL), `niceness` steps nicer."""
    os.nice(niceness)
    X = np.random.default_rng(1).uniform(-1, 1, size=(BIG_ROWS, BIG_SPEC["input_dim"]))
    raw = request_bytes(f"/v1/maps/{map_id}/transform", npy_bytes(X), NPY, accept=NPY)
    stop, lock, counts = threading.Event(), threading.Lock(), {}
    threads = [threading.Thread(target=_batch_client, args=(port, raw, stop, counts, lock)) for _ in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    results.put(counts)


def latency(server: Server, seconds: float, niceness: int) -> None:
    import multiprocessing

    small_id, big_id = server.create_map(SMALL_SPEC), server.create_map(BIG_SPEC)
    rng = np.random.default_rng(1)
    one = request_bytes(f"/v1/maps/{small_id}/transform",
                        orjson.dumps({"vectors": rng.uniform(-1, 1, (1, 16)).tolist()}), JSON)
    idle = _single_vector_latencies(server, one, seconds)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    batches = context.Process(target=_batch_clients, args=(server.port, big_id, 4, seconds + 3.0, results, niceness))
    batches.start()
    time.sleep(2.0)  # the batches under way
    busy = _single_vector_latencies(server, one, seconds)
    counts = results.get()
    batches.join()
    (idle50, idle99), (busy50, busy99) = _percentiles(idle), _percentiles(busy)
    print(f"single-vector JSON transform (rff d=16 D=256), {seconds:.0f} s each")
    print(f"  idle: p50 {idle50:8.0f} us  p99 {idle99:8.0f} us  ({idle.size} requests)")
    print(f"  beside 4 clients (nice +{niceness}) streaming 60 MiB npy batches: p50 {busy50:8.0f} us  p99 {busy99:8.0f} us  "
          f"({busy.size} requests); ratio p50 {busy50 / idle50:.1f}x, p99 {busy99 / idle99:.1f}x")
    print(f"  batch answers: {', '.join(f'{status}: {n}' for status, n in sorted(counts.items(), key=str))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default=str(HERE.parent / "app"), help="PYTHONPATH of the server")
    parser.add_argument("--only", choices=("memory", "latency"))
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="a server setting, e.g. FEATUREHASH_INFLIGHT_BYTES=2147483648 (repeatable)")
    parser.add_argument("--batch-client-niceness", type=int, default=0,
                        help="run the batch clients this much nicer (19: they copy 4 x 60 MiB in and out on the "
                             "server's cores; nicer, they stand in for clients on other machines)")
    args = parser.parse_args()
    print(f"server code: {args.app}")
    with running(args.app, dict(item.split("=", 1) for item in args.server_env)) as server:
        if args.only in (None, "memory"):
            memory(server)
        if args.only in (None, "latency"):
            latency(server, args.latency_seconds, args.batch_client_niceness)


if __name__ == "__main__":
    main()
