"""Checks of an LSH index's Redis layout, shared by the store tests and the service's index tests."""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict

import numpy as np
import redis

from featurehash.lsh.banding import band_digests
from featurehash.store import LSHIndexes
from featurehash.store.lsh_layout import item_number


class LayoutIndexes(LSHIndexes):
    """LSHIndexes whose create makes indexes of one layout (the tests run over layouts 2 and 3)."""

    def __init__(self, *args, layout: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.layout = layout

    def create(self, feature_map, **options):
        return super().create(feature_map, **{"layout": self.layout, **options})


def process_prefix(name: str) -> str:
    """A key prefix of this process's own: an xdist worker tearing a module down deletes only its keys. A
    constant prefix let one worker's teardown delete the rate key of the two-process quota test running on
    the other (CI: 169 admitted against a bound of 161, a second burst)."""
    return f"featurehash-{name}-test-{uuid.uuid4().hex[:8]}-"


@contextlib.contextmanager
def cleaned_client(redis_url: str, prefix: str):
    """A client of `redis_url`; on exit every key under `prefix` is deleted and the client closed."""
    connection = redis.Redis.from_url(redis_url)
    try:
        yield connection
    finally:
        for key in connection.scan_iter(match=f"{prefix}*", count=1000):
            connection.unlink(key)
        connection.close()


def stored_layout(client, index) -> tuple[dict[int, tuple[np.ndarray, str]], dict[bytes, set[int]]]:
    """Every record (number -> (fingerprints, id)) and bucket (key -> numbers, forest levels included)
    of the index in Redis."""
    prefix = index.layout.prefix
    records, buckets = {}, {}
    for key in set(client.scan_iter(match=index.layout.scan_pattern(), count=1000)):  # SCAN repeats keys
        kind = key[len(prefix):len(prefix) + 1]
        if kind == b"i":
            fingerprints, ids = index._unpack([client.get(key)])
            records[int.from_bytes(key[len(prefix) + 1:], "big")] = (fingerprints[0], ids[0])
        elif kind in (b"b", b"p"):
            buckets[key] = {int(member) for member in client.smembers(key)}
    return records, buckets


def assert_layout_consistent(client, index) -> dict[str, np.ndarray]:
    """Buckets == the memberships the records imply; count == records. Returns id -> fingerprints (as
    stored: see stored_codes)."""
    if index.config.layout >= 3:
        return assert_compact_layout_consistent(client, index)
    records, buckets = stored_layout(client, index)
    expected: dict[bytes, set[int]] = defaultdict(set)
    for number, (fingerprints, item_id) in records.items():
        assert number == item_number(item_id)
        digests = band_digests(fingerprints[None, :], index.config.bands, index.config.rows)
        keys = index.layout.buckets(digests)[0]
        for prefix_rows in index.config.forest_rows:
            prefixes = band_digests(fingerprints[None, :], index.config.bands, index.config.rows, prefix_rows)
            keys += index.layout.buckets(prefixes, prefix_rows)[0]
        for key in keys:
            expected[key].add(number)
    assert buckets == dict(expected)
    assert int(client.get(index.layout.count) or 0) == len(records)
    return {item_id: fingerprints for fingerprints, item_id in records.values()}


def stored_codes(index, fingerprints: np.ndarray) -> np.ndarray:
    """What the index keeps of full fingerprints: all 32 bits (layouts 1, 2), the low 8 (layout 3)."""
    return fingerprints if index.config.layout < 3 else (fingerprints & 0xFF).astype(np.uint8)


def code_estimates(index, query_fingerprints: np.ndarray, item_fingerprints: np.ndarray) -> np.ndarray:
    """(queries, items): the similarity estimate the index ranks by, from full fingerprints."""
    items = stored_codes(index, item_fingerprints)
    return np.array([index._code_similarities(row, items) for row in stored_codes(index, query_fingerprints)])


def compact_layout(client, index):
    """A layout-3 index in Redis: number -> (b-bit fingerprints, identities, id) of every item the id
    maps name, and every bucket ((level, partition) bytes, field) -> its numbers (overflow sets read)."""
    compact, prefix = index.compact, index.layout.prefix
    numbers, tails, chunks, buckets, overflow_keys = {}, {}, {}, {}, set()
    for key in set(client.scan_iter(match=index.layout.scan_pattern(), count=1000)):  # SCAN repeats keys
        kind, rest = key[len(prefix):len(prefix) + 1], key[len(prefix) + 1:]
        if kind == b"u":
            for item_id, number in client.hgetall(key).items():
                assert int(number) not in numbers
                numbers[int(number)] = item_id.decode()
        elif kind == b"t":
            for field, tail in client.hgetall(key).items():
                tails[int.from_bytes(rest, "big") * 64 + int(field)] = tail
        elif kind == b"r":
            chunks[int.from_bytes(rest, "big")] = client.get(key)
            assert len(chunks[int.from_bytes(rest, "big")]) == compact.chunk_items * compact.width
        elif kind == b"o":
            overflow_keys.add(key)
        elif kind == b"b":
            for field, value in client.hgetall(key).items():
                assert len(value) <= 64 and len(value) % 4 == 0   # small enough for a listpack
                if value == b"":
                    overflow = compact.overflow_set(key, field)
                    assert overflow in overflow_keys or client.exists(overflow)
                    overflow_keys.discard(overflow)
                    buckets[(rest, field)] = {int(member) for member in client.smembers(overflow)}
                    assert len(buckets[(rest, field)]) >= 1
                else:
                    members = np.frombuffer(value, "<u4").tolist()
                    assert len(set(members)) == len(members)
                    buckets[(rest, field)] = set(members)
    assert set(tails) == set(numbers)
    items = {}
    for number, item_id in numbers.items():
        chunk = chunks[number // compact.chunk_items]
        at = (number % compact.chunk_items) * compact.width
        fingerprints, identities = compact.unpack_records(chunk[at:at + compact.width])
        assert tails[number].endswith(item_id.encode())
        items[number] = (fingerprints[0], identities[0], item_id)
    return items, buckets


def assert_compact_layout_consistent(client, index) -> dict[str, np.ndarray]:
    items, buckets = compact_layout(client, index)
    compact = index.compact
    expected: dict[tuple[bytes, bytes], set[int]] = defaultdict(set)
    for number, (fingerprints, identities, _) in items.items():
        keys = compact.bucket_keys(np.zeros(1, np.int64), identities[None, :])
        for address in compact._addresses(keys):
            expected[(address[:5].tobytes(), address[5:].tobytes())].add(number)
    assert buckets == dict(expected)
    assert int(client.get(index.layout.count) or 0) == len(items)
    free = {int(number) for number in client.lrange(compact.free, 0, -1)}
    assert not free & set(items)
    return {item_id: fingerprints for fingerprints, _, item_id in items.values()}
