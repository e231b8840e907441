"""AsyncFeatureHashClient: the operations driven over an httpx.AsyncClient, with retries."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable

import httpx
import numpy as np

from ..maps import FeatureHashError, OneHotFeatures
from .operations import SpecArgument, _Operations
from .results import (
    AddedItems,
    BandedCodes,
    DeletedItems,
    DuplicatesAnswer,
    Documents,
    IndexInfo,
    IndexPage,
    KernelAnswer,
    MapPage,
    MapSpec,
    QueryAnswer,
    Tokens,
    WeightedTokens,
)
from .sync import _headers
from . import deadline
from .wire import Answer, Operation, RetryPolicy, _aread, _Call, _raise_for_status, _refusal, _retryable


class AsyncFeatureHashClient:
    """The same calls over httpx.AsyncClient, each a coroutine, with FeatureHashClient's `timeout` (a deadline
    per request), `max_answer_bytes` and retries."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy = RetryPolicy(), transport: httpx.AsyncBaseTransport | None = None,
                 max_answer_bytes: int | None = None, sleep: Callable[[float], Any] = asyncio.sleep):
        self.http = httpx.AsyncClient(base_url=base_url, headers=_headers(api_key), timeout=timeout,
                                      transport=transport or deadline.async_transport())
        self.retry, self._sleep, self._ops = retry, sleep, _Operations()
        self.timeout, self.max_answer_bytes = timeout, max_answer_bytes

    async def __aenter__(self) -> "AsyncFeatureHashClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _send(self, call: _Call) -> Answer:
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                with deadline.within(self.timeout):
                    response = await self.http.send(self.http.build_request(
                        call.method, call.path, content=call.content, headers=call.headers, params=call.params),
                        stream=True)
                    try:
                        answer = await _aread(response, call.expect, self.max_answer_bytes)
                    finally:
                        await response.aclose()
            except httpx.TransportError:
                if last:
                    raise
                await self._sleep(self.retry.wait(attempt, None))
                continue
            if last or not _retryable(answer):
                return _raise_for_status(answer)
            await self._sleep(self.retry.wait(attempt, answer.headers.get("Retry-After")))
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

    async def create_map(self, spec: SpecArgument = None, input_dim: int | None = None,
                         n_components: int | None = None, *, method: str | None = None, seed: int | None = None,
                         params: dict[str, Any] | None = None, input: dict[str, Any] | None = None) -> MapSpec:
        """The resolved spec (the same id for the same spec, whoever creates it). The spec as
        featurehash.create_map takes it (a dict such as {"method": "rff", "input_dim": 3, "n_components": 4,
        "params": {"gamma": 0.5}}, a resolved spec, or a featurehash.maps.MapSpec), or the method's name with
        the other fields as keywords: create_map("rff", input_dim=3, n_components=4, params={...})."""
        return await self._run(self._ops.create_map(spec, input_dim, n_components, method=method, seed=seed,
                                                      params=params, input=input))

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

    async def transform(self, map_id: str, X=None, *, binary: bool = True, dtype: str = "float32",
                        documents: Documents = None, tokens: Tokens = None,
                        weighted_tokens: WeightedTokens = None) -> np.ndarray | OneHotFeatures:
        return await self._run(self._ops.transform(map_id, X, binary=binary, dtype=dtype,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens))

    async def hash(self, map_id: str, X=None, *, bands: int | None = None, binary: bool = True,
                   documents: Documents = None, tokens: Tokens = None,
                   weighted_tokens: WeightedTokens = None) -> np.ndarray | BandedCodes:
        return await self._run(self._ops.hash(map_id, X, bands=bands, binary=binary,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens))

    async def kernel(self, map_id: str, X=None, Y=None, *, binary: bool = True,
                     documents: Documents = None, tokens: Tokens = None, weighted_tokens: WeightedTokens = None,
                     y_documents: Documents = None, y_tokens: Tokens = None,
                     y_weighted_tokens: WeightedTokens = None) -> KernelAnswer:
        return await self._run(self._ops.kernel(map_id, X, Y, binary=binary,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens,
                y_documents=y_documents, y_tokens=y_tokens, y_weighted_tokens=y_weighted_tokens))

    async def create_index(self, map_id: str, *, name: str | None = None, bands: int | None = None,
                           rows: int | None = None, threshold: float | None = None,
                           recall_at_threshold: float | None = None, vectors: str | None = None,
                           forest_rows: list[int] | None = None, expected_items: int | None = None) -> IndexInfo:
        return await self._run(self._ops.create_index(map_id, name=name, bands=bands, rows=rows,
                                                        threshold=threshold, recall_at_threshold=recall_at_threshold,
                                                        vectors=vectors, forest_rows=forest_rows,
                                                        expected_items=expected_items))

    async def get_index(self, index_id: str) -> IndexInfo:
        return await self._run(self._ops.get_index(index_id))

    async def list_indexes(self, *, after: str | None = None, limit: int = 100) -> IndexPage:
        return await self._run(self._ops.list_indexes(after=after, limit=limit))

    async def list_tenants(self) -> list[str]:
        """Every tenant (an admin key's call: ScopeRequired otherwise)."""
        return await self._run(self._ops.list_tenants())

    async def delete_index(self, index_id: str) -> None:
        await self._run(self._ops.delete_index(index_id))

    async def add_items(self, index_id: str, ids: list[str], X=None, *, binary: bool = True, batch_rows: int = 1000,
                        documents: Documents = None, tokens: Tokens = None,
                        weighted_tokens: WeightedTokens = None) -> AddedItems:
        return await self._run(self._ops.add_items(index_id, ids, X, binary=binary, batch_rows=batch_rows,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens))

    async def delete_item(self, index_id: str, item_id: str) -> None:
        await self._run(self._ops.delete_item(index_id, item_id))

    async def delete_items(self, index_id: str, ids: list[str]) -> DeletedItems:
        return await self._run(self._ops.delete_items(index_id, ids))

    async def query_index(self, index_id: str, X=None, *, top_k: int = 10, min_similarity: float = 0.0,
                          target_recall: float | None = None, binary: bool = True,
                          documents: Documents = None, tokens: Tokens = None,
                          weighted_tokens: WeightedTokens = None) -> QueryAnswer:
        return await self._run(self._ops.query_index(index_id, X, top_k=top_k, min_similarity=min_similarity,
                                                       target_recall=target_recall, binary=binary,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens))

    async def query_items(self, index_id: str, ids: list[str], *, top_k: int = 10, min_similarity: float = 0.0,
                          target_recall: float | None = None) -> QueryAnswer:
        return await self._run(self._ops.query_items(index_id, ids, top_k=top_k, min_similarity=min_similarity,
                                                       target_recall=target_recall))

    async def duplicates(self, index_id: str, threshold: float | None = None, *, mode: str = "components",
                         min_cluster_size: int = 2) -> DuplicatesAnswer:
        return await self._run(self._ops.duplicates(index_id, threshold, mode=mode,
                                                      min_cluster_size=min_cluster_size))

    async def healthz(self) -> dict[str, Any]:
        return await self._run(self._ops.healthz())

    async def readyz(self) -> dict[str, Any]:
        return await self._run(self._ops.readyz())
