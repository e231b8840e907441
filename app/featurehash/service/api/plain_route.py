"""Routes whose endpoint takes only the request, served without FastAPI's per-request machinery.

For every route FastAPI opens two exit stacks (for dependencies with yield), records telemetry,
solves the dependencies and wraps the call in its own exception handling: together more time than
transforming one vector. An endpoint that takes only the Request and returns a Response uses none
of it, so `PlainRoute` calls it directly. Its errors still reach the app's exception handlers
(Starlette's ExceptionMiddleware, which wraps the router); its OpenAPI entry is FastAPI's, as for
any route (parameters the endpoint reads itself are documented through openapi_extra).

`PlainDispatch` goes one step further for the request middleware (middleware.RequestRecorder): a request the
router would give to a plain route (the first route that fully matches it) is matched there and handed to the
route with the app's exception handlers, skipping the layers between (ExceptionMiddleware, FastAPI's exit stack
middleware, the router's own pass), ~10 us of the ~150 us a single-vector transform costs in process. Anything
else, and any app whose stack is not that shape (FastAPI telemetry on, router form limits), goes the usual way.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from fastapi.routing import APIRoute
from starlette._exception_handler import wrap_app_handling_exceptions
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Receive, Scope, Send

try:  # FastAPI's merge of a route's child scope (its own keys included); without it, no shortcut
    from fastapi.routing import _update_scope
except ImportError:  # pragma: no cover - other FastAPI releases
    _update_scope = None


class PlainRoute(APIRoute):
    """An APIRoute that calls an endpoint `async (request) -> Response` directly; other endpoints
    (parameters, dependencies) are served as by APIRoute."""

    def __init__(self, path: str, endpoint, **options):
        super().__init__(path, endpoint, **options)
        self.direct = _takes_only_the_request(self)
        if self.direct:
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


class PlainDispatch:
    """`inner` (the app below the request middleware), with the plain routes at the head of its router served
    directly: matched in the router's order, called within the app's exception handlers."""

    def __init__(self, inner: ASGIApp):
        self.inner = inner
        self.head: list = []
        router = _router_below(inner)
        if router is None or _update_scope is None or getattr(router, "form_limits", None):
            return
        plain = [at for at, route in enumerate(router.routes) if getattr(route, "direct", False)]
        if plain:
            self.router, self.head = router, router.routes[:plain[-1] + 1]
            self.methods = frozenset(m for route in self.head if getattr(route, "direct", False) for m in route.methods)
            self.handlers = (inner._exception_handlers, inner._status_handlers)

    def route_of(self, scope: Scope):
        """(route, child scope) of a request the router would give to a plain route, else None."""
        if not self.head or scope["type"] != "http" or scope["method"] not in self.methods \
                or "fastapi.telemetry" in scope:
            return None
        for route in self.head:
            match, child = route.matches(scope)
            if match is Match.FULL:
                return (route, child) if getattr(route, "direct", False) else None
            if match is Match.PARTIAL:  # the router decides: a later full match, or 405
                return None
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.route_of(scope)
        if found is None:
            await self.inner(scope, receive, send)
            return
        route, child = found
        scope["starlette.exception_handlers"] = self.handlers  # as ExceptionMiddleware, then the router
        if "router" not in scope:
            scope["router"] = self.router
        _update_scope(scope, child)
        await wrap_app_handling_exceptions(route.handle, Request(scope, receive, send))(scope, receive, send)


def _router_below(app: ASGIApp) -> Router | None:
    """The router under ExceptionMiddleware and FastAPI's exit stack middleware, if that is the stack's shape."""
    if not isinstance(app, ExceptionMiddleware) or not isinstance(app.app, AsyncExitStackMiddleware):
        return None
    router = app.app.app
    return router if isinstance(router, Router) else None
