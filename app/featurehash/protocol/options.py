"""The request options the routes check by hand (not through a request model), written once: the service
refuses with these and the client (featurehash.client.checks) checks its requests with them, so both give
the same field and detail."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..maps import InputError
from ..store.lsh_layout import check_query_ids, is_path_segment
from .schemas import MAX_TOP_K


def check_top_k(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOP_K:
        raise InputError("top_k", f"must be an integer in [1, {MAX_TOP_K}]")
    return value


def check_bands_value(value: Any) -> None:
    """`bands` as a JSON body gives it (a query parameter is validated as an integer by its schema)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InputError("bands", "expected an integer")


def check_path_item_id(item_id: str) -> None:
    """An id DELETE .../items/{item_id} can carry: one URL path segment."""
    if not is_path_segment(item_id):
        raise InputError("item_id", f"{item_id!r} is not an item id that a URL path can carry; "
                         "remove it with POST .../items/delete {\"ids\": [...]}")


def query_parameter(raw: str, name: str, adapter: TypeAdapter) -> Any:
    """A query parameter's text validated as FastAPI validates a declared one (a 422 naming it)."""
    try:
        return adapter.validate_python(raw)
    except ValidationError as exc:
        raise InputError(name, exc.errors()[0]["msg"]) from None



QUERY_INPUTS = ("vectors", "sparse_vectors", "documents", "tokens", "weighted_tokens")


def query_item_ids(body: dict[str, Any]) -> list[str] | None:
    """The `ids` of a query body (stored items to find the neighbours of), None when it sends vectors or text:
    exactly one of vectors, sparse_vectors, documents, tokens, weighted_tokens or ids."""
    if "ids" not in body:
        return None
    if any(kind in body for kind in QUERY_INPUTS):
        raise InputError("ids", "send exactly one of " + ", ".join(f"'{kind}'" for kind in (*QUERY_INPUTS, "ids")))
    return check_query_ids(body["ids"])
