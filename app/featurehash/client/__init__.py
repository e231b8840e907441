"""Python clients for the featurehash service (httpx): `FeatureHashClient` and `AsyncFeatureHashClient`.

    with FeatureHashClient("http://127.0.0.1:8000") as client:
        spec = client.create_map({"method": "rff", "input_dim": 64, "n_components": 1024, "params": {"gamma": 0.1}})
        Z = client.transform(spec["id"], X)                     # float32 ndarray, sent and read as .npy
    async with AsyncFeatureHashClient("http://127.0.0.1:8000") as client:
        Z = await client.transform(spec["id"], X)

create_map takes the spec as featurehash.create_map does (a dict, or a featurehash.maps.MapSpec), or the
method's name and the other fields as keywords: create_map("rff", input_dim=64, n_components=1024, ...).
Both speak the same operations, written once as generators of requests (`operations._Operations`) that
the two clients (`sync`, `async_client`) drive. Each first checks its inputs by the service's own rules
(featurehash.client.checks):
what the service would refuse raises FeatureHashAPIError with its 422, field and detail, and nothing
is sent. A 403 (the API key lacks the operation's scope) raises ScopeRequired (a FeatureHashAPIError)
naming the scope in `.scope`. Dense batches travel as .npy by default (`binary=False`: JSON); sparse ones as JSON
sparse rows. Path segments are percent-encoded. A 503 (Redis unreachable or refusing writes, or a worker
shedding load), or a 409, 429 or 507 with Retry-After (a concurrent write; Redis out of memory or disk)
is retried after Retry-After or an exponential backoff, whichever is longer; so
is a connection error or a timeout, for every call here is idempotent (creating a map or an index of a given
spec, adding items by id: the same items again; deleting items: nothing more removed) except that a retried
delete may find the thing already gone (a 404).

Every 2xx answer is held to its request (featurehash.client.checked): the content type asked for, its rows, the
map's width and the dtype, the field types of JSON answers (the protocol's response models), its size (the
client's `max_answer_bytes`, else what the request can produce: reading stops there). One that is not what was
asked for raises AnswerMismatch, never retried. `timeout` is a deadline for each request as a whole (connect,
send and every read together: featurehash.client.deadline).
"""

from __future__ import annotations

from ..maps import OneHotFeatures
from . import checks
from .async_client import AsyncFeatureHashClient
from .results import (AddedItems, AnswerMismatch, BandedCodes, DeletedItems, DuplicateCluster, DuplicatesAnswer,
                      FeatureHashAPIError, IndexInfo, IndexPage, KernelAnswer, MapPage, MapSpec, Neighbour, QueryAnswer,
                      ScopeRequired)
from .sync import FeatureHashClient
from .wire import ITEM_IDS_HEADER_BYTES, NPY, Operation, RetryPolicy

__all__ = [
    "FeatureHashClient", "AsyncFeatureHashClient", "FeatureHashAPIError", "AnswerMismatch", "ScopeRequired",
    "RetryPolicy",
    "MapSpec", "MapPage", "IndexInfo", "IndexPage", "AddedItems", "DeletedItems", "Neighbour", "QueryAnswer",
    "DuplicateCluster", "DuplicatesAnswer", "BandedCodes", "KernelAnswer", "OneHotFeatures", "Operation", "NPY",
    "ITEM_IDS_HEADER_BYTES", "checks",
]
