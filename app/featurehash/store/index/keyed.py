"""Layouts 1 and 2 of an LSH index: a record per item under its 63-bit number and a Redis set per bucket. The
hooks (featurehash.store.index.state.LayoutSteps) the operations of featurehash.store.index.queries, writes and
duplicates call: writes are optimistic transactions whose one Lua script writes the records and the buckets
they leave and join; queries SUNION each row's buckets, then MGET the candidates' records."""


from __future__ import annotations

import functools
import hashlib

import numpy as np

from ...lsh.matches import aligned_match_fractions, match_fractions
from ...maps import InputError
from ..lsh_layout import item_number, pack_record, unpack_records_and_vectors
from ..redis_steps import MAX_TRANSACTION_ATTEMPTS, Compute, RoundTrip, Scan, Transaction, TransactionConflict
from .inline import INLINE_ROWS
from .queries import CandidatePool
from .state import IndexState, ItemNotFound

WRITE_BATCH_COMMANDS = 10_000   # per transaction: bounds how long its script blocks Redis (~10 ms)
READ_BATCH_KEYS = 10_000        # keys per MGET
SUNION_ROWS = 16                # query rows a pipeline


# One transaction's writes as one script call: Redis runs them in a loop, where thousands of
# pipelined commands would cost ~20 us each to pack and parse in redis-py. KEYS, per item: its
# record, the buckets it leaves, those it joins; the count last. ARGV: the count change, then per
# item its number, how many buckets it leaves and joins, and its record.
_WRITE_SCRIPT = """
local key = 1
for a = 2, #ARGV, 4 do
  local number, leaving, joining, record = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), ARGV[a + 3]
  redis.call('SET', KEYS[key], record)
  key = key + 1
  for _ = 1, leaving do redis.call('SREM', KEYS[key], number); key = key + 1 end
  for _ = 1, joining do redis.call('SADD', KEYS[key], number); key = key + 1 end
end
return redis.call('INCRBY', KEYS[key], ARGV[1])
"""


# Removes items if the index (its meta key) and their records are still as read: else nil, and
# nothing is written. KEYS: meta, count, then per item its record and its buckets. ARGV: the meta's
# SHA-1, then per item its number, its record's SHA-1 and how many buckets it is in. Its first write
# is a DEL (Redis at maxmemory refuses a script's first write only if that may grow memory).
_REMOVE_SCRIPT = """
if redis.sha1hex(redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return false end
local key = 3
for a = 2, #ARGV, 3 do
  local record = redis.call('GET', KEYS[key])
  if not record or redis.sha1hex(record) ~= ARGV[a + 1] then return false end
  key = key + 1 + tonumber(ARGV[a + 2])
end
key = 3
for a = 2, #ARGV, 3 do
  local number, buckets = ARGV[a], tonumber(ARGV[a + 2])
  redis.call('DEL', KEYS[key])
  for b = 1, buckets do redis.call('SREM', KEYS[key + b], number) end
  key = key + 1 + buckets
end
return redis.call('DECRBY', KEYS[2], (#ARGV - 1) / 3)
"""


# The members of the sets among KEYS that have >= 2 (one page of bucket keys, all in the index's slot).
_SHARED_MEMBERS_SCRIPT = """
local shared = {}
for _, key in ipairs(KEYS) do
  if redis.call('SCARD', key) >= 2 then shared[#shared + 1] = redis.call('SMEMBERS', key) end
end
return shared
"""


class KeyedSteps:
    """The hooks (featurehash.store.index.state.LayoutSteps) of layouts 1 and 2 over one index's state."""

    def __init__(self, index: IndexState):
        self.index = index
        config = index.config
        self.batch_items = max(1, WRITE_BATCH_COMMANDS // (2 * config.bands * len(config.levels) + 2))

    # -- writes ----------------------------------------------------------------------------------

    def encode(self, X):
        """(fingerprints, packed vectors or None) of rows to add."""
        return self.index._encode(X)

    def add_batch_steps(self, ids, encoded, batch: slice):
        """One optimistic transaction: WATCH the meta key and the records, MGET them, then one script call."""
        index = self.index
        fingerprints, vectors = encoded
        ids = ids[batch]
        item_numbers = [item_number(item_id) for item_id in ids]
        records = [index.layout.record(number) for number in item_numbers]
        outcome: dict[str, int] = {}
        writes = functools.partial(self._upsert_commands, ids, item_numbers, fingerprints[batch],
                                   None if vectors is None else vectors[batch], records, batch.start, outcome)
        replies = yield Transaction([index.layout.meta, *records], ("MGET", index.layout.meta, *records), writes,
                                    inline=len(records) <= INLINE_ROWS)
        return outcome["added"], int(replies[-1])

    def _upsert_commands(self, ids, item_numbers, fingerprints, vectors, records, offset, outcome,
                         read) -> list[tuple]:
        self.index._check_meta(read[0])
        stored = read[1:]
        new_keys = self.index._bucket_keys(fingerprints)
        old_keys: dict[int, list[bytes]] = {}
        replaced = [row for row, record in enumerate(stored) if record is not None]
        if replaced:
            old_fingerprints, old_ids = self.index._unpack([stored[row] for row in replaced])
            for row, old_id, keys in zip(replaced, old_ids, self.index._bucket_keys(old_fingerprints)):
                if old_id != ids[row]:
                    raise InputError(f"ids[{offset + row}]", f"its 63-bit item number equals that of stored item "
                                     f"{old_id!r} (odds about n^2 / 2^64); use another id")
                old_keys[row] = keys
        writes = []
        for row, number in enumerate(item_numbers):
            previous = old_keys.get(row)
            if previous is None:
                leaving, joining = [], new_keys[row]
            else:  # only the buckets that change: re-adding an unchanged vector writes just its record
                now, before = set(new_keys[row]), set(previous)
                leaving = [key for key in previous if key not in now]
                joining = [key for key in new_keys[row] if key not in before]
            record = pack_record(fingerprints[row], ids[row], b"" if vectors is None else vectors[row])
            writes.append((records[row], number, leaving, joining, record))
        outcome["added"] = len(item_numbers) - len(replaced)
        return [self._write_command(writes, outcome["added"])]

    def _write_command(self, writes: list[tuple], count_change: int) -> tuple:
        """The _WRITE_SCRIPT call for (record key, number, buckets left, buckets joined, record)."""
        keys, args = [], [count_change]
        for record_key, number, leaving, joining, record in writes:
            keys += [record_key, *leaving, *joining]
            args += [number, len(leaving), len(joining), record]
        return ("EVAL", _WRITE_SCRIPT, len(keys) + 1, *keys, self.index.layout.count, *args)

    def remove_batch_steps(self, ids):
        """Read the records, then one script deletes those still as read (else read again). No MULTI: Redis at
        maxmemory refuses any command queued in one, and deleting must free memory then. The script's first
        write is a DEL, after which Redis lets it finish (featurehash.store.durability)."""
        layout = self.index.layout
        item_numbers = [item_number(item_id) for item_id in ids]
        records = [layout.record(number) for number in item_numbers]
        for _ in range(MAX_TRANSACTION_ATTEMPTS):
            (read,) = yield RoundTrip([("MGET", layout.meta, *records)])
            outcome: dict[str, list[str]] = {}
            command = yield Compute(self._remove_command, (ids, item_numbers, records, outcome, read),
                                    inline=len(records) <= INLINE_ROWS)
            if command is None or (yield RoundTrip([command]))[0] is not None:
                return outcome["removed"]
        raise TransactionConflict(f"{MAX_TRANSACTION_ATTEMPTS} attempts met concurrent changes to the same items")

    def _remove_command(self, ids, item_numbers, records, outcome, read) -> tuple | None:
        """The _REMOVE_SCRIPT call for the stored items among those read (None: none is stored)."""
        self.index._check_meta(read[0])
        present = [row for row, record in enumerate(read[1:]) if record is not None]
        keys, args, outcome["removed"] = [], [hashlib.sha1(read[0]).hexdigest()], []
        if present:
            fingerprints, stored_ids = self.index._unpack([read[1 + row] for row in present])
            for row, stored_id, buckets in zip(present, stored_ids, self.index._bucket_keys(fingerprints)):
                if stored_id == ids[row]:  # else another id's record under the same number: this one is not stored
                    keys += [records[row], *buckets]
                    args += [item_numbers[row], hashlib.sha1(read[1 + row]).hexdigest(), len(buckets)]
                    outcome["removed"].append(ids[row])
        if not outcome["removed"]:
            return None
        return ("EVAL", _REMOVE_SCRIPT, len(keys) + 2, self.index.layout.meta, self.index.layout.count, *keys, *args)

    # -- queries ---------------------------------------------------------------------------------

    def plan(self, X):
        """The checked vectors, their fingerprints and their bucket keys at every level."""
        index = self.index
        X = index.feature_map.check(X, "vectors")
        fingerprints = index._fingerprints(X)
        return X, fingerprints, [index._level_keys(fingerprints, level) for level in range(len(index.config.levels))]

    def stored_plan_steps(self, ids: list[str]):
        """(vectors or None, fingerprints, bucket keys at every level, item numbers) of stored items, read
        from their records (a record per item under its 63-bit number)."""
        numbers = np.array([item_number(item_id) for item_id in ids], dtype=np.int64)
        records = yield from self.records_steps(numbers)
        for item_id, record in zip(ids, records):
            if record is None:
                raise ItemNotFound(item_id)
        X, fingerprints, level_keys = yield Compute(self._stored_plan, (ids, records), inline=len(ids) <= INLINE_ROWS)
        return X, fingerprints, level_keys, numbers

    def _stored_plan(self, ids: list[str], records: list[bytes]):
        """plan for stored items: their vectors (None without), fingerprints and bucket keys."""
        index = self.index
        fingerprints, stored_ids, X = unpack_records_and_vectors(records, index.config.n_codes, index.codec)
        for item_id, stored_id in zip(ids, stored_ids):
            if stored_id != item_id:  # another id under the same 63-bit number: this one is not stored
                raise ItemNotFound(item_id)
        return X, fingerprints, [index._level_keys(fingerprints, level) for level in range(len(index.config.levels))]

    def records_steps(self, numbers: np.ndarray):
        """The records (bytes, None where gone) of items by number: MGETs of READ_BATCH_KEYS keys,
        pipelined in one round trip."""
        keys = [self.index.layout.record(int(number)) for number in numbers]
        if not keys:
            return []
        replies = yield RoundTrip([("MGET", *keys[start:start + READ_BATCH_KEYS])
                                   for start in range(0, len(keys), READ_BATCH_KEYS)])
        return [record for reply in replies for record in reply]

    def probe_steps(self, level_keys, active: list[int], level: list[int], pool, bounds):
        """(the item numbers in the buckets of each active query at its level (sorted), None: the records are
        read after, by fetch_steps): SUNION_ROWS rows a round trip, so that Redis serves other clients between
        them. Every bucket is taken whole (bounds.per_row does not apply: migrate such an index)."""
        unions, before = [], pool.walked
        for begin in range(0, len(active), SUNION_ROWS):
            page = yield RoundTrip([("SUNION", *level_keys[level[q]][q]) for q in active[begin:begin + SUNION_ROWS]])
            pool.walked += sum(len(members) for members in page)
            bounds.check(pool.walked, pool.walked - before, begin + len(page), len(active))
            unions += page
        return [np.sort(np.fromiter((int(m) for m in members), np.int64, len(members))) for members in unions], None

    def fetch_steps(self, wanted: np.ndarray):
        """The records of item numbers (None where gone), as CandidatePool.add takes them."""
        return (yield from self.records_steps(wanted))

    def new_pool(self) -> CandidatePool:
        return CandidatePool(self.index.config, self.index.codec, self.index.similarity)

    def code_similarities(self, query: np.ndarray, items: np.ndarray) -> np.ndarray:
        return match_fractions(query, items)

    # -- duplicates ------------------------------------------------------------------------------

    def shared_buckets_steps(self, cursor: int, count: int):
        """One page of the level-0 buckets holding >= 2 items: SCAN MATCH over the bucket keys (on the node of
        the index's slot), then one script call that SCARDs the page's keys and returns the SMEMBERS of the
        shared ones (a pipeline of a SCARD per key cost ~20 us a key in redis-py's packing and parsing, 3/4 of
        the whole operation; bench/bench_index_duplicates.py). SCAN may return a key twice: a caller must
        tolerate repeated buckets."""
        layout = self.index.layout
        cursor, keys = yield Scan(layout.bucket_scan_pattern(), cursor, count, layout.meta)
        if not keys:
            return [], cursor
        (members,) = yield RoundTrip([("EVAL", _SHARED_MEMBERS_SCRIPT, len(keys), *keys)])
        return [np.array(found, dtype=np.int64) for found in members], cursor

    def decode_records(self, records):
        """(live mask, fingerprints, ids, vectors or None) of the records records_steps read."""
        live = np.array([record is not None for record in records], dtype=bool)
        fingerprints, ids, vectors = unpack_records_and_vectors([r for r in records if r is not None],
                                                                self.index.config.n_codes, self.index.codec)
        return live, fingerprints, ids, vectors

    def pair_code_similarities(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The match fraction of each pair of rows of fingerprints."""
        return aligned_match_fractions(a, b)
