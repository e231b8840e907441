"""The framework floor for bench_service.py: one FastAPI route of the service's shape, nothing else.

    python bench/service_floor.py --port P [--workers N]

POST /floor reads an orjson body and answers {"features": <a constant 1x1024 float32 array>}
through orjson; POST /floor-rff does the service's numpy work too (the rows as float32, the transform
of bench_service's rff map, 64 -> 1024, built here once: create_map(...).materialize()), so that what
the service spends beyond it is its own layers: store, validation, admission, metrics, middleware. Both are
served by the same uvicorn configuration as `featurehash serve` (featurehash.service.web.TCPListenerConfig:
TCP_NODELAY listener, no uvicorn access log, the same guarded h11 protocol and its limits).
"""

from __future__ import annotations

import argparse

import numpy as np
import orjson
import uvicorn
from fastapi import FastAPI, Request, Response
from featurehash.service.config import Settings
from featurehash.service.connection_guard import GuardedH11Protocol
from featurehash.service.web import TCPListenerConfig
from uvicorn.supervisors import Multiprocess

FEATURES = np.linspace(-1, 1, 1024, dtype=np.float32).reshape(1, 1024)
RFF_SPEC = {"method": "rff", "input_dim": 64, "n_components": 1024, "seed": 1, "params": {"gamma": 1 / 64}}


def create_app() -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/floor")
    async def floor(request: Request) -> Response:
        orjson.loads(await request.body())
        return Response(orjson.dumps({"features": FEATURES}, option=orjson.OPT_SERIALIZE_NUMPY),
                        media_type="application/json")

    from featurehash.maps import create_map

    maps = {}  # the rff map, built on the first /floor-rff (a slow worker start trips uvicorn's health check)

    @app.post("/floor-rff")
    async def floor_rff(request: Request) -> Response:
        X = np.asarray(orjson.loads(await request.body())["vectors"], dtype=np.float32)
        if not maps:
            maps["rff"] = create_map(RFF_SPEC).materialize()
        return Response(orjson.dumps({"features": maps["rff"].transform(X)}, option=orjson.OPT_SERIALIZE_NUMPY),
                        media_type="application/json")

    @app.get("/readyz")
    async def ready() -> Response:
        return Response(b'{"status":"ready"}', media_type="application/json")

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    settings = Settings()
    config = TCPListenerConfig("service_floor:create_app", factory=True, host="127.0.0.1", port=args.port,
                               workers=args.workers, access_log=False, timeout_graceful_shutdown=20,
                               http=GuardedH11Protocol, ws="none", header_timeout=settings.header_timeout_seconds,
                               body_timeout=settings.body_timeout_seconds, max_connections=settings.max_connections)
    if config.workers > 1:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    else:
        uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
