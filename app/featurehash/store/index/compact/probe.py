"""The probe of a layout-3 index (featurehash.store.index.compact.keys) and its candidate pool, for the query
loop of featurehash.store.index.queries (through featurehash.store.index.compact.steps). A level of a query is
one round trip (the PROBE_FETCH script returns the bucket members and the new candidates' vectors and ids
together; with a near cache, featurehash.store.index.compact.near, one compiled call over the local replica
returns the same, decoded), and the exact re-ranking reads the packed vectors in place (featurehash.lsh.rerank):
no scipy.sparse matrix is built. The client's own steps (the plan, the addresses, where each tail lies, the
pool's rows) are compiled calls (featurehash.store.index.compact.kernels); ids are decoded for the results
only."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ....lsh.rerank import packed_similarities
from ...redis_steps import RoundTrip, set_members_steps
from ..queries import CandidatePool
from . import scripts
from .kernels import TAIL_FIXED, TAIL_ID_ONLY, TAIL_SPARSE, merged_by_number, rows_of, tail_positions
from .near.lookup import sorted_distinct


# The bounds of one Redis call of a query (compact.scripts.PROBE_FETCH, TAILS, SSCAN): bucket members walked,
# the overflow set size past which its members are read by SSCAN pages instead, and tails fetched. Each is a few
# milliseconds of Redis time (~1-2.5 us a member the script walks: SMEMBERS makes a Lua string of each; ~1 us a
# member an SSCAN page returns, once a query however many rows defer the set; ~5 us a tail), so that no query holds
# Redis for long.
PROBE_BUDGET = 20_000
PROBE_BIG_BUCKET = 2_000
TAIL_BUDGET = 2_500
SSCAN_PAGE = 5_000
SETS_PER_TRIP = 8  # deferred sets whose SSCAN pages go in one round trip (~8 x 2-5 ms of Redis)
KNOWN_LIMIT = 10_000  # candidates already fetched that a query's first call may be sent
_PROBE_BOUNDS = tuple(str(bound).encode() for bound in (PROBE_BUDGET, PROBE_BIG_BUCKET, TAIL_BUDGET))

_NO_POSITIONS, _NO_WORDS = np.empty(0, np.int64), np.empty(0, "<u4")
_NO_POSITIONS.flags.writeable = _NO_WORDS.flags.writeable = False


class PackedPool(CandidatePool):
    """The candidates as the probe returned them, sorted by item number: their b-bit fingerprints (codes-only
    indexes) and their tails (packed vector, then id) in one uint32 array, each from a word (`starts`, in
    words), which the compiled re-ranking (featurehash.lsh.rerank) reads in place; ids are decoded only
    for the results."""

    def __init__(self, config, codec, similarity):
        super().__init__(config, codec, similarity)
        self.fingerprints = np.empty((0, config.n_codes), np.uint8)
        self.starts = _NO_POSITIONS  # shared empty arrays (read only): a query makes a pool, ~0.2 us an array
        self.ends = _NO_POSITIONS  # byte end of each tail
        self.id_starts = _NO_POSITIONS  # byte start of each id (after the packed vector)
        self.words = _NO_WORDS

    def add(self, numbers: np.ndarray, records) -> None:
        fingerprints, lengths, tails = records  # tails: uint32 words, each tail padded to whole words
        self.fetched = np.union1d(self.fetched, numbers) if self.fetched.size else np.sort(numbers)
        base = self.words.size
        words = np.concatenate((self.words, tails)) if base else tails
        kind, fixed = self._tail_kind
        positions = tail_positions(words, base, lengths, numbers, kind, fixed)
        if not positions[0].size:
            return
        if self.numbers.size:  # a deeper level: merged with what the pool has
            *merged, order = merged_by_number(self.numbers, self.starts, self.ends, self.id_starts, *positions)
        else:
            order = np.argsort(positions[0])
            merged = [part[order] for part in positions]
        self.numbers, self.starts, self.ends, self.id_starts = merged
        if fingerprints is not None:
            live = np.flatnonzero(lengths)
            self.fingerprints = np.vstack([self.fingerprints, fingerprints[live]])[order]
        self.words = words

    @property
    def _tail_kind(self) -> tuple[int, int]:
        """How the tails start (compact.kernels' TAIL_*) and the bytes of a fixed-width vector."""
        if self.codec is None:
            return TAIL_ID_ONLY, 0
        if self.codec.kind == "sparse":
            return TAIL_SPARSE, 0
        return TAIL_FIXED, self.codec.packed_bytes(0)

    def rows_of(self, numbers: np.ndarray) -> np.ndarray:
        return rows_of(self.numbers, numbers)

    def similarities(self, X, q: int, rows: np.ndarray) -> np.ndarray:
        query = X[q:q + 1] if sp.issparse(X) else X[q]
        return packed_similarities(self.similarity, query, self.codec.kind, self.words, self.starts[rows],
                                   self.codec.input_dim)

    def results(self, rows: np.ndarray, similarities: np.ndarray) -> list[tuple[str, float]]:
        words = self.words  # a small pool copied (slicing bytes is faster), a large one viewed
        blob = words.tobytes() if words.size <= 4096 else memoryview(words).cast("B")
        return [(str(blob[start:end], "utf-8"), similarity) for start, end, similarity
                in zip(self.id_starts[rows].tolist(), self.ends[rows].tolist(), similarities.tolist())]


def bounded_probe_steps(steps, level_keys, rows: np.ndarray, levels: np.ndarray, pool, bounds):
    """PROBE_FETCH from the first address, and again from where it stopped until every address is probed;
    the overflow sets it left to the caller read by SSCAN pages; then the tails of the new candidates by TAILS
    calls of TAIL_BUDGET numbers. Every call's work in Redis is bounded (compact.scripts), whatever the
    buckets hold; a small probe is the first call alone (one round trip, tails included)."""
    addresses = steps.compact.probe_addresses(level_keys, rows, levels)
    # a large pool (a deep level of a large query) is not sent: reading it into a Lua table would cost more
    # than the one round trip it saves
    track = pool.fetched.size <= KNOWN_LIMIT
    known = pool.fetched.astype("<u4").tobytes() if pool.fetched.size and track else b""
    cap = -1 if bounds.per_row is None else bounds.per_row
    bands, total = steps.config.bands, rows.size * steps.config.bands
    parts: list[list[bytes]] | None = None  # made only when the probe takes more than one call
    deferred: list[tuple[int, int]] = []
    start, walked, before = 0, 0, pool.walked
    while True:
        (raw,) = yield RoundTrip([("EVAL", scripts.PROBE_FETCH, 1, steps.layout.meta, addresses,
                                   *steps._probe_options[:2], known if start == 0 else b"",
                                   *steps._probe_options[2:], start, walked, cap, *_PROBE_BOUNDS,
                                   b"1" if track else b"0")])
        blobs, stop, walked, left, whole = raw[4:]
        if bounds.total is not None:
            pool.walked += sum(len(blob) for blob in blobs) // 4
            if left:
                pool.walked += sum(np.frombuffer(left, "<u4")[1::2].tolist())
            bounds.check(pool.walked, pool.walked - before, stop // bands, rows.size)
        if whole:  # the whole probe in one call, tails included
            return decoded_probe(steps, raw[:5])
        if parts is None:
            parts = [[] for _ in range(rows.size)]
        for offset, blob in enumerate(blobs):
            parts[start // bands + offset].append(blob)
        if left:
            pairs = np.frombuffer(left, "<u4").reshape(-1, 2)
            deferred.extend(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist()))
        if stop >= total:
            break
        start = stop
    if deferred:
        stride = steps.compact.address_stride
        keys = [steps.layout.prefix + b"o" + addresses[address * stride:(address + 1) * stride]
                for address, _ in deferred]
        # rows of near-identical items defer the same sets: each is read once a query, as far as the most any
        # of its deferrals takes
        enough: dict[bytes, int] = {}
        for key, (_, take) in zip(keys, deferred):
            enough[key] = max(enough.get(key, 0), take)
        distinct = list(enough)
        sets = yield from set_members_steps(distinct, SSCAN_PAGE, SETS_PER_TRIP, enough)
        numbers = {key: np.array([int(m) for m in found], np.int64).astype("<u4") for key, found in zip(distinct, sets)}
        for (address, take), key in zip(deferred, keys):
            parts[address // bands].append(numbers[key][:take].tobytes())
    members = [sorted_distinct(np.frombuffer(b"".join(row), "<u4").astype(np.int64)) for row in parts]
    everyone = sorted_distinct(np.concatenate(members)) if members else np.empty(0, np.int64)
    wanted = np.setdiff1d(everyone, pool.fetched, assume_unique=True)
    lengths, tails, records = yield from _tails_steps(steps, wanted)
    return members, wanted, lengths, tails, records


def _tails_steps(steps, wanted: np.ndarray):
    """(tail lengths, padded tail words, records or None) of `wanted` by TAILS calls of TAIL_BUDGET numbers."""
    lengths, tails, records = [], [], []
    for begin in range(0, wanted.size, TAIL_BUDGET):
        blob = wanted[begin:begin + TAIL_BUDGET].astype("<u4").tobytes()
        (reply,) = yield RoundTrip([("EVAL", scripts.TAILS, 1, steps.layout.meta, blob,
                                     *steps._probe_options[2:])])
        lengths.append(reply[0]), tails.append(reply[1]), records.append(reply[2])
    decoded = (np.frombuffer(b"".join(lengths), "<u4").astype(np.int64),
               np.frombuffer(b"".join(tails), "<u4"))
    if steps.codec is not None:
        return (*decoded, None)
    return (*decoded, np.frombuffer(b"".join(records), np.uint8).reshape(-1, steps.compact.width))


def decoded_probe(steps, reply) -> tuple:
    """PROBE_FETCH's reply as NearCache.probe gives it."""
    numbers, lengths, tails, records, members = reply
    return ([sorted_distinct(np.frombuffer(blob, "<u4").astype(np.int64)) for blob in members],
            np.frombuffer(numbers, "<u4").astype(np.int64), np.frombuffer(lengths, "<u4").astype(np.int64),
            np.frombuffer(tails, "<u4"),
            np.frombuffer(records, np.uint8).reshape(-1, steps.compact.width) if steps.codec is None else None)
