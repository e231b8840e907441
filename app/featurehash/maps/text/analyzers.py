"""Turning a document into tokens: word n-grams (shingles), character n-grams, and character n-grams inside
word boundaries, with scikit-learn's rules (`sklearn.feature_extraction.text`, CountVectorizer and
HashingVectorizer), so that the hashing map's compatibility mode gives their columns token for token.

Steps, as scikit-learn takes them: lower-cased (optional, `str.lower`), then accents stripped (optional:
"unicode" decomposes to NFKD and drops the combining marks, "ascii" also drops what is not ASCII), then
- "word": the tokens are the matches of `token_pattern` (default (?u)\\b\\w\\w+\\b: words of two or more
  word characters; a pattern with one group yields the group), and the n-grams for n in `ngram_range` are the
  runs of n consecutive tokens joined by one space, smaller n first (w-shingles of a document are the word
  n-grams with ngram_range (w, w));
- "char": runs of two or more whitespace characters become one space, then every run of n characters;
- "char_wb": the same spacing, then per whitespace-separated word padded with one space each side, every run
  of n characters inside the padded word (a word shorter than n counts once, whole).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property

ANALYZERS = ("word", "char", "char_wb")
STRIP_ACCENTS = ("unicode", "ascii")
DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
_WHITE_SPACES = re.compile(r"\s\s+")


def strip_accents_unicode(text: str) -> str:
    if text.isascii():   # nothing to strip: most documents, and the cheap case
        return text
    # combining marks are dropped even from text already in NFKD, as scikit-learn >= 0.22 does
    return "".join(character for character in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(character))


def strip_accents_ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


@dataclass(frozen=True)
class Analyzer:
    """A document -> its tokens, with the settings of a hashing spec's params."""

    analyzer: str = "word"
    ngram_range: tuple[int, int] = (1, 1)
    lowercase: bool = True
    strip_accents: str | None = None
    token_pattern: str = DEFAULT_TOKEN_PATTERN

    @cached_property
    def _pattern(self) -> re.Pattern:
        return re.compile(self.token_pattern)

    def _preprocess(self, document: str) -> str:
        # lower case first, as scikit-learn's _preprocess: the other order differs on compatibility characters
        # whose decomposition has a lower case of its own (U+210C BLACK-LETTER CAPITAL H: "H", then "h")
        if self.lowercase:
            document = document.lower()
        if self.strip_accents == "unicode":
            document = strip_accents_unicode(document)
        elif self.strip_accents == "ascii":
            document = strip_accents_ascii(document)
        return document

    def __call__(self, document: str) -> list[str]:
        document = self._preprocess(document)
        if self.analyzer == "word":
            return self._word_ngrams(self._pattern.findall(document))
        if self.analyzer == "char":
            return self._char_ngrams(_WHITE_SPACES.sub(" ", document))
        return self._char_wb_ngrams(_WHITE_SPACES.sub(" ", document))

    def _word_ngrams(self, tokens: list[str]) -> list[str]:
        low, high = self.ngram_range
        if high == 1:
            return tokens
        grams = list(tokens) if low == 1 else []
        for n in range(max(low, 2), min(high, len(tokens)) + 1):
            grams.extend(" ".join(tokens[start:start + n]) for start in range(len(tokens) - n + 1))
        return grams

    def _char_ngrams(self, text: str) -> list[str]:
        low, high = self.ngram_range
        grams = list(text) if low == 1 else []
        for n in range(max(low, 2), min(high, len(text)) + 1):
            grams.extend(text[start:start + n] for start in range(len(text) - n + 1))
        return grams

    def _char_wb_ngrams(self, text: str) -> list[str]:
        low, high = self.ngram_range
        grams: list[str] = []
        for word in text.split():
            padded = f" {word} "
            for n in range(low, high + 1):
                if len(padded) <= n:   # shorter than n: the whole padded word, once
                    grams.append(padded)
                    break
                grams.extend(padded[start:start + n] for start in range(len(padded) - n + 1))
        return grams
