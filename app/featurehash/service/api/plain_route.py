"""Routes whose endpoint takes only the request, served without FastAPI's per-request machinery.

For every route FastAPI opens two exit stacks (for dependencies with yield), records telemetry,
solves the dependencies and wraps the call in its own exception handling: together more time than
transforming one vector. An endpoint that takes only the Request and returns a Response uses none
of it, so `PlainRoute` calls it directly. Its errors still reach the app's exception handlers
(Starlette's ExceptionMiddleware, which wraps the router); its OpenAPI entry is FastAPI's, as for
any route (parameters the endpoint reads itself are documented through openapi_extra).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send


class PlainRoute(APIRoute):
    """An APIRoute that calls an endpoint `async (request) -> Response` directly; other endpoints
    (parameters, dependencies) are served as by APIRoute."""

    def __init__(self, path: str, endpoint, **options):
        super().__init__(path, endpoint, **options)
        if _takes_only_the_request(self):
            self.app = _direct(endpoint)


def _takes_only_the_request(route: APIRoute) -> bool:
    dependant = route.dependant
    declared = (dependant.path_params, dependant.query_params, dependant.header_params, dependant.cookie_params,
                dependant.body_params, dependant.dependencies)
    return (dependant.request_param_name is not None and not any(declared) and route.body_field is None
            and getattr(route, "max_body_size", None) is None)


def _direct(endpoint) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        response = await endpoint(Request(scope, receive, send))
        await response(scope, receive, send)
    return app
