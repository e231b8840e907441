"""A layout-3 query's probe answered from the near cache's table (featurehash.store.index.compact.near.table) in one
compiled call: what the PROBE_FETCH script (featurehash.store.index.compact.scripts) answers, decoded as
featurehash.store.index.compact.probe uses it.

For each probed row (a query at its level): the members of its `bands` buckets (an overflowed bucket's from
its set), sorted and distinct. Then the candidates no earlier level fetched (`known`), sorted by item number
(the script gives them in first-seen order; the pool sorts them either way), with each one's tail (packed
vector then id; length 0 when the item is gone) copied into one word array, each from a word boundary, and,
for codes-only indexes, its record (zeros when its chunk does not hold it), as the script reads them.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .table import BUCKET, CHUNK, OVERFLOW, OVERFLOWED, SIZE, START, TAIL, _find


@nb.njit(cache=True, nogil=True)
def sorted_distinct(values):
    """values sorted, repeats dropped (sorted in place; returns the kept prefix): np.unique of integers."""
    values.sort()
    kept = 0
    for i in range(values.size):
        if i == 0 or values[i] != values[kept - 1]:
            values[kept] = values[i]
            kept += 1
    return values[:kept]


@nb.njit(cache=True, nogil=True)
def probe(slots, arena, identities, rows, levels, bands, known, record_width, chunk_items, cap):
    """(members of each row's buckets, concatenated, and the offsets of each row's (n + 1); the new candidates
    (int64); their tails' byte lengths (int64); the tails (uint32 words); records (m, record_width) uint8,
    0 x 0 when record_width is 0; False), or empty arrays and True when a row's buckets hold more than `cap`
    (>= 0) members: the script cuts such a row, by SSCAN's order, which the replica does not have. `known` is
    sorted."""
    n = rows.size
    found = np.empty(n * bands, np.int64)  # the slot of each bucket's members (-1: none)
    total = 0
    for i in range(n):
        row_start = total
        level = levels[i]
        for band in range(bands):
            payload = (level << 32) | np.int64(identities[rows[i], level * bands + band])
            slot = _find(slots, (BUCKET << 48) | payload)
            if slot >= 0 and slots[slot, SIZE] == OVERFLOWED:
                slot = _find(slots, (OVERFLOW << 48) | payload)
            found[i * bands + band] = slot
            if slot >= 0:
                total += max(slots[slot, SIZE], 0) // 4
        if cap >= 0 and total - row_start > cap:
            nothing = np.empty(0, np.int64)
            return (nothing, np.zeros(1, np.int64), nothing, nothing, np.empty(0, np.uint32),
                    np.zeros((0, record_width), np.uint8), True)
    members = np.empty(total, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    at = 0
    for i in range(n):
        first = at
        for band in range(bands):
            slot = found[i * bands + band]
            if slot >= 0:
                start = slots[slot, START]
                for j in range(max(slots[slot, SIZE], 0) // 4):
                    members[at] = arena[start + j]
                    at += 1
        at = first + sorted_distinct(members[first:at]).size
        offsets[i + 1] = at
    members = members[:at]

    everyone = sorted_distinct(members.copy())
    fresh = np.empty(everyone.size, np.int64)
    m, k = 0, 0
    for i in range(everyone.size):  # everyone minus known: both sorted
        while k < known.size and known[k] < everyone[i]:
            k += 1
        if k < known.size and known[k] == everyone[i]:
            continue
        fresh[m] = everyone[i]
        m += 1
    fresh = fresh[:m]

    lengths = np.zeros(m, np.int64)
    tail_slots = np.empty(m, np.int64)
    words = 0
    for i in range(m):
        slot = _find(slots, (TAIL << 48) | fresh[i])
        tail_slots[i] = slot
        if slot >= 0:
            lengths[i] = slots[slot, SIZE]
            words += (lengths[i] + 3) // 4
    tails = np.empty(words, np.uint32)
    at = 0
    for i in range(m):
        if tail_slots[i] >= 0:
            count = (lengths[i] + 3) // 4
            start = slots[tail_slots[i], START]
            tails[at:at + count] = arena[start:start + count]  # the padding is zeros
            at += count

    records = np.zeros((m if record_width else 0, record_width), np.uint8)
    if record_width:
        bytes_ = arena.view(np.uint8)
        for i in range(m):
            chunk = fresh[i] // chunk_items
            offset = (fresh[i] % chunk_items) * record_width
            slot = _find(slots, (CHUNK << 48) | chunk)
            if slot >= 0 and offset + record_width <= slots[slot, SIZE]:
                start = 4 * slots[slot, START] + offset
                for b in range(record_width):
                    records[i, b] = bytes_[start + b]
    return members, offsets, fresh, lengths, tails, records, False
