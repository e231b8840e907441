"""FeatureHashClient: the operations driven over a blocking httpx.Client, with retries."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

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
from . import deadline
from .wire import Answer, Operation, RetryPolicy, _Call, _raise_for_status, _read, _refusal, _retryable



def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class FeatureHashClient:
    """Blocking client. Every call raises FeatureHashAPIError for a 4xx/5xx that retries did not cure, and
    AnswerMismatch (a FeatureHashAPIError) for a 2xx answer that is not what the request asked for.

    `timeout`: seconds for one request in all (connecting, sending and every read of the answer together;
    each retry gets its own), cut at the deadline with an httpx.TimeoutException. A `transport` you pass is used
    as it is: the deadline is then checked between the pieces of an answer, not within httpx's reads.
    `max_answer_bytes`: the most an answer may hold, the same for every request; None (the default) derives it
    from the request (featurehash.client.answers: an .npy answer's exact size, NUMBER_BYTES a number of a JSON
    one, UNSIZED_ANSWER_BYTES for answers a request does not bound). Reading stops at the limit."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy = RetryPolicy(), transport: httpx.BaseTransport | None = None,
                 max_answer_bytes: int | None = None, sleep: Callable[[float], None] = time.sleep):
        self.http = httpx.Client(base_url=base_url, headers=_headers(api_key), timeout=timeout,
                                 transport=transport or deadline.transport())
        self.retry, self._sleep, self._ops = retry, sleep, _Operations()
        self.timeout, self.max_answer_bytes = timeout, max_answer_bytes

    def __enter__(self) -> "FeatureHashClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _send(self, call: _Call) -> Answer:
        """One call's answer, retried on a connection error, a timeout or a retryable status (`_retryable`);
        never after an answer that does not match the request (AnswerMismatch propagates)."""
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                with deadline.within(self.timeout):
                    response = self.http.send(self.http.build_request(call.method, call.path, content=call.content,
                                                                      headers=call.headers, params=call.params),
                                              stream=True)
                    try:
                        answer = _read(response, call.expect, self.max_answer_bytes)
                    finally:
                        response.close()
            except httpx.TransportError:
                if last:
                    raise
                self._sleep(self.retry.wait(attempt, None))
                continue
            if last or not _retryable(answer):
                return _raise_for_status(answer)
            self._sleep(self.retry.wait(attempt, answer.headers.get("Retry-After")))
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

    def create_map(self, spec: SpecArgument = None, input_dim: int | None = None,
                   n_components: int | None = None, *, method: str | None = None, seed: int | None = None,
                   params: dict[str, Any] | None = None, input: dict[str, Any] | None = None) -> MapSpec:
        """The resolved spec (the same id for the same spec, whoever creates it). The spec as
        featurehash.create_map takes it (a dict such as {"method": "rff", "input_dim": 3, "n_components": 4,
        "params": {"gamma": 0.5}}, a resolved spec, or a featurehash.maps.MapSpec), or the method's name with
        the other fields as keywords: create_map("rff", input_dim=3, n_components=4, params={...})."""
        return self._run(self._ops.create_map(spec, input_dim, n_components, method=method, seed=seed,
                                              params=params, input=input))

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

    def transform(self, map_id: str, X=None, *, binary: bool = True, dtype: str = "float32",
                  documents: Documents = None, tokens: Tokens = None,
                  weighted_tokens: WeightedTokens = None) -> np.ndarray | OneHotFeatures:
        """Dense features as an ndarray, OneHotFeatures for one-hot maps (GCWS, binning), or a scipy CSR matrix
        for a hashing map. Text (documents=, tokens=, weighted_tokens=) goes as JSON, for a hashing map or a map
        with a text `input` stage."""
        return self._run(self._ops.transform(map_id, X, binary=binary, dtype=dtype,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens))

    def hash(self, map_id: str, X=None, *, bands: int | None = None, binary: bool = True,
             documents: Documents = None, tokens: Tokens = None,
             weighted_tokens: WeightedTokens = None) -> np.ndarray | BandedCodes:
        """Codes (int64 n x k); with `bands`, BandedCodes(codes, band_keys)."""
        return self._run(self._ops.hash(map_id, X, bands=bands, binary=binary,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens))

    def kernel(self, map_id: str, X=None, Y=None, *, binary: bool = True,
               documents: Documents = None, tokens: Tokens = None, weighted_tokens: WeightedTokens = None,
               y_documents: Documents = None, y_tokens: Tokens = None,
               y_weighted_tokens: WeightedTokens = None) -> KernelAnswer:
        """(estimate, exact) kernel matrices between the rows of X and Y (Y defaults to X)."""
        return self._run(self._ops.kernel(map_id, X, Y, binary=binary,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens,
                y_documents=y_documents, y_tokens=y_tokens, y_weighted_tokens=y_weighted_tokens))

    def create_index(self, map_id: str, *, name: str | None = None, bands: int | None = None, rows: int | None = None,
                     threshold: float | None = None, recall_at_threshold: float | None = None,
                     vectors: str | None = None, forest_rows: list[int] | None = None,
                     expected_items: int | None = None) -> IndexInfo:
        """The index (chosen bands and rows included); an existing one of that name if it matches.
        `vectors` ("sparse", "float32", "float16") keeps items' vectors for exact re-ranking;
        `forest_rows` adds shorter band prefixes that a query with target_recall can widen to;
        `expected_items` sizes the index's Redis hashes (default 100,000)."""
        return self._run(self._ops.create_index(map_id, name=name, bands=bands, rows=rows, threshold=threshold,
                                                  recall_at_threshold=recall_at_threshold, vectors=vectors,
                                                  forest_rows=forest_rows, expected_items=expected_items))

    def get_index(self, index_id: str) -> IndexInfo:
        return self._run(self._ops.get_index(index_id))

    def list_indexes(self, *, after: str | None = None, limit: int = 100) -> IndexPage:
        return self._run(self._ops.list_indexes(after=after, limit=limit))

    def list_tenants(self) -> list[str]:
        """Every tenant (an admin key's call: ScopeRequired otherwise)."""
        return self._run(self._ops.list_tenants())

    def delete_index(self, index_id: str) -> None:
        self._run(self._ops.delete_index(index_id))

    def add_items(self, index_id: str, ids: list[str], X=None, *, binary: bool = True, batch_rows: int = 1000,
                  documents: Documents = None, tokens: Tokens = None,
                  weighted_tokens: WeightedTokens = None) -> AddedItems:
        """Add or replace items, `batch_rows` per request (fewer with binary, whose ids ride in a
        header); the summed "added" and "replaced" and the final "items"."""
        return self._run(self._ops.add_items(index_id, ids, X, binary=binary, batch_rows=batch_rows,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens))

    def delete_item(self, index_id: str, item_id: str) -> None:
        """Remove one item (FeatureHashAPIError 404 if it is not there)."""
        self._run(self._ops.delete_item(index_id, item_id))

    def delete_items(self, index_id: str, ids: list[str]) -> DeletedItems:
        """Remove items by id, in the body (so any id works); the ids that were not there come back."""
        return self._run(self._ops.delete_items(index_id, ids))

    def query_index(self, index_id: str, X=None, *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None, binary: bool = True,
                    documents: Documents = None, tokens: Tokens = None,
                    weighted_tokens: WeightedTokens = None) -> QueryAnswer:
        """Per row of X its neighbours, best first, and the number of candidates re-ranked; with
        target_recall the search widens until the S-curve promises it ("estimated_recall", "rows_probed")."""
        return self._run(self._ops.query_index(index_id, X, top_k=top_k, min_similarity=min_similarity,
                                                 target_recall=target_recall, binary=binary,
                documents=documents, tokens=tokens, weighted_tokens=weighted_tokens))

    def query_items(self, index_id: str, ids: list[str], *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None) -> QueryAnswer:
        """query_index for stored items named by id (each left out of its own results); a 404 names an
        unknown id."""
        return self._run(self._ops.query_items(index_id, ids, top_k=top_k, min_similarity=min_similarity,
                                               target_recall=target_recall))

    def duplicates(self, index_id: str, threshold: float | None = None, *, mode: str = "components",
                   min_cluster_size: int = 2) -> DuplicatesAnswer:
        """The near-duplicate clusters among the index's items (pairs >= threshold, default the index's);
        "verify" says whether the pairs were checked by the exact kernel or the codes."""
        return self._run(self._ops.duplicates(index_id, threshold, mode=mode, min_cluster_size=min_cluster_size))

    def healthz(self) -> dict[str, Any]:
        return self._run(self._ops.healthz())

    def readyz(self) -> dict[str, Any]:
        return self._run(self._ops.readyz())
