"""Layout 3 of an LSH index (featurehash.store.index.compact.keys): the hooks
(featurehash.store.index.state.LayoutSteps) the operations of featurehash.store.index.queries, writes and
duplicates call, as step generators (no I/O).

Writes keep layout 2's guarantees with scripts instead of a MULTI, three round trips a batch: read the
ids' numbers and records (LOOKUP), give new items numbers (ALLOCATE), then WRITE checks that the meta key
and every item are still as read (else it writes nothing and the batch is read again) and applies the
records, the id maps and every bucket operation of the batch. So a record and its buckets change
together, and nothing is written under a deleted index. Queries: the plan and the code similarities here, the
probe (PROBE_FETCH, bounded per call) and the candidate pool in featurehash.store.index.compact.probe.
"""

from __future__ import annotations

import hashlib
from functools import cached_property

import numpy as np

from ....lsh.matches import aligned_match_fractions, b_bit_match_fractions
from ....maps import InputError
from ...lsh_accounting import StoredBytesExceeded, tenant_usage_steps
from ...redis_steps import (MAX_TRANSACTION_ATTEMPTS, Compute, RoundTrip, Scan, TransactionConflict, is_cluster,
                            set_members_steps)
from ..inline import INLINE_ROWS
from ..state import IndexState, ItemNotFound
from . import scripts
from .kernels import query_plan
from .keys import FINGERPRINT_BITS, CompactLayout, members_of, pack_strings
from .probe import PackedPool, bounded_probe_steps

READ_CHUNK = 2048  # ids or item numbers a LOOKUP or RECORDS call reads (a few ms of Redis)
COMPACT_BATCH_OPERATIONS = 6_000  # bucket operations per script call: ~10-25 ms of Redis (~2-4 us each)
_META_CHANGED, _ITEM_CHANGED, _OVER_LIMIT = -1, -2, -3


class CompactSteps:
    """The hooks of layout 3 over one index's state and its keys (`compact`)."""

    def __init__(self, index: IndexState, compact: CompactLayout):
        self.index, self.compact = index, compact
        self.config, self.layout, self.codec = index.config, index.layout, index.codec
        self.batch_items = max(1, min(2**15, COMPACT_BATCH_OPERATIONS // (self.config.bands * len(self.config.levels))))

    # -- writes ----------------------------------------------------------------------------------

    def encode(self, X):
        """Fingerprints, bucket identities and packed vectors (None: codes only) of rows to add."""
        fingerprints, vectors = self.index._encode(X)
        identities = self.compact.identities(fingerprints)
        return fingerprints, identities, vectors

    def add_batch_steps(self, ids, encoded, batch: slice, only_absent: bool = False):
        """Adds ids[batch]; `only_absent`: only those the index does not hold (a migration's copy, which must not
        overwrite a newer write)."""
        fingerprints, identities, vectors = encoded
        encoded_ids = [item_id.encode() for item_id in ids[batch]]
        tails = encoded_ids if vectors is None else [vector + item_id for vector, item_id
                                                     in zip(vectors[batch], encoded_ids)]
        return (yield from self._write_batch(encoded_ids, fingerprints[batch], identities[batch], tails, only_absent))

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

    def _write_batch(self, ids, fingerprints, identities, tails, only_absent: bool = False):
        """Add one batch (retried while other writers change the same items): (added, items). On a Redis Cluster
        with a stored-bytes limit, the tenant's other indexes' counts are read just before the write (two round
        trips; featurehash.store.lsh_accounting says what that bounds)."""
        compact, account = self.compact, self.index.stored_bytes
        spread = account is not None and account.limit is not None and is_cluster(self.index.redis)
        for _ in range(MAX_TRANSACTION_ATTEMPTS):
            numbers, old_records = yield from self._numbers_steps(ids)
            if only_absent and numbers.any():  # the WRITE script checks they are still absent
                keep = np.flatnonzero(numbers == 0)
                ids, fingerprints, identities = [ids[row] for row in keep], fingerprints[keep], identities[keep]
                tails, numbers, old_records = [tails[row] for row in keep], numbers[keep], b""
                if not ids:
                    return 0, None
            fresh = np.flatnonzero(numbers == 0)
            if fresh.size:
                (given,) = yield RoundTrip([("EVAL", scripts.ALLOCATE, 3, self.layout.meta, compact.next,
                                             compact.free, hashlib.sha1(self.index._meta).hexdigest(), fresh.size)])
                if given is None:
                    yield from self._meta_gone_steps()
                    continue
                numbers_now = numbers.copy()
                numbers_now[fresh] = np.frombuffer(given, "<u4")
            else:
                numbers_now = numbers
            others = (yield from tenant_usage_steps(self.layout.key_prefix, self.layout.size)) if spread else 0
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
        account = self.index.stored_bytes
        # the tenant's total lies in another slot (lsh_accounting)
        totals = () if account is None or is_cluster(self.index.redis) else (account.key,)
        if totals:
            limit = -1 if account.limit is None else account.limit
        else:  # a negative allowance (the others are past the limit) refuses any growth, as 0 does
            limit = -1 if allowance is None else max(0, allowance)
        return ("EVAL", scripts.WRITE, 4 + len(totals), self.layout.meta, self.layout.count, compact.free,
                self.layout.size, *totals,
                hashlib.sha1(self.index._meta).hexdigest(), mode, items.tobytes(), *pack_strings(ids), shas, records,
                *pack_strings(tails), *operations, width, compact.chunk_items, compact.field_bytes, count_change,
                limit)

    def _meta_gone_steps(self):
        """Raises IndexNotFound or IndexConflict when the meta key is gone or another; returns when
        it is back as it was (deleted and created again alike): the batch is then read again."""
        (meta,) = yield RoundTrip([("GET", self.layout.meta)])
        self.index._check_meta(meta)

    def remove_batch_steps(self, ids):
        """Read the items' numbers and records, then one WRITE removes them if still as read (else read again)."""
        for _ in range(MAX_TRANSACTION_ATTEMPTS):
            numbers, old_records = yield from self._numbers_steps([item_id.encode() for item_id in ids])
            present = np.flatnonzero(numbers > 0)
            if not present.size:
                return []
            command = yield Compute(self._compact_remove_command, ([ids[row].encode() for row in present],
                                                                   numbers[present], old_records),
                                    inline=present.size <= INLINE_ROWS)
            (reply,) = yield RoundTrip([command])
            if reply == _META_CHANGED:
                yield from self._meta_gone_steps()
            elif reply != _ITEM_CHANGED:
                return [ids[row] for row in present]
        raise TransactionConflict(f"{MAX_TRANSACTION_ATTEMPTS} attempts met concurrent changes to the same items")

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

    # -- reads: records and shared buckets (duplicates) -----------------------------------------

    def records_steps(self, numbers: np.ndarray):
        """(b-bit fingerprints (m, k) uint8, identities (m, L x levels), tails) of item numbers; a
        tail is the item's vector bytes (if kept) then its id, b"" for a number that holds no item."""
        records, tails = [], []
        for start in range(0, max(len(numbers), 1), READ_CHUNK):
            blob = np.ascontiguousarray(numbers[start:start + READ_CHUNK], "<u4").tobytes()
            (reply,) = yield RoundTrip([("EVAL", scripts.RECORDS, 1, self.layout.meta, blob, self.compact.width,
                                         self.compact.chunk_items)], atomic=True)
            records.append(reply[0]), tails.extend(reply[1])
        fingerprints, identities = self.compact.unpack_records(b"".join(records))
        return fingerprints, identities, tails

    def shared_buckets_steps(self, cursor: int, count: int):
        """(arrays of the item numbers of each level-0 bucket with >= 2 members; the next SCAN cursor, 0 at the
        end): a SCAN MATCH page of the level-0 partition hashes that exist (so the cost follows the stored
        buckets, not the partitions planned from `expected_items`), then their fields. A hash may come twice
        (SCAN's guarantee): callers tolerate repeated buckets."""
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

    def decode_records(self, records):
        """(live mask, fingerprints, ids, vectors) of records read by records_steps (duplicates' verification)."""
        fingerprints, _, tails = records
        live = np.array([bool(tail) for tail in tails], dtype=bool)
        blobs, vectors = [tail for tail in tails if tail], None
        if self.codec is not None and blobs:
            vectors, blobs = self.codec.unpack(blobs)
        return live, fingerprints[live], [blob.decode() for blob in blobs], vectors

    def pair_code_similarities(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return aligned_match_fractions(a, b, FINGERPRINT_BITS)

    # -- queries ---------------------------------------------------------------------------------

    def plan(self, X):
        """The checked vectors (None when the index keeps none: the codes alone rank, as for stored items), their
        b-bit fingerprints and their bucket identities (all levels), the latter two in one compiled call
        (featurehash.store.index.compact.kernels.query_plan). `hash` checks the vectors itself, so without stored
        vectors they are not checked a second time for nothing to read them."""
        feature_map = self.index.feature_map
        checked = None if self.codec is None else feature_map.check(X, "vectors")
        codes = feature_map.hash(X if checked is None else checked)
        if codes.shape[1] != self.config.n_codes:
            raise InputError("vectors", f"the map gave {codes.shape[1]} codes, the index expects {self.config.n_codes}")
        low, identities = query_plan(codes, self.config.bands, self.config.rows, self._level_rows, FINGERPRINT_BITS)
        return checked, low, identities

    def stored_plan_steps(self, ids: list[str]):
        """(vectors or None, b-bit fingerprints, stored bucket identities, item numbers) of stored items."""
        numbers, _ = yield from self._numbers_steps([item_id.encode() for item_id in ids])
        for item_id, number in zip(ids, numbers):
            if number == 0:
                raise ItemNotFound(item_id)
        fingerprints, identities, tails = yield from self.records_steps(numbers)
        X = None if self.codec is None else self.codec.unpack(list(tails))[0]
        return X, fingerprints, identities, numbers

    def new_pool(self) -> PackedPool:
        return PackedPool(self.config, self.codec, self.index.similarity)

    def code_similarities(self, query: np.ndarray, items: np.ndarray) -> np.ndarray:
        return b_bit_match_fractions(query, items, FINGERPRINT_BITS)

    def probe_steps(self, level_keys, active: list[int], level: list[int], pool, bounds):
        """The bucket members of each active query and the tails (and, codes only, the records) of those not in
        the pool yet: one script call a level when the probe is small, else bounded calls
        (featurehash.store.index.compact.probe.bounded_probe_steps)."""
        rows = np.array(active, np.int64)
        levels = np.array(level, np.int64)[rows]
        return self.probe_reply((yield from bounded_probe_steps(self, level_keys, rows, levels, pool, bounds)))

    def probe_reply(self, reply) -> tuple:
        """probe_steps' answer from (members, numbers, tail lengths, tails, records or None) as the probe (or the
        near cache's replica) gives them."""
        members, wanted, lengths, tails, records = reply
        fingerprints = None if records is None else records[:, :self.config.n_codes]
        return members, (wanted, (fingerprints, lengths, tails))

    def fetch_steps(self, wanted: np.ndarray):
        raise AssertionError("layout 3's probe fetches the new candidates itself")

    @cached_property
    def _level_rows(self) -> np.ndarray:
        return np.asarray(self.config.levels, dtype=np.int64)

    @cached_property
    def _probe_options(self) -> tuple[bytes, ...]:
        """PROBE_FETCH's constant arguments (address stride, bands; record width, chunk items, records wanted),
        encoded once."""
        return tuple(str(value).encode() for value in (
            self.compact.address_stride, self.config.bands, self.compact.width, self.compact.chunk_items,
            0 if self.codec is not None else 1))
