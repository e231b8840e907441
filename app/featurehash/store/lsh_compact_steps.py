"""Adding, removing and querying items of a layout-3 index (featurehash.store.lsh_compact) as step
generators (no I/O); indexes of layouts 1 and 2 go on to featurehash.store.lsh_writes / lsh_queries.

Writes keep layout 2's guarantees with scripts instead of a MULTI, three round trips a batch: read the
ids' numbers and records (LOOKUP), give new items numbers (ALLOCATE), then WRITE checks that the meta key
and every item are still as read (else it writes nothing and the batch is read again) and applies the
records, the id maps and every bucket operation of the batch. So a record and its buckets change
together, and nothing is written under a deleted index. The methods the other operations build on:
`_numbers_steps(ids)`, `_records_steps(numbers)`, `_stored_bucket_keys(identities)` and
`_shared_buckets_steps(cursor, count)`.
"""

from __future__ import annotations

import hashlib

import numpy as np

from . import lsh_compact_scripts as scripts
from .lsh_compact import members_of, pack_strings
from .lsh_inline import INLINE_ROWS, _small_input
from .lsh_layout import check_item_ids, distinct_ids
from .lsh_accounting import StoredBytesExceeded, tenant_usage_steps
from .redis_steps import (MAX_TRANSACTION_ATTEMPTS, Compute, RoundTrip, Scan, TransactionConflict, is_cluster,
                          persisted, set_members_steps)

READ_CHUNK = 2048  # ids or item numbers a LOOKUP or RECORDS call reads (a few ms of Redis)
COMPACT_BATCH_OPERATIONS = 6_000  # bucket operations per script call: ~10-25 ms of Redis (~2-4 us each)
_META_CHANGED, _ITEM_CHANGED, _OVER_LIMIT = -1, -2, -3


class _CompactSteps:
    """Needs what _IndexSteps sets up (lsh_index.py): config, layout, compact, codec, feature_map."""

    def _compact_batch(self) -> int:
        return max(1, min(2**15, COMPACT_BATCH_OPERATIONS // (self.config.bands * len(self.config.levels))))

    def _compact_encode(self, X):
        """Fingerprints, bucket identities and packed vectors (None: codes only) of rows to add."""
        fingerprints, vectors = self._encode(X)
        identities = self.compact.identities(fingerprints)
        return fingerprints, identities, vectors

    def _add_steps(self, ids, X):
        if self.config.layout < 3:
            return (yield from super()._add_steps(ids, X))
        fingerprints, identities, vectors = yield Compute(self._compact_encode, (X,),
                                                          inline=_small_input(X, self.config.n_codes))
        ids = check_item_ids(ids, fingerprints.shape[0])
        added, total = 0, self.items_when_opened
        for start in range(0, len(ids), self._compact_batch()):
            batch = slice(start, start + self._compact_batch())
            encoded = [item_id.encode() for item_id in ids[batch]]
            tails = encoded if vectors is None else [vector + item_id for vector, item_id in zip(vectors[batch], encoded)]
            try:
                new, total = yield from self._write_batch(encoded, fingerprints[batch], identities[batch], tails)
            except StoredBytesExceeded as exc:
                exc.stored = start  # the batches before this one stay written (and counted)
                raise
            added += new
        yield from persisted(self.durability, self.layout.meta)
        return {"added": added, "replaced": len(ids) - added, "items": total}

    def _numbers_steps(self, ids: list[bytes]):
        """(numbers (0: not stored), records blob of the stored ones) of UTF-8 ids, READ_CHUNK ids a call."""
        numbers, records = [], []
        for start in range(0, len(ids), READ_CHUNK):
            chunk = ids[start:start + READ_CHUNK]
            lengths, joined = pack_strings(chunk)
            (reply,) = yield RoundTrip([("EVAL", scripts.LOOKUP, 1, self.layout.meta, self.compact.id_partitions(chunk),
                                         lengths, joined, self.compact.width, self.compact.chunk_items)])
            numbers.append(reply[0]), records.append(reply[1])
        return np.frombuffer(b"".join(numbers), "<u4").astype(np.int64), b"".join(records)

    def _write_batch(self, ids, fingerprints, identities, tails):
        """Add one batch (retried while other writers change the same items): (added, items). On a Redis Cluster
        with a stored-bytes limit, the tenant's other indexes' counts are read just before the write (two round
        trips; featurehash.store.lsh_accounting says what that bounds)."""
        compact, account = self.compact, self.stored_bytes
        spread = account is not None and account.limit is not None and is_cluster(self.redis)
        for _ in range(MAX_TRANSACTION_ATTEMPTS):
            numbers, old_records = yield from self._numbers_steps(ids)
            fresh = np.flatnonzero(numbers == 0)
            if fresh.size:
                (given,) = yield RoundTrip([("EVAL", scripts.ALLOCATE, 3, self.layout.meta, compact.next,
                                             compact.free, hashlib.sha1(self._meta).hexdigest(), fresh.size)])
                if given is None:
                    yield from self._meta_gone_steps()
                    continue
                numbers_now = numbers.copy()
                numbers_now[fresh] = np.frombuffer(given, "<u4")
            else:
                numbers_now = numbers
            others = (yield from tenant_usage_steps(self.layout.key_prefix, self.name)) if spread else 0
            command = yield Compute(self._compact_add_command, (ids, numbers, numbers_now, old_records, fingerprints,
                                                                identities, tails,
                                                                account.limit - others if spread else None),
                                    inline=len(ids) <= INLINE_ROWS)
            (reply,) = yield RoundTrip([command])
            if reply == _META_CHANGED:
                yield from self._meta_gone_steps()
            elif reply != _ITEM_CHANGED:
                if int(reply[0]) == _OVER_LIMIT:
                    raise StoredBytesExceeded(account.limit, others + int(reply[1]), int(reply[2]))
                return int(fresh.size), int(reply[0])
        raise TransactionConflict(f"{MAX_TRANSACTION_ATTEMPTS} attempts met concurrent changes to the same items")

    def _compact_add_command(self, ids, numbers, numbers_now, old_records, fingerprints, identities, tails,
                             allowance: int | None = None) -> tuple:
        compact = self.compact
        rows = np.arange(len(ids))
        stored = np.flatnonzero(numbers > 0)
        _, old_identities = compact.unpack_records(old_records)
        joining = compact.bucket_keys(rows, identities)
        leaving = compact.bucket_keys(stored, old_identities)
        # only the buckets that change: re-adding an unchanged vector rewrites just its record
        joining, leaving = np.setdiff1d(joining, leaving, True), np.setdiff1d(leaving, joining, True)
        return self._compact_write_command("a", ids, numbers_now, numbers, old_records,
                                   compact.operations(leaving, joining, numbers_now),
                                   compact.pack_records(fingerprints, identities), tails, len(ids) - stored.size,
                                   allowance)

    def _compact_write_command(self, mode, ids, numbers, numbers_read, old_records, operations, records, tails,
                       count_change, allowance: int | None = None) -> tuple:
        """The WRITE call; `allowance` (a Redis Cluster's, else None) bounds this index's count instead of the
        tenant's total bounding by the limit."""
        compact = self.compact
        items = np.empty((len(ids), 12), np.uint8)
        items[:, :4] = np.frombuffer(compact.id_partitions(ids), np.uint8).reshape(-1, 4)
        items[:, 4:8] = numbers.astype("<u4").view(np.uint8).reshape(-1, 4)
        items[:, 8:] = numbers_read.astype("<u4").view(np.uint8).reshape(-1, 4)
        width = compact.width
        shas = b"".join(hashlib.sha1(old_records[at:at + width]).hexdigest().encode()
                        for at in range(0, len(old_records), width))
        account = self.stored_bytes
        totals = () if account is None or is_cluster(self.redis) else (account.key,)  # another slot (lsh_accounting)
        if totals:
            limit = -1 if account.limit is None else account.limit
        else:  # a negative allowance (the others are past the limit) refuses any growth, as 0 does
            limit = -1 if allowance is None else max(0, allowance)
        return ("EVAL", scripts.WRITE, 4 + len(totals), self.layout.meta, self.layout.count, compact.free,
                self.layout.size, *totals,
                hashlib.sha1(self._meta).hexdigest(), mode, items.tobytes(), *pack_strings(ids), shas, records,
                *pack_strings(tails), *operations, width, compact.chunk_items, compact.field_bytes, count_change,
                limit)

    def _meta_gone_steps(self):
        """Raises IndexNotFound or IndexConflict when the meta key is gone or another; returns when
        it is back as it was (deleted and created again alike): the batch is then read again."""
        (meta,) = yield RoundTrip([("GET", self.layout.meta)])
        self._check_meta(meta)

    def _remove_steps(self, ids):
        if self.config.layout < 3:
            return (yield from super()._remove_steps(ids))
        ids = distinct_ids(ids)
        removed: list[str] = []
        for start in range(0, len(ids), self._compact_batch()):
            batch = ids[start:start + self._compact_batch()]
            for _ in range(MAX_TRANSACTION_ATTEMPTS):
                numbers, old_records = yield from self._numbers_steps([item_id.encode() for item_id in batch])
                present = np.flatnonzero(numbers > 0)
                if not present.size:
                    break
                command = yield Compute(self._compact_remove_command, ([batch[row].encode() for row in present],
                                                               numbers[present], old_records),
                                        inline=present.size <= INLINE_ROWS)
                (reply,) = yield RoundTrip([command])
                if reply == _META_CHANGED:
                    yield from self._meta_gone_steps()
                elif reply != _ITEM_CHANGED:
                    removed += [batch[row] for row in present]
                    break
            else:
                raise TransactionConflict(f"{MAX_TRANSACTION_ATTEMPTS} attempts met concurrent changes to the same "
                                          "items")
        yield from persisted(self.durability, self.layout.meta)
        return removed

    def _compact_remove_command(self, ids, numbers, old_records) -> tuple:
        _, identities = self.compact.unpack_records(old_records)
        leaving = self._stored_bucket_keys(identities)
        return self._compact_write_command("r", ids, numbers, numbers, old_records,
                                   self.compact.operations(leaving, np.empty(0, np.uint64), numbers), b"", [],
                                   -len(ids))

    def _stored_bucket_keys(self, identities: np.ndarray) -> np.ndarray:
        """The buckets of stored items (row i of their records' identities) at every level, as
        CompactLayout.bucket_keys: row << 40 | level << 32 | identity (query by stored id probes these)."""
        return self.compact.bucket_keys(np.arange(identities.shape[0]), identities)

    def _records_steps(self, numbers: np.ndarray):
        """(b-bit fingerprints (m, k) uint8, identities (m, L x levels), tails) of item numbers; a
        tail is the item's vector bytes (if kept) then its id, b"" for a number that holds no item."""
        if self.config.layout < 3:
            return (yield from super()._records_steps(numbers))
        records, tails = [], []
        for start in range(0, max(len(numbers), 1), READ_CHUNK):
            blob = np.ascontiguousarray(numbers[start:start + READ_CHUNK], "<u4").tobytes()
            (reply,) = yield RoundTrip([("EVAL", scripts.RECORDS, 1, self.layout.meta, blob, self.compact.width,
                                         self.compact.chunk_items)], atomic=True)
            records.append(reply[0]), tails.extend(reply[1])
        fingerprints, identities = self.compact.unpack_records(b"".join(records))
        return fingerprints, identities, tails

    def _shared_buckets_steps(self, cursor: int, count: int):
        """(arrays of the item numbers of each level-0 bucket with >= 2 members; the next SCAN cursor, 0 at the
        end): a SCAN MATCH page of the level-0 partition hashes that exist (so the cost follows the stored
        buckets, not the partitions planned from `expected_items`), then their fields. A hash may come twice
        (SCAN's guarantee): callers tolerate repeated buckets."""
        if self.config.layout < 3:
            return (yield from super()._shared_buckets_steps(cursor, count))
        cursor, keys = yield Scan(self.compact.bucket_scan_pattern(0), cursor, count, self.layout.meta)
        if not keys:
            return [], cursor
        replies = yield RoundTrip([("HGETALL", key) for key in keys])
        shared, overflowed = [], []
        for key, fields in zip(keys, replies):
            for field, value in fields.items():
                if value == b"":
                    overflowed.append(self.compact.overflow_set(key, field))
                elif len(value) >= 8:
                    shared.append(members_of(value))
        if overflowed:
            sets = yield from set_members_steps(overflowed)
            shared += [np.array(sorted(int(m) for m in members), np.int64) for members in sets]
        return shared, cursor
