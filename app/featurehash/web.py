"""The web tier that `featurehash serve` runs as its child: uvicorn and its workers.

Settings come from the environment the launcher prepared (REDIS_URL included). With
several workers uvicorn binds the shared listener itself, with protocol number 0, so
asyncio never sets TCP_NODELAY on accepted connections and every small keep-alive
response waits ~40 ms on Nagle + delayed ACK. This module binds that listener as TCP,
with TCP_NODELAY (inherited by accepted sockets on Linux).
"""

from __future__ import annotations

import logging
import socket
import sys

import uvicorn
from uvicorn.supervisors import Multiprocess

from .config import Settings

STARTUP_FAILURE = 3
logger = logging.getLogger("uvicorn.error")


class TCPListenerConfig(uvicorn.Config):
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


def main() -> None:
    settings = Settings()
    config = TCPListenerConfig("featurehash.main:create_app", factory=True, host=settings.host, port=settings.port,
                               workers=settings.workers, access_log=False, timeout_graceful_shutdown=20)
    if config.workers > 1:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
        return
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)


if __name__ == "__main__":
    main()
