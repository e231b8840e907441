"""Layouts 1 and 2's hooks (featurehash.store.index.keyed): the batch size, the plan's bucket keys, the probe's
SUNION pages, and the scripts stored data depends on (pinned: changing one breaks indexes already written).
The index in Redis over both layouts is tests/store/index/test_handles.py; these drive the hooks by hand."""

from __future__ import annotations

import hashlib

import numpy as np
import redis

from featurehash.maps import create_map
from featurehash.store import LSHIndex, plan_index
from featurehash.store.index import keyed
from featurehash.store.index.queries import CandidateBounds
from featurehash.store.redis_steps import RoundTrip
from index_support import GCWS, positive_rows


def opened() -> LSHIndex:
    feature_map = create_map(GCWS)
    return LSHIndex(redis.Redis(), plan_index(feature_map, name="k", layout=2, bands=8, rows=8, forest_rows=[4]),
                    feature_map, "keyed-test:")


def test_the_scripts_are_pinned():
    pins = {"_WRITE_SCRIPT": "3e9d8dfde0709a9ff7d22f0731ef69921a5102dc",
            "_REMOVE_SCRIPT": "35141e3300603d1041811c23970d8ac103d481c0",
            "_SHARED_MEMBERS_SCRIPT": "e241aaa4aae1626ce45725a1846e5488f58a9e49"}
    assert {name: hashlib.sha1(getattr(keyed, name).encode()).hexdigest() for name in pins} == pins


def test_the_batch_and_the_plan():
    index = opened()
    assert index.steps.batch_items == keyed.WRITE_BATCH_COMMANDS // (2 * 8 * 2 + 2)
    X = positive_rows(1, 3)
    _, fingerprints, level_keys = index.steps.plan(X)
    assert [len(keys) for keys in level_keys] == [3, 3]
    assert level_keys[1] == index._level_keys(fingerprints, 1) and len(level_keys[0][0]) == 8


def test_the_probe_takes_sunion_rows_a_round_trip_and_leaves_the_records_to_fetch_steps():
    index = opened()
    level_keys = [[[b"k%d" % row] for row in range(20)]]
    pool = index.steps.new_pool()
    steps = index.steps.probe_steps(level_keys, list(range(20)), [0] * 20, pool, CandidateBounds())
    pages = [steps.send(None)]
    pages.append(steps.send([{b"3", b"1"}] * len(pages[0].commands)))
    try:
        steps.send([set()] * len(pages[1].commands))
    except StopIteration as stop:
        members, fetched = stop.value
    assert all(isinstance(page, RoundTrip) for page in pages)
    assert [len(page.commands) for page in pages] == [keyed.SUNION_ROWS, 20 - keyed.SUNION_ROWS]
    assert fetched is None and pool.walked == 2 * keyed.SUNION_ROWS
    assert [row.tolist() for row in members] == [[1, 3]] * keyed.SUNION_ROWS + [[]] * (20 - keyed.SUNION_ROWS)
