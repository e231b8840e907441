"""The OpenAPI document (the contract clients are generated from) and its offline docs pages.

FastAPI documents the routes, their query parameters and their answers. Vector bodies are read raw
(for speed and .npy), so their models are added here under components, made in one pass so that
shared models (SparseVector) are defined once and referenced. Swagger UI and ReDoc load their
scripts from the service itself (the assets fastapi-offline ships), so /docs works without a network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic.json_schema import models_json_schema

from ...protocol.schemas import BODY_MODELS
from .deps import SCOPE_EXTENSION, Requires

ASSETS_URL = "/docs-assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
REF_TEMPLATE = "#/components/schemas/{model}"
BEARER = "HTTPBearer"  # FastAPI's name for the HTTPBearer scheme
SECURITY_SCHEME = {"type": "http", "scheme": "bearer", "description": (
    "An API key as 'Authorization: Bearer <key>'. A key belongs to one tenant and grants scopes: read (transform, "
    "hash, kernel, index queries, reading maps and indexes), write (creating maps, creating and deleting one's own "
    "indexes, adding and removing items; implies nothing else), admin (every scope, other tenants' indexes with "
    "?tenant=, GET /v1/tenants). A missing or unknown key is a 401; a key without the operation's scope a 403 "
    "naming it (field 'scope'). Another tenant's index is a 404.")}
SCOPE_NOTE = "\n\nRequires the `{}` scope."


def build_document(app: FastAPI, api_key_required: bool = True) -> dict[str, Any]:
    """The document; without API keys (neither FEATUREHASH_API_KEY nor a keys file) no operation declares
    Bearer security, which FastAPI's HTTPBearer (even with auto_error=False) would declare as required.
    With keys, each operation names the scope it requires: in `x-required-scope`, in its description and as
    the role of its Bearer requirement (OpenAPI 3.1 lets a non-OAuth scheme list roles)."""
    document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    scopes = _route_scopes(app)
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            scope = operation.get(SCOPE_EXTENSION) or scopes.get((path, method.upper()))
            if not api_key_required:
                operation.pop("security", None)
            elif scope is not None:
                operation[SCOPE_EXTENSION] = scope
                operation["security"] = [{BEARER: [scope]}]
                operation["description"] = (operation.get("description", "") + SCOPE_NOTE.format(scope)).lstrip()
    if not api_key_required:
        document.get("components", {}).pop("securitySchemes", None)
    else:
        document.setdefault("components", {}).setdefault("securitySchemes", {})[BEARER] = SECURITY_SCHEME
    _, body_schemas = models_json_schema([(model, "validation") for model in BODY_MODELS.values()],
                                         ref_template=REF_TEMPLATE)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in body_schemas.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    return document


def _route_scopes(app: FastAPI) -> dict[tuple[str, str], str]:
    """(path, METHOD) -> the scope a route's Requires dependency (deps.READ/WRITE/ADMIN) checks."""
    found = {}
    for route in app.routes:
        if isinstance(route, APIRoute):
            scope = _required_scope(route.dependant)
            if scope is not None:
                found.update({(route.path_format, method): scope for method in route.methods})
    return found


def _required_scope(dependant) -> str | None:
    for sub in dependant.dependencies:
        if isinstance(sub.call, Requires):
            return sub.call.scope.value
        scope = _required_scope(sub)
        if scope is not None:
            return scope
    return None


def install_openapi(app: FastAPI, api_key_required: bool = True) -> None:
    """Serve the document (built once) and the docs pages from local assets."""
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_document(app, api_key_required)
        return app.openapi_schema

    app.openapi = openapi
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - Swagger UI",
                                   swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png")

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - ReDoc",
                              redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png", with_google_fonts=False)
