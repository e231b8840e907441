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
from fastapi.staticfiles import StaticFiles
from pydantic.json_schema import models_json_schema

from ...protocol.schemas import BODY_MODELS

ASSETS_URL = "/docs-assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
REF_TEMPLATE = "#/components/schemas/{model}"


def build_document(app: FastAPI, api_key_required: bool = True) -> dict[str, Any]:
    """The document; without an API key (settings.api_key unset) no operation declares Bearer security,
    which FastAPI's HTTPBearer (even with auto_error=False) would declare as required."""
    document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    if not api_key_required:
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                operation.pop("security", None)
        document.get("components", {}).pop("securitySchemes", None)
    _, body_schemas = models_json_schema([(model, "validation") for model in BODY_MODELS.values()],
                                         ref_template=REF_TEMPLATE)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in body_schemas.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    return document


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
