"""Text in request bodies, wherever rows of numbers are accepted: `documents` (strings), `tokens` (lists of
strings) or `weighted_tokens` (objects token -> weight). The service decodes with these and the client checks
its requests with them, so both refuse the same bodies.

Names: beside `vectors` / `sparse_vectors` a body may carry `documents`, `tokens` or `weighted_tokens`; beside
the kernel's `x` / `sparse_x` (and `y`), `x_documents`, `x_tokens`, `x_weighted_tokens`. Exactly one of them per
row set. Every row is checked here, before any analysis, so that a refusal names the row (`documents[3]`) and
the cost of what follows is known from the characters counted: a document over the character limit, a token
that is not a string, a weight that is not a finite number >= 0 (bool refused), and a request over the total
characters (or tokens) allowed. An empty document (or token list, or weighted tokens) passes: it is the
all-zero row, which the map takes as the library does (the zero vector; refused by the maps that need a
nonzero row unless the spec gives them an empty result: `params.empty_rows`, `input.empty`).
Cost: one pass over the rows, O(characters) for `len` only (no copy of the text).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..maps import FeatureMap, InputError
from .codecs import vectors_from

TEXT_KINDS = ("documents", "tokens", "weighted_tokens")


@dataclass(frozen=True)
class TextLimits:
    """Characters of one document; characters and tokens (tokens / weighted_tokens) of one request."""

    max_document_chars: int = 1_000_000
    max_request_chars: int = 16_000_000
    max_request_tokens: int = 4_000_000


class Rows(NamedTuple):
    """Rows of a request under `field`: numbers (an array or CSR; `chars` None) or a list of text rows."""

    X: Any
    field: str
    chars: int | None = None

    @property
    def is_text(self) -> bool:
        return self.chars is not None


@functools.cache
def text_fields(key: str) -> dict[str, str]:
    """The text field names beside `key` ("vectors" -> documents, ...; "x" -> x_documents, ...) -> their kind."""
    prefix = "" if key == "vectors" else f"{key}_"
    return {f"{prefix}{kind}": kind for kind in TEXT_KINDS}


@functools.cache
def _input_fields(key: str) -> tuple[str, ...]:
    """Every field that may carry the rows of `key`: itself, sparse_<key>, then its text fields."""
    return (key, f"sparse_{key}", *text_fields(key))


def rows_from(body: dict[str, Any] | np.ndarray, key: str, input_dim: int, limits: TextLimits, *,
              required: bool = True) -> Rows | None:
    """The rows under exactly one of `key`, `sparse_<key>` or its text fields (an .npy body: the array)."""
    if isinstance(body, np.ndarray):
        return Rows(body, key)
    texts = text_fields(key)
    given = [name for name in _input_fields(key) if name in body]
    if given == [key] and body[key] is not None:  # the usual body: rows of numbers, as below
        return Rows(vectors_from(body, key, input_dim), key)
    if given and all(body[name] is None for name in given):   # e.g. a form filling in every field with null
        if not required:
            raise InputError(given[0], f"null: leave out {', '.join(repr(name) for name in given)} or send one")
        raise InputError(key, f"missing: one input is required, null is none: send '{key}' (a list of rows), "
                              f"'sparse_{key}' or {', '.join(repr(name) for name in texts)}")
    if given == [key, f"sparse_{key}"]:
        vectors_from(body, key, input_dim)   # refuses the two, naming `key`
    if len(given) > 1:
        raise InputError(given[1], f"send exactly one of {', '.join(repr(name) for name in given)}: one input "
                                   "kind per request")
    if not given:
        if not required:
            return None
        raise InputError(key, f"missing: send '{key}' (a list of rows), 'sparse_{key}' or "
                              f"{', '.join(repr(name) for name in texts)}")
    name = given[0]
    if name in texts:
        rows, chars = checked_text(body[name], texts[name], name, limits)
        return Rows(rows, name, chars)
    return Rows(vectors_from(body, key, input_dim), key)   # the map's checks name `key` for sparse rows too


def checked_text(rows: Any, kind: str, field: str, limits: TextLimits) -> tuple[list, int]:
    """The rows (as given) and their characters (documents: the text; tokens: the tokens' summed lengths);
    InputError naming the row (`field[r]`) or the field (a limit of the whole request)."""
    if not isinstance(rows, list) or not rows:
        raise InputError(field, f"expected a non-empty list of {_EXPECTED[kind]}")
    chars = tokens = 0
    for r, row in enumerate(rows):
        where = f"{field}[{r}]"
        if kind == "documents":
            if not isinstance(row, str):
                raise InputError(where, "expected a string")
            if len(row) > limits.max_document_chars:
                raise InputError(where, f"{len(row)} characters exceed this service's limit of "
                                        f"{limits.max_document_chars} per document (FEATUREHASH_MAX_DOCUMENT_CHARS)")
            chars += len(row)
            continue
        if kind == "tokens":
            if not isinstance(row, list) or not all(isinstance(token, str) for token in row):
                raise InputError(where, "expected a list of strings (tokens)")
            pairs = None
        else:
            if not isinstance(row, dict):
                raise InputError(where, "expected an object {token: weight}")
            pairs = row.items()
            for token, weight in pairs:
                _check_weight(weight, token, where)
        tokens += len(row)
        chars += sum(map(len, row))
    if tokens > limits.max_request_tokens:
        raise InputError(field, f"{tokens} tokens exceed this service's limit of {limits.max_request_tokens} per "
                                "request (FEATUREHASH_MAX_REQUEST_TOKENS); split the batch")
    if chars > limits.max_request_chars:
        raise InputError(field, f"{chars} characters exceed this service's limit of {limits.max_request_chars} per "
                                "request (FEATUREHASH_MAX_REQUEST_CHARS); split the batch")
    return rows, chars


_EXPECTED = {"documents": "strings", "tokens": "token lists (lists of strings)",
             "weighted_tokens": "objects {token: weight}"}


def _check_weight(weight: Any, token: str, where: str) -> None:
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise InputError(where, f"the weight of {token[:40]!r} must be a number")
    try:
        value = float(weight)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value) or value < 0:
        raise InputError(where, f"the weight of {token[:40]!r} must be finite and >= 0 (got {weight!r})")


def takes_text(feature_map: FeatureMap) -> bool:
    """A hashing map, or a map with a text front stage (`spec.input`)."""
    return getattr(feature_map, "text_input", False) or feature_map.text_stage is not None


def check_input_kind(rows: Rows, feature_map: FeatureMap) -> None:
    """Text only for a map that reads it; numbers not for a hashing map. InputError naming the field sent."""
    if rows.is_text and not takes_text(feature_map):
        raise InputError(rows.field, f"map {feature_map.spec.id} has no text front stage: send vectors, or create a "
                                     "map with \"input\": {\"hashing\": {}} to send text")
    if not rows.is_text and getattr(feature_map, "text_input", False):
        raise InputError(rows.field, f"a '{feature_map.method}' map takes text: send documents, tokens or "
                                     "weighted_tokens")
