"""Checks of an LSH index's Redis layout, shared by the store tests and the service's index tests."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from featurehash.maps.lsh import band_digests
from featurehash.store.lsh_layout import item_number


def stored_layout(client, index) -> tuple[dict[int, tuple[np.ndarray, str]], dict[bytes, set[int]]]:
    """Every record (number -> (fingerprints, id)) and bucket (key -> numbers, forest levels included)
    of the index in Redis."""
    prefix = index.layout.prefix
    records, buckets = {}, {}
    for key in client.scan_iter(match=index.layout.scan_pattern(), count=1000):
        kind = key[len(prefix):len(prefix) + 1]
        if kind == b"i":
            fingerprints, ids = index._unpack([client.get(key)])
            records[int.from_bytes(key[len(prefix) + 1:], "big")] = (fingerprints[0], ids[0])
        elif kind in (b"b", b"p"):
            buckets[key] = {int(member) for member in client.smembers(key)}
    return records, buckets


def assert_layout_consistent(client, index) -> dict[str, np.ndarray]:
    """Buckets == the memberships the records imply; count == records. Returns id -> fingerprints."""
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
