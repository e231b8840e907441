"""An opt-in local replica of a layout-3 index, so a query needs no round trip (LSHIndex.enable_near_cache).

Why: a query's round trip (a PING's latency plus the PROBE_FETCH script's Redis time) costs more than its
client work, so an index in the client's memory answers in less than the round trip alone. redis-py's
client-side caching does not help: it caches single read commands (HGET, GET, ...; not EVALSHA), a hit still
costs a connection check-out and a deep copy, and it refuses Redis servers older than 7.4. (The timings:
docs/benchmarks.md, "LSH indexes in Redis", the near cache.)

What it holds: every key of the index a query reads, as Redis has it: the bucket partition hashes (`P b...`,
field -> packed numbers), the overflow sets (`P o...`), the tail hashes (`P t...`: vector bytes + id) and, for a
codes-only index, the record chunks (`P r...`), in one compiled table (featurehash.store.index.compact.near.
table: arrays, no Python object per bucket or item). `probe` answers what the PROBE_FETCH script would, from
them, in one compiled call (featurehash.store.index.compact.near.lookup): the rest of the query (pool,
re-ranking, results) is the same code, so the answers are the same. Queries read it through NearCachedSteps
(below), the wrapper of layout 3's hooks that LSHIndex.enable_near_cache puts in their place.

Coherence: a connection of its own (RESP3) runs CLIENT TRACKING ON BCAST PREFIX <the index's prefix>: Redis
pushes the names of the keys under the prefix that any client changes, one push per event-loop pass. Before
each query the replica reads the pushes that have arrived (a non-blocking poll) and, if there are any, refetches
the keys they name in MULTI/EXEC, then PINGs (BCAST pushes go out at the end of Redis's event-loop pass, so a
write run just before the EXEC, in the same pass, is announced after its reply: the PONG comes after it), and
again while a round brings new pushes (MAX_REFETCH_ROUNDS): what it then holds is Redis's state at that PING,
every key at one moment, never half of a write. Bound: a write is seen by every query that begins after its
push reached this process's socket. Redis sends the push in the same event-loop pass as the write's reply, so
a query that starts after another client received its write's reply misses it only within the microseconds
between the two socket writes of that pass. `strict=True` closes that window: each query first sends a PING on
the tracking connection (its PONG follows every push queued before it): one round trip, no script. A write
through the index that owns the replica makes the next query do that PING: a process reads its own writes. A
lost connection, a flush (a push without keys) or the index's meta key changing (deleted, or created again)
drop the replica; it is loaded again (SCAN of the prefix) on the next query, and a query that cannot get a
coherent state goes to Redis as usual.

Costs: loading reads the whole index once (SCAN and fetch of every key under its prefix). The replica then
takes the table's slots (24 B each, at most 3/4 full) and the arena (4 B a bucket membership, the tails, the
partitions' field lists, codes only the record chunks, and 1/8 more): ~0.6 KB an item at 50,000 float16 items
(docs/benchmarks.md, "LSH indexes in Redis"). Every write to the index costs this client a refetch
of the keys it touched (and a PING).
Sync clients only (LSHIndex; an AsyncLSHIndex has none): the refetch is blocking I/O.
"""

from __future__ import annotations

import select
import threading

import numpy as np
from redis.exceptions import RedisError, TimeoutError

from ....redis_steps import Compute, set_members_steps
from ..keys import CompactLayout
from .lookup import probe
from .table import BUCKET, CHUNK, OVERFLOW, OVERFLOWED, PARTITION, TAIL, WordTable, key_of

MAX_REFETCH_ROUNDS = 8  # refetches in a row that met new invalidations before a query gives up (goes to Redis)
LOAD_BATCH_KEYS = 1000  # keys read per MULTI/EXEC while loading
_U32 = np.dtype("<u4")
_NO_KEYS = np.empty(0, np.int64)


class NearCache:
    """The replica of one layout-3 index's buckets, tails (and, codes only, records) over a connection of its own."""

    def __init__(self, redis, prefix: bytes, meta_key: bytes, meta: bytes, compact: CompactLayout,
                 with_records: bool, strict: bool = False):
        pool = redis.connection_pool
        self._connection_class, self._connection_kwargs = pool.connection_class, dict(pool.connection_kwargs)
        self.prefix, self.meta_key, self.meta = prefix, meta_key, meta
        self.compact, self.with_records, self.strict = compact, with_records, strict
        self.table = WordTable()  # the keys' contents, as queries look them up (compact.near.table's kinds)
        self.stale: set[bytes] = set()
        self.loaded = False
        self.barrier = False  # a PING before the next query (after a write through the owning index)
        self.connection = None
        self._socket_poll, self._drained = None, False  # _drain's fast path
        self._lock = threading.RLock()  # one connection and one table; close() may run inside sync()

    # -- coherence ------------------------------------------------------------------------------------

    def _connect(self):
        connection = self._connection_class(**{**self._connection_kwargs, "protocol": 3})
        connection.register_connect_callback(self._on_connect)
        connection.connect()
        return connection

    def _on_connect(self, connection) -> None:
        """Tracking starts on every (re)connection; what arrived before it is unknown, so the replica reloads."""
        connection._parser.set_invalidation_push_handler(self._invalidated)  # redis-py's RESP3 push hook
        connection.send_command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", self.prefix)
        connection.read_response()
        self.loaded = False
        self._socket_poll = select.poll()  # this socket's (a reconnection makes another)
        self._socket_poll.register(connection._sock, select.POLLIN)
        self._drained = False

    def _invalidated(self, push) -> None:
        keys = push[1]
        if keys is None:  # FLUSHDB / FLUSHALL
            self.loaded = False
        else:
            self.stale.update(keys)

    def _drain(self) -> None:
        """Reads the pushes that have arrived (the handler records them), without waiting. When the last read
        was a drain that left nothing buffered in redis-py's parser (`_drained`), one poll of the socket says
        whether anything arrived since (~0.5 us; redis-py's can_read, which also looks at the parser's buffer,
        costs ~2-4 us, a few percent of a query); a closed socket polls as readable, and can_read reports it."""
        if self._drained and not self._socket_poll.poll(0):
            return
        connection, self._drained = self.connection, False
        while connection.can_read(timeout=0):
            try:
                connection.read_response(push_request=True, timeout=0, disconnect_on_error=False)
            except TimeoutError:
                break
        else:
            self._drained = True  # can_read found nothing buffered and nothing on the socket

    def sync(self) -> bool:
        """Brings the replica to a coherent state (loading it if needed); False if that failed (go to Redis)."""
        try:
            if self.connection is None:
                self.connection = self._connect()
            if self.strict or self.barrier:
                self._ping()
                self.barrier = False
            else:
                self._drain()
            for _ in range(MAX_REFETCH_ROUNDS):
                if not self.loaded:
                    self._load()
                if not self.stale:
                    return self.meta is not None
                keys, self.stale = list(self.stale), set()
                for start in range(0, len(keys), LOAD_BATCH_KEYS):  # batches need not be atomic: the PING is the check
                    self._fetch(keys[start:start + LOAD_BATCH_KEYS])
                self._ping()
            return False
        except (RedisError, OSError):  # a lost connection, or a reply out of step: start again from nothing
            self.close()
            return False

    def refresh(self) -> bool:
        """sync() for callers outside a query (LSHIndex.enable_near_cache)."""
        with self._lock:
            return self.sync()

    def _ping(self) -> None:
        """One round trip after which every push queued before it has been read (and recorded). Needed after a
        read too: a write that Redis ran in the same event-loop pass as the read, before it, is in the read's
        reply, but its BCAST invalidation (of the keys not read) is sent at the end of that pass, after the
        reply; the PING, sent once the reply is in, is answered in a later pass."""
        self._drained = False  # what follows the PONG may be buffered
        self.connection.send_command("PING")
        self.connection.read_response()

    def _call(self, commands: list[tuple]) -> list:
        """Commands as one MULTI/EXEC on the tracking connection: their replies (a snapshot at one moment)."""
        connection = self.connection
        self._drained = False
        connection.send_packed_command(connection.pack_commands([("MULTI",), *commands, ("EXEC",)]))
        for _ in range(len(commands) + 1):  # +OK, then +QUEUED a command
            connection.read_response()
        return connection.read_response()

    def _load(self) -> None:
        self._clear()
        self.loaded = True  # before the scan: what changes meanwhile arrives as pushes, refetched after
        keys, cursor = [self.meta_key], 0
        pattern = self.prefix.replace(b"\\", b"\\\\").replace(b"*", b"\\*").replace(b"?", b"\\?") \
            .replace(b"[", b"\\[").replace(b"]", b"\\]") + b"*"
        while True:
            cursor, page = self._call([("SCAN", cursor, "MATCH", pattern, "COUNT", LOAD_BATCH_KEYS)])[0]
            keys.extend(key for key in page if self._command(key) is not None and key != self.meta_key)
            cursor = int(cursor)
            if cursor == 0:
                break
        keys = list(dict.fromkeys(keys))  # SCAN may return a key twice (a rehash during the scan)
        for start in range(0, len(keys), LOAD_BATCH_KEYS):
            self._fetch(keys[start:start + LOAD_BATCH_KEYS])
        self.table.trim()
        self._ping()

    def _command(self, key: bytes) -> tuple | None:
        """How the replica reads a key of the index (None: a key no query reads)."""
        if key == self.meta_key:
            return ("GET", key)
        kind = key[len(self.prefix):len(self.prefix) + 1]
        if kind in (b"b", b"t"):
            return ("HGETALL", key)
        if kind == b"o":
            return ("SSCAN", key)  # by pages: _scanned_sets
        if kind == b"r" and self.with_records:
            return ("GET", key)
        return None

    def _fetch(self, keys: list[bytes]) -> None:
        """Reads keys into the table: the overflow sets by SSCAN pages (a set of 100,000 members read at once held
        Redis ~10 ms), the rest in one MULTI/EXEC. Neither needs to be atomic with the other: a key written
        meanwhile is announced by a push and read again before any query uses the replica (sync's PING rounds)."""
        wanted = [(key, command) for key in keys if (command := self._command(key)) is not None]
        if not wanted:
            return
        sets = [key for key, command in wanted if command[0] == "SSCAN"]
        others = [(key, command) for key, command in wanted if command[0] != "SSCAN"]
        changes = _Changes(self.prefix, self.compact)
        replies = self._call([command for _, command in others]) if others else []
        for (key, command), value in zip(others, replies):
            if key == self.meta_key:
                if value != self.meta:
                    self.meta = None  # deleted or created again: this replica answers no more queries
            else:
                changes.note(key, value)
        for key, members in self._scanned_sets(sets).items():
            changes.note(key, members)
        changes.apply(self.table)

    def _scanned_sets(self, keys: list[bytes]) -> dict[bytes, list[bytes]]:
        """The members of sets by redis_steps.set_members_steps (SSCAN pages, pipelined, not atomic), its round
        trips sent on the tracking connection."""
        operation, reply, connection = set_members_steps(keys), None, self.connection
        while True:
            try:
                step = operation.send(reply)
            except StopIteration as done:
                return dict(zip(keys, done.value))
            self._drained = False
            connection.send_packed_command(connection.pack_commands(step.commands))
            reply = [connection.read_response() for _ in step.commands]

    def _clear(self) -> None:
        self.table = WordTable()
        self.stale.clear()

    def note_write(self) -> None:
        self.barrier = True

    def close(self) -> None:
        with self._lock:
            connection, self.connection, self.loaded = self.connection, None, False
            self._clear()
        if connection is not None:
            try:
                connection.disconnect()
            except (RedisError, OSError):
                pass

    # -- the probe, from the replica ---------------------------------------------------------------------

    def probe(self, identities: np.ndarray, rows: np.ndarray, levels: np.ndarray, known: np.ndarray,
              max_candidates: int | None = None) -> tuple | None:
        """What featurehash.store.index.compact.scripts.PROBE_FETCH answers for these rows of `identities`
        (int64 `rows`, each at its level), `known` (sorted) the candidates fetched before, from the replica (None
        if it is not coherent now, or a row's buckets hold more than `max_candidates` members: the caller sends
        the script), decoded: (each row's bucket members, sorted and
        distinct; the new candidates, sorted by number; their tails' byte lengths; the tails (uint32 words, each
        padded to a word); codes only, their records (m, width) uint8, else None)."""
        with self._lock:  # a query at a time (threads may share an index); the arrays are not changed meanwhile
            if not self.sync():
                return None
            table, compact = self.table, self.compact
            width = compact.width if self.with_records else 0
            members, offsets, fresh, lengths, tails, records, capped = probe(
                table.slots, table.arena, identities, rows, levels, compact.bands,
                known, width, compact.chunk_items, -1 if max_candidates is None else max_candidates)
        if capped:
            return None
        bounds = offsets.tolist()
        found = [members[start:end] for start, end in zip(bounds[:-1], bounds[1:])]
        return found, fresh, lengths, tails, records if width else None


class _Changes:
    """What one batch of keys read (in one MULTI/EXEC) changes in the table, applied at once: the old contents of
    every key read are dropped, then what was read is put (a key read twice in the batch read the same). The
    bucket hashes' fields (most of what a load reads) are turned into table entries by numpy, a batch at once."""

    def __init__(self, prefix: bytes, compact: CompactLayout):
        self.prefix, self.compact = prefix, compact
        self.partitions: list[int] = []  # PARTITION keys to drop, with their buckets
        self.deleted: list[int] = []
        self.keys: list[int] = []  # other entries to put: keys, byte lengths, values
        self.lengths: list[int] = []
        self.values: list[bytes] = []
        self.heads: list[int] = []  # per bucket hash read: its PARTITION key, its fields' payload base, field count
        self.bases: list[int] = []
        self.counts: list[int] = []
        self.fields: list[bytes] = []  # every field of those hashes, and its value
        self.members: list[bytes] = []

    def _put(self, key: int, value: bytes) -> None:
        self.keys.append(key)
        self.lengths.append(len(value))
        self.values.append(value)

    def _identity_base(self, partition: int) -> int:
        shift = 32 - self.compact.bucket_bits
        return partition << shift if shift < 32 else 0

    def note(self, key: bytes, value) -> None:
        """Replaces what the replica holds of a key by its value as read (empty: the key is gone)."""
        kind, rest = key[len(self.prefix):len(self.prefix) + 1], key[len(self.prefix) + 1:]
        if kind == b"b":
            level, partition = rest[0], int.from_bytes(rest[1:5], "big")
            here = key_of(PARTITION, level << 32 | partition)
            self.partitions.append(here)
            if value:
                self.heads.append(here)
                self.bases.append(level << 32 | self._identity_base(partition))
                self.counts.append(len(value))
                self.fields.extend(value)
                self.members.extend(value.values())
        elif kind == b"o":
            level, partition = rest[0], int.from_bytes(rest[1:5], "big")
            here = key_of(OVERFLOW, level << 32 | self._identity_base(partition) | int.from_bytes(rest[5:], "big"))
            self.deleted.append(here)
            if value:
                self._put(here, np.array(sorted(int(member) for member in value), _U32).tobytes())
        elif kind == b"t":
            first = int.from_bytes(rest, "big") * 64
            self.deleted.extend(key_of(TAIL, number) for number in range(first, first + 64))
            for field, tail in (value or {}).items():
                self._put(key_of(TAIL, first + int(field)), tail)
        else:
            here = key_of(CHUNK, int.from_bytes(rest, "big"))
            self.deleted.append(here)
            if value:
                self._put(here, value)

    def apply(self, table: WordTable) -> None:
        table.drop_partitions(np.array(self.partitions, np.int64) if self.partitions else _NO_KEYS)
        table.delete(np.array(self.deleted, np.int64) if self.deleted else _NO_KEYS)
        if self.heads:
            width = self.compact.field_bytes  # every field is the identity's low bits, big-endian, this wide
            raw = np.frombuffer(b"".join(self.fields), np.uint8).reshape(-1, width).astype(np.int64)
            payloads = np.repeat(np.array(self.bases, np.int64), self.counts)  # level << 32 | identity
            for byte in range(width):
                payloads |= raw[:, byte] << (8 * (width - 1 - byte))
            lengths = np.fromiter(map(len, self.members), np.int64, len(self.members))
            lengths[lengths == 0] = OVERFLOWED  # "": the members are in the overflow set
            table.put((BUCKET << 48) | payloads, lengths, b"".join(self.members))
            counts = np.array(self.counts, np.int64)
            table.put(np.array(self.heads, np.int64), 4 * counts, (payloads & 0xFFFFFFFF).astype(_U32).tobytes())
        if self.keys:
            table.put(np.array(self.keys, np.int64), np.array(self.lengths, np.int64), b"".join(self.values))


class NearCachedSteps:
    """Layout 3's hooks (featurehash.store.index.compact.steps.CompactSteps) with queries answered from the near
    cache: its probe asks the replica first and, when the replica is not coherent (or a row's buckets hold more
    than bounds.per_row members), the wrapped layout's probe; every other hook is the wrapped layout's."""

    def __init__(self, inner, cache: NearCache):
        self.inner, self.cache = inner, cache
        self.layout, self.compact, self.batch_items = inner.layout, inner.compact, inner.batch_items
        # every hook but the probe is the wrapped layout's own
        self.plan, self.stored_plan_steps, self.new_pool = inner.plan, inner.stored_plan_steps, inner.new_pool
        self.fetch_steps, self.code_similarities = inner.fetch_steps, inner.code_similarities
        self.encode, self.add_batch_steps, self.remove_batch_steps = (inner.encode, inner.add_batch_steps,
                                                                      inner.remove_batch_steps)
        self.records_steps, self.shared_buckets_steps = inner.records_steps, inner.shared_buckets_steps
        self.decode_records, self.pair_code_similarities = inner.decode_records, inner.pair_code_similarities
        self._numbers_steps = inner._numbers_steps

    def probe_steps(self, level_keys, active: list[int], level: list[int], pool, bounds):
        rows = np.array(active, np.int64)
        levels = np.array(level, np.int64)[rows]
        reply = yield Compute(self.cache.probe, (level_keys, rows, levels, pool.fetched, bounds.per_row))
        if reply is None:
            return (yield from self.inner.probe_steps(level_keys, active, level, pool, bounds))
        pool.walked += sum(row.size for row in reply[0])
        bounds.check(pool.walked)
        return self.inner.probe_reply(reply)
