"""Text inputs of a batch, flattened: documents, token lists or weighted tokens -> one list of tokens with
the row of each and, for weighted tokens, its weight.

A batch is a list whose rows are all of one kind:
- documents: `str` (or UTF-8 `bytes`), turned into tokens by the spec's analyzer;
- token lists: lists or tuples of `str`, each token counted once per occurrence;
- weighted tokens: mappings {token: weight}, or lists of (token, weight) pairs; weights are finite real numbers
  (bool is refused: it is almost always a mistake for a count).
Errors are InputError naming the field and the row (numbered from 0), like the numeric inputs'.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .analyzers import Analyzer

KINDS = ("documents", "tokens", "weighted_tokens")


@dataclass(frozen=True)
class TokenRows:
    """The tokens of n rows, concatenated: row r holds tokens[starts[r]:starts[r + 1]]; `weights` (float64,
    one per token) for weighted tokens, else None (each occurrence counts 1)."""

    tokens: list[str]
    starts: np.ndarray
    weights: np.ndarray | None
    kind: str

    @property
    def n_rows(self) -> int:
        return self.starts.size - 1

    @property
    def rows(self) -> np.ndarray:
        """The row of each token (int64)."""
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), np.diff(self.starts))


def is_text_batch(X) -> bool:
    """Whether X looks like a batch of text rows (not a numeric array): a list or tuple whose first row is a
    str, bytes, mapping, or a sequence starting with a str or a (str, ...) pair."""
    if not isinstance(X, (list, tuple)) or not X:
        return False
    first = X[0]
    if isinstance(first, (str, bytes, Mapping)):
        return True
    if isinstance(first, (list, tuple)) and first:
        head = first[0]
        return isinstance(head, str) or (isinstance(head, (list, tuple)) and bool(head) and isinstance(head[0], str))
    return False


def _kind_of(row) -> str | None:
    if isinstance(row, (str, bytes)):
        return "documents"
    if isinstance(row, Mapping):
        return "weighted_tokens"
    if isinstance(row, (list, tuple)):
        if not row:
            return None   # an empty row fits any kind
        return "weighted_tokens" if isinstance(row[0], (list, tuple)) else "tokens"
    return "?"


def _document(row, index: int, field: str) -> str:
    if isinstance(row, bytes):
        try:
            return row.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(field, f"row {index}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if not row.isascii():
        try:
            row.encode("utf-8")
        except UnicodeEncodeError as exc:   # a lone surrogate, e.g. from a bad JSON escape
            raise InputError(field, f"row {index}: text with no UTF-8 form (character {exc.start})") from None
    return row


def _pairs(row, index: int, field: str) -> Iterable[tuple[str, float]]:
    items = row.items() if isinstance(row, Mapping) else row
    for pair in items:
        if isinstance(row, Mapping):
            token, weight = pair
        elif not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise InputError(field, f"row {index}: weighted tokens are [token, weight] pairs")
        else:
            token, weight = pair
        if not isinstance(token, str):
            raise InputError(field, f"row {index}: a token must be a string, got {type(token).__name__}")
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise InputError(field, f"row {index}: the weight of {token[:40]!r} must be a number")
        if not math.isfinite(weight):
            raise InputError(field, f"row {index}: the weight of {token[:40]!r} is NaN or infinite")
        yield token, float(weight)


def token_rows(X, analyzer: Analyzer, field: str = "documents") -> TokenRows:
    """Flatten a text batch (see the module docstring); InputError for anything else."""
    if isinstance(X, (str, bytes)):
        raise InputError(field, "expected a list of documents; wrap a single document as [document]")
    if not isinstance(X, (list, tuple)):
        raise InputError(field, f"expected a list of documents, token lists or weighted tokens, "
                                f"got {type(X).__name__}")
    if not X:
        raise InputError(field, "the batch is empty")
    kinds = [_kind_of(row) for row in X]
    kind = next((found for found in kinds if found is not None), "tokens")   # all rows empty: empty token lists
    for index, found in enumerate(kinds):
        if found not in (None, kind) or found == "?":
            raise InputError(field, f"row {index}: every row must be of one kind: documents (strings), token lists "
                                    f"(lists of strings) or weighted tokens ({{token: weight}})")
    tokens: list[str] = []
    weights: list[float] = []
    lengths = np.empty(len(X), dtype=np.int64)
    for index, row in enumerate(X):
        before = len(tokens)
        if kind == "documents":
            tokens.extend(analyzer(_document(row, index, field)))
        elif kind == "tokens":
            if not all(isinstance(token, str) for token in row):
                raise InputError(field, f"row {index}: a token list holds strings only")
            tokens.extend(row)
        else:
            for token, weight in _pairs(row, index, field):
                tokens.append(token)
                weights.append(weight)
        lengths[index] = len(tokens) - before
    starts = np.zeros(len(X) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    return TokenRows(tokens, starts, np.asarray(weights, dtype=np.float64) if kind == "weighted_tokens" else None,
                     kind)
