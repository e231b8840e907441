"""POST /v1/indexes/{index_id}/duplicates: its work bound before it starts, and its answer streamed.

Bound: the index's item count against settings.max_duplicates_items, then the cost model of
featurehash.store.index.duplicates (CPU seconds of the bucket scan, from the items and bands; the
candidate pairs the rest of FEATUREHASH_REQUEST_WORK_SECONDS pays for, passed on as max_pairs).
Answer: the clusters are all known once the library returns (union-find needs every pair); they are
encoded and sent CLUSTERS_PER_CHUNK at a time on the thread pool, so the answer is never held
encoded whole: JSON (the DuplicatesResponse fields, then "clusters") or, with Accept:
application/x-ndjson, one line of those fields and then one line per cluster.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Iterator

import orjson
from fastapi import Response
from fastapi.responses import StreamingResponse

from ...maps import InputError
from ...protocol.codecs import JSON
from ...store.index.duplicates import DuplicateCluster, Duplicates, pairs_within, scan_seconds
from ...store.index.handles import AsyncLSHIndex
from ..config import Settings

NDJSON = "application/x-ndjson"
CLUSTERS_PER_CHUNK = 1000
HEAD_FIELDS = tuple(field.name for field in fields(Duplicates) if field.name != "clusters")
BATCH_ADVICE = ("find them in a batch job: LSHIndex.duplicates through the library (featurehash.store), "
                "or `featurehash dedup` on the vectors (featurehash.dedup)")


async def bounded_duplicates(index: AsyncLSHIndex, settings: Settings, threshold: float | None, mode: str,
                             min_cluster_size: int) -> Duplicates:
    """index.duplicates within this service's limits (InputError naming index_id past them)."""
    max_pairs = duplicates_budget(index, settings)
    try:
        return await index.duplicates(threshold, mode=mode, max_pairs=max_pairs, min_cluster_size=min_cluster_size)
    except InputError as refused:
        if refused.field != "max_pairs":
            raise
        raise InputError("index_id", f"its buckets give more candidate pairs than this service verifies in one "
                         f"request ({max_pairs}, FEATUREHASH_REQUEST_WORK_SECONDS); {BATCH_ADVICE}") from None


def duplicates_budget(index: AsyncLSHIndex, settings: Settings) -> int:
    """The candidate pairs this request may verify; InputError naming index_id if the index is too
    large for a synchronous answer."""
    items, config = index.items_when_opened or 0, index.config
    if items > settings.max_duplicates_items:
        raise InputError("index_id", f"index {config.name!r} holds {items} items, over this service's limit of "
                         f"{settings.max_duplicates_items} for a duplicates request "
                         f"(FEATUREHASH_MAX_DUPLICATES_ITEMS); {BATCH_ADVICE}")
    budget = settings.request_work_seconds
    scan = scan_seconds(config.bands, items)
    if scan > budget:
        raise InputError("index_id", f"scanning the {config.bands} buckets of each of its {items} items would take "
                         f"about {scan:.3g} s of CPU, over this service's budget of {budget:g} s per request "
                         f"(FEATUREHASH_REQUEST_WORK_SECONDS); {BATCH_ADVICE}")
    return max(1, pairs_within(config.vectors, index.feature_map.input_dim, budget - scan))


def duplicates_answer(found: Duplicates, ndjson: bool) -> Response:
    head = {key: getattr(found, key) for key in HEAD_FIELDS}
    clusters = found.clusters
    if len(clusters) <= CLUSTERS_PER_CHUNK and not ndjson:
        return Response(orjson.dumps({**head, "clusters": _documents(clusters)}), media_type=JSON)
    parts = _ndjson_parts(head, clusters) if ndjson else _json_parts(head, clusters)
    # a sync iterator: Starlette runs it on the thread pool, each chunk encoded off the event loop
    return StreamingResponse(parts, media_type=NDJSON if ndjson else JSON)


def _documents(clusters: list[DuplicateCluster]) -> list[dict]:
    return [{"representative": cluster.representative, "members": cluster.members} for cluster in clusters]


def _json_parts(head: dict, clusters: list[DuplicateCluster]) -> Iterator[bytes]:
    yield orjson.dumps({**head, "clusters": []})[:-2]  # ends with "clusters":[
    for start in range(0, len(clusters), CLUSTERS_PER_CHUNK):
        chunk = orjson.dumps(_documents(clusters[start:start + CLUSTERS_PER_CHUNK]))[1:-1]
        yield (b"," if start else b"") + chunk
    yield b"]}"


def _ndjson_parts(head: dict, clusters: list[DuplicateCluster]) -> Iterator[bytes]:
    yield orjson.dumps(head) + b"\n"
    for start in range(0, len(clusters), CLUSTERS_PER_CHUNK):
        chunk = _documents(clusters[start:start + CLUSTERS_PER_CHUNK])
        yield b"".join(orjson.dumps(cluster) + b"\n" for cluster in chunk)
