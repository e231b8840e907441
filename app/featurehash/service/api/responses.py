"""JSON answers (orjson, numpy arrays serialized as lists); the only web-framework piece of the codecs, kept
out of featurehash.protocol so the client and batch code decode bodies without importing FastAPI."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Response

from ...protocol.codecs import JSON


def json_response(document: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    content = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    return Response(content, status_code=status_code, media_type=JSON, headers=headers)
