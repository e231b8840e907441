"""The clients with text (documents=, tokens=, weighted_tokens=) against a real server: the answers are the
library's, a near-duplicate search works end to end, and what the service refuses is refused before sending,
with the service's own field."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest
import scipy.sparse as sp
from featurehash import create_map
from featurehash.client import (
    AsyncFeatureHashClient,
    FeatureHashAPIError,
    FeatureHashClient,
)

INPUT = {"hashing": {"ngram_range": [3, 3], "weighting": "binary"}}
DOCUMENTS = ["the quick brown fox jumps over the lazy dog", "a quick brown fox jumped over two lazy dogs"]


class Recording(httpx.HTTPTransport):
    """A real transport that counts the requests sent."""

    def __init__(self):
        super().__init__()
        self.sent = []

    def handle_request(self, request):
        self.sent.append(request.url.path)
        return super().handle_request(request)


@pytest.fixture(scope="module")
def client(embedded_server):
    transport = Recording()
    with FeatureHashClient(embedded_server.url, transport=transport) as fh:
        fh.transport = transport
        yield fh


def test_near_duplicates_of_documents_through_the_client(client):
    rng = np.random.default_rng(11)
    documents = [" ".join(rng.choice([f"v{i}" for i in range(2000)], size=50)) for _ in range(120)]
    spec = client.create_map("gcws", None, 128, seed=21, input=INPUT)
    assert spec["input_dim"] == 2**30
    index = client.create_index(spec["id"], name="client-text", threshold=0.5)
    added = client.add_items(index["id"], [f"d{i}" for i in range(len(documents))], documents=documents,
                             batch_rows=50)
    assert added["items"] == len(documents)
    words = documents[42].split()
    words[10], words[30] = "changed", "words"
    found = client.query_index(index["id"], documents=[" ".join(words)], top_k=2)
    assert found["results"][0][0]["id"] == "d42"
    np.testing.assert_array_equal(client.hash(spec["id"], documents=DOCUMENTS), create_map(spec).hash(DOCUMENTS))


def test_sparse_features_and_kernels_of_text(client):
    spec = client.create_map("hashing", None, 512, seed=4)
    features = client.transform(spec["id"], documents=DOCUMENTS, dtype="float64")
    expected = create_map(spec).transform(DOCUMENTS, dtype=np.float64)
    assert sp.issparse(features) and features.shape == (2, 512)
    assert (features != expected).nnz == 0
    tokens = [document.split() for document in DOCUMENTS]
    answer = client.kernel(spec["id"], tokens=tokens, y_weighted_tokens=[{"fox": 1.0, "dog": 2.0}])
    np.testing.assert_allclose(answer.exact, create_map(spec).exact_kernel(tokens, [{"fox": 1.0, "dog": 2.0}]))


@pytest.mark.parametrize("call, field", [
    (lambda fh, ids: fh.transform(ids["hashing"], [[1.0]], documents=DOCUMENTS), "documents"),
    (lambda fh, ids: fh.transform(ids["hashing"], documents=DOCUMENTS, tokens=[["a"]]), "tokens"),
    (lambda fh, ids: fh.transform(ids["hashing"], weighted_tokens=[{"a": -1.0}]), "weighted_tokens[0]"),
    (lambda fh, ids: fh.transform(ids["hashing"], weighted_tokens=[{"a": float("nan")}]), "weighted_tokens[0]"),
    (lambda fh, ids: fh.transform(ids["plain"], documents=DOCUMENTS), "documents"),
    (lambda fh, ids: fh.transform(ids["hashing"], [[1.0]]), "vectors"),
    (lambda fh, ids: fh.hash(ids["hashing"], documents=DOCUMENTS), "method"),
    (lambda fh, ids: fh.kernel(ids["hashing"], documents=DOCUMENTS, y_documents=[3]), "y_documents[0]"),
])
def test_the_client_refuses_what_the_service_refuses_before_sending(client, call, field):
    ids = {"hashing": client.create_map("hashing", None, 64, seed=2)["id"],
           "plain": client.create_map("gcws", 4, 8, seed=2)["id"]}
    sent = len(client.transport.sent)
    with pytest.raises(FeatureHashAPIError) as refusal:
        call(client, ids)
    assert refusal.value.field == field and refusal.value.status == 422, refusal.value
    assert len(client.transport.sent) == sent


def test_an_empty_document_is_sent_and_answered_as_in_the_library(client):
    spec = client.create_map("hashing", None, 64, seed=2)
    documents = ["the quick brown fox", "", "  "]
    features = client.transform(spec["id"], documents=documents, dtype="float64")
    assert (features != create_map(spec).transform(documents, dtype=np.float64)).nnz == 0
    assert features[1].nnz == 0 and features[2].nnz == 0


def test_the_async_client_sends_text_too(embedded_server):
    async def run():
        async with AsyncFeatureHashClient(embedded_server.url) as fh:
            spec = await fh.create_map("hashing", None, 256, seed=8)
            return spec, await fh.transform(spec["id"], tokens=[["a", "b", "a"]])
    spec, features = asyncio.run(run())
    assert (features != create_map(spec).transform([["a", "b", "a"]])).nnz == 0
