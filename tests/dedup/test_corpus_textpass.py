"""featurehash.dedup.corpus.textpass: the compiled normalisation and BLAKE2b-128 equal `normalise` and `hash128`
(hashlib) on every input, a fuzz of Unicode text included."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pyarrow as pa
from featurehash.dedup.corpus.normalise import hash128, normalise
from featurehash.dedup.corpus.textpass import blake2b_128, normalise_column, unicode_table

# characters NFKC changes or composes, case rules with context or growth, white space of every kind
TRICKY = ("\u0301\u0308\u0327\u1100\u1161\u11a8\uac00\u0b47\u0b3e\u0bbe\u09c7\u09be\u03a3\u0130\u023a\u1e9e"
          "\u00df\ufb01\u2163\u212a\u212b\u00a0\u2028\u2029\u0085\u1680\u3000\u200b\u001c\u001f\u000b\uff21"
          "\u00c5\u0041\u030a\u1e9b\u0323\u0345")


def test_blake2b_equals_hashlib_at_every_block_boundary():
    rng = np.random.default_rng(0)
    messages = [rng.integers(0, 256, size=n, dtype=np.uint8).tobytes() for n in range(0, 400)]
    offsets = np.zeros(len(messages) + 1, dtype=np.int64)
    np.cumsum([len(m) for m in messages], out=offsets[1:])
    got = blake2b_128(np.frombuffer(b"".join(messages), dtype=np.uint8), offsets)
    want = np.frombuffer(b"".join(hashlib.blake2b(m, digest_size=16).digest() for m in messages), "<u8")
    assert np.array_equal(got, want.reshape(-1, 2))


def _check(texts):
    column, hashes, lengths = normalise_column(pa.array(texts, pa.string()))
    expected = [normalise(t) for t in texts]
    assert column.to_pylist() == expected
    assert np.array_equal(hashes, hash128(expected))
    assert lengths.tolist() == [len(t.encode("utf-8")) for t in texts]


def test_fuzz_of_unicode_text_equals_the_python_path():
    rng = random.Random(46)

    def char():
        u = rng.random()
        if u < 0.35:
            return chr(rng.randrange(128))
        if u < 0.75:
            code = rng.randrange(0x80, 0x10000)
            return chr(code) if not 0xD800 <= code < 0xE000 else " "
        if u < 0.95:
            return rng.choice(TRICKY)
        return chr(rng.randrange(0x10000, 0x30000))

    _check(["".join(char() for _ in range(rng.randrange(0, 60))) for _ in range(30000)])


def test_every_bmp_character_in_context_equals_the_python_path():
    # each character between others that compose, decompose or change case, so a wrong table entry shows
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    _check([f"Ao{c}e{c}\u0301 {c}{c.upper()}x" for c in chars] + [f"{c}A b" for c in chars])


def test_sliced_column_and_empty_texts():
    texts = pa.array(["  X ", "", "Ünïcode  TEXT", "\t\n", "a"], pa.string()).slice(1, 3)
    column, hashes, _ = normalise_column(texts)
    assert column.to_pylist() == ["", "ünïcode text", ""]
    assert np.array_equal(hashes, hash128(["", "ünïcode text", ""]))


def test_table_leaves_unsafe_characters_to_python():
    table = unicode_table()
    assert table[ord("A")] == ord("a") and table[ord("\u00c5")] == ord("\u00e5")
    assert all(table[ord(c)] == -1 for c in "\u0301\u1161\u0b3e\u03a3\u0130\u00a0\ufb01\u212b")
