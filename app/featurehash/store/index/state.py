"""What the parts of one index share: its state (`IndexState`: client, configuration, map, key names, vector
codec, the meta it was opened with), the errors its operations raise, and `LayoutSteps`, the hooks through
which the operations (featurehash.store.index.queries, writes, duplicates) reach the storage layout chosen when
the index is opened: featurehash.store.index.keyed (layouts 1 and 2) or featurehash.store.index.compact
(layout 3, optionally wrapped by its near cache, featurehash.store.index.compact.near)."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ...lsh.banding import band_digests, code_fingerprints
from ...lsh.similarity import similarity_of
from ...maps import FeatureMap, InputError
from ..durability import check_durability
from ..lsh_accounting import StoredBytes
from ..lsh_layout import IndexConfig, IndexLayout, unpack_records_and_vectors
from ..lsh_vectors import VectorCodec
from ..redis_steps import check_client


class IndexNotFound(LookupError):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class IndexConflict(Exception):
    """The request clashes with the index's stored state (HTTP 409); `field` names what."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ItemNotFound(LookupError):
    def __init__(self, item_id: str):
        super().__init__(item_id)
        self.item_id = item_id


class IndexState:
    """One index's client, configuration, map, key names and codec, and the helpers every layout uses."""

    def __init__(self, redis, config: IndexConfig, feature_map: FeatureMap, key_prefix: str,
                 meta: bytes | None = None, items: int | None = None, durability: str = "reply",
                 stored_bytes: StoredBytes | None = None):
        check_client(redis)
        self.stored_bytes = stored_bytes  # the tenant's count and limit (featurehash.store.lsh_accounting)
        self.durability = check_durability(durability)
        if feature_map.spec.id != config.map_spec["id"]:
            raise ValueError(f"index {config.name!r} is over map {config.map_spec['id']}, not {feature_map.spec.id}")
        self.redis = redis
        self.config = config
        self.feature_map = feature_map
        self.layout = IndexLayout(key_prefix, config.name, config.layout)
        self.codec = VectorCodec.for_storage(config.vectors, feature_map.input_dim)
        # the exact similarity of the map's code family (featurehash.lsh.similarity), when vectors are kept
        self.similarity = None if self.codec is None else similarity_of(feature_map)
        self.items_when_opened = items
        self.created = False
        self._meta = config.to_json() if meta is None else meta

    @property
    def name(self) -> str:
        return self.config.name

    def _fingerprints(self, X) -> np.ndarray:
        codes = self.feature_map.hash(X)
        if codes.shape[1] != self.config.n_codes:
            raise InputError("vectors", f"the map gave {codes.shape[1]} codes, the index expects {self.config.n_codes}")
        return code_fingerprints(codes)

    def _encode(self, X) -> tuple[np.ndarray, list[bytes] | None]:
        """Fingerprints and, if the index keeps vectors, each row's packed vector."""
        X = self.feature_map.check(X, "vectors")
        return self._fingerprints(X), None if self.codec is None else self.codec.pack(X)

    def _level_keys(self, fingerprints: np.ndarray, level: int) -> list[list[bytes]]:
        """Per row, its L bucket keys at a level (0: the bands; then the forest's prefixes)."""
        if level == 0:
            return self.layout.buckets(band_digests(fingerprints, self.config.bands, self.config.rows))
        prefix = self.config.levels[level]
        return self.layout.buckets(band_digests(fingerprints, self.config.bands, self.config.rows, prefix), prefix)

    def _bucket_keys(self, fingerprints: np.ndarray) -> list[list[bytes]]:
        """Per row, every bucket it belongs to (all levels)."""
        per_level = [self._level_keys(fingerprints, level) for level in range(len(self.config.levels))]
        return [[key for keys in row for key in keys] for row in zip(*per_level)]

    def _check_meta(self, stored: bytes | None) -> None:
        if stored is None:
            raise IndexNotFound(self.name)
        if stored != self._meta:
            raise IndexConflict("index_id", f"index {self.name!r} was deleted and created again with another "
                                "configuration, or began or ended a migration (featurehash.store.index.migration), "
                                "during the request; retry")

    def _unpack(self, records: list[bytes]) -> tuple[np.ndarray, list[str]]:
        fingerprints, ids, _ = unpack_records_and_vectors(records, self.config.n_codes, self.codec)
        return fingerprints, ids


class LayoutSteps(Protocol):
    """The hooks of a storage layout, chosen once when the index is opened (featurehash.store.index.handles).
    Generators yield featurehash.store.redis_steps' steps; the others are CPU work."""

    batch_items: int  # items a write batch takes (add and remove)

    # queries (featurehash.store.index.queries)
    def plan(self, X) -> tuple[Any, np.ndarray, Any]:
        """(checked vectors, fingerprints, per level the rows' buckets in the layout's form)."""

    def stored_plan_steps(self, ids: list[str]):
        """(vectors or None, fingerprints, buckets at every level, item numbers) of stored items by id."""

    def new_pool(self):
        """An empty candidate pool (featurehash.store.index.queries.CandidatePool or a subclass)."""

    def probe_steps(self, level_keys, active: list[int], level: list[int], pool, bounds):
        """(per active row its bucket members, sorted and distinct; None, or (numbers fetched, their records)
        when the probe read the new candidates' records too)."""

    def fetch_steps(self, wanted: np.ndarray):
        """The records of item numbers, as the pool's `add` takes them (after a probe that returned None)."""

    def code_similarities(self, query: np.ndarray, items: np.ndarray) -> np.ndarray:
        """The code estimate of one query's similarity to candidates' fingerprints."""

    # writes (featurehash.store.index.writes)
    def encode(self, X) -> tuple:
        """What an add writes of rows of X, fingerprints first."""

    def add_batch_steps(self, ids: list[str], encoded: tuple, batch: slice):
        """Adds ids[batch] (rows `batch` of `encoded`): (items added, items in the index)."""

    def remove_batch_steps(self, ids: list[str]):
        """Removes a batch of distinct ids: those that were stored."""

    # duplicates (featurehash.store.index.duplicates)
    def records_steps(self, numbers: np.ndarray):
        """The records of item numbers, as decode_records takes them."""

    def shared_buckets_steps(self, cursor: int, count: int):
        """(members of a page of level-0 buckets with >= 2 items, one int64 array each; the next cursor)."""

    def decode_records(self, records) -> tuple:
        """(live mask, fingerprints, ids, vectors or None) of records read by records_steps."""

    def pair_code_similarities(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The code estimate of the similarity of each pair of rows of fingerprints."""
