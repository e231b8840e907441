"""The compiled text pass (featurehash.maps.text._compiled_text, _unicode_tables, documents): HashingVectorizer
bit for bit (float64) for the built-in analyzers with lowercase / strip_accents variants; random Unicode
documents whose hashes and features equal the Python analyzer's; the interpreter's tables checked against `re`,
`str.lower` and scikit-learn's accent stripping on every code point."""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from featurehash import create_map
from featurehash.maps.text import _unicode_tables as tables
from featurehash.maps.text._murmur import murmur3_32_many, token_bytes
from featurehash.maps.text.analyzers import Analyzer
from featurehash.maps.text.documents import CompiledAnalyzer, encoded, hash_key
from text_support import real_corpus

sklearn = pytest.importorskip("sklearn")
from sklearn.feature_extraction.text import HashingVectorizer, strip_accents_ascii, strip_accents_unicode  # noqa: E402

# Real text plus the cases the tables exist for: accents precomposed and combining, a capital sigma (Python's
# context-dependent lower case), U+0130 (two code points in lower case), ligatures and compatibility letters
# (NFKD), CJK, emoji, underscores and digits, every kind of whitespace run.
EDGE = ["Crème brûlée à la café, naïve façade", "", "   ", "x", "e\u0301te\u0301 de\u0301ja\u0300",
        "ΟΔΥΣΣΕΥΣ ΚΑΙ ΣΑΣ Σ", "İSTANBUL İi ıI", "ﬁnal ﬂow ℌilbert ㎒ ½ ①② ﷺ", "東京都 の 天気 は 晴れ",
        "emoji 😀😀 mixed👍🏽text", "snake_case __init__ 42 x2 _", "tabs\t\tand\n\nnew\x1c\x1dlines\u3000\u3000ok\u00a0x",
        "a\tb c\u2028d"]
CORPUS = [part for text in real_corpus()[:60] for part in text.split("\n\n")] + EDGE


def same_csr(ours: sp.csr_matrix, theirs: sp.csr_matrix) -> None:
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours.indptr, theirs.indptr)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_array_equal(ours.data, theirs.data)


def python_hashes(analyzer: Analyzer, documents, key) -> tuple[np.ndarray, np.ndarray]:
    """Each document's token hashes by the Python analyzer (the reference), concatenated, with row offsets."""
    tokens = [analyzer(document) for document in documents]
    offsets = np.zeros(len(documents) + 1, dtype=np.int64)
    np.cumsum([len(row) for row in tokens], out=offsets[1:])
    flat = [token for row in tokens for token in row]
    return murmur3_32_many(*token_bytes(flat), key), offsets


VARIANTS = [
    {"analyzer": "word"},
    {"analyzer": "word", "ngram_range": (1, 2)},
    {"analyzer": "word", "ngram_range": (2, 3), "lowercase": False},
    {"analyzer": "word", "strip_accents": "unicode"},
    {"analyzer": "word", "ngram_range": (1, 2), "strip_accents": "ascii"},
    {"analyzer": "char_wb", "ngram_range": (3, 5)},
    {"analyzer": "char_wb", "ngram_range": (1, 3), "strip_accents": "unicode", "lowercase": False},
    {"analyzer": "char", "ngram_range": (1, 1)},
    {"analyzer": "char", "ngram_range": (2, 4), "strip_accents": "ascii"},
    {"analyzer": "char", "ngram_range": (3, 5), "strip_accents": "unicode"},
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(f"{k}={v[k]}" for k in v))
def test_equals_hashing_vectorizer_in_float64(variant):
    vectorizer = HashingVectorizer(n_features=2**20, **variant)
    params = {key: list(value) if isinstance(value, tuple) else value for key, value in variant.items()}
    feature_map = create_map({"method": "hashing", "n_components": 2**20, "params": {"hash": "sklearn", **params}})
    assert feature_map._compiled is not None   # the compiled pass, not the Python one
    ours = feature_map.transform(CORPUS, dtype=np.float64)
    assert ours.nnz > 5000
    same_csr(ours, vectorizer.transform(CORPUS))


@pytest.mark.parametrize("options", [{"weighting": "binary", "norm": "l1", "alternate_sign": False},
                                     {"weighting": "count", "norm": "none"},
                                     {"weighting": "sublinear", "norm": "l2"}])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_seeded_mode_equals_the_python_path(options, dtype):
    for n_components in (2**20, 37):   # 37 columns: many collisions summed within a row
        feature_map = create_map({"method": "hashing", "n_components": n_components, "seed": 3,
                                  "params": {"ngram_range": [1, 2], **options}})
        python_rows = feature_map.check(CORPUS)   # TokenRows: the Python analyzer, then the numpy rows
        same_csr(feature_map.transform(CORPUS, dtype=dtype), feature_map.transform(python_rows, dtype=dtype))


def test_sklearn_mode_binary_and_float32_equal_the_python_path():
    feature_map = create_map({"method": "hashing", "n_components": 64,
                              "params": {"hash": "sklearn", "weighting": "binary", "analyzer": "char_wb",
                                         "ngram_range": [2, 3]}})
    for dtype in (np.float32, np.float64):
        same_csr(feature_map.transform(CORPUS, dtype=dtype), feature_map.transform(feature_map.check(CORPUS), dtype=dtype))


def test_documents_split_over_threads_give_the_rows_of_one_pass(monkeypatch):
    from featurehash.maps.text import documents
    monkeypatch.setattr(documents, "CHUNK_BYTES", 512)   # many chunks out of a small corpus
    analyzer = CompiledAnalyzer(Analyzer("word", (1, 3)))
    data, starts = encoded(CORPUS)
    key = hash_key("murmur3", 5)
    one = analyzer.map_rows(CORPUS, data, starts, key, lambda h, c: (h, c), threads=1)
    two = analyzer.map_rows(CORPUS, data, starts, key, lambda h, c: (h, c), threads=2)
    assert len(one) > 10
    for (h1, c1), (h2, c2) in zip(one, two):
        np.testing.assert_array_equal(h1, h2)
        np.testing.assert_array_equal(c1, c2)
    reference, offsets = python_hashes(analyzer.analyzer, CORPUS, key)
    np.testing.assert_array_equal(np.concatenate([h for h, _ in one]), reference)
    np.testing.assert_array_equal(np.concatenate([c for _, c in one]), np.diff(offsets))


# Characters the fuzz draws from, by kind, so that every kind is frequent in short documents.
_POOLS = ["abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
          " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u3000  ",
          ".,;:!?'\"()-/@#%&*+=<>[]{}|\\~`^$",
          "éèêëàâäîïôöùûüçñÉÈÀÇÑåøæœßẞÅØÆŒĳĲǅǆ",
          "\u0301\u0300\u0308\u0327\u0345\u0307\u20dd\u0f72\u05b0",
          "ΣσςΑαΟοΔδİıIiK\u212a\u2126\u0130\u1e9e\u03f4",
          "ﬁﬂﬀℌℍ㎒½①⑳ﷺ\u2460Ⅻⅻ\uff21\uff41",
          "東京都天気晴れ한국어조선말\uac00\ud7a3ㄱ",
          "😀👍🏽🇫🇷\U0001f9d1\u200d\U0001f4bb\U00010400\U00010428"]


@st.composite
def unicode_documents(draw):
    n = draw(st.integers(0, 40))
    kinds = draw(st.lists(st.integers(0, len(_POOLS)), min_size=n, max_size=n))
    characters = []
    for kind in kinds:
        if kind == len(_POOLS):   # any code point but a surrogate (documents must have a UTF-8 form)
            characters.append(draw(st.characters(blacklist_categories=("Cs",))))
        else:
            characters.append(draw(st.sampled_from(_POOLS[kind])))
    return "".join(characters)


@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(documents=st.lists(unicode_documents(), min_size=1, max_size=6),
       analyzer=st.sampled_from(["word", "char", "char_wb"]), low=st.integers(1, 3), extra=st.integers(0, 2),
       lowercase=st.booleans(), strip_accents=st.sampled_from([None, "unicode", "ascii"]))
def test_random_unicode_documents_hash_as_the_python_analyzer(documents, analyzer, low, extra, lowercase,
                                                             strip_accents):
    spec = Analyzer(analyzer, (low, low + extra), lowercase, strip_accents)
    key = hash_key("murmur3", 11)
    data, starts = encoded(documents)
    hashes, counts = CompiledAnalyzer(spec).chunk_hashes(documents, data, starts, key)
    reference, offsets = python_hashes(spec, documents, key)
    np.testing.assert_array_equal(counts, np.diff(offsets))
    np.testing.assert_array_equal(hashes, reference)
    params = {"analyzer": analyzer, "ngram_range": [low, low + extra], "lowercase": lowercase,
              "strip_accents": strip_accents}
    for mode in ("sklearn", "murmur3"):
        feature_map = create_map({"method": "hashing", "n_components": 1000, "params": {"hash": mode, **params}})
        same_csr(feature_map.transform(documents, dtype=np.float64),
                 feature_map.transform(feature_map.check(documents), dtype=np.float64))


def test_word_and_space_tables_equal_re_on_every_code_point():
    flags = tables.character_flags()
    assert flags.size == 0x110000 == 1_114_112
    word, space = re.compile(r"\w"), re.compile(r"\s")
    for code in range(0x110000):
        character = chr(code)
        expected = (1 if word.match(character) else 0) | (2 if space.match(character) else 0)
        assert flags[code] & 3 == expected, hex(code)
        assert bool(flags[code] & 2) == character.isspace(), hex(code)   # char_wb splits with str.split()


def test_the_context_flag_marks_exactly_the_code_points_whose_lower_case_depends_on_neighbours():
    flags = tables.character_flags()
    marked = np.flatnonzero(flags & tables.CONTEXT)
    assert 0x3A3 in marked   # GREEK CAPITAL LETTER SIGMA: final sigma
    for code in marked:
        character = chr(code)
        assert ("a" + character).lower()[1:] != character.lower() or (character + "a").lower()[:-1] != character.lower()


@pytest.mark.parametrize("lowercase,strip", [(True, None), (True, "unicode"), (False, "ascii")])
def test_mapping_table_is_scikit_learns_preprocessing_of_every_code_point(lowercase, strip):
    table = tables.mapping(lowercase, strip)
    strip_function = {None: lambda text: text, "unicode": strip_accents_unicode, "ascii": strip_accents_ascii}[strip]
    context = tables.character_flags() & tables.CONTEXT
    start, pool = table.start, table.pool
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000 or (lowercase and context[code]):
            continue   # no UTF-8 form / left to Python
        character = chr(code)
        expected = strip_function(character.lower() if lowercase else character)
        got = "".join(map(chr, pool[start[code]:start[code + 1]]))
        assert got == expected, hex(code)
    assert table.longest == max(int(n) for n in np.diff(start))
    assert tables.mapping(False, None) is None


def test_a_document_the_table_cannot_lower_goes_through_python_with_the_same_result():
    documents = ["ΟΔΥΣΣΕΥΣ ΣΑΣ", "plain text here", "ΣΑΣ σας"]
    spec = Analyzer("word", (1, 2))
    data, starts = encoded(documents)
    hashes, counts = CompiledAnalyzer(spec).chunk_hashes(documents, data, starts, np.uint32(0))
    reference, offsets = python_hashes(spec, documents, np.uint32(0))
    np.testing.assert_array_equal(hashes, reference)
    np.testing.assert_array_equal(counts, np.diff(offsets))
    assert "ςας" not in "".join(spec(documents[0]))   # the final sigma is the Python path's
    assert "σας" in spec("ΣΑΣ σας")[0] or spec("ΣΑΣ σας")[0] == "σας"


def test_scikit_learn_order_lowercase_then_strip_accents():
    """U+210C lower-cases to itself and decomposes to "H": scikit-learn lowers first, so "H" stays."""
    document = ["\u210cilbert \u00c9t\u00e9"]
    vectorizer = HashingVectorizer(n_features=2**20, strip_accents="unicode", norm=None, alternate_sign=False)
    feature_map = create_map({"method": "hashing", "n_components": 2**20,
                              "params": {"hash": "sklearn", "strip_accents": "unicode", "norm": "none",
                                         "alternate_sign": False}})
    same_csr(feature_map.transform(document, dtype=np.float64), vectorizer.transform(document))
    same_csr(feature_map.transform(feature_map.check(document), dtype=np.float64), vectorizer.transform(document))
    assert Analyzer(strip_accents="unicode")(document[0]) == ["Hilbert", "ete"]
    assert unicodedata.normalize("NFKD", "\u210c") == "H"


def test_bytes_rows_custom_patterns_and_token_lists_keep_the_python_path():
    feature_map = create_map({"method": "hashing", "n_components": 2**16,
                              "params": {"hash": "sklearn", "token_pattern": r"(?u)\b\w+\b"}})
    assert feature_map._compiled is None
    same_csr(feature_map.transform(EDGE, dtype=np.float64),
             HashingVectorizer(n_features=2**16, token_pattern=r"(?u)\b\w+\b").transform(EDGE))
    plain = create_map({"method": "hashing", "n_components": 2**16, "params": {"hash": "sklearn"}})
    assert encoded([document.encode() for document in EDGE]) is None
    assert encoded(["ok", "\ud800"]) is None   # a lone surrogate: the Python path names the row
    same_csr(plain.transform([document.encode() for document in EDGE], dtype=np.float64),
             plain.transform(EDGE, dtype=np.float64))


@pytest.mark.parametrize("mode", ["sklearn", "murmur3"])
def test_float32_rows_are_the_float64_rows_rounded_once(mode):
    """Count weights are integers summed exactly and their squares are exact in float32: the norm is the same in
    both precisions, and each float32 value is the float64 value rounded to nearest (hashing.py's docstring)."""
    feature_map = create_map({"method": "hashing", "n_components": 2**18,
                              "params": {"hash": mode, "ngram_range": [1, 2], "norm": "l2"}})
    rows32, rows64 = feature_map.transform(CORPUS), feature_map.transform(CORPUS, dtype=np.float64)
    assert rows32.dtype == np.float32
    np.testing.assert_array_equal(rows32.indices, rows64.indices)
    np.testing.assert_array_equal(rows32.data, rows64.data.astype(np.float32))


def test_what_is_not_a_list_of_documents_is_refused_as_before():
    from featurehash.maps import InputError
    feature_map = create_map({"method": "hashing", "n_components": 2**10})
    for bad in (np.array(["a b", "c d"]), [], "one document"):
        with pytest.raises(InputError):
            feature_map.transform(bad)
    same_csr(feature_map.transform(("tuple of", "documents here")), feature_map.transform(["tuple of", "documents here"]))
