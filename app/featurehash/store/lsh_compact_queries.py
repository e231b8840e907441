"""Querying a layout-3 index (featurehash.store.lsh_compact): the hooks of featurehash.store.lsh_queries'
query loop (the plan, the bucket probe, the record fetch, the pool, the code similarity) for compact
records; indexes of layouts 1 and 2 go on to lsh_queries' own."""

from __future__ import annotations

import numpy as np

from ..maps.lsh import b_bit_match_fractions
from . import lsh_compact_scripts as scripts
from .lsh_compact import FINGERPRINT_BITS
from .lsh_queries import ItemNotFound, _CandidatePool
from .redis_steps import RoundTrip


class _CompactPool(_CandidatePool):
    """The candidates' b-bit fingerprints, ids and vectors, sorted by item number."""

    def add(self, numbers: np.ndarray, records) -> None:
        fingerprints, _, tails = records
        self.fetched = np.union1d(self.fetched, numbers)
        live = [row for row, tail in enumerate(tails) if tail]
        if not live:
            return
        blobs, vectors = [tails[row] for row in live], None
        if self.codec is not None:
            vectors, blobs = self.codec.unpack(blobs)
        self._merge(numbers[live], fingerprints[live], [blob.decode() for blob in blobs], vectors)


class _CompactQuerySteps:
    """Needs what _IndexSteps sets up (lsh_index.py) and _CompactSteps' _records_steps."""

    def _query_plan(self, X):
        """The checked vectors, their b-bit fingerprints and their bucket identities (all levels)."""
        if self.config.layout < 3:
            return super()._query_plan(X)
        X = self.feature_map.check(X, "vectors")
        fingerprints = self._fingerprints(X)
        low = (fingerprints & np.uint32(2**FINGERPRINT_BITS - 1)).astype(np.uint8)
        return X, low, self.compact.identities(fingerprints)

    def _bucket_members_steps(self, level_keys, active: list[int], level: list[int]):
        if self.config.layout < 3:
            return (yield from super()._bucket_members_steps(level_keys, active, level))
        addresses = b"".join(self.compact.probe_addresses(level_keys[q:q + 1], level[q]) for q in active)
        (blobs,) = yield RoundTrip([("EVAL", scripts.PROBE, 1, self.layout.meta, addresses,
                                     self.compact.address_stride, self.config.bands)])
        return [np.unique(np.frombuffer(blob, "<u4")).astype(np.int64) for blob in blobs]

    def _fetch_steps(self, wanted: np.ndarray):
        if self.config.layout < 3:
            return (yield from super()._fetch_steps(wanted))
        if not wanted.size:
            return None, None, []
        return (yield from self._records_steps(wanted))

    def _stored_plan_steps(self, ids: list[str]):
        """(vectors or None, b-bit fingerprints, stored bucket identities, item numbers) of stored items."""
        if self.config.layout < 3:
            return (yield from super()._stored_plan_steps(ids))
        numbers, _ = yield from self._numbers_steps([item_id.encode() for item_id in ids])
        for item_id, number in zip(ids, numbers):
            if number == 0:
                raise ItemNotFound(item_id)
        fingerprints, identities, tails = yield from self._records_steps(numbers)
        X = None if self.codec is None else self.codec.unpack(list(tails))[0]
        return X, fingerprints, identities, numbers

    def _decode_records(self, records):
        """(live mask, fingerprints, ids, vectors) of records read by _records_steps (duplicates' verification)."""
        if self.config.layout < 3:
            return super()._decode_records(records)
        fingerprints, _, tails = records
        live = np.array([bool(tail) for tail in tails], dtype=bool)
        blobs, vectors = [tail for tail in tails if tail], None
        if self.codec is not None and blobs:
            vectors, blobs = self.codec.unpack(blobs)
        return live, fingerprints[live], [blob.decode() for blob in blobs], vectors

    def _pair_code_similarities(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.config.layout < 3:
            return super()._pair_code_similarities(a, b)
        chance = 2.0 ** -FINGERPRINT_BITS
        return np.clip(((a == b).mean(axis=1) - chance) / (1.0 - chance), 0.0, 1.0)

    def _new_pool(self) -> _CandidatePool:
        return _CompactPool(self.config, self.codec) if self.config.layout >= 3 else super()._new_pool()

    def _code_similarities(self, query: np.ndarray, items: np.ndarray) -> np.ndarray:
        if self.config.layout < 3:
            return super()._code_similarities(query, items)
        return b_bit_match_fractions(query, items, FINGERPRINT_BITS)
