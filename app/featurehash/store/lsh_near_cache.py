"""An opt-in local replica of a layout-3 index, so a query needs no round trip (LSHIndex.enable_near_cache).

Why: a query's client work is ~0.1-0.2 ms, but its one round trip costs a bare PING (~0.1-0.16 ms here) plus the
PROBE_FETCH script (~0.1-0.2 ms of Redis time: 35 HGETs on listpack hashes and the tails): an index in the
client's memory (datasketch's MinHashLSH) answers in less than the round trip alone. redis-py's client-side
caching does not help: it caches single read commands (HGET, GET, ...; not EVALSHA), a hit still costs a
connection check-out and a deep copy (~46 of them a query), and it refuses Redis servers older than 7.4.

What it holds: every key of the index a query reads, as Redis has it: the bucket partition hashes (`P b...`,
field -> packed numbers), the overflow sets (`P o...`), the tail hashes (`P t...`: vector bytes + id) and, for a
codes-only index, the record chunks (`P r...`). `probe_fetch` answers what the PROBE_FETCH script would, from
them: the rest of the query (pool, re-ranking, results) is the same code, so the answers are the same.

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

Costs: loading reads the whole index once (3-6 s on this loaded 2-core host at 50,000 items: 65,000 hashes,
257,000 bucket entries), and the replica's dicts take ~70 MB there (Python objects: ~0.2 KB a bucket entry, a
tail per item); every write to the index costs this client a refetch of the keys it touched (and a PING).
Sync clients only (LSHIndex; an AsyncLSHIndex has none): the refetch is blocking I/O.
"""

from __future__ import annotations

import threading

import numpy as np
from redis.exceptions import RedisError, TimeoutError

from .lsh_compact import CompactLayout

MAX_REFETCH_ROUNDS = 8  # refetches in a row that met new invalidations before a query gives up (goes to Redis)
LOAD_BATCH_KEYS = 1000  # keys read per MULTI/EXEC while loading
_U32 = np.dtype("<u4")


class NearCache:
    """The replica of one layout-3 index's buckets, tails (and, codes only, records) over a connection of its own."""

    def __init__(self, redis, prefix: bytes, meta_key: bytes, meta: bytes, compact: CompactLayout,
                 with_records: bool, strict: bool = False):
        pool = redis.connection_pool
        self._connection_class, self._connection_kwargs = pool.connection_class, dict(pool.connection_kwargs)
        self.prefix, self.meta_key, self.meta = prefix, meta_key, meta
        self.compact, self.with_records, self.strict = compact, with_records, strict
        # the keys' contents, as queries look them up: bucket address (level, partition, field) -> packed numbers
        # ("" when it overflowed into a set), overflow set address -> packed numbers, item number -> tail, record
        # chunk key -> chunk; and each bucket hash's fields (to drop them when it is refetched)
        self.buckets: dict[bytes, bytes] = {}
        self.overflow: dict[bytes, bytes] = {}
        self.tails: dict[int, bytes] = {}
        self.chunks: dict[bytes, bytes] = {}
        self.bucket_fields: dict[bytes, list[bytes]] = {}
        self.stale: set[bytes] = set()
        self.loaded = False
        self.barrier = False  # a PING before the next query (after a write through the owning index)
        self.connection = None
        self._lock = threading.RLock()  # one connection and one set of dicts; close() may run inside sync()

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

    def _invalidated(self, push) -> None:
        keys = push[1]
        if keys is None:  # FLUSHDB / FLUSHALL
            self.loaded = False
        else:
            self.stale.update(keys)

    def _drain(self) -> None:
        """Reads the pushes that have arrived (the handler records them), without waiting."""
        connection = self.connection
        while connection.can_read(timeout=0):
            try:
                connection.read_response(push_request=True, timeout=0, disconnect_on_error=False)
            except TimeoutError:
                break

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
        self.connection.send_command("PING")
        self.connection.read_response()

    def _call(self, commands: list[tuple]) -> list:
        """Commands as one MULTI/EXEC on the tracking connection: their replies (a snapshot at one moment)."""
        connection = self.connection
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
        for start in range(0, len(keys), LOAD_BATCH_KEYS):
            self._fetch(keys[start:start + LOAD_BATCH_KEYS])
        self._ping()

    def _command(self, key: bytes) -> tuple | None:
        """How the replica reads a key of the index (None: a key no query reads)."""
        if key == self.meta_key:
            return ("GET", key)
        kind = key[len(self.prefix):len(self.prefix) + 1]
        if kind in (b"b", b"t"):
            return ("HGETALL", key)
        if kind == b"o":
            return ("SMEMBERS", key)
        if kind == b"r" and self.with_records:
            return ("GET", key)
        return None

    def _fetch(self, keys: list[bytes]) -> None:
        wanted = [(key, command) for key in keys if (command := self._command(key)) is not None]
        if not wanted:
            return
        for (key, command), value in zip(wanted, self._call([command for _, command in wanted])):
            if key == self.meta_key:
                if value != self.meta:
                    self.meta = None  # deleted or created again: this replica answers no more queries
            else:
                self._store(key, value)

    def _store(self, key: bytes, value) -> None:
        """Replaces what the replica holds of a key by its value as read (empty: the key is gone)."""
        kind, rest = key[len(self.prefix):len(self.prefix) + 1], key[len(self.prefix) + 1:]
        if kind == b"b":
            for field in self.bucket_fields.pop(key, ()):
                del self.buckets[rest + field]
            if value:
                self.bucket_fields[key] = list(value)
                self.buckets.update((rest + field, members) for field, members in value.items())
        elif kind == b"o":
            members = sorted(int(member) for member in value) if value else []
            if members:
                self.overflow[rest] = np.array(members, _U32).tobytes()
            else:
                self.overflow.pop(rest, None)
        elif kind == b"t":
            first = int.from_bytes(rest, "big") * 64
            for number in range(first, first + 64):
                self.tails.pop(number, None)
            for field, tail in (value or {}).items():
                self.tails[first + int(field)] = tail
        elif value:
            self.chunks[key] = value
        else:
            self.chunks.pop(key, None)

    def _clear(self) -> None:
        for held in (self.buckets, self.overflow, self.tails, self.chunks, self.bucket_fields, self.stale):
            held.clear()

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

    def probe_fetch(self, addresses: bytes, per: int, known: bytes) -> tuple | None:
        """What featurehash.store.lsh_compact_scripts.PROBE_FETCH answers for these arguments, from the replica
        (None if it is not coherent now: the caller sends the script). The candidates come in item-number
        order, not the script's first-seen order: the query's pool sorts them by number either way."""
        with self._lock:  # a query at a time (threads may share an index)
            if not self.sync():
                return None
            return self._probe(addresses, per, known)

    def _probe(self, addresses: bytes, per: int, known: bytes) -> tuple:
        stride, overflow = self.compact.address_stride, self.overflow
        keys = [addresses[at:at + stride] for at in range(0, len(addresses), stride)]
        values = list(map(self.buckets.get, keys))
        out = []
        for start in range(0, len(keys), per):  # each query's distinct bucket values, as the script returns them
            distinct = dict.fromkeys(overflow.get(key) if value == b"" else value
                                     for key, value in zip(keys[start:start + per], values[start:start + per]))
            distinct.pop(None, None)
            out.append(b"".join(distinct))
        found = np.unique(np.frombuffer(b"".join(out), _U32))
        if known:
            found = np.setdiff1d(found, np.frombuffer(known, _U32), assume_unique=True)
        numbers = found.tolist()
        tails = [tail or b"" for tail in map(self.tails.get, numbers)]
        lengths = np.fromiter(map(len, tails), _U32, len(tails))
        padded = b"".join(tail + b"\0" * (-len(tail) % 4) for tail in tails)
        records = b"".join(self._record(number) for number in numbers) if self.with_records else b""
        return found.astype(_U32).tobytes(), lengths.tobytes(), padded, records, out

    def _record(self, number: int) -> bytes:
        width, chunk_items = self.compact.width, self.compact.chunk_items
        chunk = self.chunks.get(self.compact.chunk_key(number), b"")
        offset = (number % chunk_items) * width
        record = chunk[offset:offset + width]
        return record if len(record) == width else b"\0" * width
