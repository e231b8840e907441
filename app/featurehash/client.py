"""A small Python client for the featurehash service (httpx), speaking JSON and .npy.

    with FeatureHashClient("http://127.0.0.1:8000") as client:
        spec = client.create_map("rff", input_dim=64, n_components=1024, params={"gamma": 0.1})
        Z = client.transform(spec["id"], X, binary=True)
        client.create_index(gcws_map_id, name="docs", threshold=0.7)    # LSH index in Redis
        client.add_items("docs", ids, X); client.query_index("docs", Q, top_k=10)["results"]
"""

from __future__ import annotations

import io
import json
from typing import Any, Iterator
from urllib.parse import quote

import httpx
import numpy as np
import orjson
import scipy.sparse as sp

from .maps import OneHotFeatures

NPY = "application/x-npy"
ITEM_IDS_HEADER_BYTES = 8192  # ids of an .npy add travel in a header; servers cap headers near 16 KiB


class FeatureHashAPIError(Exception):
    """A non-2xx answer: `status`, the offending `field` (when given) and the `detail`."""

    def __init__(self, status: int, detail: str, field: str | None = None, retry_after: str | None = None):
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.field = field
        self.retry_after = retry_after


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def _segment(value: str) -> str:
    """`value` as exactly one URL path segment: percent-encoded, and never a dot segment, which HTTP
    clients and proxies remove together with the segment before it (".../items/.." is the index)."""
    if value in ("", ".", ".."):
        raise ValueError(f"{value!r} cannot be a URL path segment")
    return quote(value, safe="")


def _rows_field(X, key: str) -> dict[str, Any]:
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        return {f"sparse_{key}": [
            {"indices": X.indices[X.indptr[r]:X.indptr[r + 1]].tolist(),
             "values": X.data[X.indptr[r]:X.indptr[r + 1]].tolist()} for r in range(X.shape[0])]}
    return {key: np.asarray(X)}


class FeatureHashClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0,
                 transport: httpx.BaseTransport | None = None):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> "FeatureHashClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    # -- plumbing ------------------------------------------------------------------

    def _request(self, method: str, path: str, *, json: Any = None, content: bytes | None = None,
                 headers: dict[str, str] | None = None, params: dict[str, Any] | None = None) -> httpx.Response:
        headers = dict(headers or {})
        if json is not None:
            content = orjson.dumps(json, option=orjson.OPT_SERIALIZE_NUMPY)
            headers.setdefault("Content-Type", "application/json")
        response = self.http.request(method, path, content=content, headers=headers, params=params)
        if response.status_code >= 400:
            try:
                body = response.json()
                detail, field = body.get("detail", response.text), body.get("field")
            except ValueError:
                detail, field = response.text, None
            raise FeatureHashAPIError(response.status_code, str(detail), field, response.headers.get("Retry-After"))
        return response

    def _vectors_request(self, path: str, X, key: str, binary: bool, extra: dict | None = None,
                         params: dict | None = None) -> httpx.Response:
        if binary and not sp.issparse(X) and not extra:
            return self._request("POST", path, content=_npy_bytes(np.asarray(X)), params=params,
                                 headers={"Content-Type": NPY, "Accept": NPY})
        headers = {"Accept": NPY} if binary else None
        return self._request("POST", path, json={**_rows_field(X, key), **(extra or {})}, headers=headers,
                             params=params)

    @staticmethod
    def _load_npy(response: httpx.Response) -> np.ndarray:
        return np.load(io.BytesIO(response.content), allow_pickle=False)

    # -- maps ----------------------------------------------------------------------

    def create_map(self, method: str, input_dim: int, n_components: int, *, seed: int | None = None,
                   params: dict[str, Any] | None = None) -> dict[str, Any]:
        body = {"method": method, "input_dim": input_dim, "n_components": n_components}
        if seed is not None:
            body["seed"] = seed
        if params is not None:
            body["params"] = params
        return self._request("POST", "/v1/maps", json=body).json()

    def get_map(self, map_id: str) -> dict[str, Any]:
        return self._request("GET", f"/v1/maps/{_segment(map_id)}").json()

    def list_maps(self, *, after: str | None = None, limit: int = 100) -> dict[str, Any]:
        params = {"limit": limit, **({"after": after} if after else {})}
        return self._request("GET", "/v1/maps", params=params).json()

    def iter_maps(self, page_size: int = 100) -> Iterator[dict[str, Any]]:
        after = None
        while True:
            page = self.list_maps(after=after, limit=page_size)
            yield from page["maps"]
            after = page["next"]
            if after is None:
                return

    def delete_map(self, map_id: str) -> None:
        self._request("DELETE", f"/v1/maps/{_segment(map_id)}")

    # -- features ------------------------------------------------------------------

    def transform(self, map_id: str, X, *, binary: bool = False, dtype: str = "float32"):
        """Dense features as an ndarray, or OneHotFeatures for one-hot maps (GCWS)."""
        response = self._vectors_request(f"/v1/maps/{_segment(map_id)}/transform", X, "vectors", binary,
                                         params={"dtype": dtype})
        if response.headers.get("content-type", "").startswith(NPY):
            array = self._load_npy(response)
            if "X-Feature-Dim" in response.headers:
                return OneHotFeatures(array, float(response.headers["X-Feature-Scale"]),
                                      int(response.headers["X-Feature-Dim"]))
            return array
        body = orjson.loads(response.content)
        if "indices" in body:
            return OneHotFeatures(np.asarray(body["indices"], dtype=np.int64), body["scale"], body["dim"])
        return np.asarray(body["features"], dtype=np.float64 if dtype == "float64" else np.float32)

    def hash(self, map_id: str, X, *, bands: int | None = None, binary: bool = False):
        """Codes (int64 n x k); with `bands`, a tuple (codes, band_keys)."""
        extra = {"bands": bands} if bands is not None else None
        response = self._vectors_request(f"/v1/maps/{_segment(map_id)}/hash", X, "vectors", binary, extra)
        if response.headers.get("content-type", "").startswith(NPY):
            return self._load_npy(response)
        body = orjson.loads(response.content)
        codes = np.asarray(body["codes"], dtype=np.int64)
        return (codes, body["band_keys"]) if bands is not None else codes

    def kernel(self, map_id: str, X, Y=None) -> tuple[np.ndarray, np.ndarray]:
        """(estimate, exact) kernel matrices between the rows of X and Y (Y defaults to X)."""
        body = _rows_field(X, "x")
        if Y is not None:
            body.update(_rows_field(Y, "y"))
        answer = self._request("POST", f"/v1/maps/{_segment(map_id)}/kernel", json=body).json()
        return np.asarray(answer["estimate"]), np.asarray(answer["exact"])

    # -- LSH indexes -----------------------------------------------------------------

    def create_index(self, map_id: str, *, name: str | None = None, bands: int | None = None,
                     rows: int | None = None, threshold: float | None = None,
                     recall_at_threshold: float | None = None) -> dict[str, Any]:
        """The index (chosen bands and rows included); an existing one of that name if it matches."""
        options = {"name": name, "bands": bands, "rows": rows, "threshold": threshold,
                   "recall_at_threshold": recall_at_threshold}
        body = {"map_id": map_id, **{key: value for key, value in options.items() if value is not None}}
        return self._request("POST", "/v1/indexes", json=body).json()

    def get_index(self, index_id: str) -> dict[str, Any]:
        return self._request("GET", f"/v1/indexes/{_segment(index_id)}").json()

    def list_indexes(self, *, after: str | None = None, limit: int = 100) -> dict[str, Any]:
        params = {"limit": limit, **({"after": after} if after else {})}
        return self._request("GET", "/v1/indexes", params=params).json()

    def delete_index(self, index_id: str) -> None:
        self._request("DELETE", f"/v1/indexes/{_segment(index_id)}")

    def add_items(self, index_id: str, ids: list[str], X, *, binary: bool = False,
                  batch_rows: int = 1000) -> dict[str, int]:
        """Add or replace items, `batch_rows` per request (fewer with binary, whose ids ride in a
        header); returns the summed "added" and "replaced" and the final "items"."""
        total = {"added": 0, "replaced": 0, "items": 0}
        path = f"/v1/indexes/{_segment(index_id)}/items"
        start = 0
        while start < len(ids):
            stop = min(len(ids), start + batch_rows)
            if binary and not sp.issparse(X):
                header = json.dumps(ids[start:stop])  # ASCII (\u escapes), as headers must be
                while len(header) > ITEM_IDS_HEADER_BYTES and stop - start > 1:
                    stop = start + (stop - start) // 2
                    header = json.dumps(ids[start:stop])
                response = self._request("POST", path, content=_npy_bytes(np.asarray(X[start:stop])),
                                         headers={"Content-Type": NPY, "X-Item-Ids": header})
            else:
                response = self._request("POST", path, json={"ids": ids[start:stop],
                                                             **_rows_field(X[start:stop], "vectors")})
            answer = response.json()
            total = {"added": total["added"] + answer["added"], "replaced": total["replaced"] + answer["replaced"],
                     "items": answer["items"]}
            start = stop
        return total

    def delete_item(self, index_id: str, item_id: str) -> None:
        """Remove one item (FeatureHashAPIError 404 if it is not there)."""
        self._request("DELETE", f"/v1/indexes/{_segment(index_id)}/items/{_segment(item_id)}")

    def delete_items(self, index_id: str, ids: list[str]) -> dict[str, Any]:
        """Remove items by id, in the body (so any id works): {"removed": n, "missing": [ids not there]}."""
        return self._request("POST", f"/v1/indexes/{_segment(index_id)}/items/delete", json={"ids": ids}).json()

    def query_index(self, index_id: str, X, *, top_k: int = 10, min_similarity: float = 0.0,
                    binary: bool = False) -> dict[str, Any]:
        """{"results": [[{"id", "similarity"}, ...] per row of X], "candidates": [...]}."""
        path = f"/v1/indexes/{_segment(index_id)}/query"
        if binary and not sp.issparse(X):
            response = self._request("POST", path, content=_npy_bytes(np.asarray(X)), headers={"Content-Type": NPY},
                                     params={"top_k": top_k, "min_similarity": min_similarity})
        else:
            response = self._request("POST", path, json={**_rows_field(X, "vectors"), "top_k": top_k,
                                                         "min_similarity": min_similarity})
        return orjson.loads(response.content)

    # -- LSH indexes: exact re-ranking and target recall (issue 17) --------------------

    def create_index_with(self, map_id: str, **fields: Any) -> dict[str, Any]:
        """create_index with any field of POST /v1/indexes, e.g. vectors="float32", forest_rows=[3, 2]."""
        body = {"map_id": map_id, **{key: value for key, value in fields.items() if value is not None}}
        return self._request("POST", "/v1/indexes", json=body).json()

    def query_index_for_recall(self, index_id: str, X, *, target_recall: float, top_k: int = 10,
                               min_similarity: float = 0.0, binary: bool = False) -> dict[str, Any]:
        """query_index widened until the S-curve gives target_recall; adds "estimated_recall" and
        "rows_probed" per row of X."""
        path = f"/v1/indexes/{_segment(index_id)}/query"
        options = {"top_k": top_k, "min_similarity": min_similarity, "target_recall": target_recall}
        if binary and not sp.issparse(X):
            response = self._request("POST", path, content=_npy_bytes(np.asarray(X)), headers={"Content-Type": NPY},
                                     params=options)
        else:
            response = self._request("POST", path, json={**_rows_field(X, "vectors"), **options})
        return orjson.loads(response.content)

    # -- health --------------------------------------------------------------------

    def healthz(self) -> dict[str, Any]:
        return self._request("GET", "/healthz").json()

    def readyz(self) -> dict[str, Any]:
        return self._request("GET", "/readyz").json()
