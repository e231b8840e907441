"""Layout 3's keys and packing (featurehash.store.index.compact.keys): strings as two script arguments, bucket
values as item numbers, partitions by the expected entries. Its addresses against the query's compiled ones are
tests/store/index/compact/test_kernels.py."""

from __future__ import annotations

import numpy as np

from featurehash.store.index.compact.keys import HASH_FILL, MAX_PARTITION_BITS, members_of, pack_strings, partition_bits


def test_strings_ride_as_lengths_and_their_concatenation():
    lengths, joined = pack_strings([b"a", b"", "é".encode()])
    assert np.frombuffer(lengths, "<u4").tolist() == [1, 0, 2] and joined == b"a" + "é".encode()


def test_a_bucket_value_is_its_members_u32_le():
    assert members_of(np.array([5, 2**32 - 1], "<u4").tobytes()).tolist() == [5, 2**32 - 1]
    assert members_of(b"").size == 0


def test_partitions_spread_the_entries_and_are_bounded():
    assert partition_bits(0.0) == 0 and partition_bits(HASH_FILL) == 0
    assert partition_bits(2 * HASH_FILL) == 1 and partition_bits(1e18) == MAX_PARTITION_BITS
