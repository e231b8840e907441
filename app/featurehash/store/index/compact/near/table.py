"""The near cache's replica (featurehash.store.index.compact.near.cache) as one compiled table: int64 keys -> byte
strings kept in one uint32 arena, so a query's probe (its buckets, their members, the candidates' tails and
records) is one compiled call that builds no Python object per bucket or candidate.

Why: as Python dicts of bytes the replica's probe made 35 dict probes, joins of the members, a tail lookup and
a re-packing per candidate, decoded again by the pool, and held ~1.4 KB an item; over these arrays the probe is
mostly cache misses (a slot and a value a bucket) and the replica less than half the memory (the timings:
docs/benchmarks.md, "LSH indexes in Redis", the near cache).

Keys are KIND << 48 | payload:

    BUCKET     level << 32 | identity   the bucket's members (uint32 LE, as its partition hash's field holds
                                        them), or OVERFLOWED (no bytes, size -1): they are in the OVERFLOW entry
    OVERFLOW   level << 32 | identity   the members of the bucket's overflow set (uint32 LE, sorted)
    PARTITION  level << 32 | partition  the identities (uint32) of the partition hash's fields: what to drop
                                        when the hash is read again
    TAIL       item number              the item's tail: its packed vector (if the index keeps them), then its id
    CHUNK      chunk number             a record chunk (codes-only indexes)

The table is open addressing with linear probing and backward-shift deletion (no tombstones), at most
MAX_LOAD full; a slot is (key, first word, bytes) side by side, so a lookup touches one cache line for the slot
and one for the value (as three arrays, three misses a lookup). Values are appended to the arena, each from a
word boundary (zero-padded); a replaced or deleted
value's words are garbage until the arena is reallocated, which copies the live values only. All integer
work: the same answers on every CPU.
"""

from __future__ import annotations

import numba as nb
import numpy as np

BUCKET, OVERFLOW, PARTITION, TAIL, CHUNK = 0, 1, 2, 3, 4
OVERFLOWED = -1  # the size of a BUCKET entry whose members are in its OVERFLOW entry
MAX_LOAD = 0.75
_EMPTY = -1  # no key (keys are < 2^51)
KEY, START, SIZE = 0, 1, 2  # a slot's columns
_MIX_1, _MIX_2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def key_of(kind: int, payload: int) -> int:
    return kind << 48 | payload


@nb.njit(cache=True, nogil=True, inline="always")
def _home(key, mask):
    """The key's first slot: splitmix64's finalizer, so sequential item numbers spread over the table."""
    z = np.uint64(key)
    z = z ^ (z >> np.uint64(30))
    z = z * _MIX_1
    z = z ^ (z >> np.uint64(27))
    z = z * _MIX_2
    return np.int64((z ^ (z >> np.uint64(31))) & np.uint64(mask))


@nb.njit(cache=True, nogil=True)
def _find(slots, key):
    """The slot holding `key`, or -1."""
    mask = slots.shape[0] - 1
    slot = _home(key, mask)
    while True:
        held = slots[slot, KEY]
        if held == key:
            return slot
        if held == _EMPTY:
            return -1
        slot = (slot + 1) & mask


@nb.njit(cache=True, nogil=True)
def _remove(slots, key):
    """Deletes `key` (if held), shifting back the entries after it that may move nearer their home slot;
    returns the words its value held (0 if absent)."""
    slot = _find(slots, key)
    if slot < 0:
        return 0
    freed = (slots[slot, SIZE] + 3) // 4 if slots[slot, SIZE] > 0 else 0
    mask = slots.shape[0] - 1
    hole, at = slot, slot
    while True:
        at = (at + 1) & mask
        held = slots[at, KEY]
        if held == _EMPTY:
            break
        home = _home(held, mask)
        if ((at - home) & mask) >= ((at - hole) & mask):  # its home is at or before the hole: it may fill it
            slots[hole, KEY], slots[hole, START], slots[hole, SIZE] = held, slots[at, START], slots[at, SIZE]
            hole = at
    slots[hole, KEY] = _EMPTY
    return freed


@nb.njit(cache=True, nogil=True)
def _delete(slots, deleted):
    """Deletes keys: (entries removed, words freed)."""
    removed, freed = 0, 0
    for i in range(deleted.size):
        if _find(slots, deleted[i]) >= 0:
            freed += _remove(slots, deleted[i])
            removed += 1
    return removed, freed


@nb.njit(cache=True, nogil=True)
def _drop_partitions(slots, arena, partitions):
    """Deletes PARTITION keys and the BUCKET entries of the identities they list: (entries removed, words freed)."""
    removed, freed = 0, 0
    for i in range(partitions.size):
        slot = _find(slots, partitions[i])
        if slot < 0:
            continue
        level = (partitions[i] >> 32) & 0xFF
        start, count = slots[slot, START], slots[slot, SIZE] // 4
        for j in range(count):  # deletions do not change the arena: the list stays readable
            bucket = (BUCKET << 48) | (level << 32) | np.int64(arena[start + j])
            if _find(slots, bucket) >= 0:
                freed += _remove(slots, bucket)
                removed += 1
        freed += _remove(slots, partitions[i])
        removed += 1
    return removed, freed


@nb.njit(cache=True, nogil=True)
def _put(slots, arena, used, added, blob, lengths):
    """Sets keys `added` to the strings of `lengths` bytes laid end to end in `blob` (uint8; a length < 0:
    a value of that size and no bytes), appending them to the arena from word `used`; the caller made room
    for them in both. Returns (the arena's words used, entries added, words freed by replacement)."""
    bytes_ = arena.view(np.uint8)
    mask = slots.shape[0] - 1
    new_entries, freed, at = 0, 0, 0
    for i in range(added.size):
        key, length = added[i], lengths[i]
        slot = _home(key, mask)
        while slots[slot, KEY] != key and slots[slot, KEY] != _EMPTY:
            slot = (slot + 1) & mask
        if slots[slot, KEY] == key:
            freed += (slots[slot, SIZE] + 3) // 4 if slots[slot, SIZE] > 0 else 0
        else:
            slots[slot, KEY] = key
            new_entries += 1
        slots[slot, START], slots[slot, SIZE] = used, length
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
def _rehash(slots, new_slots):
    mask = new_slots.shape[0] - 1
    for i in range(slots.shape[0]):
        if slots[i, KEY] != _EMPTY:
            slot = _home(slots[i, KEY], mask)
            while new_slots[slot, KEY] != _EMPTY:
                slot = (slot + 1) & mask
            new_slots[slot, :] = slots[i, :]


@nb.njit(cache=True, nogil=True)
def _compact(slots, arena, new_arena):
    """Copies the live values into new_arena (in slot order), pointing the entries at them: its words used."""
    used = 0
    for i in range(slots.shape[0]):
        if slots[i, KEY] != _EMPTY and slots[i, SIZE] > 0:
            words = (slots[i, SIZE] + 3) // 4
            new_arena[used:used + words] = arena[slots[i, START]:slots[i, START] + words]
            slots[i, START] = used
            used += words
    return used


def _empty_slots(count: int) -> np.ndarray:
    slots = np.zeros((count, 3), np.int64)
    slots[:, KEY] = _EMPTY
    return slots


class WordTable:
    """The arrays and their bookkeeping; compact.near.lookup reads them (slots, arena)."""

    def __init__(self, slots: int = 1024, words: int = 1024):
        self.slots = _empty_slots(slots)  # (key, the value's first word in the arena, its bytes (OVERFLOWED: none))
        self.arena = np.zeros(words, np.uint32)
        self.entries, self.used, self.garbage = 0, 0, 0  # keys held; arena words written; of them, not live

    def nbytes(self) -> int:
        return self.slots.nbytes + self.arena.nbytes

    def get(self, key: int) -> bytes | None:
        """A value as bytes (b"" for one without bytes), None if absent (tests and debugging)."""
        slot = _find(self.slots, key)
        if slot < 0:
            return None
        start, size = 4 * int(self.slots[slot, START]), int(self.slots[slot, SIZE])
        return self.arena.view(np.uint8)[start:start + size].tobytes() if size > 0 else b""

    def size_of(self, key: int) -> int | None:
        slot = _find(self.slots, key)
        return None if slot < 0 else int(self.slots[slot, SIZE])

    def delete(self, keys: np.ndarray) -> None:
        if keys.size:
            removed, freed = _delete(self.slots, np.ascontiguousarray(keys, np.int64))
            self.entries -= removed
            self.garbage += freed

    def drop_partitions(self, partitions: np.ndarray) -> None:
        if partitions.size:
            removed, freed = _drop_partitions(self.slots, self.arena, np.ascontiguousarray(partitions, np.int64))
            self.entries -= removed
            self.garbage += freed

    def put(self, keys: np.ndarray, lengths: np.ndarray, blob: bytes) -> None:
        """Sets keys to consecutive strings of `blob` (lengths in bytes; < 0: a size without bytes); a key given
        twice keeps the later."""
        if not keys.size:
            return
        lengths = np.ascontiguousarray(lengths, np.int64)
        self._room(keys.size, int(((np.maximum(lengths, 0) + 3) // 4).sum()))
        self.used, added, freed = _put(self.slots, self.arena, self.used, np.ascontiguousarray(keys, np.int64),
                                       np.frombuffer(blob, np.uint8), lengths)
        self.entries += added
        self.garbage += freed

    def trim(self, slack: float = 0.125) -> None:
        """Reallocates the arena to its live values and `slack` of them more (after a load, whose growth left
        up to half of it unused)."""
        live = self.used - self.garbage
        self._reallocate(live + int(slack * live))

    def _room(self, entries: int, words: int) -> None:
        """Slots for `entries` more keys and arena space for `words` more words."""
        if self.entries + entries > MAX_LOAD * self.slots.shape[0]:
            count = self.slots.shape[0]
            while self.entries + entries > MAX_LOAD * count:
                count *= 2
            slots = _empty_slots(count)
            _rehash(self.slots, slots)
            self.slots = slots
        if self.used + words > self.arena.size:
            self._reallocate(max(1024, 2 * (self.used - self.garbage + words)))

    def _reallocate(self, words: int) -> None:
        """A new arena of `words` words holding the live values only (garbage reclaimed)."""
        arena = np.zeros(max(words, self.used - self.garbage), np.uint32)
        self.used, self.garbage = _compact(self.slots, self.arena, arena), 0
        self.arena = arena
