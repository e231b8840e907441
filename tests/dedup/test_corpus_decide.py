"""featurehash.dedup.corpus.decide: exact groups, clusters over exact and near pairs, each keep policy, reference
documents never removed."""

from __future__ import annotations

import numpy as np
import pytest
from featurehash.dedup.corpus.decide import decide, exact_representatives, parse_keep
from featurehash.maps.errors import InputError


def _h(*groups):
    return np.array([[g, 0] for g in groups], dtype=np.uint64)


def test_exact_representatives_first_of_each_hash():
    assert exact_representatives(_h(5, 3, 5, 3, 9)).tolist() == [0, 1, 0, 1, 4]


def test_parse_keep():
    assert parse_keep("max:score") == ("max", "score") and parse_keep("first") == ("first", None)
    with pytest.raises(InputError, match="max:<field>"):
        parse_keep("max:")


@pytest.mark.parametrize("keep, kept", [("first", [0, 3]), ("longest", [2, 3]), ("shortest", [1, 3]),
                                        ("max:k", [1, 3]), ("min:k", [2, 3])])
def test_keep_policies(keep, kept):
    # 0 and 1 identical texts, 2 near them (a pair of exact representatives: 0 and 2); 3 alone. Lengths and
    # keys pick different winners; a NaN key loses.
    hashes, lengths, keys = _h(1, 1, 2, 3), [10, 5, 20, 7], [np.nan, 4.0, 1.0, 0.0]
    d = decide(hashes, lengths, keys, np.zeros(4, bool), [0], [2], [0.8], keep)
    assert np.flatnonzero(d.kept).tolist() == kept
    assert d.exact_duplicates == 1 and d.near_duplicates == 1 and d.cluster.tolist() == [0, 0]
    for r, k, s, e in zip(d.removed, d.kept_of, d.similarity, d.exact):
        assert k == kept[0] and e == ({int(r), int(k)} == {0, 1})
        assert s == (1.0 if e else 0.8)


def test_unverified_pairs_are_left_for_the_caller():
    d = decide(_h(1, 2, 3), [1, 1, 1], [0, 0, 0], np.zeros(3, bool), [0, 1], [1, 2], [0.9, 0.8], "first")
    assert d.kept_of.tolist() == [0, 0] and d.similarity[0] == 0.9 and np.isnan(d.similarity[1])


def test_reference_documents_win_and_stay():
    reference = np.array([True, True, False, False])
    d = decide(_h(1, 2, 3, 1), [1, 1, 50, 50], [0] * 4, reference, [0, 1], [1, 2], [0.9, 0.9], "longest")
    assert d.kept.tolist() == [True, True, False, False]
    # 0-1 is not re-judged (both reference): 2 joins 1 through their pair, 3 is 0's exact copy
    assert d.kept_of.tolist() == [1, 0] and d.exact.tolist() == [False, True]
