"""Batches of documents hashed at compiled speed: the hashes of every token or n-gram of each document, as one
flat array with row offsets, for the built-in analyzers (featurehash.maps.text.analyzers).

Invariant: `CompiledAnalyzer(analyzer).hashes(documents, key)` gives, row after row, exactly
murmur3_32_many(token_bytes(analyzer(document)), key) for each document: the same tokens, in the same order,
hashed the same way, whether a document went through the compiled pass (featurehash.maps.text._compiled_text)
or, for the few that must, through the Python analyzer.

What takes the compiled pass: documents given as `str` (a batch of `bytes` or token lists keeps the Python
path), for analyzers "char" and "char_wb" whatever their settings, and "word" with the default token pattern
(?u)\\b\\w\\w+\\b. A custom `token_pattern` keeps Python's `re` (the project's analyzers take no preprocessor
or callable analyzer; featurehash.sklearn's estimators pass only these settings). Within a compiled batch, a
document holding a code point whose lower case depends on its neighbours (Greek capital sigma: Final_Sigma) is
analysed by Python when `lowercase` is on, since `str.lower` is per code point everywhere else (multi code point
lower cases such as U+0130 are in the table). Rows are split over the row threads
(featurehash.maps.numerics._row_threads), each chunk's pass holding no GIL.

`shingle_hashes` is the entry for minhash over plain sets: the hashes of a batch's shingles as (uint64 flat
array, int64 row offsets), each row's hashes in document order with repeats kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..numerics import _row_threads as row_threads
from ..randomness import counter_key
from . import _compiled_text as compiled
from . import _unicode_tables as tables
from ._murmur import murmur3_32_many, token_bytes
from .analyzers import ANALYZERS, DEFAULT_TOKEN_PATTERN, Analyzer

# about this many bytes of text per chunk when threads share a batch: large enough that a chunk's pass
# dwarfs the claiming and the Python around it, small enough for a few chunks per thread on small batches
CHUNK_BYTES = 1 << 18
_ANALYZER_CODES = {"word": compiled.WORD_ANALYZER, "char": compiled.CHAR_ANALYZER,
                   "char_wb": compiled.CHAR_WB_ANALYZER}


def encoded(documents) -> tuple[np.ndarray, np.ndarray] | None:
    """(data uint8, starts int64) of a list of `str` documents as UTF-8 in one buffer, or None when a row is
    not a `str` or has no UTF-8 form (a lone surrogate): the Python path then tells what is wrong."""
    if not isinstance(documents, (list, tuple)):
        return None
    try:
        joined = "".join(documents)
    except TypeError:
        return None
    starts = np.zeros(len(documents) + 1, dtype=np.int64)
    if joined.isascii():   # most text: one encode, character counts are byte counts
        np.cumsum(np.fromiter(map(len, documents), dtype=np.int64, count=len(documents)), out=starts[1:])
        return np.frombuffer(joined.encode("ascii"), dtype=np.uint8), starts
    try:
        pieces = list(map(str.encode, documents))
    except UnicodeEncodeError:
        return None
    np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)), out=starts[1:])
    return np.frombuffer(b"".join(pieces), dtype=np.uint8), starts


@dataclass(frozen=True)
class CompiledAnalyzer:
    """An analyzer's settings, ready for the compiled pass (`supports(analyzer)` says whether it may be used)."""

    analyzer: Analyzer

    @staticmethod
    def supports(analyzer: Analyzer) -> bool:
        return analyzer.analyzer in ANALYZERS and (analyzer.analyzer != "word"
                                                   or analyzer.token_pattern == DEFAULT_TOKEN_PATTERN)

    def _tables(self):
        flags = tables.character_flags()
        mapping = tables.mapping(self.analyzer.lowercase, self.analyzer.strip_accents)
        context_bit = tables.CONTEXT if self.analyzer.lowercase else np.uint8(0)
        if mapping is None:
            # arrays of the mapped case's types: one compiled specialisation serves every setting
            return flags, context_bit, False, np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32), 1
        return flags, context_bit, True, mapping.start, mapping.pool, mapping.longest

    def chunk_hashes(self, documents: Sequence[str], data: np.ndarray, starts: np.ndarray, key: np.uint32,
                     ) -> tuple[np.ndarray, np.ndarray]:
        """(uint32 hashes, int64 count per document) of documents[i] = data[starts[i]:starts[i + 1]] (starts
        may be a slice of a larger batch's; `documents` the same rows, read only for those Python analyses)."""
        low, high = self.analyzer.ngram_range
        hashes, counts, context = compiled.gram_hashes(
            data, starts, *self._tables(), _ANALYZER_CODES[self.analyzer.analyzer], low, high, key)
        if not context.any():
            return hashes, counts
        return self._with_python_rows(documents, hashes, counts, np.flatnonzero(context), key)

    def _with_python_rows(self, documents, hashes, counts, rows, key):
        """The rows the compiled pass left (CONTEXT code points) analysed by Python and spliced in place."""
        pieces, ends, taken = [], np.cumsum(counts), 0
        for row in rows:   # rare rows only (Greek capital sigma with lowercase)
            cut = int(ends[row])
            pieces.append(hashes[taken:cut])
            extra = murmur3_32_many(*token_bytes(self.analyzer(documents[row])), key)
            pieces.append(extra)
            counts[row] = extra.size
            taken = cut
        pieces.append(hashes[taken:])
        return np.concatenate(pieces), counts

    def map_rows(self, documents: Sequence[str], data: np.ndarray, starts: np.ndarray, key: np.uint32,
                 rows: Callable, threads: int | None = None) -> list:
        """[rows(hashes, counts) per chunk of documents], the chunks in order, computed by `threads` threads
        (default: as the row threads allow, for a batch of more than one chunk's bytes)."""
        n = starts.size - 1
        cuts = _chunk_cuts(starts)
        if threads is None:
            threads = row_threads.thread_count() if len(cuts) > 2 else 1

        def work(chunk):
            first, last = chunk
            return rows(*self.chunk_hashes(documents[first:last], data, starts[first:last + 1], key))

        chunks = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])] or [(0, n)]
        if threads <= 1:
            return [work(chunk) for chunk in chunks]
        return row_threads.run_chunks(work, chunks, threads)


def _chunk_cuts(starts: np.ndarray) -> np.ndarray:
    """Document indices cutting the batch into runs of about CHUNK_BYTES bytes (0 and n included)."""
    n = starts.size - 1
    total = int(starts[-1] - starts[0])
    if total <= CHUNK_BYTES or n <= 1:
        return np.array([0, n], dtype=np.int64)
    marks = np.arange(1, -(-total // CHUNK_BYTES)) * CHUNK_BYTES + starts[0]
    cuts = np.unique(np.concatenate(([0], np.searchsorted(starts, marks), [n])))
    return cuts


def hash_key(hash_mode: str, seed) -> np.uint32:
    """The MurmurHash3 key of a hashing map's tokens: 0 in scikit-learn mode, else drawn from the seed (as
    featurehash.maps.text.hashing.HashingMap)."""
    return np.uint32(0 if hash_mode == "sklearn" else int(counter_key(seed, "hashing")) & 0xFFFFFFFF)


def shingle_hashes(documents, *, analyzer: str = "word", ngram_range: tuple[int, int] = (3, 3),
                   lowercase: bool = True, strip_accents: str | None = None, token_pattern: str = DEFAULT_TOKEN_PATTERN,
                   hash: str = "murmur3", seed=0, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(hashes uint64, offsets int64 of n + 1) of a batch of documents: row r's shingles (word n-grams with
    the default analyzer, w-shingles for ngram_range (w, w)) hashed to 32 bits as a `hashing` map with these
    settings and `seed` hashes them (hash "sklearn": scikit-learn's murmurhash3_32, seed 0), widened to
    uint64, in document order with repeats kept: hashes[offsets[r]:offsets[r + 1]]. Settings the compiled pass
    does not take (a custom token_pattern, bytes rows) go through the Python analyzer, with the same result."""
    spec = Analyzer(analyzer, tuple(ngram_range), lowercase, strip_accents, token_pattern)
    key = hash_key(hash, seed)
    batch = encoded(documents)
    if batch is None or not CompiledAnalyzer.supports(spec):
        from .token_rows import token_rows
        rows = token_rows(list(documents), spec)
        return murmur3_32_many(*token_bytes(rows.tokens), key).astype(np.uint64), rows.starts
    data, starts = batch
    parts = CompiledAnalyzer(spec).map_rows(documents, data, starts, key, lambda h, c: (h, c), threads)
    hashes = np.concatenate([h for h, _ in parts]).astype(np.uint64)
    offsets = np.zeros(starts.size, dtype=np.int64)
    np.cumsum(np.concatenate([c for _, c in parts]), out=offsets[1:])
    return hashes, offsets
