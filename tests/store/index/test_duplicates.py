"""Queries by stored item id and the near-duplicate clusters of an LSH index (featurehash.store.index.duplicates).

Redis is real (the fixtures of tests/index_support.py). The clusters must be featurehash.dedup's on the same rows
when the index's banding is the join's: the same band digests give the same candidate pairs, the same
verification the same pairs, the same grouping the same clusters (rows are float32-representable, so a stored
float32 vector is the row itself).
"""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import orjson
import pytest
import redis.asyncio

import index_support
from featurehash.dedup import duplicate_clusters
from featurehash.maps import InputError, create_map
from featurehash.lsh.banding import choose_bands, collision_probability
from featurehash.store import AsyncLSHIndexes, ItemNotFound, plan_index
from featurehash.store.lsh_layout import IndexLayout
from index_support import GCWS, assert_layout_consistent

redis_url, layout, key_prefix, client, indexes = (index_support.redis_url, index_support.layout,
                                                  index_support.key_prefix, index_support.client,
                                                  index_support.indexes)
THRESHOLD = 0.8


def planted(seed: int = 7) -> np.ndarray:
    """60 rows, near copies of the first 30 (5% noise) and looser copies of the first 10 (30%): chains
    and pairs on both sides of the threshold; float32-representable."""
    rng = np.random.default_rng(seed)
    base = rng.random((60, 24)) + 0.01
    X = np.vstack([base, base[:30] * (1 + 0.05 * rng.random((30, 24))), base[:10] * (1 + 0.3 * rng.random((10, 24)))])
    return X.astype(np.float32).astype(np.float64)


IDS = [f"r{i:03d}" for i in range(100)]  # string order = row order


def dedup_clusters(X, feature_map, verify: str, mode: str) -> list[tuple[str, ...]]:
    found = duplicate_clusters(X, feature_map, THRESHOLD, target_recall=0.95, verify=verify, mode=mode)
    members = [np.flatnonzero(found.labels == label) for label in range(found.n_clusters)]
    return [tuple(IDS[row] for row in rows) for rows in members if rows.size >= 2], found.pairs


def as_tuples(result) -> list[tuple[str, ...]]:
    return [tuple(cluster.members) for cluster in result.clusters]


@pytest.mark.parametrize("vectors,verify", [("float32", "exact"), ("none", "codes")])
def test_duplicates_are_dedups_clusters_under_the_same_banding(indexes, vectors, verify):
    m, X = create_map(GCWS), planted()
    bands, rows = choose_bands(64, THRESHOLD, 0.95)
    index = indexes.create(m, name=f"dup-{vectors}", bands=bands, rows=rows, threshold=0.7, vectors=vectors)
    index.add(IDS, X)
    for mode in ("components", "representatives"):
        found = index.duplicates(THRESHOLD, mode=mode)
        expected, pairs = dedup_clusters(X, m, verify, mode)
        assert as_tuples(found) == expected and len(expected) >= 25
        assert all(cluster.representative == cluster.members[0] == min(cluster.members) for cluster in found.clusters)
        assert (found.verify, found.mode, found.bands, found.rows) == (verify, mode, bands, rows)
        assert (found.candidates, found.pairs) == (pairs.candidates, len(pairs))
        assert found.recall_at_threshold == pytest.approx(pairs.recall_at_threshold)
    chained = index.duplicates(0.6)  # the loose copies join their families: fewer, larger clusters
    assert len(chained.clusters) < len(index.duplicates(THRESHOLD).clusters)
    assert index.duplicates().threshold == 0.7  # the index's own
    assert index.duplicates(0.6).recall_at_threshold == pytest.approx(collision_probability(0.6, bands, rows))
    big = index.duplicates(THRESHOLD, min_cluster_size=3)
    assert big.clusters and all(len(cluster.members) >= 3 for cluster in big.clusters)
    index.remove(["r060"])
    assert "r060" not in {item for cluster in index.duplicates(THRESHOLD).clusters for item in cluster.members}
    indexes.delete(index.name)


def test_bad_duplicates_options_name_the_field(indexes):
    index = indexes.create(create_map(GCWS), name="dup-bad", bands=8, rows=4)
    index.add(IDS, planted())
    for kwargs, field in (({"threshold": 0.0}, "threshold"), ({"threshold": 1.5}, "threshold"),
                          ({"threshold": "high"}, "threshold"), ({"mode": "chains"}, "mode"),
                          ({"max_pairs": 0}, "max_pairs"), ({"max_pairs": 10}, "max_pairs"),
                          ({"min_cluster_size": 0}, "min_cluster_size")):
        with pytest.raises(InputError) as refused:
            index.duplicates(**{"threshold": 0.8, **kwargs})
        assert refused.value.field == field, kwargs
    indexes.delete(index.name)


def test_query_items_is_a_query_by_the_stored_rows_without_the_item_itself(indexes):
    X = planted(8)
    for vectors in ("float32", "none"):
        index = indexes.create(create_map(GCWS), name=f"qi-{vectors}", bands=16, rows=4, vectors=vectors,
                               forest_rows=[2])
        index.add(IDS, X)
        asked = ["r060", "r001", "r095", "r001"]
        by_id = index.query_items(asked, top_k=3, target_recall=0.95)
        rows = [IDS.index(item_id) for item_id in asked]
        by_vector = index.query(X[rows], top_k=4, target_recall=0.95)
        for item_id, mine, theirs in zip(asked, by_id.results, by_vector.results):
            assert mine == [found for found in theirs if found[0] != item_id][:3]
        assert by_id.candidates == [count - 1 for count in by_vector.candidates]
        assert by_id.results[0][0][0] == "r000"  # r060 is a near copy of r000
        with pytest.raises(ItemNotFound) as missing:
            index.query_items(["r001", "nope"])
        assert missing.value.item_id == "nope"
        for bad, field in (([], "ids"), ("r001", "ids"), ([""], "ids[0]"), (["r001", 5], "ids[1]"),
                           (["x" * 600], "ids[0]"), (["\ud800"], "ids[0]")):
            with pytest.raises(InputError) as refused:
                index.query_items(bad)
            assert refused.value.field == field, bad
        with pytest.raises(InputError) as refused:
            index.query_items(["r001"], top_k=0)
        assert refused.value.field == "top_k"
        indexes.delete(index.name)


def test_async_index_gives_the_sync_answers(redis_url, key_prefix, indexes):
    index = indexes.create(create_map(GCWS), name="dup-async", bands=10, rows=6, vectors="sparse")
    index.add(IDS, planted())

    async def run():
        connection = redis.asyncio.Redis.from_url(redis_url)
        try:
            async_index = await AsyncLSHIndexes(connection, key_prefix).open("dup-async")
            return await async_index.duplicates(THRESHOLD), await async_index.query_items(IDS[:5], top_k=4)
        finally:
            await connection.aclose()

    assert asyncio.run(run()) == (index.duplicates(THRESHOLD), index.query_items(IDS[:5], top_k=4))
    indexes.delete(index.name)


def test_an_index_of_layout_1_finds_the_same_duplicates(client, indexes, key_prefix, layout):
    m, X = create_map(GCWS), planted()
    config = plan_index(m, name="dup-legacy", bands=10, rows=6)
    old_fields = {field: value for field, value in dataclasses.asdict(config).items()
                  if field not in ("vectors", "forest_rows", "layout")}
    client.set(f"{key_prefix}index:dup-legacy:meta".encode(), orjson.dumps(old_fields, option=orjson.OPT_SORT_KEYS))
    client.zadd(IndexLayout.registry(key_prefix), {"dup-legacy": 0})
    legacy = indexes.open("dup-legacy")
    current = indexes.create(m, name="dup-current", bands=10, rows=6)
    assert (legacy.config.layout, current.config.layout) == (1, layout)
    for index in (legacy, current):
        index.add(IDS, X)
    assert_layout_consistent(client, legacy)
    assert legacy.duplicates(THRESHOLD) == current.duplicates(THRESHOLD)
    old, new = legacy.query_items(IDS[:4]), current.query_items(IDS[:4])
    if layout == 2:
        assert old == new
    else:   # layout 3 ranks by 8-bit fingerprints (b-bit estimate): the same candidates, the clear winner first
        assert old.candidates == new.candidates
        assert [found[0][0] for found in old.results] == [found[0][0] for found in new.results]
    for index in (legacy, current):
        indexes.delete(index.name)
