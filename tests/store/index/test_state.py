"""What the parts of one index share (featurehash.store.index.state): the state's checks and errors, and the
LayoutSteps hooks every layout provides (the layout is chosen once, when the index is opened). No Redis I/O."""

from __future__ import annotations

import pytest
import redis

from featurehash.maps import create_map
from featurehash.store import IndexConflict, IndexNotFound, LSHIndex, plan_index
from featurehash.store.index.compact.near.cache import NearCachedSteps
from featurehash.store.index.compact.steps import CompactSteps
from featurehash.store.index.keyed import KeyedSteps
from featurehash.store.index.state import IndexState, LayoutSteps
from index_support import GCWS

HOOKS = sorted(name for name in vars(LayoutSteps) if not name.startswith("_")) + ["batch_items"]


def opened(layout: int) -> LSHIndex:
    feature_map = create_map(GCWS)
    return LSHIndex(redis.Redis(), plan_index(feature_map, name="s", layout=layout), feature_map, "state-test:")


def test_the_state_refuses_another_map_and_names_a_gone_or_replaced_index():
    feature_map = create_map(GCWS)
    config = plan_index(feature_map, name="s")
    with pytest.raises(ValueError, match="is over map"):
        IndexState(redis.Redis(), config, create_map({**GCWS, "seed": 6}), "p:")
    state = IndexState(redis.Redis(), config, feature_map, "p:")
    state._check_meta(config.to_json())  # as opened: nothing raised
    with pytest.raises(IndexNotFound):
        state._check_meta(None)
    with pytest.raises(IndexConflict) as conflict:
        state._check_meta(config.to_json() + b" ")
    assert conflict.value.field == "index_id"


@pytest.mark.parametrize("layout, steps", [(3, CompactSteps), (2, KeyedSteps)])
def test_the_layout_is_chosen_once_and_has_every_hook(layout, steps):
    index = opened(layout)
    assert type(index.steps) is steps
    assert (index.compact is not None) == (layout == 3)
    missing = [name for name in HOOKS if not hasattr(index.steps, name)]
    assert not missing, missing


def test_the_near_cache_wraps_layout_3s_hooks_and_is_refused_below():
    index = opened(3)
    wrapped = NearCachedSteps(index.steps, cache=None)
    assert wrapped.inner is index.steps and wrapped.batch_items == index.steps.batch_items
    assert all(hasattr(wrapped, name) for name in HOOKS)
    with pytest.raises(ValueError, match="layout 2"):
        opened(2).enable_near_cache()
