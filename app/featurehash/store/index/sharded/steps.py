"""The hooks (featurehash.store.index.state.LayoutSteps) of a sharded index: S layout-3 shards
(featurehash.store.index.compact), each under its own hash tag (placement.py), driven side by side (lockstep.py).

An item lives on one shard (placement.shard_of its id) under the shard's own item number n; the index names it
n S + s, so the candidate pool, the ranking and the duplicates of featurehash.store.index.queries and duplicates.py
run unchanged over items of every shard. Writes: a batch is split by shard and each part written by its shard's
scripts, all parts in the same round trips (so a record and its buckets still change together; a batch refused
for the tenant's stored-bytes limit may have written its other shards' parts). Queries: every shard probes the
same buckets at once (one pipeline a round trip, one per node on a Redis Cluster), each row capped at
ceil(max_candidates / S) members a shard, and the members and tails merge into one pool. Duplicates: the level-0
partition hashes of the S shards are read side by side, partition after partition, and a bucket's members are
those of every shard, so pairs across shards are found as within one.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from ...redis_steps import RoundTrip, set_members_steps
from ..compact.keys import members_of
from ..queries import CandidateBounds
from .lockstep import lockstep
from .placement import shard_of


class _ShardPool:
    """A shard's view of the query's pool: the candidates of that shard already fetched (its own numbers), and the
    members walked, counted in the whole pool (CandidateBounds.total bounds the query, not a shard)."""

    def __init__(self, pool, shard: int, shards: int):
        self.pool = pool
        fetched = pool.fetched
        self.fetched = fetched[fetched % shards == shard] // shards

    @property
    def walked(self) -> int:
        return self.pool.walked

    @walked.setter
    def walked(self, value: int) -> None:
        self.pool.walked = value


class ShardedSteps:
    """The hooks of a sharded index over its shards' layout-3 hooks (CompactSteps, or their near-cache wrappers)."""

    def __init__(self, index, shards: list):
        self.index, self.shards, self.count = index, shards, len(shards)
        first = shards[0]
        self.config, self.codec = index.config, index.codec
        self.batch_items = first.batch_items * self.count
        # what does not depend on where an item lives is any shard's
        self.plan, self.encode, self.new_pool = first.plan, first.encode, first.new_pool
        self.code_similarities, self.pair_code_similarities = first.code_similarities, first.pair_code_similarities
        self.decode_records = first.decode_records

    def mapped(self, wrap) -> "ShardedSteps":
        """The same index with each shard's hooks wrapped (the near cache: wrap(shard number, hooks))."""
        return ShardedSteps(self.index, [wrap(at, shard) for at, shard in enumerate(self.shards)])

    def _split(self, ids: list[str]) -> list[np.ndarray]:
        """Per shard, the positions of its ids."""
        owner = shard_of([item_id.encode() for item_id in ids], self.count)
        return [np.flatnonzero(owner == shard) for shard in range(self.count)]

    def items_steps(self):
        """The items of every shard."""
        counts = yield RoundTrip([("GET", shard.layout.count) for shard in self.shards])
        return sum(int(count or 0) for count in counts)

    def held_steps(self, ids: list[str]):
        """Whether the index holds each id."""
        parts = [(shard, picked) for shard, picked in zip(self.shards, self._split(ids)) if picked.size]
        found = yield from lockstep([shard._numbers_steps([ids[row].encode() for row in picked])
                                     for shard, picked in parts])
        held = np.zeros(len(ids), bool)
        for (_, picked), (numbers, _) in zip(parts, found):
            held[picked] = numbers > 0
        return held.tolist()

    # -- writes ----------------------------------------------------------------------------------

    def add_batch_steps(self, ids, encoded, batch: slice, only_absent: bool = False):
        rows = np.arange(len(ids))[batch]
        batch_ids = [ids[row] for row in rows]
        operations = []
        for shard, picked in zip(self.shards, self._split(batch_ids)):
            if picked.size:
                chosen = rows[picked]
                part = tuple(None if column is None else
                             (column[chosen] if isinstance(column, np.ndarray) else [column[row] for row in chosen])
                             for column in encoded)
                operations.append(shard.add_batch_steps([ids[row] for row in chosen], part, slice(None), only_absent))
        written = yield from lockstep(operations)
        return sum(added for added, _ in written), (yield from self.items_steps())

    def remove_batch_steps(self, ids):
        parts = [(shard, picked) for shard, picked in zip(self.shards, self._split(ids)) if picked.size]
        removed = yield from lockstep([shard.remove_batch_steps([ids[row] for row in picked])
                                       for shard, picked in parts])
        gone = {item_id for part in removed for item_id in part}
        return [item_id for item_id in ids if item_id in gone]

    # -- queries ---------------------------------------------------------------------------------

    def stored_plan_steps(self, ids: list[str]):
        parts = [(at, picked) for at, picked in enumerate(self._split(ids)) if picked.size]
        plans = yield from lockstep([self.shards[at].stored_plan_steps([ids[row] for row in picked])
                                     for at, picked in parts])
        order = np.argsort(np.concatenate([picked for _, picked in parts]), kind="stable")
        fingerprints = np.vstack([plan[1] for plan in plans])[order]
        identities = np.vstack([plan[2] for plan in plans])[order]
        numbers = np.concatenate([plan[3] * self.count + at for (at, _), plan in zip(parts, plans)])[order]
        X = None
        if self.codec is not None:
            vectors = [plan[0] for plan in plans]
            X = (sp.vstack(vectors, format="csr") if sp.issparse(vectors[0]) else np.vstack(vectors))[order]
        return X, fingerprints, identities, numbers

    def probe_steps(self, level_keys, active: list[int], level: list[int], pool, bounds):
        """Every shard's probe of the same buckets, merged: members and new candidates in the index's numbers."""
        shard_bounds = bounds if bounds.per_row is None else \
            CandidateBounds(math.ceil(bounds.per_row / self.count), bounds.total)
        answers = yield from lockstep([shard.probe_steps(level_keys, active, level,
                                                         _ShardPool(pool, at, self.count), shard_bounds)
                                       for at, shard in enumerate(self.shards)])
        S = self.count
        members = [np.sort(np.concatenate([answer[0][row] * S + at for at, answer in enumerate(answers)]))
                   for row in range(len(active))]
        wanted = np.concatenate([answer[1][0] * S + at for at, answer in enumerate(answers)])
        lengths = np.concatenate([answer[1][1][1] for answer in answers])
        tails = np.concatenate([answer[1][1][2] for answer in answers])
        fingerprints = None if answers[0][1][1][0] is None else np.vstack([answer[1][1][0] for answer in answers])
        return members, (wanted, (fingerprints, lengths, tails))

    def fetch_steps(self, wanted: np.ndarray):
        raise AssertionError("a sharded index's probe fetches the new candidates itself")

    # -- reads: records and shared buckets (duplicates) -----------------------------------------

    def records_steps(self, numbers: np.ndarray):
        """(b-bit fingerprints, identities, tails) of the index's item numbers, in their order."""
        numbers = np.asarray(numbers, np.int64)
        owner = numbers % self.count
        parts = [(at, np.flatnonzero(owner == at)) for at in range(self.count)]
        parts = [(at, picked) for at, picked in parts if picked.size]
        if not parts:
            return (yield from self.shards[0].records_steps(numbers))
        read = yield from lockstep([self.shards[at].records_steps(numbers[picked] // self.count)
                                    for at, picked in parts])
        order = np.argsort(np.concatenate([picked for _, picked in parts]), kind="stable")
        fingerprints = np.vstack([records[0] for records in read])[order]
        identities = np.vstack([records[1] for records in read])[order]
        tails = [tail for records in read for tail in records[2]]
        return fingerprints, identities, [tails[row] for row in order.tolist()]

    def shared_buckets_steps(self, cursor: int, count: int):
        """(the members of each level-0 bucket with >= 2 items over all shards; the next cursor, 0 at the end): the
        partition hashes `cursor - 1` onwards (every shard has the same partitions), count // S of them a page."""
        S, first = self.count, self.shards[0].compact
        partitions = 1 << first.bucket_bits
        begin = max(cursor - 1, 0)
        end = min(partitions, begin + max(1, count // S))
        keys = [(at, shard.compact.bucket_hash(0, partition))
                for partition in range(begin, end) for at, shard in enumerate(self.shards)]
        replies = yield RoundTrip([("HGETALL", key) for _, key in keys])
        buckets: dict[tuple[int, bytes], list[np.ndarray]] = {}
        overflowed: list[tuple[tuple[int, bytes], int, bytes]] = []
        for (at, key), fields in zip(keys, replies):
            partition = key[-4:]
            for field, value in fields.items():
                bucket = (partition, field)
                if value == b"":
                    overflowed.append((bucket, at, self.shards[at].compact.overflow_set(key, field)))
                else:
                    buckets.setdefault(bucket, []).append(members_of(value) * S + at)
        if overflowed:
            sets = yield from set_members_steps([set_key for _, _, set_key in overflowed])
            for (bucket, at, _), members in zip(overflowed, sets):
                buckets.setdefault(bucket, []).append(np.array([int(m) for m in members], np.int64) * S + at)
        shared = [np.sort(np.concatenate(parts)) for parts in buckets.values()]
        return [members for members in shared if members.size >= 2], (end + 1 if end < partitions else 0)


def shard_config(config, shards: int):
    """A shard's configuration: the index's, its partitions sized for its share of the expected items."""
    return replace(config, expected_items=max(1, math.ceil(config.expected_items / shards)))
