"""What the clients (featurehash.client) check before sending: the service's own rules, so that a request it
would refuse is refused here with the field and detail it would answer, and nothing is sent.

The rules are called, not copied: a map's `check` (the map built from a spec this client has seen: dimension,
all-zero rows, negative entries where the kernel refuses them), check_input, the JSON rows decoder of the
service (featurehash.protocol.codecs), the request models, check_item_ids, check_name, check_fraction and band_keys.
The options the routes check by hand come from featurehash.protocol.options, as the routes' do;
tests/client/test_client.py compares every refusal with a running service's answer. Each check raises the library's FeatureHashError; the clients turn it into
FeatureHashAPIError(422, ...), the status the service answers with. A NaN or an infinity is named as such
(the service's answer to a JSON body holding NaN, as Python's json writes it), though orjson would have sent
it as null, which the service would call a non-number.

What the client does not know it does not check: the service's batch, body and answer limits (its settings),
whether a map or an index exists, and a map's input_dim until a create_map, get_map or list_maps answer (or a
create_index, get_index or list_indexes answer for an index over such a map) has shown it. Without it, every
check that does not need the map still runs, and an array that is not 2-D goes to the service, which refuses it
naming the dimension.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Annotated, Any, Literal

import numpy as np
import orjson
import scipy.sparse as sp
from pydantic import BaseModel, Field, TypeAdapter

from ..protocol.codecs import JSON, parse_model, vectors_from
from ..protocol.options import check_bands_value, check_path_item_id, check_top_k, query_item_ids, query_parameter
from ..protocol.schemas import CreateIndexRequest, CreateMapRequest, DeleteItemsRequest, DuplicatesRequest
from ..protocol.text_inputs import TEXT_KINDS, Rows, TextLimits, check_input_kind, checked_text, text_fields
from ..maps import FeatureHashError, FeatureMap, InputError, SpecError, create_map
from ..maps.base import DenseFeatureMap
from ..maps.inputs import check_input
from ..lsh.banding import band_keys
from ..store.lsh_layout import check_fraction, check_item_ids, check_name

DTYPE = TypeAdapter(Literal["float32", "float64"])
BANDS = TypeAdapter(int | None)
PAGE_LIMIT = TypeAdapter(Annotated[int, Field(ge=1, le=1000)])
_NUMBERS = "fiub"


class KnownMaps:
    """The maps this client has seen (by id) and the map of each index it has seen, so that inputs are checked
    against the map they are for. A map's spec never changes under its id; an index is forgotten when this
    client deletes it. The most recently seen `max_maps` specs (a spec can hold a Nystroem map's landmarks) and
    `max_indexes` indexes are kept."""

    def __init__(self, max_maps: int = 64, max_indexes: int = 4096) -> None:
        self._specs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._maps: dict[str, FeatureMap | None] = {}
        self._index_maps: OrderedDict[str, str] = OrderedDict()
        self.max_maps, self.max_indexes = max_maps, max_indexes

    def learn_map(self, spec: dict[str, Any]) -> dict[str, Any]:
        self._specs[spec["id"]] = self._specs.pop(spec["id"], spec)
        while len(self._specs) > self.max_maps:
            self._maps.pop(self._specs.popitem(last=False)[0], None)
        return spec

    def learn_index(self, info: dict[str, Any]) -> dict[str, Any]:
        self._index_maps.pop(info["id"], None)
        self._index_maps[info["id"]] = info["map_id"]
        while len(self._index_maps) > self.max_indexes:
            self._index_maps.popitem(last=False)
        return info

    def forget_index(self, index_id: str) -> None:
        self._index_maps.pop(index_id, None)

    def spec(self, map_id: str) -> dict[str, Any] | None:
        """The spec of a map seen, as the service answered it, or None."""
        return self._specs.get(map_id)

    def for_map(self, map_id: str) -> FeatureMap | None:
        """The map (built on first use: its parameters are made only when features are, never here), or None."""
        if map_id not in self._maps and map_id in self._specs:
            try:
                self._maps[map_id] = create_map(self._specs[map_id])
            except (SpecError, KeyError, TypeError, ValueError):  # a spec of a newer service: leave it the checks
                self._maps[map_id] = None
        return self._maps.get(map_id)

    def for_index(self, index_id: str) -> FeatureMap | None:
        map_id = self._index_maps.get(index_id)
        return None if map_id is None else self.for_map(map_id)


def vectors(X, field: str, feature_map: FeatureMap | None, as_json: bool):
    """X as it will be sent (a 2-D array or a CSR matrix), after the checks the service makes of it as a JSON
    body (`as_json`, and Python rows whatever the body: .npy cannot carry a ragged list) or an .npy body."""
    if sp.issparse(X):
        return _sparse(sp.csr_matrix(X), field, feature_map)
    if isinstance(X, (list, tuple)):
        X = _json_rows(X, field)
    else:
        try:
            X = np.asarray(X)
        except (TypeError, ValueError):
            check_input(X, 0, field=field)  # raises the library's "not a numeric array"
            raise
        if as_json and (X.ndim != 2 or X.dtype.kind not in _NUMBERS):
            X = _json_rows(X.tolist(), field)
    if feature_map is not None:
        check_input_kind(Rows(X, field), feature_map)   # numbers to a hashing map: refused by the service first
        feature_map.check(X, field)
    elif X.ndim == 2 or X.dtype.kind not in _NUMBERS:
        check_input(X, X.shape[1] if X.ndim == 2 else 0, field=field)  # all but the map's own rules
    return X


def _json_rows(rows, field: str) -> np.ndarray:
    """Rows as the service decodes them from the JSON orjson writes for them (tuples and arrays as lists)."""
    if isinstance(rows, (list, tuple)):
        rows = [row.tolist() if isinstance(row, np.ndarray) else list(row) if isinstance(row, tuple) else row
                for row in rows]
    return vectors_from({field: rows}, field, 0)


def _sparse(X: sp.csr_matrix, field: str, feature_map: FeatureMap | None) -> sp.csr_matrix:
    """Sparse rows travel as {"indices", "values"} objects, which the service reads against the map's width."""
    if feature_map is None:
        check_input(X, X.shape[1], field=field)
        return X
    width = feature_map.input_dim
    outside = np.flatnonzero(X.indices >= width)
    if outside.size:
        row = int(np.searchsorted(X.indptr, outside[0], side="right")) - 1
        raise InputError(f"sparse_{field}[{row}].indices", f"out of range: indices must lie in [0, {width})")
    feature_map.check(sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width)), field)
    return X


# The service's text limits are its settings, unknown here (as its batch and body limits are).
UNKNOWN_LIMITS = TextLimits(max_document_chars=2**62, max_request_chars=2**62, max_request_tokens=2**62)


def text_rows(key: str, X, texts: dict[str, Any], feature_map: FeatureMap | None) -> dict[str, list] | None:
    """{field: rows} for the one text keyword given (documents=, tokens=, weighted_tokens=; for a kernel's y the
    field is y_documents, ...), after the service's checks of its rows and of the map it is for; None when no text
    is given (X is sent). X and text together, or two kinds of text, are refused as the service refuses them."""
    given = [kind for kind in TEXT_KINDS if texts.get(kind) is not None]
    if not given:
        return None
    names = {kind: name for name, kind in text_fields(key).items()}
    sent = ([key] if X is not None else []) + [names[kind] for kind in given]
    if len(sent) > 1:
        raise InputError(sent[1], f"send exactly one of {', '.join(repr(name) for name in sent)}: one input kind "
                                  "per request")
    field = names[given[0]]
    rows = [list(row) if isinstance(row, tuple) else row for row in texts[given[0]]] \
        if isinstance(texts[given[0]], (list, tuple)) else texts[given[0]]
    rows, chars = checked_text(rows, given[0], field, UNKNOWN_LIMITS)
    if feature_map is not None:
        check_input_kind(Rows(rows, field, chars), feature_map)
        feature_map.check(rows, field)
    return {field: rows}


def json_ready(X: np.ndarray) -> np.ndarray:
    """X as orjson writes arrays: C-ordered, in native byte order."""
    if X.flags.c_contiguous and X.dtype.isnative:
        return X
    return np.ascontiguousarray(X, dtype=X.dtype.newbyteorder("="))


def item_ids(ids, rows: int) -> list[str]:
    return check_item_ids(list(ids) if isinstance(ids, tuple) else ids, rows)


def deletable_item_id(item_id: str) -> None:
    if isinstance(item_id, str) and item_id:
        check_path_item_id(item_id)


def request_model(content: bytes, model: type[BaseModel], error: type[FeatureHashError] = InputError):
    """A small JSON body (as it will be sent) validated by the service's own request model."""
    return parse_model(content, JSON, model, error)


def create_map_body(content: bytes) -> None:
    request_model(content, CreateMapRequest, SpecError)


def create_index_body(content: bytes, feature_map: FeatureMap | None) -> None:
    fields = request_model(content, CreateIndexRequest)
    if fields.name is not None and (feature_map is None or feature_map.has_hash):  # else the map is refused first
        check_name(fields.name)


def delete_items_body(content: bytes) -> None:
    request_model(content, DeleteItemsRequest)


def duplicates_body(content: bytes) -> None:
    request_model(content, DuplicatesRequest)


def query_ids(body: dict[str, Any]) -> None:
    """A query by stored ids as the service reads it (what it does not know: the batch limit, which ids exist)."""
    query_item_ids(orjson.loads(orjson.dumps(body)))


def query_param(value: Any, name: str, adapter: TypeAdapter) -> None:
    """A query parameter as the service validates the text httpx sends for it."""
    query_parameter(query_text(value), name, adapter)


def query_text(value: Any) -> str:
    """httpx's text of a query parameter value."""
    return "true" if value is True else "false" if value is False else "" if value is None else str(value)


def query_options(options: dict[str, Any], in_query: bool) -> dict[str, Any]:
    """top_k checked, and the fractions as the service reads them (in the body, or parsed from the query string)
    before it reads the rows; `fractions` checks their ranges, which it does after."""
    check_top_k(as_sent(options["top_k"], "top_k", in_query))
    return {name: as_sent(value, name, in_query) for name, value in options.items() if name != "top_k"}


def fractions(values: dict[str, Any]) -> None:
    for name, value in values.items():
        check_fraction(value, name)


def bands_option(bands: Any, in_query: bool) -> None:
    if bands is None:
        return
    if in_query:
        query_param(bands, "bands", BANDS)
        return
    check_bands_value(_as_json(bands))


def codes_for(feature_map: FeatureMap | None, X, bands: int | None) -> None:
    """What /hash refuses once the rows are good: a map without codes, a band count that does not divide them."""
    if feature_map is None:
        return
    if not feature_map.has_hash:
        feature_map.hash(None)  # raises the library's UnsupportedOperation before any work
    if bands is not None:
        band_keys(np.zeros((1, feature_map.spec.n_components), dtype=np.int64), int(bands))


def features_of(feature_map: FeatureMap | None) -> None:
    if isinstance(feature_map, DenseFeatureMap):
        feature_map.require_features()


def as_sent(value: Any, name: str, in_query: bool) -> Any:
    """An option as the service reads it: a JSON body's value, or the JSON text of a query parameter."""
    if not in_query:
        return _as_json(value)
    try:
        return orjson.loads(query_text(value))
    except orjson.JSONDecodeError:
        raise InputError(name, "must be a number") from None


def _as_json(value: Any) -> Any:
    """A numpy scalar as the JSON number orjson writes for it."""
    return value.item() if isinstance(value, np.generic) else value
