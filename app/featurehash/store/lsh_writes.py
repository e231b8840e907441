"""Adding and removing items of an LSH index as step generators (no I/O): the records, the buckets
they leave and join, and the Lua scripts that write them in one call per transaction."""

from __future__ import annotations

import functools
import hashlib

from ..maps import InputError
from .lsh_inline import INLINE_ROWS, _small_input
from .lsh_layout import check_item_ids, distinct_ids, item_number, pack_record
from .redis_steps import MAX_TRANSACTION_ATTEMPTS, Compute, RoundTrip, Transaction, TransactionConflict, persisted

WRITE_BATCH_COMMANDS = 10_000   # per transaction: bounds how long its script blocks Redis (~10 ms)


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


class _WriteSteps:
    """Needs what _IndexSteps sets up (lsh_index.py): config, layout, codec, feature_map and its key helpers."""

    def _batch_size(self) -> int:
        return max(1, WRITE_BATCH_COMMANDS // (2 * self.config.bands * len(self.config.levels) + 2))

    def _add_steps(self, ids, X):
        fingerprints, vectors = yield Compute(self._encode, (X,), inline=_small_input(X, self.config.n_codes))
        ids = check_item_ids(ids, fingerprints.shape[0])
        item_numbers = [item_number(item_id) for item_id in ids]
        added, total = 0, self.items_when_opened
        for start in range(0, len(ids), self._batch_size()):
            batch = slice(start, start + self._batch_size())
            records = [self.layout.record(number) for number in item_numbers[batch]]
            outcome: dict[str, int] = {}
            writes = functools.partial(self._upsert_commands, ids[batch], item_numbers[batch], fingerprints[batch],
                                       None if vectors is None else vectors[batch], records, start, outcome)
            replies = yield Transaction([self.layout.meta, *records], ("MGET", self.layout.meta, *records), writes,
                                        inline=len(records) <= INLINE_ROWS)
            added, total = added + outcome["added"], int(replies[-1])
        yield from persisted(self.durability, self.layout.meta)
        return {"added": added, "replaced": len(ids) - added, "items": total}

    def _upsert_commands(self, ids, item_numbers, fingerprints, vectors, records, offset, outcome,
                         read) -> list[tuple]:
        self._check_meta(read[0])
        stored = read[1:]
        new_keys = self._bucket_keys(fingerprints)
        old_keys: dict[int, list[bytes]] = {}
        replaced = [row for row, record in enumerate(stored) if record is not None]
        if replaced:
            old_fingerprints, old_ids = self._unpack([stored[row] for row in replaced])
            for row, old_id, keys in zip(replaced, old_ids, self._bucket_keys(old_fingerprints)):
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
        return ("EVAL", _WRITE_SCRIPT, len(keys) + 1, *keys, self.layout.count, *args)

    def _remove_steps(self, ids):
        """Per batch: read the records, then one script deletes those still as read (else read again).
        No MULTI: Redis at maxmemory refuses any command queued in one, and deleting must free memory
        then. The script's first write is a DEL, after which Redis lets it finish (featurehash.store.durability)."""
        ids = distinct_ids(ids)
        removed: list[str] = []
        for start in range(0, len(ids), self._batch_size()):
            batch = ids[start:start + self._batch_size()]
            item_numbers = [item_number(item_id) for item_id in batch]
            records = [self.layout.record(number) for number in item_numbers]
            for _ in range(MAX_TRANSACTION_ATTEMPTS):
                (read,) = yield RoundTrip([("MGET", self.layout.meta, *records)])
                outcome: dict[str, list[str]] = {}
                command = yield Compute(self._remove_command, (batch, item_numbers, records, outcome, read),
                                        inline=len(records) <= INLINE_ROWS)
                if command is None or (yield RoundTrip([command]))[0] is not None:
                    break
            else:
                raise TransactionConflict(f"{MAX_TRANSACTION_ATTEMPTS} attempts met concurrent changes to the same "
                                          "items")
            removed += outcome["removed"]
        yield from persisted(self.durability, self.layout.meta)
        return removed

    def _remove_command(self, ids, item_numbers, records, outcome, read) -> tuple | None:
        """The _REMOVE_SCRIPT call for the stored items among those read (None: none is stored)."""
        self._check_meta(read[0])
        present = [row for row, record in enumerate(read[1:]) if record is not None]
        keys, args, outcome["removed"] = [], [hashlib.sha1(read[0]).hexdigest()], []
        if present:
            fingerprints, stored_ids = self._unpack([read[1 + row] for row in present])
            for row, stored_id, buckets in zip(present, stored_ids, self._bucket_keys(fingerprints)):
                if stored_id == ids[row]:  # else another id's record under the same number: this one is not stored
                    keys += [records[row], *buckets]
                    args += [item_numbers[row], hashlib.sha1(read[1 + row]).hexdigest(), len(buckets)]
                    outcome["removed"].append(ids[row])
        if not outcome["removed"]:
            return None
        return ("EVAL", _REMOVE_SCRIPT, len(keys) + 2, self.layout.meta, self.layout.count, *keys, *args)
