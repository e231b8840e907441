"""Unauthenticated abuse of `featurehash serve`: metric series minted by callers, and half-open connections.

    python bench/bench_abuse.py [--only metrics|halfopen|overhead] [--requests 30000] [--connections 20000]
    PYTHONPATH=/work/main/app python bench/bench_abuse.py ...   # the same against another checkout

1. metrics: one worker gets `--requests` requests, each with a random 10-letter method token
   (GET /healthz otherwise); printed are the /metrics size, its series (sample lines) and render
   time (median of 3), and a /healthz sent while /metrics renders. Then two workers get
   `--requests-2w` such requests; printed is the size of PROMETHEUS_MULTIPROC_DIR before and after.
2. halfopen: one worker with default settings; an attacker process (raising its own open-file limit)
   keeps `--connections` connections that sent half a request line's headers and never finish,
   reconnecting as soon as the server closes one, from several loopback source addresses. Meanwhile
   `--probes` sequential probes each open a new connection and GET /healthz (timeout
   `--probe-timeout`); the attack is split over `--attackers` processes. Printed are p50/p99/max
   latency and failures, the attacker's connections held, the worker's open descriptors and RSS,
   its connections_closed counters and whether accept() ever failed with EMFILE ("out of system
   resource" in the log).

3. overhead: what the guard costs a request. uvicorn with a trivial ASGI app, once with its own
   H11Protocol and once with GuardedH11Protocol (each server in its own process); printed is each
   server's CPU time (user + system) per keep-alive request, median of interleaved runs.

Nothing is written (the servers live in a temporary directory).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import os
import random
import resource
import string
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from service_support import ServiceProcess, children, cmdline, start_all, stop_all  # noqa: E402

PARTIAL = b"GET /healthz HTTP/1.1\r\nHost: attacker\r\nX-Slow: "  # headers never finished
PROBE = b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"


# -- 1. random method tokens -------------------------------------------------------------------------

async def _one_connection(port: int, methods: list[str], statuses: dict[int, int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for method in methods:
            writer.write(f"{method} /healthz HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            statuses[status] = statuses.get(status, 0) + 1
            if b"connection: close" in head.lower():
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
    finally:
        writer.close()


def random_methods(port: int, requests: int, connections: int = 16, seed: int = 27) -> tuple[dict[int, int], float]:
    rng = random.Random(seed)
    methods = ["".join(rng.choices(string.ascii_uppercase, k=10)) for _ in range(requests)]
    statuses: dict[int, int] = {}

    async def run():
        await asyncio.gather(*(_one_connection(port, methods[i::connections], statuses) for i in range(connections)))

    start = time.perf_counter()
    asyncio.run(run())
    return statuses, time.perf_counter() - start


def metrics_figures(server: ServiceProcess) -> str:
    with server.client(timeout=300) as http:
        times, text = [], ""
        for _ in range(3):
            start = time.perf_counter()
            text = http.get("/metrics").text
            times.append(time.perf_counter() - start)
        healthz: list[float] = []

        def probe():
            time.sleep(0.02)
            with server.client(timeout=300) as other:
                start = time.perf_counter()
                other.get("/healthz")
                healthz.append(time.perf_counter() - start)

        thread = threading.Thread(target=probe)
        thread.start()
        http.get("/metrics")
        thread.join()
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return (f"/metrics {len(text.encode()) / 1e6:.3f} MB, {series} series, render {np.median(times) * 1e3:.1f} ms "
            f"(median of 3); /healthz during a render {healthz[0] * 1e3:.1f} ms")


def directory_bytes(path: Path) -> int:
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())


def run_metrics(tmp: Path, requests: int, requests_2w: int) -> None:
    server = start_all([ServiceProcess("metrics-1w", tmp / "metrics-1w")])[0]
    try:
        print(f"one worker, before: {metrics_figures(server)}")
        statuses, seconds = random_methods(server.port, requests)
        print(f"one worker, {requests} requests with random method tokens in {seconds:.1f} s (statuses {statuses})")
        print(f"one worker, after: {metrics_figures(server)}")
    finally:
        problems = stop_all([server])
    server = start_all([ServiceProcess("metrics-2w", tmp / "metrics-2w", workers=2)])[0]
    try:
        files = tmp / "metrics-2w" / "metrics"
        with server.client() as http:
            http.get("/healthz")
        before = directory_bytes(files)
        statuses, seconds = random_methods(server.port, requests_2w)
        print(f"two workers: {requests_2w} requests with random method tokens in {seconds:.1f} s; "
              f"PROMETHEUS_MULTIPROC_DIR {before / 1e3:.0f} KB -> {directory_bytes(files) / 1e3:.0f} KB; "
              f"{metrics_figures(server)}")
    finally:
        problems += stop_all([server])
    if problems:
        print(f"(servers did not stop cleanly: {problems})")


# -- 2. half-open connections -------------------------------------------------------------------------

async def _attack(port: int, connections: int, sources: int, stats: dict) -> None:
    async def hold(source: str):
        while True:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
            except OSError as exc:
                stats["failed"] += 1
                reason = errno.errorcode.get(exc.errno, type(exc).__name__)
                stats["errors"][reason] = stats["errors"].get(reason, 0) + 1
                await asyncio.sleep(0.2)
                continue
            stats["open"] += 1
            stats["connects"] += 1
            try:
                writer.write(PARTIAL)
                await reader.read(1)  # b"" when the server closes, or a reset
            except OSError:
                pass
            finally:
                stats["open"] -= 1
                writer.close()

    tasks = [asyncio.create_task(hold(f"127.0.0.{2 + i % sources}")) for i in range(connections)]
    while True:
        await asyncio.sleep(1.0)
        print(json.dumps(stats), flush=True)
    await asyncio.gather(*tasks)


def attacker_main(port: int, connections: int, sources: int) -> None:
    want, hard = connections + 1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    try:  # root with CAP_SYS_RESOURCE may raise its own hard limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(_attack(port, connections, sources, {"open": 0, "connects": 0, "failed": 0, "errors": {}}))


class Attacker:
    """`processes` attacker processes sharing `connections`; their per-second reports, summed."""

    def __init__(self, port: int, connections: int, sources: int, processes: int):
        self.procs = [subprocess.Popen([sys.executable, __file__, "attacker", "--port", str(port), "--connections",
                                        str(len(range(i, connections, processes))), "--sources", str(sources)],
                                       stdout=subprocess.PIPE, text=True) for i in range(processes)]
        self.reports: list[dict] = [{"open": 0, "connects": 0, "failed": 0, "errors": {}} for _ in self.procs]
        self.held: list[tuple[float, int]] = []  # (when, connections open in all)
        for i, proc in enumerate(self.procs):
            threading.Thread(target=self._read, args=(i, proc), daemon=True).start()

    def _read(self, i: int, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.reports[i] = json.loads(line)
            self.held.append((time.monotonic(), self.latest["open"]))

    @property
    def latest(self) -> dict:
        errors: dict[str, int] = {}
        for report in self.reports:
            for reason, count in report["errors"].items():
                errors[reason] = errors.get(reason, 0) + count
        return {**{key: sum(report[key] for report in self.reports) for key in ("open", "connects", "failed")},
                "errors": errors}

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def probe_once(port: int, timeout: float, connects: list | None = None) -> float | None:
    import socket

    start = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            if connects is not None:
                connects.append(time.perf_counter() - start)
            sock.settimeout(max(0.01, timeout - (time.perf_counter() - start)))
            sock.sendall(PROBE)
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
                data = sock.recv(4096)
                if not data:
                    break
                answer += data
    except OSError:
        return None
    return time.perf_counter() - start if answer.startswith(b"HTTP/1.1 200") else None


def worker_pid(server: ServiceProcess) -> int:
    web = [pid for pid in children(server.pid) if "featurehash.service.web" in cmdline(pid)]
    return web[0]


def sample_worker(pid: int, samples: list, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            status = Path(f"/proc/{pid}/status").read_text()
            rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        except (FileNotFoundError, ProcessLookupError):
            return
        samples.append((fds, rss * 1024))


def run_halfopen(tmp: Path, connections: int, attackers: int, sources: int, probes: int, probe_timeout: float,
                 settle: float, settings: dict) -> None:
    server = start_all([ServiceProcess("halfopen", tmp / "halfopen", **settings)])[0]
    pid = worker_pid(server)
    samples: list = []
    stop = threading.Event()
    threading.Thread(target=sample_worker, args=(pid, samples, stop), daemon=True).start()
    baseline = [probe_once(server.port, probe_timeout) for _ in range(20)]
    print(f"no attack: /healthz p50 {np.median(baseline) * 1e3:.1f} ms over 20 probes "
          f"(worker limit {resource.getrlimit(resource.RLIMIT_NOFILE)} inherited)")
    attacker = Attacker(server.port, connections, sources, attackers)
    try:
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline and attacker.latest["open"] < connections:
            time.sleep(0.5)
        print(f"attacker: {attacker.latest['open']} of {connections} connections open after "
              f"{settle - max(0.0, deadline - time.monotonic()):.1f} s")
        latencies, connects, failed = [], [], 0
        start = time.monotonic()
        for _ in range(probes):
            answered = probe_once(server.port, probe_timeout, connects)
            if answered is None:
                failed += 1
            else:
                latencies.append(answered)
            time.sleep(0.05)
        elapsed = time.monotonic() - start
        held = [count for when, count in attacker.held if when >= start] or [attacker.latest["open"]]
        closed = closed_counters(server, probe_timeout)
        figures = (f"p50 {np.percentile(latencies, 50) * 1e3:.1f} ms, p99 {np.percentile(latencies, 99) * 1e3:.1f} ms, "
                   f"max {max(latencies) * 1e3:.1f} ms" if latencies else "no answer")
        print(f"under attack: /healthz {figures}; {failed} of {probes} probes failed (timeout {probe_timeout} s); "
              f"over {elapsed:.1f} s; {sum(t > 0.5 for t in latencies)} took over 0.5 s, "
              f"{sum(t > 0.5 for t in connects)} of them in connect() (a SYN dropped by a full accept queue is "
              "sent again after 1 s)")
        print(f"attacker: held {min(held)}-{max(held)} connections open (its side) while probing, "
              f"{attacker.latest['connects']} connects in all, connect errors {attacker.latest['errors']} (ECONNRESET: "
              "closed by the server before the attacker saw it open)")
    finally:
        attacker.stop()
        stop.set()
    if samples:
        print(f"worker: at most {max(fd for fd, _ in samples)} open descriptors, RSS up to "
              f"{max(rss for _, rss in samples) / 2**20:.0f} MiB (from {samples[0][1] / 2**20:.0f})")
    print(f"worker: connections closed early {closed}")
    time.sleep(1.0)
    after = [probe_once(server.port, probe_timeout) for _ in range(5)]
    print(f"after the attack: {sum(a is not None for a in after)} of 5 probes answered")
    problems = stop_all([server])
    emfile = server.log_path.read_text(errors="replace").count("out of system resource")
    print(f"accept() failed with EMFILE ('out of system resource' in the log) {emfile} times"
          + (f"; stop problems: {problems}" if problems else ""))


def closed_counters(server: ServiceProcess, timeout: float) -> dict | str:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = httpx.get(f"{server.url}/metrics", timeout=max(timeout, 10)).text
    except httpx.HTTPError as exc:
        return f"(/metrics: {type(exc).__name__})"
    return {sample.labels["reason"]: int(sample.value) for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "featurehash_connections_closed_total"}


# -- 3. the guard's cost per request -------------------------------------------------------------------

async def _trivial_app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


def protocol_server_main(guarded: bool, port: int) -> None:
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from featurehash.service.connection_guard import GuardedH11Protocol
    from featurehash.service.web import TCPListenerConfig

    config = TCPListenerConfig(_trivial_app, host="127.0.0.1", port=port, lifespan="off", log_level="warning",
                               http=GuardedH11Protocol if guarded else H11Protocol, header_timeout=10,
                               body_timeout=30, max_connections=4096)
    uvicorn.Server(config).run()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_overhead(requests: int = 5000, runs: int = 6) -> None:
    import socket

    from service_support import free_port

    servers = {}
    for name in ("h11", "guarded"):
        port = free_port()
        servers[name] = (port, subprocess.Popen([sys.executable, __file__, "protocol-server", name, str(port)]))
    try:
        for port, _ in servers.values():
            deadline = time.monotonic() + 30
            while probe_once(port, 1.0) is None and time.monotonic() < deadline:
                time.sleep(0.1)
        per_request: dict[str, list[float]] = {name: [] for name in servers}
        for _ in range(runs):
            for name, (port, proc) in servers.items():
                with socket.create_connection(("127.0.0.1", port)) as sock:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    before = _cpu_seconds(proc.pid)
                    for _ in range(requests):
                        sock.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
                        answer = b""
                        while not answer.endswith(b"ok"):
                            answer += sock.recv(4096)
                    per_request[name].append((_cpu_seconds(proc.pid) - before) / requests * 1e6)
        figures = ", ".join(f"{name} {np.median(values):.0f} us (runs {', '.join(f'{v:.0f}' for v in values)})"
                            for name, values in per_request.items())
        print(f"server CPU per keep-alive request (trivial app), median of {runs} runs of {requests}: {figures}")
    finally:
        for _, proc in servers.values():
            proc.kill()
            proc.wait()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "protocol-server":
        protocol_server_main(sys.argv[2] == "guarded", int(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "attacker":
        parser = argparse.ArgumentParser()
        parser.add_argument("attacker")
        parser.add_argument("--port", type=int)
        parser.add_argument("--connections", type=int)
        parser.add_argument("--sources", type=int)
        args = parser.parse_args()
        attacker_main(args.port, args.connections, args.sources)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["metrics", "halfopen", "overhead"])
    parser.add_argument("--requests", type=int, default=30_000)
    parser.add_argument("--requests-2w", type=int, default=5_000)
    parser.add_argument("--connections", type=int, default=20_000)
    parser.add_argument("--attackers", type=int, default=2, help="attacker processes (each under 20,000 descriptors)")
    parser.add_argument("--sources", type=int, default=8, help="loopback source addresses of the attacker")
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--probe-timeout", type=float, default=5.0)
    parser.add_argument("--max-connections", type=int, help="FEATUREHASH_MAX_CONNECTIONS (default: the server's)")
    parser.add_argument("--header-timeout", type=float,
                        help="FEATUREHASH_HEADER_TIMEOUT_SECONDS (default: the server's)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to let the attacker open its connections")
    args = parser.parse_args()
    import featurehash

    print(f"featurehash from {featurehash.__file__}")
    with tempfile.TemporaryDirectory(prefix="featurehash-abuse-") as tmp:
        if args.only in (None, "metrics"):
            run_metrics(Path(tmp), args.requests, args.requests_2w)
        if args.only in (None, "halfopen"):
            settings = {name: value for name, value in (("max_connections", args.max_connections),
                                                        ("header_timeout_seconds", args.header_timeout))
                        if value is not None}
            run_halfopen(Path(tmp), args.connections, args.attackers, args.sources, args.probes, args.probe_timeout,
                         args.settle, settings)
        if args.only in (None, "overhead"):
            run_overhead()


if __name__ == "__main__":
    main()
