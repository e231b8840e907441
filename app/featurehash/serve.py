"""`featurehash serve`: Redis (embedded unless REDIS_URL is set), then the web tier (featurehash.web).

The launcher owns both children. It starts the embedded Redis once (never one per
worker), waits for PING, then runs uvicorn with REDIS_URL pointing at the server's unix
socket. On SIGTERM/SIGINT it forwards the signal to uvicorn (which drains its workers),
waits for it to exit, and only then stops Redis, so no acknowledged write is lost.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

from .config import Settings
from .store.embedded import EmbeddedRedis, die_with_parent


def _metrics_dir(settings: Settings) -> str:
    path = settings.data_dir / "metrics"
    shutil.rmtree(path, ignore_errors=True)  # counters restart with the workers
    path.mkdir(parents=True, exist_ok=True)
    return str(path.resolve())


def serve(settings: Settings) -> int:
    embedded = None
    env = {**os.environ, "FEATUREHASH_HOST": settings.host, "FEATUREHASH_PORT": str(settings.port),
           "FEATUREHASH_WORKERS": str(settings.workers), "FEATUREHASH_DATA_DIR": str(settings.data_dir)}
    if not settings.redis_url:
        embedded = EmbeddedRedis(settings.data_dir)
        embedded.start()
        env["REDIS_URL"] = embedded.url
        print(f"featurehash: embedded Redis at {embedded.url} (data in {embedded.data_dir})", file=sys.stderr)
    if settings.workers > 1:
        env["PROMETHEUS_MULTIPROC_DIR"] = _metrics_dir(settings)
    stopping = False
    try:
        web = subprocess.Popen([sys.executable, "-m", "featurehash.web"], env=env, preexec_fn=die_with_parent)

        def forward(signum, frame):  # must not block: just pass the signal on
            nonlocal stopping
            stopping = True
            if web.poll() is None:
                web.send_signal(signal.SIGTERM)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        code = web.wait()
        # uvicorn re-raises the signal it shut down on; that is a clean stop we asked for.
        return 0 if stopping and code in (0, -signal.SIGTERM) else code
    finally:
        if embedded is not None:
            embedded.stop()
