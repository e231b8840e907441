"""params.empty_rows through HTTP and the client: a spec with the option is created like any other, and an
all-zero row (JSON, sparse or .npy) gets the explicit empty result: the zero feature vector (nrff "zero"), the
reserved code in every sample (gcws "code", also in band keys and an LSH index, where empty rows match each
other only). Without the option the row is refused (422 naming the row); a value the map has not is a 422
naming params.empty_rows. Never a 5xx. Uses the session's embedded server.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from featurehash import create_map
from featurehash.client import FeatureHashClient
from featurehash.maps.base import EMPTY_CODE
from service_support import NPY, load_npy, npy_bytes, sparse_rows

NRFF = {"method": "nrff", "input_dim": 5, "n_components": 32, "seed": 31, "params": {"empty_rows": "zero"}}
GCWS = {"method": "gcws", "input_dim": 5, "n_components": 16, "seed": 31, "params": {"empty_rows": "code"}}
X = np.array([[0.5, 1.0, 0.0, 2.0, 0.25], [0.0] * 5, [1.0, 0.0, 3.0, 0.5, 0.0], [0.0] * 5])
EMPTY, KEPT = [1, 3], [0, 2]


def _without_option(spec: dict) -> dict:
    return {**spec, "params": {}}


def test_dense_map_gives_an_all_zero_row_the_zero_vector(embedded_server):
    with embedded_server.client(timeout=60.0) as http:
        created = http.post("/v1/maps", json=NRFF)
        assert created.status_code == 201, created.text
        spec = created.json()
        assert spec["params"]["empty_rows"] == "zero" and spec["id"] == create_map(NRFF).spec.id
        plain = http.post("/v1/maps", json=_without_option(NRFF)).json()
        assert "empty_rows" not in plain["params"] and plain["id"] == create_map(_without_option(NRFF)).spec.id
        path = f"/v1/maps/{spec['id']}"

        by_json = http.post(f"{path}/transform", json={"vectors": X.tolist()})
        assert by_json.status_code == 200, by_json.text
        Z = np.array(by_json.json()["features"])
        assert not Z[EMPTY].any() and np.allclose(np.linalg.norm(Z[KEPT], axis=1), 1, atol=1e-5)
        by_sparse = http.post(f"{path}/transform", json={"sparse_vectors": sparse_rows(sp.csr_matrix(X))})
        by_npy = http.post(f"{path}/transform", content=npy_bytes(X), headers={"Content-Type": NPY, "Accept": NPY})
        assert by_sparse.status_code == by_npy.status_code == 200, (by_sparse.text, by_npy.text)
        sparse_Z = np.array(by_sparse.json()["features"])   # the sparse path: equal to float32 rounding
        assert not sparse_Z[EMPTY].any() and np.allclose(sparse_Z, Z, rtol=0, atol=1e-6)
        npy_Z = load_npy(by_npy.content)   # float64 rows in, float64 features out
        assert not npy_Z[EMPTY].any() and np.allclose(npy_Z, Z, rtol=0, atol=1e-6)
        kernel = http.post(f"{path}/kernel", json={"x": X.tolist(), "y": X.tolist()}).json()
        assert not np.array(kernel["estimate"])[EMPTY].any() and not np.array(kernel["exact"])[:, EMPTY].any()

        refused = http.post(f"/v1/maps/{plain['id']}/transform", json={"vectors": X.tolist()})
        assert refused.status_code == 422 and refused.json()["field"] == "vectors"
        assert "row(s) 1, 3" in refused.json()["detail"] and "empty_rows" in refused.json()["detail"]
        wrong = http.post("/v1/maps", json={**NRFF, "params": {"empty_rows": "code"}})
        assert wrong.status_code == 422 and wrong.json()["field"] == "params.empty_rows"


def test_gcws_gives_an_all_zero_row_the_reserved_code(embedded_server):
    with embedded_server.client(timeout=60.0) as http:
        spec = http.post("/v1/maps", json=GCWS).json()
        path = f"/v1/maps/{spec['id']}"
        hashed = http.post(f"{path}/hash", json={"vectors": X.tolist(), "bands": 4})
        assert hashed.status_code == 200, hashed.text
        codes, keys = np.array(hashed.json()["codes"]), hashed.json()["band_keys"]
        assert (codes[EMPTY] == EMPTY_CODE).all() and not (codes[KEPT] == EMPTY_CODE).any()
        np.testing.assert_array_equal(codes[KEPT], create_map(_without_option(GCWS)).hash(X[KEPT]))
        assert keys[1] == keys[3] and not set(keys[1]) & (set(keys[0]) | set(keys[2]))
        features = http.post(f"{path}/transform", json={"sparse_vectors": sparse_rows(sp.csr_matrix(X))})
        assert features.status_code == 200, features.text
        assert features.json()["indices"] == create_map(GCWS).transform(X).indices.tolist()

        # An index: empty rows are duplicates of each other (GMM(0, 0) = 1) and of nothing else.
        created = http.post("/v1/indexes", json={"map_id": spec["id"], "name": "empty-rows", "bands": 4, "rows": 4})
        assert created.status_code == 201, created.text
        added = http.post("/v1/indexes/empty-rows/items", json={"ids": ["a", "e1", "b", "e2"], "vectors": X.tolist()})
        assert added.status_code == 200, added.text
        found = http.post("/v1/indexes/empty-rows/query", json={"vectors": [[0.0] * 5, X[0].tolist()], "top_k": 4})
        assert found.status_code == 200, found.text
        empty_hits, real_hits = found.json()["results"]
        assert sorted(hit["id"] for hit in empty_hits) == ["e1", "e2"] and {hit["similarity"] for hit in empty_hits} == {1.0}
        assert "e1" not in {hit["id"] for hit in real_hits} and "e2" not in {hit["id"] for hit in real_hits}
        assert http.delete("/v1/indexes/empty-rows").status_code == 204


def test_the_client_sends_empty_rows_the_spec_allows(embedded_server):
    """The client checks a request with the map's own rules: the option lets the row through, as the service."""
    with FeatureHashClient(embedded_server.url) as client:
        spec = client.create_map(**{key: GCWS[key] for key in ("method", "input_dim", "n_components", "seed",
                                                               "params")})
        codes = client.hash(spec["id"], X)
        assert (codes[EMPTY] == EMPTY_CODE).all()
        dense = client.create_map(**{key: NRFF[key] for key in ("method", "input_dim", "n_components", "seed",
                                                                "params")})
        assert not client.transform(dense["id"], X)[EMPTY].any()
