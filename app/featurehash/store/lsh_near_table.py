"""The near cache's replica (featurehash.store.lsh_near_cache) as one compiled table: uint64 keys -> byte
strings kept in one uint32 arena, so a query's probe (its buckets, their members, the candidates' tails and
records) is one compiled call that builds no Python object per bucket or candidate.

Why: as Python dicts of bytes the replica cost ~60 us of a ~200 us query (35 dict probes, joins of the
members, a tail lookup and a re-packing per candidate, decoded again by the pool) and ~1.3 KB an item
(~65 MB at 50,000 items); here the probe is a few microseconds and an item ~0.5 KB.

Keys are KIND << 48 | payload:

    BUCKET     level << 32 | identity   the bucket's members (uint32 LE, as its partition hash's field holds
                                        them), or OVERFLOWED (no bytes, size -1): they are in the OVERFLOW entry
    OVERFLOW   level << 32 | identity   the members of the bucket's overflow set (uint32 LE, sorted)
    PARTITION  level << 32 | partition  the identities (uint32) of the partition hash's fields: what to drop
                                        when the hash is read again
    TAIL       item number              the item's tail: its packed vector (if the index keeps them), then its id
    CHUNK      chunk number             a record chunk (codes-only indexes)

The table is open addressing with linear probing and backward-shift deletion (no tombstones), at most
MAX_LOAD full. Values are appended to the arena, each from a word boundary (zero-padded); a replaced or
deleted value's words are garbage until the arena is reallocated, which copies the live values only. All
integer work: the same answers on every CPU.
"""

from __future__ import annotations

import numba as nb
import numpy as np

BUCKET, OVERFLOW, PARTITION, TAIL, CHUNK = 0, 1, 2, 3, 4
OVERFLOWED = -1  # the size of a BUCKET entry whose members are in its OVERFLOW entry
MAX_LOAD = 0.75
_EMPTY = np.uint64(2**64 - 1)  # no key (payloads are < 2^48)
_MIX_1, _MIX_2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def key_of(kind: int, payload: int) -> int:
    return kind << 48 | payload


@nb.njit(cache=True, nogil=True, inline="always")
def _home(key, mask):
    """The key's first slot: splitmix64's finalizer, so sequential item numbers spread over the table."""
    z = key ^ (key >> np.uint64(30))
    z = z * _MIX_1
    z = z ^ (z >> np.uint64(27))
    z = z * _MIX_2
    return np.int64((z ^ (z >> np.uint64(31))) & mask)


@nb.njit(cache=True, nogil=True)
def _find(keys, key):
    """The slot holding `key`, or -1."""
    mask = np.uint64(keys.size - 1)
    slot = _home(key, mask)
    while True:
        held = keys[slot]
        if held == key:
            return slot
        if held == _EMPTY:
            return -1
        slot = (slot + 1) & (keys.size - 1)


@nb.njit(cache=True, nogil=True)
def _remove(keys, starts, sizes, key):
    """Deletes `key` (if held), shifting back the entries after it that may move nearer their home slot;
    returns the words its value held (0 if absent)."""
    slot = _find(keys, key)
    if slot < 0:
        return 0
    freed = (sizes[slot] + 3) // 4 if sizes[slot] > 0 else 0
    mask = keys.size - 1
    hole, at = slot, slot
    while True:
        at = (at + 1) & mask
        held = keys[at]
        if held == _EMPTY:
            break
        home = _home(held, np.uint64(mask))
        if ((at - home) & mask) >= ((at - hole) & mask):  # its home is at or before the hole: it may fill it
            keys[hole], starts[hole], sizes[hole] = held, starts[at], sizes[at]
            hole = at
    keys[hole] = _EMPTY
    return freed


@nb.njit(cache=True, nogil=True)
def _delete(keys, starts, sizes, deleted):
    """Deletes keys: (entries removed, words freed)."""
    removed, freed = 0, 0
    for i in range(deleted.size):
        if _find(keys, deleted[i]) >= 0:
            freed += _remove(keys, starts, sizes, deleted[i])
            removed += 1
    return removed, freed


@nb.njit(cache=True, nogil=True)
def _drop_partitions(keys, starts, sizes, arena, partitions):
    """Deletes PARTITION keys and the BUCKET entries of the identities they list: (entries removed, words freed)."""
    removed, freed = 0, 0
    for i in range(partitions.size):
        slot = _find(keys, partitions[i])
        if slot < 0:
            continue
        level = (partitions[i] >> np.uint64(32)) & np.uint64(0xFF)
        start, count = starts[slot], sizes[slot] // 4
        for j in range(count):  # the arena is not changed by deletions: the list stays readable
            bucket = (np.uint64(BUCKET) << np.uint64(48)) | (level << np.uint64(32)) | np.uint64(arena[start + j])
            if _find(keys, bucket) >= 0:
                freed += _remove(keys, starts, sizes, bucket)
                removed += 1
        freed += _remove(keys, starts, sizes, partitions[i])
        removed += 1
    return removed, freed


@nb.njit(cache=True, nogil=True)
def _put(keys, starts, sizes, arena, used, added, blob, lengths):
    """Sets keys `added` to the strings of `lengths` bytes laid end to end in `blob` (uint8; a length < 0:
    a value of that size and no bytes), appending them to the arena from word `used`; the caller made room
    for them in both. Returns (the arena's words used, entries added, words freed by replacement)."""
    bytes_ = arena.view(np.uint8)
    mask = keys.size - 1
    new_entries, freed, at = 0, 0, 0
    for i in range(added.size):
        key, length = added[i], lengths[i]
        slot = _home(key, np.uint64(mask))
        while keys[slot] != key and keys[slot] != _EMPTY:
            slot = (slot + 1) & mask
        if keys[slot] == key:
            freed += (sizes[slot] + 3) // 4 if sizes[slot] > 0 else 0
        else:
            keys[slot] = key
            new_entries += 1
        sizes[slot] = length
        starts[slot] = used
        if length > 0:
            words = (length + 3) // 4
            out = 4 * used
            for b in range(length):
                bytes_[out + b] = blob[at + b]
            for b in range(length, 4 * words):
                bytes_[out + b] = 0
            used += words
            at += length
    return used, new_entries, freed


@nb.njit(cache=True, nogil=True)
def _rehash(keys, starts, sizes, new_keys, new_starts, new_sizes):
    mask = new_keys.size - 1
    for i in range(keys.size):
        if keys[i] != _EMPTY:
            slot = _home(keys[i], np.uint64(mask))
            while new_keys[slot] != _EMPTY:
                slot = (slot + 1) & mask
            new_keys[slot], new_starts[slot], new_sizes[slot] = keys[i], starts[i], sizes[i]


@nb.njit(cache=True, nogil=True)
def _compact(keys, starts, sizes, arena, new_arena):
    """Copies the live values into new_arena (in slot order), pointing the entries at them: its words used."""
    used = 0
    for i in range(keys.size):
        if keys[i] != _EMPTY and sizes[i] > 0:
            words = (sizes[i] + 3) // 4
            new_arena[used:used + words] = arena[starts[i]:starts[i] + words]
            starts[i] = used
            used += words
    return used


class WordTable:
    """The arrays and their bookkeeping; lsh_near_probe reads them (keys, starts, sizes, arena)."""

    def __init__(self, slots: int = 1024, words: int = 1024):
        self.keys = np.full(slots, _EMPTY, np.uint64)
        self.starts = np.zeros(slots, np.int64)  # the value's first word in the arena
        self.sizes = np.zeros(slots, np.int64)   # its bytes (OVERFLOWED: none)
        self.arena = np.zeros(words, np.uint32)
        self.entries, self.used, self.garbage = 0, 0, 0  # keys held; arena words written; of them, not live

    def nbytes(self) -> int:
        return self.keys.nbytes + self.starts.nbytes + self.sizes.nbytes + self.arena.nbytes

    def get(self, key: int) -> bytes | None:
        """A value as bytes (b"" for one without bytes), None if absent (tests and debugging)."""
        slot = _find(self.keys, np.uint64(key))
        if slot < 0:
            return None
        size = int(self.sizes[slot])
        start = 4 * int(self.starts[slot])
        return self.arena.view(np.uint8)[start:start + size].tobytes() if size > 0 else b""

    def size_of(self, key: int) -> int | None:
        slot = _find(self.keys, np.uint64(key))
        return None if slot < 0 else int(self.sizes[slot])

    def delete(self, keys: np.ndarray) -> None:
        if keys.size:
            removed, freed = _delete(self.keys, self.starts, self.sizes, np.ascontiguousarray(keys, np.uint64))
            self.entries -= removed
            self.garbage += freed

    def drop_partitions(self, partitions: np.ndarray) -> None:
        if partitions.size:
            removed, freed = _drop_partitions(self.keys, self.starts, self.sizes, self.arena,
                                              np.ascontiguousarray(partitions, np.uint64))
            self.entries -= removed
            self.garbage += freed

    def put(self, keys: np.ndarray, lengths: np.ndarray, blob: bytes) -> None:
        """Sets keys (distinct) to consecutive strings of `blob` (lengths in bytes; < 0: a size without bytes)."""
        if not keys.size:
            return
        lengths = np.ascontiguousarray(lengths, np.int64)
        self._room(keys.size, int(((np.maximum(lengths, 0) + 3) // 4).sum()))
        self.used, added, freed = _put(self.keys, self.starts, self.sizes, self.arena, self.used,
                                       np.ascontiguousarray(keys, np.uint64), np.frombuffer(blob, np.uint8), lengths)
        self.entries += added
        self.garbage += freed

    def _room(self, entries: int, words: int) -> None:
        """Slots for `entries` more keys and arena space for `words` more words."""
        if self.entries + entries > MAX_LOAD * self.keys.size:
            slots = self.keys.size
            while self.entries + entries > MAX_LOAD * slots:
                slots *= 2
            keys, starts, sizes = np.full(slots, _EMPTY, np.uint64), np.zeros(slots, np.int64), np.zeros(slots, np.int64)
            _rehash(self.keys, self.starts, self.sizes, keys, starts, sizes)
            self.keys, self.starts, self.sizes = keys, starts, sizes
        if self.used + words > self.arena.size:
            live = self.used - self.garbage
            arena = np.zeros(max(1024, 2 * (live + words)), np.uint32)  # live values copied: garbage reclaimed
            self.used, self.garbage = _compact(self.keys, self.starts, self.sizes, self.arena, arena), 0
            self.arena = arena
