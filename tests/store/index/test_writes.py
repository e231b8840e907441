"""Adding and removing, written once for every layout (featurehash.store.index.writes): the rows encoded once,
the ids checked, batches of the layout's size handed to its hooks; a refused batch says how much was written.
Driven by hand over a stand-in layout (no Redis)."""

from __future__ import annotations

import numpy as np
import pytest

from featurehash.maps import InputError
from featurehash.store.lsh_accounting import StoredBytesExceeded
from featurehash.store.index.writes import add_steps, remove_steps
from featurehash.store.redis_steps import Compute


class Steps:
    batch_items = 2

    def __init__(self, refuse_at: int | None = None):
        self.added, self.removed, self.refuse_at = [], [], refuse_at

    def encode(self, X):
        return (np.asarray(X),)

    def add_batch_steps(self, ids, encoded, batch):
        if batch.start == self.refuse_at:
            raise StoredBytesExceeded(10, 9, 5)
        self.added.append((ids[batch], encoded[0][batch].tolist()))
        return len(ids[batch]), 100 + batch.stop
        yield  # a generator, as every layout's

    def remove_batch_steps(self, ids):
        self.removed.append(ids)
        return ids[:1]
        yield


class Index:
    def __init__(self, steps):
        self.steps, self.durability, self.items_when_opened = steps, "reply", 7
        self.config = type("Config", (), {"n_codes": 4})()
        self.layout = type("Layout", (), {"meta": b"m"})()


def drive(steps):
    reply = None
    try:
        while True:
            step = steps.send(reply)
            assert isinstance(step, Compute), step
            reply = step.function(*step.args)
    except StopIteration as stop:
        return stop.value


def test_an_add_goes_in_batches_of_the_layouts_size():
    index = Index(Steps())
    answer = drive(add_steps(index, ["a", "b", "c", "d", "e"], [[1], [2], [3], [4], [5]]))
    assert answer == {"added": 5, "replaced": 0, "items": 106}
    assert index.steps.added == [(["a", "b"], [[1], [2]]), (["c", "d"], [[3], [4]]), (["e"], [[5]])]
    assert drive(add_steps(index, [], np.empty((0, 1)))) == {"added": 0, "replaced": 0, "items": 7}
    with pytest.raises(InputError, match="one id per vector"):
        drive(add_steps(index, ["a"], [[1], [2]]))


def test_a_refused_batch_names_the_items_written_before_it():
    with pytest.raises(StoredBytesExceeded) as refused:
        drive(add_steps(Index(Steps(refuse_at=2)), ["a", "b", "c"], [[1], [2], [3]]))
    assert refused.value.stored == 2


def test_a_removal_drops_repeats_and_goes_in_batches():
    index = Index(Steps())
    assert drive(remove_steps(index, ["a", "b", "a", "c"])) == ["a", "c"]
    assert index.steps.removed == [["a", "b"], ["c"]]
