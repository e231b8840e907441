"""Python clients for the featurehash service (httpx): `FeatureHashClient` and `AsyncFeatureHashClient`.

    with FeatureHashClient("http://127.0.0.1:8000") as client:
        spec = client.create_map("rff", input_dim=64, n_components=1024, params={"gamma": 0.1})
        Z = client.transform(spec["id"], X)                     # float32 ndarray, sent and read as .npy
    async with AsyncFeatureHashClient("http://127.0.0.1:8000") as client:
        Z = await client.transform(spec["id"], X)

Both speak the same operations, written once as generators of requests (`_Operations`) that the two
clients drive. Each first checks its inputs by the service's own rules (featurehash.client.checks):
what the service would refuse raises FeatureHashAPIError with its 422, field and detail, and nothing
is sent. Dense batches travel as .npy by default (`binary=False`: JSON); sparse ones as JSON
sparse rows. Path segments are percent-encoded. A 503 (Redis unreachable or refusing writes, or a worker
shedding load), or a 409, 429 or 507 with Retry-After (a concurrent write; Redis out of memory or disk)
is retried after Retry-After or an exponential backoff, whichever is longer; so
is a connection error, for every call here is idempotent (creating a map or an index of a given
spec, adding items by id) except that a retried delete may find the thing already gone (a 404).
"""

from __future__ import annotations

import asyncio
import email.utils
import io
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Generator, Iterator, NamedTuple, TypedDict
from urllib.parse import quote

import httpx
import numpy as np
import orjson
import scipy.sparse as sp

from . import checks
from ..maps import FeatureHashError, OneHotFeatures
from ..npy.answer import NpyAnswer
from ..store.lsh_layout import check_positive_int

NPY = "application/x-npy"
ITEM_IDS_HEADER_BYTES = 8192  # ids of an .npy add travel in a header; servers cap headers near 16 KiB


# -- typed results ---------------------------------------------------------------------------------

class MapSpec(TypedDict):
    id: str
    method: str
    input_dim: int
    n_components: int
    output_dim: int
    seed: int
    params: dict[str, Any]
    format_version: int
    features: str
    has_hash: bool


class MapPage(TypedDict):
    maps: list[MapSpec]
    next: str | None


class IndexInfo(TypedDict):
    id: str
    name: str
    map_id: str
    method: str
    n_codes: int
    bands: int
    rows: int
    threshold: float
    recall_at_threshold: float
    bands_chosen_by: str
    collision_probability_at_threshold: float
    half_point: float
    items: int
    key_prefix: str


class IndexPage(TypedDict):
    indexes: list[IndexInfo]
    next: str | None


class AddedItems(TypedDict):
    added: int
    replaced: int
    items: int


class DeletedItems(TypedDict):
    removed: int
    missing: list[str]


class Neighbour(TypedDict):
    id: str
    similarity: float


class QueryAnswer(TypedDict):
    results: list[list[Neighbour]]
    candidates: list[int]


class BandedCodes(NamedTuple):
    codes: np.ndarray
    band_keys: list[list[str]]


class KernelAnswer(NamedTuple):
    estimate: np.ndarray
    exact: np.ndarray


class FeatureHashAPIError(Exception):
    """A non-2xx answer: `status`, the offending `field` (when given) and the `detail`."""

    def __init__(self, status: int, detail: str, field: str | None = None, retry_after: str | None = None):
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.field = field
        self.retry_after = retry_after


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
        raise FeatureHashAPIError(response.status_code, str(detail), field_name, response.headers.get("Retry-After"))
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


class _Operations:
    """Each operation: checks its inputs as the service would (featurehash.client.checks: a refusal raises
    FeatureHashError before any request), yields the requests it needs, receives their (2xx) answers and
    returns the result. `known` holds the maps and indexes this client has seen, whose inputs it checks."""

    def __init__(self) -> None:
        self.known = checks.KnownMaps()

    def create_map(self, method: str, input_dim: int, n_components: int, *, seed: int | None = None,
                   params: dict[str, Any] | None = None) -> Operation:
        body = {"method": method, "input_dim": input_dim, "n_components": n_components,
                **({"seed": seed} if seed is not None else {}), **({"params": params} if params is not None else {})}
        call = _json_call("POST", "/v1/maps", body)
        checks.create_map_body(call.content)
        return self.known.learn_map((yield call).json())

    def get_map(self, map_id: str) -> Operation:
        return self.known.learn_map((yield _Call("GET", f"/v1/maps/{_segment(map_id)}")).json())

    def list_maps(self, *, after: str | None = None, limit: int = 100) -> Operation:
        page = (yield _Call("GET", "/v1/maps", params=_page(limit, after))).json()
        for spec in page["maps"]:
            self.known.learn_map(spec)
        return page

    def delete_map(self, map_id: str, *, force: bool = False) -> Operation:
        yield _Call("DELETE", f"/v1/maps/{_segment(map_id)}", params={"force": "true"} if force else None)

    def transform(self, map_id: str, X, *, binary: bool = True, dtype: str = "float32") -> Operation:
        checks.query_param(dtype, "dtype", checks.DTYPE)
        feature_map = self.known.for_map(map_id)
        X = checks.vectors(X, "vectors", feature_map, not _as_npy(X, binary))
        checks.features_of(feature_map)
        response = yield _vectors_call(f"/v1/maps/{_segment(map_id)}/transform", X, "vectors", binary,
                                       params={"dtype": dtype}, headers={"Accept": NPY} if binary else None)
        if _is_npy(response):
            array = _load_npy(response)
            if "X-Feature-Dim" in response.headers:
                return OneHotFeatures(array, float(response.headers["X-Feature-Scale"]),
                                      int(response.headers["X-Feature-Dim"]))
            return array
        body = orjson.loads(response.content)
        if "indices" in body:
            return OneHotFeatures(np.asarray(body["indices"], dtype=np.int64), body["scale"], body["dim"])
        return np.asarray(body["features"], dtype=np.float64 if dtype == "float64" else np.float32)

    def hash(self, map_id: str, X, *, bands: int | None = None, binary: bool = True) -> Operation:
        checks.bands_option(bands, _as_npy(X, binary))
        feature_map = self.known.for_map(map_id)
        X = checks.vectors(X, "vectors", feature_map, not _as_npy(X, binary))
        checks.codes_for(feature_map, X, bands)
        params = {"bands": bands} if bands is not None else None
        response = yield _vectors_call(f"/v1/maps/{_segment(map_id)}/hash", X, "vectors", binary, options=params,
                                       headers={"Accept": NPY} if binary else None)
        if _is_npy(response):
            return _load_npy(response)
        body = orjson.loads(response.content)
        codes = np.asarray(body["codes"], dtype=np.int64)
        return BandedCodes(codes, body["band_keys"]) if bands is not None else codes

    def kernel(self, map_id: str, X, Y=None, *, binary: bool = True) -> Operation:
        path, feature_map = f"/v1/maps/{_segment(map_id)}/kernel", self.known.for_map(map_id)
        as_json = Y is not None or not _as_npy(X, binary)
        X = checks.vectors(X, "x", feature_map, as_json)
        if Y is None:
            call = _vectors_call(path, X, "x", binary)
        else:
            Y = checks.vectors(Y, "y", feature_map, True)
            call = _json_call("POST", path, {**_rows_field(X, "x"), **_rows_field(Y, "y")})
        answer = (yield call).json()
        return KernelAnswer(np.asarray(answer["estimate"]), np.asarray(answer["exact"]))

    def create_index(self, map_id: str, *, name: str | None = None, bands: int | None = None,
                     rows: int | None = None, threshold: float | None = None,
                     recall_at_threshold: float | None = None, vectors: str | None = None,
                     forest_rows: list[int] | None = None) -> Operation:
        options = {"name": name, "bands": bands, "rows": rows, "threshold": threshold,
                   "recall_at_threshold": recall_at_threshold, "vectors": vectors, "forest_rows": forest_rows}
        body = {"map_id": map_id, **{key: value for key, value in options.items() if value is not None}}
        call = _json_call("POST", "/v1/indexes", body)
        checks.create_index_body(call.content, self.known.for_map(map_id) if isinstance(map_id, str) else None)
        return self.known.learn_index((yield call).json())

    def get_index(self, index_id: str) -> Operation:
        return self.known.learn_index((yield _Call("GET", f"/v1/indexes/{_segment(index_id)}")).json())

    def list_indexes(self, *, after: str | None = None, limit: int = 100) -> Operation:
        page = (yield _Call("GET", "/v1/indexes", params=_page(limit, after))).json()
        for info in page["indexes"]:
            self.known.learn_index(info)
        return page

    def delete_index(self, index_id: str) -> Operation:
        self.known.forget_index(index_id)
        yield _Call("DELETE", f"/v1/indexes/{_segment(index_id)}")

    def add_items(self, index_id: str, ids: list[str], X, *, binary: bool = True, batch_rows: int = 1000) -> Operation:
        binary = _as_npy(X, binary)
        X = checks.vectors(X, "vectors", self.known.for_index(index_id), not binary)
        path = f"/v1/indexes/{_segment(index_id)}/items"
        if X.ndim != 2:  # unchecked (the map is unknown here): sent whole, for the service to name its dimension
            return (yield _items_call(path, list(ids), X, binary)).json()
        ids = checks.item_ids(ids, X.shape[0])  # every row has its id, or nothing is sent
        check_positive_int(batch_rows, "batch_rows")  # a client-side count
        total = {"added": 0, "replaced": 0, "items": 0}
        start = 0
        while start < len(ids):
            stop = min(len(ids), start + batch_rows)
            while binary and stop - start > 1 and len(json.dumps(ids[start:stop])) > ITEM_IDS_HEADER_BYTES:
                stop = start + (stop - start) // 2
            answer = (yield _items_call(path, ids[start:stop], X[start:stop], binary)).json()
            total = {"added": total["added"] + answer["added"], "replaced": total["replaced"] + answer["replaced"],
                     "items": answer["items"]}
            start = stop
        return total

    def delete_item(self, index_id: str, item_id: str) -> Operation:
        checks.deletable_item_id(item_id)
        yield _Call("DELETE", f"/v1/indexes/{_segment(index_id)}/items/{_segment(item_id)}")

    def delete_items(self, index_id: str, ids: list[str]) -> Operation:
        call = _json_call("POST", f"/v1/indexes/{_segment(index_id)}/items/delete", {"ids": ids})
        checks.delete_items_body(call.content)
        return (yield call).json()

    def query_index(self, index_id: str, X, *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None, binary: bool = True) -> Operation:
        in_query = _as_npy(X, binary)
        options = {"top_k": top_k, "min_similarity": min_similarity}
        if target_recall is not None:
            options["target_recall"] = target_recall
        fractions = checks.query_options(options, in_query)
        X = checks.vectors(X, "vectors", self.known.for_index(index_id), not in_query)
        checks.fractions(fractions)
        response = yield _vectors_call(f"/v1/indexes/{_segment(index_id)}/query", X, "vectors", binary,
                                       options=options)
        return orjson.loads(response.content)

    def healthz(self) -> Operation:
        return (yield _Call("GET", "/healthz")).json()

    def readyz(self) -> Operation:
        return (yield _Call("GET", "/readyz")).json()


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class FeatureHashClient:
    """Blocking client. Every call raises FeatureHashAPIError for a 4xx/5xx that retries did not cure."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy = RetryPolicy(), transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.http = httpx.Client(base_url=base_url, headers=_headers(api_key), timeout=timeout, transport=transport)
        self.retry, self._sleep, self._ops = retry, sleep, _Operations()

    def __enter__(self) -> "FeatureHashClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _send(self, call: _Call) -> httpx.Response:
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                response = self.http.send(self.http.build_request(call.method, call.path, content=call.content,
                                                                  headers=call.headers, params=call.params),
                                          stream=True)
                try:
                    _read(response, response.iter_bytes())
                finally:
                    response.close()
            except httpx.TransportError:
                if last:
                    raise
                self._sleep(self.retry.wait(attempt, None))
                continue
            if last or not _retryable(response):
                return _raise_for_status(response)
            self._sleep(self.retry.wait(attempt, response.headers.get("Retry-After")))
        raise AssertionError("unreachable")

    def _run(self, operation: Operation):
        try:
            call = next(operation)
            while True:
                call = operation.send(self._send(call))
        except StopIteration as done:
            return done.value
        except FeatureHashError as refused:
            raise _refusal(refused) from None

    def create_map(self, method: str, input_dim: int, n_components: int, *, seed: int | None = None,
                   params: dict[str, Any] | None = None) -> MapSpec:
        """The resolved spec (the same id for the same spec, whoever creates it)."""
        return self._run(self._ops.create_map(method, input_dim, n_components, seed=seed, params=params))

    def get_map(self, map_id: str) -> MapSpec:
        return self._run(self._ops.get_map(map_id))

    def list_maps(self, *, after: str | None = None, limit: int = 100) -> MapPage:
        return self._run(self._ops.list_maps(after=after, limit=limit))

    def iter_maps(self, page_size: int = 100) -> Iterator[MapSpec]:
        after = None
        while True:
            page = self.list_maps(after=after, limit=page_size)
            yield from page["maps"]
            if (after := page["next"]) is None:
                return

    def delete_map(self, map_id: str, *, force: bool = False) -> None:
        """409 if indexes use the map, unless `force` (they keep answering from their copy of its spec)."""
        self._run(self._ops.delete_map(map_id, force=force))

    def transform(self, map_id: str, X, *, binary: bool = True, dtype: str = "float32") -> np.ndarray | OneHotFeatures:
        """Dense features as an ndarray, or OneHotFeatures for one-hot maps (GCWS, binning)."""
        return self._run(self._ops.transform(map_id, X, binary=binary, dtype=dtype))

    def hash(self, map_id: str, X, *, bands: int | None = None, binary: bool = True) -> np.ndarray | BandedCodes:
        """Codes (int64 n x k); with `bands`, BandedCodes(codes, band_keys)."""
        return self._run(self._ops.hash(map_id, X, bands=bands, binary=binary))

    def kernel(self, map_id: str, X, Y=None, *, binary: bool = True) -> KernelAnswer:
        """(estimate, exact) kernel matrices between the rows of X and Y (Y defaults to X)."""
        return self._run(self._ops.kernel(map_id, X, Y, binary=binary))

    def create_index(self, map_id: str, *, name: str | None = None, bands: int | None = None, rows: int | None = None,
                     threshold: float | None = None, recall_at_threshold: float | None = None,
                     vectors: str | None = None, forest_rows: list[int] | None = None) -> IndexInfo:
        """The index (chosen bands and rows included); an existing one of that name if it matches.
        `vectors` ("sparse", "float32", "float16") keeps items' vectors for exact re-ranking;
        `forest_rows` adds shorter band prefixes that a query with target_recall can widen to."""
        return self._run(self._ops.create_index(map_id, name=name, bands=bands, rows=rows, threshold=threshold,
                                                  recall_at_threshold=recall_at_threshold, vectors=vectors,
                                                  forest_rows=forest_rows))

    def get_index(self, index_id: str) -> IndexInfo:
        return self._run(self._ops.get_index(index_id))

    def list_indexes(self, *, after: str | None = None, limit: int = 100) -> IndexPage:
        return self._run(self._ops.list_indexes(after=after, limit=limit))

    def delete_index(self, index_id: str) -> None:
        self._run(self._ops.delete_index(index_id))

    def add_items(self, index_id: str, ids: list[str], X, *, binary: bool = True, batch_rows: int = 1000) -> AddedItems:
        """Add or replace items, `batch_rows` per request (fewer with binary, whose ids ride in a
        header); the summed "added" and "replaced" and the final "items"."""
        return self._run(self._ops.add_items(index_id, ids, X, binary=binary, batch_rows=batch_rows))

    def delete_item(self, index_id: str, item_id: str) -> None:
        """Remove one item (FeatureHashAPIError 404 if it is not there)."""
        self._run(self._ops.delete_item(index_id, item_id))

    def delete_items(self, index_id: str, ids: list[str]) -> DeletedItems:
        """Remove items by id, in the body (so any id works); the ids that were not there come back."""
        return self._run(self._ops.delete_items(index_id, ids))

    def query_index(self, index_id: str, X, *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None, binary: bool = True) -> QueryAnswer:
        """Per row of X its neighbours, best first, and the number of candidates re-ranked; with
        target_recall the search widens until the S-curve promises it ("estimated_recall", "rows_probed")."""
        return self._run(self._ops.query_index(index_id, X, top_k=top_k, min_similarity=min_similarity,
                                                 target_recall=target_recall, binary=binary))

    def healthz(self) -> dict[str, Any]:
        return self._run(self._ops.healthz())

    def readyz(self) -> dict[str, Any]:
        return self._run(self._ops.readyz())


class AsyncFeatureHashClient:
    """The same calls over httpx.AsyncClient, each a coroutine."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy = RetryPolicy(), transport: httpx.AsyncBaseTransport | None = None,
                 sleep: Callable[[float], Any] = asyncio.sleep):
        self.http = httpx.AsyncClient(base_url=base_url, headers=_headers(api_key), timeout=timeout,
                                      transport=transport)
        self.retry, self._sleep, self._ops = retry, sleep, _Operations()

    async def __aenter__(self) -> "AsyncFeatureHashClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _send(self, call: _Call) -> httpx.Response:
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                response = await self.http.send(self.http.build_request(call.method, call.path, content=call.content,
                                                                        headers=call.headers, params=call.params),
                                                stream=True)
                try:
                    await _aread(response)
                finally:
                    await response.aclose()
            except httpx.TransportError:
                if last:
                    raise
                await self._sleep(self.retry.wait(attempt, None))
                continue
            if last or not _retryable(response):
                return _raise_for_status(response)
            await self._sleep(self.retry.wait(attempt, response.headers.get("Retry-After")))
        raise AssertionError("unreachable")

    async def _run(self, operation: Operation):
        try:
            call = next(operation)
            while True:
                call = operation.send(await self._send(call))
        except StopIteration as done:
            return done.value
        except FeatureHashError as refused:
            raise _refusal(refused) from None

    async def create_map(self, method: str, input_dim: int, n_components: int, *, seed: int | None = None,
                         params: dict[str, Any] | None = None) -> MapSpec:
        return await self._run(self._ops.create_map(method, input_dim, n_components, seed=seed, params=params))

    async def get_map(self, map_id: str) -> MapSpec:
        return await self._run(self._ops.get_map(map_id))

    async def list_maps(self, *, after: str | None = None, limit: int = 100) -> MapPage:
        return await self._run(self._ops.list_maps(after=after, limit=limit))

    async def iter_maps(self, page_size: int = 100) -> AsyncIterator[MapSpec]:
        after = None
        while True:
            page = await self.list_maps(after=after, limit=page_size)
            for spec in page["maps"]:
                yield spec
            if (after := page["next"]) is None:
                return

    async def delete_map(self, map_id: str, *, force: bool = False) -> None:
        await self._run(self._ops.delete_map(map_id, force=force))

    async def transform(self, map_id: str, X, *, binary: bool = True,
                        dtype: str = "float32") -> np.ndarray | OneHotFeatures:
        return await self._run(self._ops.transform(map_id, X, binary=binary, dtype=dtype))

    async def hash(self, map_id: str, X, *, bands: int | None = None, binary: bool = True) -> np.ndarray | BandedCodes:
        return await self._run(self._ops.hash(map_id, X, bands=bands, binary=binary))

    async def kernel(self, map_id: str, X, Y=None, *, binary: bool = True) -> KernelAnswer:
        return await self._run(self._ops.kernel(map_id, X, Y, binary=binary))

    async def create_index(self, map_id: str, *, name: str | None = None, bands: int | None = None,
                           rows: int | None = None, threshold: float | None = None,
                           recall_at_threshold: float | None = None, vectors: str | None = None,
                           forest_rows: list[int] | None = None) -> IndexInfo:
        return await self._run(self._ops.create_index(map_id, name=name, bands=bands, rows=rows,
                                                        threshold=threshold, recall_at_threshold=recall_at_threshold,
                                                        vectors=vectors, forest_rows=forest_rows))

    async def get_index(self, index_id: str) -> IndexInfo:
        return await self._run(self._ops.get_index(index_id))

    async def list_indexes(self, *, after: str | None = None, limit: int = 100) -> IndexPage:
        return await self._run(self._ops.list_indexes(after=after, limit=limit))

    async def delete_index(self, index_id: str) -> None:
        await self._run(self._ops.delete_index(index_id))

    async def add_items(self, index_id: str, ids: list[str], X, *, binary: bool = True,
                        batch_rows: int = 1000) -> AddedItems:
        return await self._run(self._ops.add_items(index_id, ids, X, binary=binary, batch_rows=batch_rows))

    async def delete_item(self, index_id: str, item_id: str) -> None:
        await self._run(self._ops.delete_item(index_id, item_id))

    async def delete_items(self, index_id: str, ids: list[str]) -> DeletedItems:
        return await self._run(self._ops.delete_items(index_id, ids))

    async def query_index(self, index_id: str, X, *, top_k: int = 10, min_similarity: float = 0.0,
                          target_recall: float | None = None, binary: bool = True) -> QueryAnswer:
        return await self._run(self._ops.query_index(index_id, X, top_k=top_k, min_similarity=min_similarity,
                                                       target_recall=target_recall, binary=binary))

    async def healthz(self) -> dict[str, Any]:
        return await self._run(self._ops.healthz())

    async def readyz(self) -> dict[str, Any]:
        return await self._run(self._ops.readyz())
