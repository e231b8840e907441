"""What the client returns and raises: the typed answers of each operation and FeatureHashAPIError."""

from __future__ import annotations

import re

from typing import Any, NamedTuple, TypedDict

import numpy as np



# -- typed results ---------------------------------------------------------------------------------

class MapSpec(TypedDict):
    id: str
    method: str
    input_dim: int
    n_components: int
    output_dim: int
    seed: int
    params: dict[str, Any]
    format_version: int
    features: str
    has_hash: bool


class MapPage(TypedDict):
    maps: list[MapSpec]
    next: str | None


class IndexInfo(TypedDict):
    id: str
    name: str
    map_id: str
    method: str
    n_codes: int
    bands: int
    rows: int
    threshold: float
    recall_at_threshold: float
    bands_chosen_by: str
    collision_probability_at_threshold: float
    half_point: float
    items: int
    key_prefix: str


class IndexPage(TypedDict):
    indexes: list[IndexInfo]
    next: str | None


class AddedItems(TypedDict):
    added: int
    replaced: int
    items: int


class DeletedItems(TypedDict):
    removed: int
    missing: list[str]


class Neighbour(TypedDict):
    id: str
    similarity: float


class QueryAnswer(TypedDict):
    results: list[list[Neighbour]]
    candidates: list[int]


class DuplicateCluster(TypedDict):
    representative: str
    members: list[str]


class DuplicatesAnswer(TypedDict):
    threshold: float
    mode: str
    verify: str
    bands: int
    rows: int
    recall_at_threshold: float
    candidates: int
    pairs: int
    clusters: list[DuplicateCluster]


class BandedCodes(NamedTuple):
    """Codes (int64 n x k) and band keys (n x bands, str: featurehash.lsh.banding.band_keys, as the library gives)."""

    codes: np.ndarray
    band_keys: np.ndarray


class KernelAnswer(NamedTuple):
    estimate: np.ndarray
    exact: np.ndarray


class FeatureHashAPIError(Exception):
    """A non-2xx answer: `status`, the offending `field` (when given) and the `detail`."""

    def __init__(self, status: int, detail: str, field: str | None = None, retry_after: str | None = None):
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.field = field
        self.retry_after = retry_after


class AnswerMismatch(FeatureHashAPIError):
    """A 2xx answer that is not what the request asked for (rows, width, dtype, content type, field types or
    size): `status` is the answer's, `field` is "answer", and `detail` says what was expected and what came.
    Never retried: the server answered, wrongly."""

    def __init__(self, status: int, expected: str, got: str):
        super().__init__(status, f"answer: expected {expected}; got {got}", "answer")
        self.expected, self.got = expected, got


class ScopeRequired(FeatureHashAPIError):
    """A 403: the API key is valid but lacks `scope` ("read", "write" or "admin"), which the operation requires.
    Use a key that grants it (a key's scopes are set in the service's keys file)."""

    def __init__(self, detail: str, scope: str | None):
        super().__init__(403, detail, "scope")
        self.scope = scope

    def __str__(self) -> str:
        return f"403: the API key lacks the {self.scope!r} scope this operation requires ({self.detail})"


_REQUIRED_SCOPE = re.compile(r"requires the '(\w+)' scope")


def api_error(status: int, detail: str, field: str | None, retry_after: str | None) -> FeatureHashAPIError:
    """The error of a non-2xx answer: ScopeRequired for a 403 naming a scope, else FeatureHashAPIError."""
    if status == 403 and field == "scope":
        found = _REQUIRED_SCOPE.search(detail)
        return ScopeRequired(detail, found.group(1) if found else None)
    return FeatureHashAPIError(status, detail, field, retry_after)


# Text rows (documents=, tokens=, weighted_tokens=): for a hashing map or a map with a text `input` stage.
Documents = list[str] | None
Tokens = list[list[str]] | None
WeightedTokens = list[dict[str, float]] | None
