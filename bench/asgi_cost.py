"""The app's own CPU time per request, without HTTP: the service and the floor driven as raw ASGI apps.

    python bench/asgi_cost.py [--layers]

Each request is a scope, one body message and the answer's send calls, timed with process_time
(this process's CPU, which other jobs on a shared machine inflate far less than wall time),
1000 requests a block, blocks interleaved, the best block kept. The service runs its lifespan
on an embedded Redis, so cached maps are served as in production (no store round trip), with
its access log on (formatted and written, to /dev/null).
What HTTP adds (uvicorn, h11, sockets) is the same for both apps and is not here.

--layers: the service's own layers, one at a time, by what a single-vector rff transform costs without
each (the access log off; metrics and access log off; admission control off; all three off), in the same
interleaved blocks as the service whole and the floor doing the same numpy work.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import io
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

import service_floor
from featurehash.service.api import middleware
from featurehash.service.api.middleware import access_lines
from featurehash.service.config import Settings
from featurehash.service.app import create_app
from featurehash.store.embedded import EmbeddedRedis

JSON = [(b"content-type", b"application/json")]
NPY = [(b"content-type", b"application/x-npy"), (b"accept", b"application/x-npy")]


async def call(app, method: str, path: str, body: bytes = b"", headers=()) -> tuple[int, bytes]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"bench"), (b"content-length", str(len(body)).encode()), *headers],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}
    delivered = False

    async def receive():
        nonlocal delivered
        if delivered:
            await asyncio.Event().wait()  # a disconnect never comes
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    sent = []

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(message.get("body", b"") for message in sent[1:])


async def _started(app):
    """Run the app's lifespan startup; returns the queue that later asks for its shutdown, and the task."""
    inbox, outbox = asyncio.Queue(), asyncio.Queue()
    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}},
                                     inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    message = await outbox.get()
    if message["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"lifespan startup failed: {message}")
    return inbox, task


@contextlib.asynccontextmanager
async def running_app(prefix: str = "featurehash-asgi-"):
    """The service's app on its own embedded Redis, its lifespan started and its access log sent to /dev/null
    (the lines are still formatted and written: their cost is part of a request's), shut down on exit."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        redis = EmbeddedRedis(Path(tmp))
        redis.start()
        try:
            app = create_app(Settings(REDIS_URL=redis.url, access_log_level="info"))
            access_lines.flush()
            access_lines.fd = os.open(os.devnull, os.O_WRONLY)
            inbox, task = await _started(app)
            yield app
            await inbox.put({"type": "lifespan.shutdown"})
            await task
        finally:
            access_lines.flush()
            if access_lines.fd != 2:
                os.close(access_lines.fd)
                access_lines.fd = 2
            redis.stop()


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


GCWS_SPEC = {"method": "gcws", "input_dim": 64, "n_components": 256, "seed": 1}
ONE_VECTOR = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
ONE_VECTOR_JSON = orjson.dumps({"vectors": ONE_VECTOR}, option=orjson.OPT_SERIALIZE_NUMPY)


async def _created(app, spec: dict) -> str:
    """The id of the map `spec` created through the service's own route."""
    status, body = await call(app, "POST", "/v1/maps", orjson.dumps(spec), JSON)
    return orjson.loads(body)["id"]


async def _best_cpu(cases: dict[str, tuple], rounds: int, per_block: int,
                    switched=lambda name: contextlib.nullcontext()) -> dict[str, float]:
    """Seconds of this process's CPU per request of each case (an app, then `call`'s arguments), the best of
    `rounds` blocks of `per_block` requests, the cases' blocks interleaved; each block within `switched(name)`
    and after one request that must answer 200."""
    best = {name: float("inf") for name in cases}
    for _ in range(rounds):
        for name, (target, *request) in cases.items():
            with switched(name):
                status, body = await call(target, *request)
                if status != 200:
                    raise RuntimeError(f"{name}: {status} {body[:200]!r}")
                start = time.process_time()
                for _ in range(per_block):
                    await call(target, *request)
                best[name] = min(best[name], (time.process_time() - start) / per_block)
    return best


async def _measure(rounds: int, per_block: int) -> dict[str, float]:
    async with running_app() as app:
        floor = service_floor.create_app()
        rff, gcws = await _created(app, service_floor.RFF_SPEC), await _created(app, GCWS_SPEC)
        cases = {"floor": (floor, "POST", "/floor", ONE_VECTOR_JSON, JSON),
                 "floor + rff work": (floor, "POST", "/floor-rff", ONE_VECTOR_JSON, JSON),
                 "rff JSON": (app, "POST", f"/v1/maps/{rff}/transform", ONE_VECTOR_JSON, JSON),
                 "rff npy": (app, "POST", f"/v1/maps/{rff}/transform", npy_bytes(ONE_VECTOR), NPY),
                 "gcws hash JSON": (app, "POST", f"/v1/maps/{gcws}/hash", ONE_VECTOR_JSON, JSON),
                 "GET /healthz": (app, "GET", "/healthz", b"", [])}
        return await _best_cpu(cases, rounds, per_block)


def app_cpu_per_request(rounds: int = 7, per_block: int = 1000) -> dict[str, float]:
    """Seconds of this process's CPU per request, best block, for the floor and the service's routes."""
    return asyncio.run(_measure(rounds, per_block))


def report(seconds: dict[str, float]) -> None:
    floor = seconds["floor"]
    print("  the app's own CPU per request, no HTTP (raw ASGI calls in this process, best of interleaved blocks):")
    for name, value in seconds.items():
        print(f"    {name:34s} {value * 1e6:8.0f} us {value / floor:6.2f}x floor   +{(value - floor) * 1e6:4.0f} us")
    work = seconds["floor + rff work"]
    print(f"    rff JSON against the floor doing the same numpy work: {seconds['rff JSON'] / work:.2f}x "
          f"(+{(seconds['rff JSON'] - work) * 1e6:.0f} us)")


def _recorder(app) -> middleware.RequestRecorder:
    node = app.middleware_stack or app.build_middleware_stack()
    while not isinstance(node, middleware.RequestRecorder):
        node = node.app
    return node


@contextlib.contextmanager
def _without(recorder: middleware.RequestRecorder, layers: tuple[str, ...]):
    """The service with `layers` switched off: "log" (the access log), "metrics" (the per-request metrics and
    the access log: RequestRecorder._record), "admission" (admission control)."""
    record, admission, level = middleware.RequestRecorder._record, recorder.admission, middleware.access_logger.level
    try:
        if "log" in layers:
            middleware.access_logger.setLevel(logging.CRITICAL + 1)
        if "metrics" in layers:
            recorder._record = lambda *args: None
        if "admission" in layers:
            recorder.admission = None
        yield
    finally:
        middleware.access_logger.setLevel(level)
        recorder.__dict__.pop("_record", None)
        recorder.admission = admission
        assert middleware.RequestRecorder._record is record


LAYER_CASES = {"service": (), "no access log": ("log",), "no metrics, no log": ("metrics", "log"),
               "no admission": ("admission",), "none of the three": ("metrics", "log", "admission")}


async def _measure_layers(rounds: int, per_block: int) -> dict[str, float]:
    async with running_app() as app:
        path = f"/v1/maps/{await _created(app, service_floor.RFF_SPEC)}/transform"
        cases = {"floor + rff work": (service_floor.create_app(), "POST", "/floor-rff", ONE_VECTOR_JSON, JSON)}
        cases.update({name: (app, "POST", path, ONE_VECTOR_JSON, JSON) for name in LAYER_CASES})
        recorder = _recorder(app)
        return await _best_cpu(cases, rounds, per_block,
                               switched=lambda name: _without(recorder, LAYER_CASES.get(name, ())))


def report_layers(seconds: dict[str, float]) -> None:
    work, whole = seconds["floor + rff work"], seconds["service"]
    print("  the service's layers, rff JSON single vector, no HTTP (best of interleaved blocks, this process's CPU):")
    for name, value in seconds.items():
        print(f"    {name:24s} {value * 1e6:7.1f} us  {value / work:5.2f}x the floor doing the same work")
    for name, layers in list(LAYER_CASES.items())[1:]:
        print(f"    cost of {' + '.join(layers):26s} {(whole - seconds[name]) * 1e6:6.1f} us")
    print(f"    the rest (decode, checks, cost model, routing, request id): "
          f"{(seconds['none of the three'] - work) * 1e6:.1f} us over the floor")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", action="store_true", help="the service's own layers, one at a time")
    parser.add_argument("--rounds", type=int, default=7)
    arguments = parser.parse_args()
    if arguments.layers:
        report_layers(asyncio.run(_measure_layers(arguments.rounds, 1000)))
    else:
        report(app_cpu_per_request(arguments.rounds))
