"""Token lists read in place (app/featurehash/maps/minhash/_token_lists.py): the stage's MurmurHash3 columns of
every token, from lists and tuples, and None (with no error left behind) for whatever the loop cannot read."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from featurehash.maps import create_map
from featurehash.maps.minhash import _set_kernels, _token_lists

pytestmark = pytest.mark.skipif(not _token_lists.AVAILABLE,
                                reason="this interpreter does not lay out lists, tuples and str objects as CPython "
                                       "with a GIL does (the joined pass is used; test_minhash.py covers it)")

WIDTH = 2**20
KEY = 0x5EED


def joined_columns(rows) -> np.ndarray:
    """The joined split-and-hash pass's columns (itself pinned to the stage's CSR rows in test_minhash.py)."""
    data = np.frombuffer("\0".join(map("\0".join, rows)).encode("utf-8"), dtype=np.uint8)
    return _set_kernels.separated_token_columns(data, sum(map(len, rows)), np.uint32(KEY), WIDTH)


def offsets_of(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.fromiter(lengths, dtype=np.int64))]).astype(np.int64)


def read(rows) -> np.ndarray | None:
    return _token_lists.token_columns(rows, offsets_of(map(len, rows)), KEY, WIDTH)


def test_columns_are_the_stage_murmur3_columns_for_any_length_and_alphabet():
    """Tokens of 0-13 characters (every tail length of the 4-byte blocks), ASCII and 2-, 3- and 4-byte UTF-8 (whose
    buffer CPython encodes on demand), rows as lists and tuples, the batch as a list and a tuple."""
    rng = np.random.default_rng(5)
    alphabet = list("abcdefghij") + ["é", "ß", "中", "😀"]
    rows = [["".join(rng.choice(alphabet, size=rng.integers(0, 14))) for _ in range(rng.integers(1, 40))]
            for _ in range(400)]
    rows = [tuple(row) if r % 3 == 0 else row for r, row in enumerate(rows)]
    expected = joined_columns(rows)
    np.testing.assert_array_equal(read(rows), expected)
    np.testing.assert_array_equal(read(tuple(rows)), expected)


def test_ascii_read_in_place_and_through_the_c_api_agree(monkeypatch):
    """Compact ASCII tokens are read in the object, others (Latin-1, emoji, a str subclass's instance, whose
    characters lie elsewhere) through PyUnicode_AsUTF8AndSize: the same columns as with the C API alone."""
    class Token(str):
        pass

    rows = [["plain", "ascii", "x" * 40], ["naïve", "😀", Token("sub"), Token("classé")], [""]]
    assert _token_lists.ASCII_DATA_AT in (40, 48)
    expected = joined_columns(rows)
    np.testing.assert_array_equal(read(rows), expected)
    monkeypatch.setattr(_token_lists, "ASCII_DATA_AT", 0)
    np.testing.assert_array_equal(read(rows), expected)


@pytest.mark.parametrize("block", [1, 7, 2**30])
def test_blocks_of_rows_give_the_columns_of_one_block(monkeypatch, block):
    """The loop reads whole rows a block (a row longer than a block alone): the same columns for any block size."""
    rng = np.random.default_rng(6)
    rows = [[str(t) for t in rng.integers(0, 10**9, rng.integers(0, 30))] for _ in range(60)]
    monkeypatch.setattr(_token_lists, "BLOCK_TOKENS", block)
    np.testing.assert_array_equal(read(rows), joined_columns([row for row in rows if row]))


def test_tokens_the_joined_pass_cannot_split_are_read():
    """A token holding U+0000 (the joined pass's separator) and empty rows need no fallback here."""
    m = create_map({"method": "minhash", "n_components": 16, "seed": 2, "input": {"hashing": {}, "empty": "code"}})
    rows = [["a\0b", "c"], [], ["", "d"]]
    np.testing.assert_array_equal(m.hash(rows), m.hash(m.text_stage.transform(rows, dtype=np.float64)))
    assert read(rows).size == 4


@pytest.mark.parametrize("rows, lengths", [
    ([["a", 3]], [2]),                  # a token that is not a str: CPython's TypeError
    ([["a", "\ud800"]], [2]),           # a lone surrogate: no UTF-8 form
    ([["a", "b"]], [3]),                # a row whose size is not the one given
    ([["a"], "bc"], [1, 2]),            # a row that is neither a list nor a tuple
    ([["a"]], [1, 1]),                  # a batch that does not hold the rows given (changed between blocks)
])
def test_what_the_loop_cannot_read_gives_none_and_leaves_no_error(rows, lengths):
    assert _token_lists.token_columns(rows, offsets_of(lengths), KEY, WIDTH) is None
    assert sys.exc_info() == (None, None, None)
    np.testing.assert_array_equal(read([["after"]]), joined_columns([["after"]]))   # the interpreter is fine


def test_the_layout_check_refuses_what_is_not_a_list_or_tuple_batch():
    assert _token_lists.token_columns(iter([["a"]]), offsets_of([1]), KEY, WIDTH) is None
    assert _token_lists._layout_holds()
