"""Each operation once, as a generator of requests (`Operation`) that the sync and the async client
drive: it checks its inputs by the service's rules first (`checks`), then yields its calls and reads
their answers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..maps import MapSpec
from ..protocol import schemas
from ..protocol.text_inputs import TEXT_KINDS
from ..store.lsh_layout import check_positive_int
from . import checked, checks
from .answers import INDEX_INFO_BYTES, NO_BODY, UNSIZED, document
from .wire import (
    ITEM_IDS_HEADER_BYTES,
    NPY,
    Operation,
    _as_npy,
    _Call,
    _items_call,
    _json_call,
    _page,
    _rows_field,
    _segment,
    _vectors_call,
)


# What create_map takes: the spec as featurehash.create_map does (a dict, a resolved spec posted back, or a
# featurehash.maps.MapSpec), or its method's name with the other fields as keywords.
SpecArgument = str | Mapping[str, Any] | MapSpec | None
KEYWORD_ORDER = ("method", "input_dim", "n_components", "seed", "params", "input")


def map_request(spec: SpecArgument, **keywords: Any) -> dict[str, Any]:
    """The body of POST /v1/maps; TypeError for a spec given both ways (its fields are checked by the service's
    model afterwards, as for any body)."""
    if isinstance(spec, MapSpec):
        spec = spec.to_dict()
    given = [key for key in KEYWORD_ORDER if keywords.get(key) is not None]
    if isinstance(spec, Mapping):
        if given:
            raise TypeError(f"create_map: give {given[0]!r} inside the spec dict, or the method name and keywords; "
                            "not both")
        return dict(spec)
    if spec is not None and keywords.get("method") is not None:
        raise TypeError("create_map: the method given twice (as the spec and as method=)")
    body = {key: keywords[key] for key in given}
    return body if spec is None else {"method": spec, **body}


def _rows(X, text: dict[str, list] | None) -> int:
    return len(next(iter(text.values()))) if text is not None else X.shape[0]


def _text_units(text: dict[str, list] | None) -> int | None:
    """The characters (documents) or tokens a text request holds: what bounds its sparse features."""
    if text is None:
        return None
    return sum(len(row) for row in next(iter(text.values())))


class _Operations:
    """Each operation: checks its inputs as the service would (featurehash.client.checks: a refusal raises
    FeatureHashError before any request), yields the requests it needs, each with what its answer must be
    (`_Call.expect`), receives their 2xx answers and returns the result, read by featurehash.client.checked
    (an answer that is not what the request asked for raises AnswerMismatch). `known` holds the maps and
    indexes this client has seen, whose inputs and answers it checks."""

    def __init__(self) -> None:
        self.known = checks.KnownMaps()

    def create_map(self, spec: SpecArgument = None, input_dim: int | None = None, n_components: int | None = None,
                   *, method: str | None = None, seed: int | None = None, params: dict[str, Any] | None = None,
                   input: dict[str, Any] | None = None) -> Operation:
        body = map_request(spec, method=method, input_dim=input_dim, n_components=n_components, seed=seed,
                           params=params, input=input)
        call = _json_call("POST", "/v1/maps", body)
        checks.create_map_body(call.content)
        return self.known.learn_map(checked.map_spec((yield replace(call, expect=UNSIZED)), request=body))

    def get_map(self, map_id: str) -> Operation:
        answer = yield _Call("GET", f"/v1/maps/{_segment(map_id)}", expect=UNSIZED)
        return self.known.learn_map(checked.map_spec(answer, map_id=map_id))

    def list_maps(self, *, after: str | None = None, limit: int = 100) -> Operation:
        answer = yield _Call("GET", "/v1/maps", params=_page(limit, after), expect=UNSIZED)
        page = checked.page(answer, schemas.MapListResponse, "maps", limit)
        for spec in page["maps"]:
            self.known.learn_map(spec)
        return page

    def delete_map(self, map_id: str, *, force: bool = False) -> Operation:
        yield _Call("DELETE", f"/v1/maps/{_segment(map_id)}", params={"force": "true"} if force else None,
                    expect=NO_BODY)

    def transform(self, map_id: str, X=None, *, binary: bool = True, dtype: str = "float32",
                  **text: Any) -> Operation:
        checks.query_param(dtype, "dtype", checks.DTYPE)
        feature_map = self.known.for_map(map_id)
        path, params = f"/v1/maps/{_segment(map_id)}/transform", {"dtype": dtype}
        rows = checks.text_rows("vectors", X, text, feature_map)
        if rows is None:
            X = checks.vectors(X, "vectors", feature_map, not _as_npy(X, binary))
        checks.features_of(feature_map)
        spec, n = self.known.spec(map_id), _rows(X, rows)
        expect = checked.features_expect(spec, n, dtype, binary and rows is None, _text_units(rows))
        call = (_vectors_call(path, X, "vectors", binary, params=params, headers={"Accept": NPY} if binary else None)
                if rows is None else _json_call("POST", path, rows, params=params))
        return checked.features((yield replace(call, expect=expect)), spec, n, dtype)

    def hash(self, map_id: str, X=None, *, bands: int | None = None, binary: bool = True, **text: Any) -> Operation:
        binary = binary and all(text.get(kind) is None for kind in TEXT_KINDS)   # text travels as JSON
        checks.bands_option(bands, _as_npy(X, binary))
        feature_map = self.known.for_map(map_id)
        rows = checks.text_rows("vectors", X, text, feature_map)
        if rows is None:
            X = checks.vectors(X, "vectors", feature_map, not _as_npy(X, binary))
        checks.codes_for(feature_map, X if rows is None else next(iter(rows.values())), bands)
        params = {"bands": bands} if bands is not None else None
        path = f"/v1/maps/{_segment(map_id)}/hash"
        npy = binary and bands is None  # band keys are strings: answered as JSON
        spec, n = self.known.spec(map_id), _rows(X, rows)
        call = (_vectors_call(path, X, "vectors", binary, options=params, headers={"Accept": NPY} if npy else None)
                if rows is None else _json_call("POST", path, {**rows, **(params or {})}))
        answer = yield replace(call, expect=checked.codes_expect(spec, n, bands, npy))
        return checked.codes(answer, spec, n, bands)

    def kernel(self, map_id: str, X=None, Y=None, *, binary: bool = True, **text: Any) -> Operation:
        path, feature_map = f"/v1/maps/{_segment(map_id)}/kernel", self.known.for_map(map_id)
        x_text = checks.text_rows("x", X, text, feature_map)
        y_text = checks.text_rows("y", Y, {kind: text.get(f"y_{kind}") for kind in TEXT_KINDS}, feature_map)
        if x_text is not None or y_text is not None:
            if x_text is None:
                X = checks.vectors(X, "x", feature_map, True)
            if y_text is None and Y is not None:
                Y = checks.vectors(Y, "y", feature_map, True)
            x_rows = x_text or _rows_field(X, "x")
            y_rows = y_text or ({} if Y is None else _rows_field(Y, "y"))
            call = _json_call("POST", path, {**x_rows, **y_rows})
        else:
            as_json = Y is not None or not _as_npy(X, binary)
            X = checks.vectors(X, "x", feature_map, as_json)
            if Y is None:
                call = _vectors_call(path, X, "x", binary)
            else:
                Y = checks.vectors(Y, "y", feature_map, True)
                call = _json_call("POST", path, {**_rows_field(X, "x"), **_rows_field(Y, "y")})
        x_n = _rows(X, x_text)
        y_n = x_n if Y is None and y_text is None else _rows(Y, y_text)
        return checked.kernel((yield replace(call, expect=checked.kernel_expect(x_n, y_n))), x_n, y_n)

    def create_index(self, map_id: str, *, name: str | None = None, bands: int | None = None,
                     rows: int | None = None, threshold: float | None = None,
                     recall_at_threshold: float | None = None, vectors: str | None = None,
                     forest_rows: list[int] | None = None, expected_items: int | None = None) -> Operation:
        options = {"name": name, "bands": bands, "rows": rows, "threshold": threshold,
                   "recall_at_threshold": recall_at_threshold, "vectors": vectors, "forest_rows": forest_rows,
                   "expected_items": expected_items}
        body = {"map_id": map_id, **{key: value for key, value in options.items() if value is not None}}
        call = _json_call("POST", "/v1/indexes", body)
        checks.create_index_body(call.content, self.known.for_map(map_id) if isinstance(map_id, str) else None)
        return self.known.learn_index(checked.index_info((yield call), request=body))

    def get_index(self, index_id: str) -> Operation:
        answer = yield _Call("GET", f"/v1/indexes/{_segment(index_id)}")
        return self.known.learn_index(checked.index_info(answer, index_id=index_id))

    def list_indexes(self, *, after: str | None = None, limit: int = 100) -> Operation:
        answer = yield _Call("GET", "/v1/indexes", params=_page(limit, after),
                             expect=checked.page_expect(limit, INDEX_INFO_BYTES))
        page = checked.page(answer, schemas.IndexListResponse, "indexes", limit)
        for info in page["indexes"]:
            self.known.learn_index(info)
        return page

    def list_tenants(self) -> Operation:
        answer = yield _Call("GET", "/v1/tenants", expect=UNSIZED)
        return document(answer.status, answer.content, schemas.TenantListResponse)["tenants"]

    def delete_index(self, index_id: str) -> Operation:
        self.known.forget_index(index_id)
        yield _Call("DELETE", f"/v1/indexes/{_segment(index_id)}", expect=NO_BODY)

    def add_items(self, index_id: str, ids: list[str], X=None, *, binary: bool = True, batch_rows: int = 1000,
                  **text: Any) -> Operation:
        path = f"/v1/indexes/{_segment(index_id)}/items"
        rows = checks.text_rows("vectors", X, text, self.known.for_index(index_id))
        if rows is not None:
            return (yield from self._add_text_items(path, ids, rows, batch_rows))
        binary = _as_npy(X, binary)
        X = checks.vectors(X, "vectors", self.known.for_index(index_id), not binary)
        path = f"/v1/indexes/{_segment(index_id)}/items"
        if X.ndim != 2:  # unchecked (the map is unknown here): sent whole, for the service to name its dimension
            return checked.added((yield _items_call(path, list(ids), X, binary)), len(ids))
        ids = checks.item_ids(ids, X.shape[0])  # every row has its id, or nothing is sent
        check_positive_int(batch_rows, "batch_rows")  # a client-side count
        total = {"added": 0, "replaced": 0, "items": 0}
        start = 0
        while start < len(ids):
            stop = min(len(ids), start + batch_rows)
            while binary and stop - start > 1 and len(json.dumps(ids[start:stop])) > ITEM_IDS_HEADER_BYTES:
                stop = start + (stop - start) // 2
            answer = checked.added((yield _items_call(path, ids[start:stop], X[start:stop], binary)), stop - start)
            total = {"added": total["added"] + answer["added"], "replaced": total["replaced"] + answer["replaced"],
                     "items": answer["items"]}
            start = stop
        return total

    def _add_text_items(self, path: str, ids: list[str], rows: dict[str, list], batch_rows: int) -> Operation:
        (field, text), = rows.items()
        ids = checks.item_ids(ids, len(text))
        check_positive_int(batch_rows, "batch_rows")
        total = {"added": 0, "replaced": 0, "items": 0}
        for start in range(0, len(ids), batch_rows):
            batch = ids[start:start + batch_rows]
            answer = checked.added((yield _json_call("POST", path, {"ids": batch,
                                                                    field: text[start:start + batch_rows]})),
                                   len(batch))
            total = {"added": total["added"] + answer["added"], "replaced": total["replaced"] + answer["replaced"],
                     "items": answer["items"]}
        return total

    def delete_item(self, index_id: str, item_id: str) -> Operation:
        checks.deletable_item_id(item_id)
        yield _Call("DELETE", f"/v1/indexes/{_segment(index_id)}/items/{_segment(item_id)}", expect=NO_BODY)

    def delete_items(self, index_id: str, ids: list[str]) -> Operation:
        call = _json_call("POST", f"/v1/indexes/{_segment(index_id)}/items/delete", {"ids": ids})
        checks.delete_items_body(call.content)
        answer = yield replace(call, expect=checked.deleted_expect(len(call.content)))
        return checked.deleted(answer, ids)

    def query_index(self, index_id: str, X, *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None, binary: bool = True, **text: Any) -> Operation:
        feature_map = self.known.for_index(index_id)
        in_query = all(text.get(kind) is None for kind in TEXT_KINDS) and _as_npy(X, binary)
        options = {"top_k": top_k, "min_similarity": min_similarity}
        if target_recall is not None:
            options["target_recall"] = target_recall
        fractions = checks.query_options(options, in_query)
        rows = checks.text_rows("vectors", X, text, feature_map)
        if rows is None:
            X = checks.vectors(X, "vectors", feature_map, not in_query)
        checks.fractions(fractions)
        path, n = f"/v1/indexes/{_segment(index_id)}/query", _rows(X, rows)
        call = (_vectors_call(path, X, "vectors", binary, options=options) if rows is None
                else _json_call("POST", path, {**rows, **options}))
        return checked.query((yield replace(call, expect=checked.query_expect(n, top_k))), n, top_k)

    def query_items(self, index_id: str, ids: list[str], *, top_k: int = 10, min_similarity: float = 0.0,
                    target_recall: float | None = None) -> Operation:
        options = {"top_k": top_k, "min_similarity": min_similarity}
        if target_recall is not None:
            options["target_recall"] = target_recall
        fractions = checks.query_options(options, False)
        body = {"ids": list(ids) if isinstance(ids, tuple) else ids, **options}
        checks.query_ids(body)
        checks.fractions(fractions)
        call = _json_call("POST", f"/v1/indexes/{_segment(index_id)}/query", body)
        n = len(body["ids"])
        return checked.query((yield replace(call, expect=checked.query_expect(n, top_k))), n, top_k)

    def duplicates(self, index_id: str, threshold: float | None = None, *, mode: str = "components",
                   min_cluster_size: int = 2) -> Operation:
        body = {**({"threshold": threshold} if threshold is not None else {}), "mode": mode,
                "min_cluster_size": min_cluster_size}
        call = _json_call("POST", f"/v1/indexes/{_segment(index_id)}/duplicates", body)
        checks.duplicates_body(call.content)
        answer = yield replace(call, expect=UNSIZED)
        return checked.duplicates(answer, threshold, mode, min_cluster_size)

    def healthz(self) -> Operation:
        answer = yield _Call("GET", "/healthz")
        return document(answer.status, answer.content, schemas.HealthResponse)

    def readyz(self) -> Operation:
        answer = yield _Call("GET", "/readyz")
        return document(answer.status, answer.content, schemas.ReadyResponse)
