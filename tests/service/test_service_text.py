"""Text over HTTP (issue 30): documents, token lists and weighted tokens wherever vectors are accepted, through a
real `featurehash serve` (the session's embedded server; the request-wide limits are checked on the decoder
itself, with small limits). The answers are the library's: the same spec
built here gives the same features, codes and kernels.

Must show: a near-duplicate search over documents end to end (a GCWS map over word 3-shingles, ~200 documents
in an index, an edited copy finds its original first)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from featurehash import create_map
from featurehash.maps import InputError
from featurehash.protocol.text_inputs import TextLimits, checked_text
from featurehash.service.config import Settings
from service_support import JSON, NPY

HASHING = {"method": "hashing", "n_components": 2**20, "seed": 3}
TEXT_GCWS = {"method": "gcws", "n_components": 128, "seed": 5,
             "input": {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}}
PLAIN_GCWS = {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 5}
DOCUMENTS = ["the quick brown fox jumps over the lazy dog", "a quick brown fox jumped over two lazy dogs",
             "completely unrelated words about tables and numbers"]


@pytest.fixture(scope="module")
def http(embedded_server):
    with embedded_server.client() as client:
        yield client


@pytest.fixture(scope="module")
def maps(http):
    created = {}
    for name, spec in (("hashing", HASHING), ("text_gcws", TEXT_GCWS), ("plain_gcws", PLAIN_GCWS)):
        response = http.post("/v1/maps", json=spec)
        assert response.status_code in (200, 201), response.text
        created[name] = response.json()
    return created


def refused(response, status: int, field: str) -> str:
    assert response.status_code == status, response.text
    assert response.json()["field"] == field, response.text
    return response.json()["detail"]


def corpus(n: int = 200, words: int = 60, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(3000)]
    return [" ".join(rng.choice(vocabulary, size=words)) for _ in range(n)]


def edited(document: str, changes: int, seed: int) -> str:
    words = document.split()
    rng = np.random.default_rng(seed)
    for position in rng.choice(len(words), size=changes, replace=False):
        words[position] = f"edit{position}"
    return " ".join(words)


def test_near_duplicate_search_over_documents(http, maps):
    documents = corpus()
    map_id = maps["text_gcws"]["id"]
    created = http.post("/v1/indexes", json={"map_id": map_id, "name": "text-near-dups", "threshold": 0.5})
    assert created.status_code == 201, created.text
    ids = [f"doc{i}" for i in range(len(documents))]
    added = http.post("/v1/indexes/text-near-dups/items", json={"ids": ids, "documents": documents})
    assert added.status_code == 200, added.text
    assert added.json()["items"] == len(documents)
    queries = [edited(documents[i], 3, seed=i) for i in (0, 57, 123, 199)]
    answer = http.post("/v1/indexes/text-near-dups/query", json={"documents": queries, "top_k": 3})
    assert answer.status_code == 200, answer.text
    for found, original in zip(answer.json()["results"], (0, 57, 123, 199)):
        assert found[0]["id"] == f"doc{original}"
        assert found[0]["similarity"] > 0.5
        assert all(other["similarity"] < 0.3 for other in found[1:])


def test_text_indexes_keep_sparse_vectors_not_dense_rows_of_2_30_columns(http, maps):
    map_id = maps["text_gcws"]["id"]
    refused(http.post("/v1/indexes", json={"map_id": map_id, "name": "text-dense", "vectors": "float32"}),
            422, "vectors")
    created = http.post("/v1/indexes", json={"map_id": map_id, "name": "text-sparse", "vectors": "sparse",
                                             "threshold": 0.5})
    assert created.status_code == 201 and created.json()["ranking"] == "exact", created.text
    documents = corpus(20, seed=9)
    assert http.post("/v1/indexes/text-sparse/items", json={"ids": [str(i) for i in range(20)],
                                                           "documents": documents}).status_code == 200
    found = http.post("/v1/indexes/text-sparse/query", json={"documents": [edited(documents[5], 2, 1)]}).json()
    assert found["results"][0][0]["id"] == "5"


def test_hashing_features_are_the_librarys_as_sparse_json(http, maps):
    feature_map = create_map(maps["hashing"])
    expected = feature_map.transform(DOCUMENTS, dtype=np.float64)
    response = http.post(f"/v1/maps/{maps['hashing']['id']}/transform?dtype=float64", json={"documents": DOCUMENTS})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["dim"] == HASHING["n_components"]
    for row, (indices, values) in enumerate(zip(body["indices"], body["values"])):
        assert indices == expected[row].indices.tolist()
        np.testing.assert_array_equal(values, expected[row].data)
    tokens = [document.split() for document in DOCUMENTS]
    by_tokens = http.post(f"/v1/maps/{maps['hashing']['id']}/transform", json={"tokens": tokens}).json()
    assert by_tokens["indices"][0] == feature_map.transform(tokens)[0].indices.tolist()
    npy = http.post(f"/v1/maps/{maps['hashing']['id']}/transform", json={"documents": DOCUMENTS},
                    headers={"Accept": NPY})
    assert "sparse" in refused(npy, 406, "accept")


def test_a_large_sparse_answer_streams_the_same_bytes(http, maps):
    """Past SPARSE_INLINE_NONZEROS (65536) the features stream, chunk by chunk: the same document."""
    rng = np.random.default_rng(3)
    documents = [" ".join(f"t{i}" for i in rng.integers(0, 10**7, size=4000)) for _ in range(20)]
    response = http.post(f"/v1/maps/{maps['hashing']['id']}/transform", json={"documents": documents})
    assert response.status_code == 200 and response.headers.get("transfer-encoding") == "chunked", response.text[:200]
    body = response.json()
    feature_map = create_map(maps["hashing"])
    expected = feature_map.transform(documents)
    assert sum(map(len, body["indices"])) == expected.nnz > 65536
    assert body["indices"][19] == expected[19].indices.tolist()
    np.testing.assert_array_equal(np.asarray(body["values"][7], dtype=np.float32), expected[7].data)


def test_codes_and_kernels_of_text_are_the_librarys(http, maps):
    gcws = create_map(maps["text_gcws"])
    codes = http.post(f"/v1/maps/{maps['text_gcws']['id']}/hash", json={"documents": DOCUMENTS})
    assert codes.status_code == 200, codes.text
    np.testing.assert_array_equal(codes.json()["codes"], gcws.hash(DOCUMENTS))
    hashing = create_map(maps["hashing"])
    weighted = [{"fox": 2.0, "dog": 1.0}, {"fox": 1.0, "cat": 3.0}]
    kernel = http.post(f"/v1/maps/{maps['hashing']['id']}/kernel",
                       json={"x_documents": DOCUMENTS[:2], "y_weighted_tokens": weighted})
    assert kernel.status_code == 200, kernel.text
    np.testing.assert_allclose(kernel.json()["exact"], hashing.exact_kernel(DOCUMENTS[:2], weighted), rtol=1e-12)
    np.testing.assert_allclose(kernel.json()["estimate"], hashing.kernel(DOCUMENTS[:2], weighted), rtol=1e-6)
    same = http.post(f"/v1/maps/{maps['text_gcws']['id']}/kernel", json={"x_documents": DOCUMENTS})
    assert same.status_code == 200, same.text
    assert np.allclose(np.diag(same.json()["exact"]), 1.0)


def test_one_input_kind_and_the_map_that_reads_it(http, maps):
    hashing, plain = maps["hashing"]["id"], maps["plain_gcws"]["id"]
    both = http.post(f"/v1/maps/{hashing}/transform", json={"documents": DOCUMENTS, "tokens": [["a"]]})
    assert "'documents', 'tokens'" in refused(both, 422, "tokens")
    assert "'x', 'x_documents'" in refused(
        http.post(f"/v1/maps/{hashing}/kernel", json={"x": [[1.0]], "x_documents": DOCUMENTS}), 422, "x_documents")
    assert "no text front stage" in refused(
        http.post(f"/v1/maps/{plain}/transform", json={"documents": DOCUMENTS}), 422, "documents")
    assert "takes text" in refused(http.post(f"/v1/maps/{hashing}/transform", json={"vectors": [[1.0]]}),
                                   422, "vectors")
    assert "no discrete codes" in refused(http.post(f"/v1/maps/{hashing}/hash", json={"documents": DOCUMENTS}),
                                          422, "method")
    refused(http.post(f"/v1/maps/{hashing}/transform", json={}), 422, "vectors")


@pytest.mark.parametrize("body, field", [
    ({"documents": ["fine", 3]}, "documents[1]"),
    ({"documents": []}, "documents"),
    ({"tokens": [["a", 1]]}, "tokens[0]"),
    ({"weighted_tokens": [{"a": 1.0}, {"b": -0.5}]}, "weighted_tokens[1]"),
    ({"weighted_tokens": [{"a": True}]}, "weighted_tokens[0]"),
    ({"documents": ["x" * (Settings().max_document_chars + 1)]}, "documents[0]"),
])
def test_bad_text_is_refused_naming_the_row_or_the_limit(http, maps, body, field):
    refused(http.post(f"/v1/maps/{maps['text_gcws']['id']}/transform", json=body), 422, field)


@pytest.mark.parametrize("rows, kind, field, limit", [
    (["word " * 100] * 10, "documents", "documents", "FEATUREHASH_MAX_REQUEST_CHARS"),
    ([["t"] * 100] * 11, "tokens", "tokens", "FEATUREHASH_MAX_REQUEST_TOKENS"),
    ([{"t": 1.0}] * 1001, "weighted_tokens", "weighted_tokens", "FEATUREHASH_MAX_REQUEST_TOKENS"),
    (["x" * 1001], "documents", "documents[0]", "FEATUREHASH_MAX_DOCUMENT_CHARS"),
])
def test_request_limits_count_characters_and_tokens(rows, kind, field, limit):
    limits = TextLimits(max_document_chars=1000, max_request_chars=4000, max_request_tokens=1000)
    with pytest.raises(InputError) as refusal:
        checked_text(rows, kind, field.split("[")[0], limits)
    assert refusal.value.field == field and limit in str(refusal.value)
    fitting = [rows[0][:1000]] if "[" in field else rows[:1]
    assert checked_text(fitting, kind, field.split("[")[0], limits)[1] > 0


def test_non_finite_weights_and_bodies_that_are_not_utf8(http, maps):
    url = f"/v1/maps/{maps['hashing']['id']}/transform"
    for weight in ("NaN", "Infinity", "1e999"):
        body = '{"weighted_tokens": [{"a": ' + weight + '}]}'
        assert "finite" in refused(http.post(url, content=body, headers={"Content-Type": JSON}), 422,
                                   "weighted_tokens[0]")
    not_utf8 = b'{"documents": ["caf\xe9"]}'
    refused(http.post(url, content=not_utf8, headers={"Content-Type": JSON}), 422, "body")
    lone = '{"documents": ["a\\ud800b"]}'
    assert http.post(url, content=lone, headers={"Content-Type": JSON}).status_code == 422


def test_a_text_map_over_text_and_all_zero_rows(http, maps):
    """A document with no word 3-shingle is an all-zero row, which GCWS refuses naming the field."""
    response = http.post(f"/v1/maps/{maps['text_gcws']['id']}/hash", json={"documents": ["two words"]})
    assert response.status_code == 422 and response.json()["field"].startswith("documents"), response.text


@pytest.mark.parametrize("body", [{"documents": ["the quick brown fox", "  "]}, {"documents": ["the quick brown fox", ""]},
                                  {"tokens": [["the", "quick", "brown"], []]},
                                  {"weighted_tokens": [{"the quick brown": 1.0}, {}]}])
def test_an_empty_document_is_the_all_zero_row_the_map_decides_about(http, maps, body):
    """An empty document, token list or weighted-token row is the all-zero row, as in the library: the hashing
    map gives it no features, a GCWS text map refuses it naming the row unless its spec asks for the empty
    code (`input.empty: "code"`), whose codes are then the library's."""
    hashing = http.post(f"/v1/maps/{maps['hashing']['id']}/transform", json=body)
    assert hashing.status_code == 200, hashing.text
    indices = hashing.json()["indices"]
    assert indices[1] == [] and indices[0]
    detail = refused(http.post(f"/v1/maps/{maps['text_gcws']['id']}/hash", json=body), 422,
                     next(iter(body)))
    assert "row(s) 1" in detail and "empty" in detail
    spec = {**TEXT_GCWS, "input": {**TEXT_GCWS["input"], "empty": "code"}}
    created = http.post("/v1/maps", json=spec)
    assert created.status_code in (200, 201), created.text
    answer = http.post(f"/v1/maps/{created.json()['id']}/hash", json=body)
    assert answer.status_code == 200, answer.text
    expected = create_map(spec).hash([["the", "quick", "brown"], []] if "tokens" in body else
                                     [{"the quick brown": 1.0}, {}] if "weighted_tokens" in body else body["documents"])
    assert np.array_equal(np.asarray(answer.json()["codes"], dtype=np.int64), expected)


def test_create_map_takes_the_input_stage_and_hashing(http):
    again = http.post("/v1/maps", json=TEXT_GCWS)
    assert again.status_code == 200, again.text
    spec = again.json()
    assert spec["input"]["hashing"]["ngram_range"] == [3, 3] and spec["input_dim"] == 2**30
    assert http.post("/v1/maps", json=spec).json()["id"] == spec["id"]
    hashing = http.post("/v1/maps", json={"method": "hashing", "n_components": 64}).json()
    assert hashing["features"] == "sparse" and hashing["input_dim"] == 1
    refused(http.post("/v1/maps", json={"method": "rff", "n_components": 8, "input": {"hashing": {}}}),
            422, "input_dim")
    refused(http.post("/v1/maps", json={**TEXT_GCWS, "input": {"hashing": {"norm": "bogus"}}}), 422,
            "input.hashing.norm")


def test_the_openapi_examples_cover_text(http):
    schema = http.get("/openapi.json").json()
    create = schema["paths"]["/v1/maps"]["post"]["requestBody"]["content"]["application/json"]["examples"]
    assert {"hashing", "gcws over text"} <= set(create)
    for name in ("VectorsRequest", "KernelRequest", "AddItemsRequest", "IndexQueryRequest"):
        properties = schema["components"]["schemas"][name]["properties"]
        assert {"documents", "tokens", "weighted_tokens"} <= set(properties) or "x_documents" in properties


def test_text_work_is_priced_by_its_characters():
    """The hashing formula (z = characters) bounds a text request before any analysis."""
    from featurehash.maps.text.stage import build  # noqa: F401  (the stage the map carries)
    from featurehash.service.api.state import ServiceState

    state = ServiceState(Settings(request_work_seconds=0.01), None, None, None, None)
    feature_map = create_map(TEXT_GCWS)
    seconds = state.check_text_work(feature_map, 10, 10_000, "documents")
    assert 0 < seconds < 0.01
    with pytest.raises(InputError) as refusal:
        state.check_text_work(feature_map, 10, 10_000_000, "documents")
    assert refusal.value.field == "documents" and "FEATUREHASH_REQUEST_WORK_SECONDS" in str(refusal.value)
    assert math.isclose(state.check_text_work(create_map(HASHING), 1, 1000, "x", multiplier=2.0),
                        2 * state.check_text_work(create_map(HASHING), 1, 1000, "x"))
    assert json.dumps(seconds)


def test_minhash_over_documents_hashes_bands_and_indexes_as_the_library(http):
    """The set method over HTTP: codes and band keys of documents are the library's, and an index keeping sparse
    vectors re-ranks by the exact Jaccard of the documents' shingle sets."""
    from featurehash.lsh.banding import band_keys

    spec = {"method": "minhash", "n_components": 64, "seed": 6, "input": {"hashing": {"ngram_range": [3, 3]}}}
    created = http.post("/v1/maps", json=spec)
    assert created.status_code in (200, 201), created.text
    described, library = created.json(), create_map(spec)
    assert described["id"] == library.spec.id and described["has_hash"]
    documents = corpus(60, seed=11)
    hashed = http.post(f"/v1/maps/{described['id']}/hash", json={"documents": documents[:10], "bands": 8})
    assert hashed.status_code == 200, hashed.text
    codes = np.asarray(hashed.json()["codes"])
    np.testing.assert_array_equal(codes, library.hash(documents[:10]))
    assert hashed.json()["band_keys"] == band_keys(codes, 8).tolist()
    made = http.post("/v1/indexes", json={"map_id": described["id"], "name": "text-minhash", "vectors": "sparse",
                                          "threshold": 0.5})
    assert made.status_code == 201 and made.json()["ranking"] == "exact", made.text
    assert http.post("/v1/indexes/text-minhash/items", json={"ids": [str(i) for i in range(60)],
                                                            "documents": documents}).status_code == 200
    query = edited(documents[17], 3, seed=2)
    found = http.post("/v1/indexes/text-minhash/query", json={"documents": [query], "top_k": 2}).json()
    best = found["results"][0][0]
    assert best["id"] == "17"
    assert best["similarity"] == pytest.approx(library.exact_kernel([query], [documents[17]])[0, 0], abs=1e-12)
    assert http.delete("/v1/indexes/text-minhash").status_code == 204
