"""The near cache's compiled table (featurehash.store.index.compact.near.table) and probe (near.lookup) against
plain Python models: a dict of keys -> bytes through puts, replacements, deletions (backward shifts), partition drops,
growth and compaction; and the probe against the members, tails and records it should gather."""

from __future__ import annotations

import numpy as np
import pytest
from featurehash.store.index.compact.near.lookup import probe, sorted_distinct
from featurehash.store.index.compact.near.table import (BUCKET, CHUNK, OVERFLOW, OVERFLOWED, PARTITION, TAIL, WordTable,
                                              key_of)


def put(table: WordTable, model: dict, items: dict) -> None:
    keys = list(items)
    table.put(np.array(keys, np.int64), np.array([len(items[k]) if items[k] is not None else OVERFLOWED
                                                  for k in keys], np.int64),
              b"".join(items[k] or b"" for k in keys))
    for k in keys:
        model[k] = items[k]


def check(table: WordTable, model: dict, absent=()) -> None:
    assert table.entries == len(model)
    for key, value in model.items():
        assert table.get(key) == (b"" if value is None else value)
        assert table.size_of(key) == (OVERFLOWED if value is None else len(value))
    for key in absent:
        assert table.get(key) is None


def test_puts_replacements_and_deletions_match_a_dict_through_growth_and_compaction():
    rng = np.random.default_rng(7)
    table, model, gone = WordTable(slots=16, words=16), {}, set()
    for round_ in range(40):
        # clustered keys (sequential numbers of one kind) make long probe runs, which deletions must shift back
        keys = rng.choice(3000, size=80, replace=False) + key_of(TAIL if round_ % 2 else BUCKET, 0)
        put(table, model, {int(k): rng.bytes(int(rng.integers(0, 23))) if rng.random() > 0.1 else None
                           for k in keys})
        doomed = rng.choice(sorted(model), size=30, replace=False)
        table.delete(np.array(doomed, np.int64))
        for key in doomed:
            del model[int(key)]
            gone.add(int(key))
        gone -= set(model)
        check(table, model, gone)
    live_words = sum((len(v) + 3) // 4 for v in model.values() if v)
    assert table.used - table.garbage == live_words
    table.trim()
    assert table.garbage == 0 and table.used == live_words
    check(table, model, gone)


def test_dropping_a_partition_drops_the_buckets_it_lists_and_no_other():
    table, model = WordTable(), {}
    mine, theirs = [5, 9, 1 << 20], [6, 9]  # identity 9 at level 0 (mine) and level 1 (theirs)
    put(table, model, {key_of(BUCKET, i): b"\x01\0\0\0" for i in mine})
    put(table, model, {key_of(BUCKET, 1 << 32 | i): b"\x02\0\0\0" for i in theirs})
    put(table, model, {key_of(PARTITION, 0): np.array(mine, "<u4").tobytes(),
                       key_of(PARTITION, 1 << 32): np.array(theirs, "<u4").tobytes()})
    table.drop_partitions(np.array([key_of(PARTITION, 0), key_of(PARTITION, 7)], np.int64))
    for i in mine:
        del model[key_of(BUCKET, i)]
    del model[key_of(PARTITION, 0)]
    check(table, model, [key_of(BUCKET, i) for i in mine])


def members(*numbers) -> bytes:
    return np.array(numbers, "<u4").tobytes()


@pytest.mark.parametrize("width", [0, 6])
def test_probe_gathers_what_the_script_would(width):
    """Two rows at levels 0 and 1 of 2 bands: a plain bucket, an overflowed one (its set), a missing one; the
    candidates not known, sorted, their tails (a gone item: length 0) and, with records, their record slots."""
    bands, chunk_items = 2, 4
    identities = np.array([[11, 12, 21, 22], [13, 14, 23, 24]], np.uint32)  # 2 rows x (2 levels x 2 bands)
    table, model = WordTable(), {}
    put(table, model, {key_of(BUCKET, 11): members(7, 3, 9), key_of(BUCKET, 12): None,
                       key_of(OVERFLOW, 12): members(1, 3, 40),
                       key_of(BUCKET, 1 << 32 | 23): members(9, 2), key_of(BUCKET, 13): members(99)})
    tails = {1: b"one!", 2: b"two..", 3: b"3", 7: b"seven", 40: b"forty-forty"}  # 9: gone
    put(table, model, {key_of(TAIL, n): tail for n, tail in tails.items()})
    chunks = {0: bytes(range(4 * width)), 10: bytes(range(100, 100 + width - 1))}  # chunk 10 (40-43): short
    put(table, model, {key_of(CHUNK, c): chunk for c, chunk in chunks.items() if width})
    found, offsets, fresh, lengths, words, records, capped = probe(
        table.slots, table.arena, identities, np.array([0, 1], np.int64), np.array([0, 1], np.int64), bands,
        np.array([2, 7], np.int64), width, chunk_items, -1)
    assert not capped
    rows = [found[offsets[i]:offsets[i + 1]].tolist() for i in range(2)]
    assert rows == [[1, 3, 7, 9, 40], [2, 9]]
    assert fresh.tolist() == [1, 3, 9, 40]
    assert lengths.tolist() == [4, 1, 0, 11]
    blob = words.tobytes()
    assert blob == b"one!" + b"3\0\0\0" + b"forty-forty\0"
    if width:
        expected = [chunks[0][n * width:(n + 1) * width] for n in (1, 3)] + [bytes(width)] * 2  # 9: no chunk
        assert [bytes(r) for r in records] == expected
    else:
        assert records.shape == (0, 0)


def test_sorted_distinct_is_numpys_unique():
    values = np.random.default_rng(3).integers(0, 50, 200)
    assert sorted_distinct(values.copy()).tolist() == np.unique(values).tolist()
    assert sorted_distinct(np.empty(0, np.int64)).size == 0
