"""The web tier that `featurehash serve` runs as its child: uvicorn and its workers.

Settings come from the environment the launcher prepared (REDIS_URL included). With
several workers uvicorn binds the shared listener itself, with protocol number 0, so
asyncio never sets TCP_NODELAY on accepted connections and every small keep-alive
response waits ~40 ms on Nagle + delayed ACK. This module binds that listener as TCP,
with TCP_NODELAY (inherited by accepted sockets on Linux).

Every worker speaks HTTP through connection_guard.GuardedH11Protocol (header and body deadlines, a cap
on open connections), named here rather than left to uvicorn's "auto" choice so that installing
httptools does not silently drop them.

SIGHUP means "re-read the keys file" (the launcher sends it once the file validated): each worker reloads it in
place (the app's lifespan), so no worker restarts and no request or connection is dropped. uvicorn's supervisor
of several workers would restart them all instead (`Workers` passes the signal on), and a worker ignores the
signal until its lifespan takes it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys

import uvicorn
from uvicorn.supervisors import Multiprocess

from .auth.keys import KeysFileError, starting_ring
from .config import Settings
from .connection_guard import GuardedH11Protocol, connection_limits, raise_open_file_limit

STARTUP_FAILURE = 3
logger = logging.getLogger("uvicorn.error")


class TCPListenerConfig(uvicorn.Config):
    """uvicorn's config plus what GuardedH11Protocol reads (a module-level class: it is pickled to the workers)."""

    def __init__(self, *args, header_timeout: float, body_timeout: float, max_connections: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.header_timeout, self.body_timeout, self.max_connections = header_timeout, body_timeout, max_connections

    def configure_logging(self) -> None:
        super().configure_logging()
        # The first thing a spawned worker runs (uvicorn's subprocess_started), and it runs in this process too:
        # until the app's lifespan takes SIGHUP, a hangup must not end the process (its default action).
        # Multiprocess installs its own handler afterwards.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def bind_socket(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            logger.error(exc)
            sys.exit(STARTUP_FAILURE)
        logger.info("Uvicorn running on http://%s:%d with %d workers", self.host, sock.getsockname()[1], self.workers)
        sock.set_inheritable(True)
        return sock


class Workers(Multiprocess):
    """uvicorn's supervisor of several workers, passing SIGHUP on to each of them (which re-read the keys file in
    place) instead of restarting them all: a restart drops the connections of the worker it retires."""

    def handle_hup(self) -> None:
        logger.info("Received SIGHUP: the workers re-read the keys file")
        for process in self.processes:
            # A worker that does not answer the health ping yet has not read the file: it reads it as it starts,
            # and a hangup before it ignores the signal would end it.
            if process.pid is None or process.exitcode is not None or not process.ping(timeout=0.5):
                continue
            try:
                os.kill(process.pid, signal.SIGHUP)
            except ProcessLookupError:  # died just now: keep_subprocess_alive replaces it
                pass


def main() -> None:
    settings = Settings()
    try:  # the keys file, or the launcher's last good copy of it: what every worker will start with
        starting_ring(settings.keys_file, settings.api_key.get_secret_value() if settings.api_key else None,
                      settings.keys_last_good_file, quiet=True)
    except KeysFileError as exc:  # one line, not a traceback per worker
        logger.error(exc)
        sys.exit(STARTUP_FAILURE)
    max_connections, backlog = connection_limits(settings.max_connections, 2048, raise_open_file_limit())
    config = TCPListenerConfig("featurehash.service.app:create_app", factory=True, host=settings.host, port=settings.port,
                               workers=settings.workers, access_log=False, timeout_graceful_shutdown=20,
                               # no WebSocket routes; an upgrade would also take its socket out of the connection cap
                               http=GuardedH11Protocol, ws="none", backlog=backlog,
                               header_timeout=settings.header_timeout_seconds,
                               body_timeout=settings.body_timeout_seconds, max_connections=max_connections)
    logger.info("At most %d connections per worker; request headers within %g s, bodies moving every %g s",
                max_connections, settings.header_timeout_seconds, settings.body_timeout_seconds)
    if config.workers > 1:
        Workers(config, sockets=[config.bind_socket()]).run()
        return
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)


if __name__ == "__main__":
    main()
