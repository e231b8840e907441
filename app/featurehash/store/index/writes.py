"""Adding and removing items of an LSH index as step generators (no I/O), written once for every layout: the
rows encoded in one CPU step, the ids checked, then batches of the layout's size, each written by the layout
(featurehash.store.index.state.LayoutSteps: add_batch_steps, remove_batch_steps) so that a record and its
bucket memberships change together; with durability "aof", the answer waits for the append-only file."""

from __future__ import annotations

from ..lsh_accounting import StoredBytesExceeded
from ..lsh_layout import check_item_ids, distinct_ids
from ..redis_steps import Compute, persisted
from .inline import _small_input


def add_steps(index, ids, X):
    """Add or replace items (one id per row of X): {"added", "replaced", "items"}."""
    steps = index.steps
    encoded = yield Compute(steps.encode, (X,), inline=_small_input(X, index.config.n_codes))
    ids = check_item_ids(ids, encoded[0].shape[0])
    added, total = 0, index.items_when_opened
    size = steps.batch_items
    for start in range(0, len(ids), size):
        try:
            new, total = yield from steps.add_batch_steps(ids, encoded, slice(start, start + size))
        except StoredBytesExceeded as exc:
            exc.stored = start  # the batches before this one stay written (and counted)
            raise
        added += new
    yield from persisted(index.durability, index.layout.meta)
    return {"added": added, "replaced": len(ids) - added, "items": total}


def remove_steps(index, ids):
    """Remove items by id: the ids that were stored."""
    ids = distinct_ids(ids)
    removed: list[str] = []
    size = index.steps.batch_items
    for start in range(0, len(ids), size):
        removed += yield from index.steps.remove_batch_steps(ids[start:start + size])
    yield from persisted(index.durability, index.layout.meta)
    return removed
