"""`featurehash serve`: Redis (embedded unless REDIS_URL is set), then the web tier (featurehash.service.web).

The launcher owns both children. It starts the embedded Redis once (never one per
worker), waits for PING, then runs uvicorn with REDIS_URL pointing at the server's unix
socket. On SIGTERM/SIGINT it forwards the signal to uvicorn (which drains its workers),
waits for it to exit, and only then stops Redis, so no acknowledged write is lost. It
supervises the embedded Redis: a server that dies is restarted on its append-only file
(with backoff), and one that cannot be started or restarted makes the launcher stop the web
tier and exit with code 4 (after one line saying why: a corrupt append-only file names
`featurehash repair-aof`), so that an orchestrator restarts the whole service. A web tier that
dies unasked is started again with backoff (WebTier), each time with a line on stderr.

The keys file is validated before anything starts (a bad one: one line, exit code 2, as for any bad setting),
then kept as the last good keys a restarted worker falls back to (auth.last_good); SIGHUP re-validates it and
only a good file is passed on to the web tier, whose workers re-read it in place.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from .auth.keys import KeysFileError
from .auth.last_good import LastGoodKeys
from .config import Settings
from ..store.durability import persistence_refusal
from ..store.embedded import (CorruptAppendOnlyFile, DataDirectoryInUse, EmbeddedRedis, EmbeddedRedisError,
                              die_with_parent)
from .web import STARTUP_FAILURE

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")  # read once, when numpy loads BLAS
REDIS_LOST = 4  # exit code: the embedded Redis died and could not be restarted
CANNOT_START = 1  # exit code: the port or the data directory is taken (one line on stderr says which)
BAD_SETTING = 2  # exit code: a setting, e.g. the keys file, cannot be used (as the CLI's bad input and usage)
SUPERVISE_INTERVAL = 0.05
RESTART_BACKOFF = (0.0, 0.1, 0.3, 1.0, 3.0)  # seconds before each restart attempt
MAX_RESTARTS = 5
RESTART_WINDOW = 60.0


def _metrics_dir(settings: Settings) -> str:
    path = settings.data_dir / "metrics"
    shutil.rmtree(path, ignore_errors=True)  # counters restart with the workers
    path.mkdir(parents=True, exist_ok=True)
    return str(path.resolve())


def _port_taken(host: str, port: int) -> str | None:
    """Why the web tier could not bind (host, port), checked before Redis starts so the launcher ends with one
    line instead of uvicorn's start-up log; None when it can (port 0: any free one)."""
    if port == 0:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as the web tier binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}; stop what uses it or pick another " \
                   "port (--port or FEATUREHASH_PORT)"
    return None


def _check_redis(url: str, timeout: float, durability: str) -> None:
    """One line when the Redis of REDIS_URL does not answer now: the service starts anyway (answering 503 with
    Retry-After, /readyz not ready, until it does), as an orchestrator may start Redis after it. One line too
    when it answers but would not persist a write as `durability` asks (no append-only file under "aof"):
    /readyz answers 503 with the same words until that is fixed."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        client.ping()
        refusal = persistence_refusal(client.info("persistence"), durability)
    except (redis.RedisError, OSError) as exc:
        _say(f"Redis at {_redacted(url)} does not answer ({exc}); serving anyway: requests get 503 and /readyz is "
             "not ready until it does")
    else:
        if refusal is not None:
            _say(f"REDIS_URL {_redacted(url)}: {refusal.cause}; until then writes get 503 and /readyz answers 503")
    finally:
        client.close()


def _redacted(url: str) -> str:
    """The URL without its password."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def serve(settings: Settings) -> int:
    embedded = keys = None
    if (taken := _port_taken(settings.host, settings.port)) is not None:
        _say(taken)
        return CANNOT_START
    if settings.keys_file is not None:
        try:  # a keys file that does not validate: one line naming the entry and field, before anything starts
            keys = LastGoodKeys(settings.keys_file, settings.api_key.get_secret_value() if settings.api_key else None)
        except KeysFileError as exc:
            _say(str(exc))
            return BAD_SETTING
    hangups = False

    def hangup(signum, frame):  # the file is read and validated in the loop below, not in the handler
        nonlocal hangups
        hangups = True

    signal.signal(signal.SIGHUP, hangup)  # from now: a hangup while Redis starts must not end the launcher
    env = {**os.environ, "FEATUREHASH_HOST": settings.host, "FEATUREHASH_PORT": str(settings.port),
           "FEATUREHASH_WORKERS": str(settings.workers), "FEATUREHASH_DATA_DIR": str(settings.data_dir),
           **{name: str(settings.blas_threads) for name in BLAS_THREAD_VARIABLES}}
    if not settings.redis_url:
        embedded = EmbeddedRedis(settings.data_dir)
        try:
            embedded.start()
        except EmbeddedRedisError as exc:  # one line naming the way out (e.g. featurehash repair-aof), no traceback
            _say(str(exc))
            embedded.stop()
            return CANNOT_START if isinstance(exc, DataDirectoryInUse) else REDIS_LOST
        env["REDIS_URL"] = embedded.url
        print(f"featurehash: embedded Redis at {embedded.url} (data in {embedded.data_dir})", file=sys.stderr)
    else:
        _check_redis(settings.redis_url, settings.redis_timeout_seconds, settings.durability)
    if settings.workers > 1:
        env["PROMETHEUS_MULTIPROC_DIR"] = _metrics_dir(settings)
    if keys is not None:  # written once the data directory is ours (the embedded Redis holds its lock)
        try:
            env["FEATUREHASH_KEYS_LAST_GOOD_FILE"] = str(keys.keep_in(settings.data_dir))
        except OSError as exc:
            _say(f"cannot keep the last good keys in {settings.data_dir} ({exc.strerror or exc}); serving anyway, "
                 "but a worker started while the keys file does not validate will not start")
    stopping = False
    try:
        web = WebTier(env)

        def forward(signum, frame):  # must not block: just pass the signal on
            nonlocal stopping
            stopping = True
            web.stop()

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        supervisor = RedisSupervisor(embedded, lambda: stopping) if embedded is not None else None
        while (code := web.keep_alive(stopping)) is None:
            if supervisor is not None and not supervisor.keep_alive():
                web.stop()  # Redis is gone for good: stop, so an orchestrator restarts us
                web.wait()
                return REDIS_LOST
            if hangups:
                hangups = False
                _reread_keys(keys, web)
            elif keys is not None:
                keys.poll()
            time.sleep(SUPERVISE_INTERVAL)
        # uvicorn re-raises the signal it shut down on; that is a clean stop we asked for.
        return 0 if stopping and code in (0, -signal.SIGTERM) else code
    finally:
        if embedded is not None:
            embedded.stop()
        if keys is not None:
            keys.close()


def _reread_keys(keys: LastGoodKeys | None, web: "WebTier") -> None:
    """SIGHUP: the web tier is told (its workers re-read the file in place) only once the file validates;
    a bad file restarts nothing. One line either way."""
    if keys is None:
        _say("SIGHUP: no keys file (FEATUREHASH_KEYS_FILE) to re-read; nothing done")
        return
    good, line = keys.hangup()
    _say(line)
    if good:
        web.signal(signal.SIGHUP)


class Deaths:
    """The deaths of a supervised child within the last RESTART_WINDOW seconds: past MAX_RESTARTS of them
    it is given up."""

    def __init__(self):
        self.times: list[float] = []

    def record(self, now: float) -> int:
        """Count a death now; how many fell within the window."""
        self.times = [t for t in self.times if now - t < RESTART_WINDOW] + [now]
        return len(self.times)


class WebTier:
    """The uvicorn child (featurehash.service.web), started again with backoff when it dies unasked.

    With several workers uvicorn replaces a dead worker itself; with one, the worker is this child,
    and a crash (an out-of-memory kill, a segfault in native code) would otherwise end the service.
    A web tier that could not start (exit code STARTUP_FAILURE: port taken, bad settings) is not
    restarted, nor one that died more than MAX_RESTARTS times within RESTART_WINDOW seconds."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.deaths = Deaths()
        self.restart_at: float | None = None
        self.process = self._start()

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "featurehash.service.web"], env=self.env,
                                preexec_fn=_web_tier_child)

    def signal(self, signum: int) -> None:
        """Sends `signum` to a running web tier (one that is dead or restarting reads the keys file as it starts)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self) -> None:
        if self.process is not None:
            self.process.wait()

    def keep_alive(self, stopping: bool) -> int | None:
        """None while serving (or waiting to restart); else the exit code to end the launcher with."""
        now = time.monotonic()
        if self.process is None:  # dead, restart pending
            if stopping:
                return 0
            if now >= self.restart_at:
                self.process = self._start()
                _say("web tier started again")
            return None
        code = self.process.poll()
        if code is None or stopping or code == STARTUP_FAILURE:
            return code
        deaths = self.deaths.record(now)
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
        if deaths > MAX_RESTARTS:
            _say(f"web tier {how}, its {deaths}th death within {RESTART_WINDOW:.0f} s; giving up")
            return code
        delay = RESTART_BACKOFF[deaths - 1]
        _say(f"web tier {how}; starting it again in {delay:.1f} s")
        self.process, self.restart_at = None, now + delay
        return None


def _web_tier_child() -> None:
    """Between fork and exec of the web tier: it dies with the launcher, and starts with SIGHUP ignored (kept
    across exec) until it takes the signal itself, so a hangup sent while it starts does not end it."""
    die_with_parent()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


class RedisSupervisor:
    """Restarts a dead embedded Redis from its append-only file, with backoff.

    Every write Redis acknowledged was in the file (written before the reply), so a restart loses
    none. A server that cannot be started again, or dies more than MAX_RESTARTS times within
    RESTART_WINDOW seconds, is given up: `keep_alive` returns False and the launcher exits non-zero.
    """

    def __init__(self, redis: EmbeddedRedis, stopping):
        self.redis = redis
        self.stopping = stopping
        self.deaths = Deaths()

    def keep_alive(self) -> bool:
        if self.redis.running() or self.stopping():
            return True
        deaths = self.deaths.record(time.monotonic())
        if deaths > MAX_RESTARTS:
            _say(f"embedded Redis died {deaths} times within {RESTART_WINDOW:.0f} s; giving up")
            return False
        _say(f"embedded Redis exited with code {self.redis.returncode}; restarting it from its append-only file")
        for delay in RESTART_BACKOFF:
            if self.stopping():
                return True
            time.sleep(delay)
            try:
                self.redis.restart()
            except CorruptAppendOnlyFile as exc:
                _say(str(exc))
                return False
            except EmbeddedRedisError as exc:
                _say(f"restart failed: {exc}")
                continue
            _say("embedded Redis is back")
            return True
        _say(f"embedded Redis could not be restarted; see {self.redis.data_dir / 'redis.log'}")
        return False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # e.g. a real-time signal
        return f"signal {number}"


def _say(message: str) -> None:
    print(f"featurehash: {message}", file=sys.stderr, flush=True)
