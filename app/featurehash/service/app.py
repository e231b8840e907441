"""The FastAPI app factory: `uvicorn featurehash.service.app:create_app --factory` (via `featurehash serve`)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import threading
import time
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from redis.asyncio import Redis
from starlette.concurrency import run_in_threadpool

from .. import __version__
from . import compile_cache
from .api import routes_compute, routes_health, routes_indexes, routes_maps
from .api.admission import Admission
from .api.state import ServiceState
from .api.quotas import RequestQuotas
from .auth import KeySource
from .api.errors import install_error_handlers
from .api.middleware import RequestRecorder, access_lines, configure_access_log
from .api.openapi import install_openapi
from ..protocol.schemas import operation_id
from .config import Settings, get_settings
from .map_cache import MapCache
from ..store import SpecStore
from ..store.lsh_indexes import AsyncLSHIndexes
from ..store.spec_watch import SpecWatch

logger = logging.getLogger("featurehash")


DESCRIPTION = """Seeded kernel feature maps: create a map once, transform and hash anywhere.

Vectors travel as JSON (`vectors` rows or `sparse_vectors`) or as one 2-D `application/x-npy` array;
answers are .npy with `Accept: application/x-npy`. Every 4xx/5xx body is `{"detail", "field"}`.
A request id is taken from `X-Request-ID` (or made) and echoed in that header and in the access log."""


def _redis_client(settings: Settings) -> Redis:
    if not settings.redis_url:
        raise RuntimeError("REDIS_URL is not set: start the service with `featurehash serve`, which runs an "
                           "embedded Redis, or point REDIS_URL at a Redis server")
    return Redis.from_url(settings.redis_url, socket_timeout=settings.redis_timeout_seconds,
                          socket_connect_timeout=settings.redis_timeout_seconds, health_check_interval=10)


def _add_routes(app: FastAPI, router: APIRouter) -> None:
    """The router's routes, made whole by it (prefix, tags, dependencies, answers), as the app's own:
    include_router keeps a router level that every request walks through, route by route."""
    app.router.routes.extend(router.routes)


def _telemetry_options(settings: Settings) -> dict:
    """FastAPI's native OpenTelemetry, off unless settings.opentelemetry (older FastAPI releases have none)."""
    if settings.opentelemetry or "telemetry" not in inspect.signature(FastAPI).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}


def preload_kernels() -> threading.Event:
    """Every method's compiled kernels loaded on a daemon thread (`compile_cache.warm`: one small map of
    each through what the service calls); the event is set when they are, or when that failed (logged: the
    service still computes, paying each kernel's load on its first request)."""
    loaded = threading.Event()

    def load() -> None:
        start = time.perf_counter()
        try:
            maps = len(compile_cache.warm())
            logger.info("compiled kernels of %d maps loaded in %.2f s", maps, time.perf_counter() - start)
        except Exception:  # noqa: BLE001  (a failed warm-up must not keep the worker unready)
            logger.exception("loading the compiled kernels failed")
        finally:
            loaded.set()

    threading.Thread(target=load, name="featurehash-preload", daemon=True).start()
    return loaded


def _reload_on_sighup(keys: KeySource) -> bool:
    """SIGHUP re-reads the keys file (in the event loop, not in the signal handler); False where the loop
    cannot take signal handlers (not the main thread: an in-process test server), the file is still
    re-read when it changes."""
    if keys.keys_file is None:
        return False
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, keys.reload)
    except (RuntimeError, ValueError, NotImplementedError, AttributeError):
        return False
    return True


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    # A keys file that does not validate (and no last good copy from `featurehash serve`) stops the start here,
    # with one line (auth.keys.KeysFileError).
    keys = KeySource(settings.keys_file, settings.api_key.get_secret_value() if settings.api_key else None,
                     last_good=settings.keys_last_good_file)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        redis = _redis_client(settings)
        watch = SpecWatch(settings.redis_url, settings.key_prefix, max_staleness=settings.map_staleness_seconds,
                          connect_timeout=settings.redis_timeout_seconds)
        app.state.service = ServiceState(settings=settings,
                                         store=SpecStore(redis, settings.key_prefix, settings.durability,
                                                         settings.max_spec_bytes),
                                         cache=MapCache(settings.map_cache_bytes),
                                         indexes=AsyncLSHIndexes(redis, settings.key_prefix, offload=run_in_threadpool,
                                                                 durability=settings.durability),
                                         watch=watch, keys=keys, quotas=RequestQuotas(redis, settings))
        hangup = _reload_on_sighup(keys)
        watch.start()
        if settings.preload_kernels:
            app.state.service.kernels_loaded = preload_kernels()
        try:
            yield
        finally:
            if hangup:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)  # removing restored the default: a hangup would end us
            app.state.service.warmups.shutdown()
            await app.state.service.quotas.close()
            await watch.stop()
            await redis.aclose()
            access_lines.flush()

    app = FastAPI(title="featurehash", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  generate_unique_id_function=operation_id, description=DESCRIPTION,
                  **_telemetry_options(settings))
    install_error_handlers(app, settings.retry_after_seconds, settings.redis_timeout_seconds)
    for module in (routes_compute, routes_maps, routes_indexes, routes_health):  # the hot routes match first
        _add_routes(app, module.router)
    _add_routes(app, routes_indexes.tenants_router)
    install_openapi(app, api_key_required=not keys.ring.open)
    app.add_middleware(RequestRecorder, max_body_bytes=settings.max_body_bytes, admission=Admission(
        settings.inflight_budget, settings.admit_small_bytes, (settings.stream_threads + 3) * settings.stream_chunk_bytes,
        settings.retry_after_seconds))
    configure_access_log(settings.access_log_level)
    return app
