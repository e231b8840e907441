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

from . import checks, deadline
from ..maps import FeatureHashError
from ..npy.answer import NpyAnswer
from .answers import ERROR_ANSWER_BYTES, UNSIZED_ANSWER_BYTES, Expect, layout_check, mismatch
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
    expect: Expect = Expect()


@dataclass(frozen=True)
class Answer:
    """An answer as read: its status and headers, and its body, or for a 2xx .npy answer its array."""

    status: int
    headers: httpx.Headers
    content: bytes = b""
    array: np.ndarray | None = None


Operation = Generator[_Call, Answer, Any]


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all; waits `backoff * 2**n` seconds (at most `max_wait`), or Retry-After if longer.
    The clients retry a connection error, a timeout (a request past its deadline), a 503, and a 409, 429 or 507
    with Retry-After, for every operation (index adds and deletes are idempotent by item id); never an answer
    that does not match its request (AnswerMismatch) or another error status."""

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


def _retryable(answer: Answer) -> bool:
    return answer.status == 503 or (answer.status in (409, 429, 507) and "Retry-After" in answer.headers)


def _refusal(error: FeatureHashError) -> FeatureHashAPIError:
    """An input refused before sending, as the service's answer to it: 422, the field, "<field>: <message>"."""
    return FeatureHashAPIError(422, str(error), error.field)


def _raise_for_status(answer: Answer) -> Answer:
    if not 200 <= answer.status < 300:  # a redirect too: the client follows none
        text = answer.content.decode("utf-8", "replace")
        try:
            body = orjson.loads(answer.content)
            detail, field_name = body.get("detail", text), body.get("field")
        except (orjson.JSONDecodeError, AttributeError):
            detail, field_name = text, None
        raise api_error(answer.status, str(detail), field_name, answer.headers.get("Retry-After"))
    return answer


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


class _Reader:
    """Reads one streamed answer, piece by piece, into an Answer. A 2xx answer must have the content type its
    call expects (checked before any byte of the body is read) and stop within its byte limit (the client's
    `max_answer_bytes`, else what the request can produce): reading stops at the limit, nothing more is held.
    An .npy answer goes straight into its array once its header matched the request's layout. An error answer
    is read up to ERROR_ANSWER_BYTES, the rest left unread."""

    def __init__(self, response: httpx.Response, expect: Expect, max_answer_bytes: int | None):
        self.status, self.headers, self.size = response.status_code, response.headers, 0
        self.pieces: list[bytes] = []
        self.npy: NpyAnswer | None = None
        self.ok = 200 <= self.status < 300
        if not self.ok:
            self.limit = ERROR_ANSWER_BYTES
            return
        if expect.content_type is not None and max_answer_bytes is not None:
            self.limit, self.source = max_answer_bytes, "the client's max_answer_bytes"
        elif expect.max_bytes is None:
            self.limit, self.source = UNSIZED_ANSWER_BYTES, "UNSIZED_ANSWER_BYTES: the request does not bound it"
        else:
            self.limit, self.source = expect.max_bytes, "what the request can produce"
        content_type = self.headers.get("content-type", "")
        if expect.content_type is not None and not content_type.startswith(expect.content_type):
            raise mismatch(self.status, f"content type {expect.content_type} (as asked)", repr(content_type))
        declared = self.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            raise mismatch(self.status, self._within(), f"Content-Length {declared}")
        if expect.content_type == NPY:
            layout = expect.one_hot_npy if "X-Feature-Dim" in self.headers and expect.one_hot_npy else expect.npy
            self.npy = NpyAnswer(layout_check(layout, self.status, self.limit))

    def _within(self) -> str:
        return "no body" if self.limit == 0 else f"at most {self.limit} bytes ({self.source})"

    def add(self, piece: bytes) -> bool:
        """Take a piece; False once no more is wanted (an error answer past its limit)."""
        self.size += len(piece)
        if deadline.passed():  # a transport given to the client reads under httpx's own timeouts
            raise httpx.ReadTimeout(deadline.message())
        if self.size > self.limit:
            if not self.ok:
                return False
            raise mismatch(self.status, self._within(), f"more ({self.size} bytes read, then stopped)")
        if self.npy is None:
            self.pieces.append(piece)
            return True
        try:
            self.npy.add(piece)
        except ValueError as error:
            raise mismatch(self.status, "an .npy array", str(error)) from None
        return True

    def answer(self) -> Answer:
        if self.npy is None:
            return Answer(self.status, self.headers, b"".join(self.pieces))
        try:
            return Answer(self.status, self.headers, array=self.npy.array())
        except ValueError as error:
            raise mismatch(self.status, "an .npy array", str(error)) from None


def _read(response: httpx.Response, expect: Expect, max_answer_bytes: int | None) -> Answer:
    reader = _Reader(response, expect, max_answer_bytes)
    for piece in response.iter_bytes():
        if not reader.add(piece):
            break
    return reader.answer()


async def _aread(response: httpx.Response, expect: Expect, max_answer_bytes: int | None) -> Answer:
    reader = _Reader(response, expect, max_answer_bytes)
    async for piece in response.aiter_bytes():
        if not reader.add(piece):
            break
    return reader.answer()


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
