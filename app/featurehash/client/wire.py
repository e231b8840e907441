"""Requests as data and answers read back: the one call a step sends, the retry policy, and the body
encodings (.npy both ways, JSON rows) both clients share."""

from __future__ import annotations

import email.utils
import io
import json
import time
from dataclasses import dataclass, field
from typing import Any, Generator, Iterator
from urllib.parse import quote

import httpx
import numpy as np
import orjson
import scipy.sparse as sp

from . import checks
from ..maps import FeatureHashError
from ..npy.answer import NpyAnswer
from .results import FeatureHashAPIError, api_error


NPY = "application/x-npy"
ITEM_IDS_HEADER_BYTES = 8192  # ids of an .npy add travel in a header; servers cap headers near 16 KiB


# -- requests as data ------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] | None = None


Operation = Generator[_Call, httpx.Response, Any]


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all; waits `backoff * 2**n` seconds (at most `max_wait`), or Retry-After if longer."""

    attempts: int = 4
    backoff: float = 0.25
    max_wait: float = 30.0

    def wait(self, attempt: int, retry_after: str | None) -> float:
        wait = self.backoff * 2**attempt
        if retry_after:
            wait = max(wait, _seconds(retry_after))
        return min(wait, self.max_wait)


def _seconds(retry_after: str) -> float:
    """Retry-After as delay-seconds or an HTTP date."""
    if retry_after.strip().isdigit():
        return float(retry_after)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(retry_after).timestamp() - time.time())
    except (TypeError, ValueError):
        return 0.0


def _retryable(response: httpx.Response) -> bool:
    return response.status_code == 503 or (response.status_code in (409, 429, 507) and "Retry-After" in response.headers)


def _refusal(error: FeatureHashError) -> FeatureHashAPIError:
    """An input refused before sending, as the service's answer to it: 422, the field, "<field>: <message>"."""
    return FeatureHashAPIError(422, str(error), error.field)


def _raise_for_status(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        try:
            body = response.json()
            detail, field_name = body.get("detail", response.text), body.get("field")
        except ValueError:
            detail, field_name = response.text, None
        raise api_error(response.status_code, str(detail), field_name, response.headers.get("Retry-After"))
    return response


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def _load_npy(response: httpx.Response) -> np.ndarray:
    array = getattr(response, _NPY_ARRAY, None)  # read while it arrived (`_read`)
    return array if array is not None else np.load(io.BytesIO(response.content), allow_pickle=False)


_NPY_ARRAY = "featurehash_npy_array"


async def _aread(response: httpx.Response) -> None:
    if response.status_code != 200 or not _is_npy(response):
        await response.aread()
        return
    answer = NpyAnswer()
    async for piece in response.aiter_bytes():
        answer.add(piece)
    setattr(response, _NPY_ARRAY, answer.array())


def _read(response: httpx.Response, pieces: Iterator[bytes]) -> None:
    """Read a streamed answer: a 200 .npy body straight into its array (kept on the response for
    `_load_npy`), anything else whole, as httpx would."""
    if response.status_code != 200 or not _is_npy(response):
        response.read()
        return
    answer = NpyAnswer()
    for piece in pieces:
        answer.add(piece)
    setattr(response, _NPY_ARRAY, answer.array())


def _is_npy(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith(NPY)


def _segment(value: str) -> str:
    """`value` as exactly one URL path segment: percent-encoded, and never a dot segment, which HTTP
    clients and proxies remove together with the segment before it (".../items/.." is the index)."""
    if value in ("", ".", ".."):
        raise ValueError(f"{value!r} cannot be a URL path segment")
    return quote(value, safe="")


def _rows_field(X, key: str) -> dict[str, Any]:
    if sp.issparse(X):
        return {f"sparse_{key}": [
            {"indices": X.indices[X.indptr[r]:X.indptr[r + 1]].tolist(),
             "values": X.data[X.indptr[r]:X.indptr[r + 1]].tolist()} for r in range(X.shape[0])]}
    return {key: checks.json_ready(X)}


def _json_call(method: str, path: str, document: Any, params: dict | None = None,
               headers: dict[str, str] | None = None) -> _Call:
    return _Call(method, path, orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY),
                 {"Content-Type": "application/json", **(headers or {})}, params)


def _vectors_call(path: str, X, key: str, binary: bool, params: dict | None = None, options: dict | None = None,
                  headers: dict[str, str] | None = None) -> _Call:
    """Dense rows (checked: an array or CSR) as an .npy body (`options` then go in the query string), else
    JSON rows with `options` in the body; `params` are query parameters either way."""
    if binary and not sp.issparse(X):
        return _Call("POST", path, _npy_bytes(X), {"Content-Type": NPY, **(headers or {})},
                     {**(params or {}), **(options or {})} or None)
    return _json_call("POST", path, {**_rows_field(X, key), **(options or {})}, params=params, headers=headers)


def _page(limit: int, after: str | None) -> dict[str, Any]:
    checks.query_param(limit, "limit", checks.PAGE_LIMIT)
    return {"limit": limit, **({"after": after} if after else {})}


def _items_call(path: str, ids: list[str], rows, binary: bool) -> _Call:
    """Items with their ids: in the X-Item-Ids header of an .npy body (JSON is ASCII, \\u escapes, as headers
    must be), else in the JSON body."""
    if binary:
        return _vectors_call(path, rows, "vectors", True, headers={"X-Item-Ids": json.dumps(ids)})
    return _json_call("POST", path, {"ids": ids, **_rows_field(rows, "vectors")})


def _as_npy(X, binary: bool) -> bool:
    """Whether rows travel as an .npy body (dense rows with `binary`), else as JSON."""
    return binary and not sp.issparse(X)
