"""Where a sharded index's shards live (their hash tags' slots) and which shard holds an item."""

import numpy as np
import pytest
from redis.crc import key_slot

from featurehash.store.index.sharded.placement import ITEMS_PER_SHARD, shard_of, shards_for
from featurehash.store.lsh_layout import CLUSTER_SLOTS, IndexLayout, shard_tags


@pytest.mark.parametrize("shards", [1, 2, 3, 12, 30, 256])
def test_each_shard_tag_hashes_into_its_own_slot_range(shards):
    tags = shard_tags("docs", shards)
    assert len(set(tags)) == shards
    for at, tag in enumerate(tags):
        assert tag.startswith(f"docs/{at}.")
        assert at * CLUSTER_SLOTS // shards <= key_slot(tag.encode()) < (at + 1) * CLUSTER_SLOTS // shards


def test_a_shard_s_keys_share_its_tag_s_slot_and_no_other_index_s():
    tag = shard_tags("docs", 3)[1]
    layout = IndexLayout("p:", tag)
    assert layout.prefix == b"p:index:{" + tag.encode() + b"}:"
    assert {key_slot(key) for key in (layout.meta, layout.count, layout.size)} == {key_slot(tag.encode())}
    # an index name cannot hold '/', so no index's own keys are a shard's
    assert all("/" not in IndexLayout("p:", name).name for name in ("docs", "docs.1"))


def test_shard_tags_are_pinned():
    """The tags are where the items are: they never change for a name and a shard count."""
    assert shard_tags("docs", 3) == ("docs/0.2", "docs/1.0", "docs/2.3")


def test_items_spread_evenly_and_stably_over_shards():
    ids = [f"item-{i}".encode() for i in range(120_000)]
    for shards in (3, 12):
        counts = np.bincount(shard_of(ids, shards), minlength=shards)
        expected = len(ids) / shards
        # binomial: sd = sqrt(n p (1 - p)); 5 sd is far from noise, close to a skew
        assert np.abs(counts - expected).max() < 5 * np.sqrt(expected)
    assert shard_of([b"a", b"b", b"c", b"d"], 12).tolist() == shard_of([b"a", b"b", b"c", b"d"], 12).tolist()
    assert shard_of([b"item-0", b"item-1", b"item-2"], 12).tolist() == [4, 4, 6]
    assert shard_of([b"x"], 1).tolist() == [0]


def test_auto_shards_follow_the_expected_items():
    assert shards_for(1) == 2
    assert shards_for(3 * ITEMS_PER_SHARD) == 3
    assert shards_for(3 * ITEMS_PER_SHARD + 1) == 4
    assert shards_for(10**12) == 256
