"""featurehash.client: retries and backoff (against httpx mock transports: no sleeping, no server), the
wire format it picks, and the async client against a real server."""

from __future__ import annotations

import asyncio
import io
import json

import httpx
import numpy as np
import pytest
import scipy.sparse as sp

from featurehash import create_map
from featurehash.client import (AsyncFeatureHashClient, FeatureHashAPIError, FeatureHashClient, KernelAnswer,
                                RetryPolicy)
from featurehash.npy.answer import NpyAnswer
from service_support import NPY, sparse_rows

SPEC = {"id": "rff-v1-x", "method": "rff", "input_dim": 2, "n_components": 4, "output_dim": 4, "seed": 1,
        "params": {}, "format_version": 1, "features": "dense", "has_hash": False}


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


class Script:
    """A mock server answering from a list of responses (or exceptions), recording the requests."""

    def __init__(self, *answers):
        self.answers, self.requests = list(answers), []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _unavailable(retry_after: str = "2") -> httpx.Response:
    return httpx.Response(503, json={"detail": "store: Redis is unreachable", "field": "store"},
                          headers={"Retry-After": retry_after})


def _sync(script: Script, sleeps: list, **kwargs) -> FeatureHashClient:
    return FeatureHashClient("http://fh", transport=httpx.MockTransport(script), sleep=sleeps.append, **kwargs)


def test_503_is_retried_after_retry_after_then_succeeds():
    script, sleeps = Script(_unavailable("2"), _unavailable("0"), httpx.Response(200, json=SPEC)), []
    with _sync(script, sleeps, retry=RetryPolicy(attempts=4, backoff=0.25)) as client:
        assert client.get_map("rff-v1-x") == SPEC
    assert sleeps == [2.0, 0.5]  # Retry-After when longer than the backoff, else the backoff (0.25 * 2**n)
    assert len(script.requests) == 3


def test_a_full_store_or_a_shed_load_is_retried_only_with_retry_after():
    full = httpx.Response(507, json={"detail": "store: Redis is out of memory", "field": "store"},
                          headers={"Retry-After": "1"})
    shed = httpx.Response(503, json={"detail": "load: busy", "field": "load"}, headers={"Retry-After": "1"})
    script, sleeps = Script(full, shed, httpx.Response(200, json=SPEC)), []
    with _sync(script, sleeps, retry=RetryPolicy(attempts=4, backoff=0.25)) as client:
        assert client.get_map("rff-v1-x") == SPEC
    assert sleeps == [1.0, 1.0]
    script, sleeps = Script(httpx.Response(507, json={"detail": "store: full", "field": "store"})), []
    with _sync(script, sleeps) as client, pytest.raises(FeatureHashAPIError) as err:
        client.get_map("rff-v1-x")
    assert err.value.status == 507 and not sleeps


def test_retries_give_up_with_the_last_error():
    script, sleeps = Script(*[_unavailable("1")] * 3), []
    with _sync(script, sleeps, retry=RetryPolicy(attempts=3)) as client, pytest.raises(FeatureHashAPIError) as err:
        client.healthz()
    assert (err.value.status, err.value.field, err.value.retry_after) == (503, "store", "1")
    assert len(sleeps) == 2


def test_connection_errors_are_retried_and_client_errors_are_not():
    script, sleeps = Script(httpx.ConnectError("refused"), httpx.ReadError("reset"),
                            httpx.Response(200, json={"status": "ok"}),
                            httpx.Response(422, json={"detail": "vectors: bad", "field": "vectors"})), []
    with _sync(script, sleeps) as client:
        assert client.healthz() == {"status": "ok"}
        with pytest.raises(FeatureHashAPIError) as err:
            client.transform("m", np.ones((1, 2)))
    assert err.value.field == "vectors" and len(sleeps) == 2 and not script.answers


def test_batches_go_as_npy_by_default_and_paths_are_percent_encoded():
    features = np.arange(8, dtype=np.float32).reshape(2, 4)
    script = Script(httpx.Response(200, content=_npy(features), headers={"Content-Type": NPY}),
                    httpx.Response(200, json={"estimate": [[1.0]], "exact": [[1.0]]}), httpx.Response(204))
    with _sync(script, []) as client:
        np.testing.assert_array_equal(client.transform("a b/c", np.ones((2, 2))), features)
        assert isinstance(client.kernel("m", np.ones((1, 2))), KernelAnswer)
        client.delete_item("idx", "x?y#%")
    transform, kernel, delete = script.requests
    assert transform.url.raw_path == b"/v1/maps/a%20b%2Fc/transform?dtype=float32"
    assert transform.headers["Content-Type"] == NPY and transform.headers["Accept"] == NPY
    assert np.load(io.BytesIO(transform.content)).shape == (2, 2)
    assert kernel.headers["Content-Type"] == NPY
    assert delete.url.raw_path == b"/v1/indexes/idx/items/x%3Fy%23%25"


def test_async_client_retries_too():
    script, sleeps = Script(_unavailable("1"), httpx.Response(200, json=SPEC)), []

    async def sleep(seconds):
        sleeps.append(seconds)

    async def run():
        async with AsyncFeatureHashClient("http://fh", transport=httpx.MockTransport(script), sleep=sleep) as client:
            return await client.get_map("rff-v1-x")

    assert asyncio.run(run()) == SPEC and sleeps == [1.0]


def test_async_client_answers_like_the_sync_client(embedded_server):
    X = np.random.default_rng(4).random((6, 6))

    async def run():
        async with AsyncFeatureHashClient(embedded_server.url) as client:
            spec = await client.create_map("gcws", 6, 16, seed=404, params={"bits": 2})
            index = await client.create_index(spec["id"], name="async-client", bands=4, rows=4)
            await client.add_items(index["id"], [f"a{i}" for i in range(6)], X)
            return (spec, await client.transform(spec["id"], X), await client.hash(spec["id"], X),
                    await client.query_index(index["id"], X, top_k=1), [s async for s in client.iter_maps()])

    spec, features, codes, found, listed = asyncio.run(run())
    with FeatureHashClient(embedded_server.url) as client:
        assert client.get_map(spec["id"]) == spec and spec in listed
        np.testing.assert_array_equal(features.indices, client.transform(spec["id"], X).indices)
        np.testing.assert_array_equal(codes, client.hash(spec["id"], X, binary=False))
        assert found == client.query_index("async-client", X, top_k=1, binary=False)
        assert [row[0]["id"] for row in found["results"]] == [f"a{i}" for i in range(6)]
        client.delete_index("async-client")


def test_create_map_takes_the_spec_as_the_library_does_sync_and_async(embedded_server):
    """A spec dict (as featurehash.create_map takes it), a featurehash.maps.MapSpec, a resolved spec posted
    back and the keyword form make the one map the library makes; a spec given both ways is a TypeError."""
    spec = {"method": "rff", "input_dim": 3, "n_components": 4, "seed": 31, "params": {"gamma": 0.5}}
    library = create_map(spec).spec

    async def run():
        async with AsyncFeatureHashClient(embedded_server.url) as client:
            return [await client.create_map(spec), await client.create_map(library)]

    with FeatureHashClient(embedded_server.url) as client:
        made = [client.create_map(spec), client.create_map(library), client.create_map("rff", 3, 4, seed=31,
                                                                                        params={"gamma": 0.5})]
        made.append(client.create_map(made[0]))
        made += asyncio.run(run())
        with pytest.raises(TypeError, match="input_dim"):
            client.create_map(spec, input_dim=3)
        with pytest.raises(TypeError, match="twice"):
            client.create_map("rff", method="rff", input_dim=3, n_components=4)
    assert all(answer == made[0] for answer in made) and made[0]["id"] == library.id
    assert made[0]["params"] == library.params


def test_query_items_and_duplicates_sync_and_async(embedded_server):
    X = np.random.default_rng(5).random((6, 6)) ** 4 + 0.01
    X = np.vstack([X, X[:1] * 1.01])  # a6: a near copy of a0
    ids = [f"a{i}" for i in range(7)]

    async def run():
        async with AsyncFeatureHashClient(embedded_server.url) as client:
            spec = await client.create_map("gcws", 6, 64, seed=405)
            index = await client.create_index(spec["id"], name="client-dup", threshold=0.9, vectors="float32")
            await client.add_items(index["id"], ids, X)
            return await client.query_items("client-dup", ["a0", "a6"], top_k=2), await client.duplicates("client-dup")

    found, clusters = asyncio.run(run())
    with FeatureHashClient(embedded_server.url) as client:
        assert found == client.query_items("client-dup", ("a0", "a6"), top_k=2)
        assert [row[0]["id"] for row in found["results"]] == ["a6", "a0"]
        assert clusters == client.duplicates("client-dup", 0.9, mode="components", min_cluster_size=2)
        assert clusters["clusters"] == [{"representative": "a0", "members": ["a0", "a6"]}]
        assert clusters["verify"] == "exact" and clusters["threshold"] == 0.9
        with pytest.raises(FeatureHashAPIError) as missing:
            client.query_items("client-dup", ["a0", "nope"])
        assert (missing.value.status, missing.value.field) == (404, "item_id") and "nope" in missing.value.detail
        client.delete_index("client-dup")


# -- .npy answers are read straight into their array ---------------------------------------------------------

@pytest.mark.parametrize("array", [
    np.random.default_rng(1).standard_normal((37, 5)).astype(np.float32),
    np.asfortranarray(np.random.default_rng(2).standard_normal((6, 4))),
    np.random.default_rng(3).standard_normal((3, 4)).astype(">f8"),
    np.zeros((0, 7)),
    np.arange(12, dtype=np.int64).reshape(3, 4),
])
@pytest.mark.parametrize("piece", [1, 7, 1 << 20])
def test_npy_answers_arrive_in_any_pieces(array, piece):
    raw = _npy(array)
    answer = NpyAnswer()
    for start in range(0, len(raw), piece):
        answer.add(raw[start:start + piece])
    got = answer.array()
    assert got.dtype == array.dtype and got.shape == array.shape and got.flags.f_contiguous == array.flags.f_contiguous
    np.testing.assert_array_equal(got, array)


def test_npy_answers_that_are_cut_too_long_or_objects_are_refused():
    raw = _npy(np.ones((4, 3)))
    cut = NpyAnswer()
    cut.add(raw[:-1])
    with pytest.raises(ValueError, match="ended"):
        cut.array()
    with pytest.raises(ValueError, match="more than"):
        NpyAnswer().add(raw + b"x")
    objects = io.BytesIO()
    np.save(objects, np.array([1, None], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="objects"):
        NpyAnswer().add(objects.getvalue())
    with pytest.raises(ValueError, match="magic"):
        NpyAnswer().add(b"not an npy file")


def test_transform_reads_a_streamed_npy_answer_into_its_array():
    features = np.random.default_rng(4).standard_normal((300, 4)).astype(np.float32)
    script = Script(httpx.Response(200, headers={"Content-Type": NPY},
                                   stream=httpx.ByteStream(_npy(features))))
    with FeatureHashClient("http://fh", transport=httpx.MockTransport(script)) as client:
        np.testing.assert_array_equal(client.transform("m", np.ones((300, 2))), features)


# -- inputs the service would refuse are refused before sending, with its field and detail --------------------
#
# Each case is a client call and the raw request carrying the same input; the client must raise
# FeatureHashAPIError without sending anything, and its status, field and detail must be the service's answer to
# the raw request. A NaN travels in a raw JSON body as Python's json writes it (NaN), which the service reads
# and names; a client never sends it.

GCWS_SPEC = {"method": "gcws", "input_dim": 6, "n_components": 16, "seed": 27, "params": {"bits": 2}}
RFF_SPEC = {"method": "rff", "input_dim": 4, "n_components": 8, "seed": 27, "params": {"gamma": 0.5}}
CHI2_SPEC = {"method": "additive_chi2", "input_dim": 4, "n_components": 12, "seed": 27}
CHECKS_INDEX = "client-checks"
ROWS = np.random.default_rng(27).random((4, 6)) + 0.1


class CountingTransport(httpx.BaseTransport):
    """A real HTTP transport that records every request it sends."""

    def __init__(self):
        self.inner, self.sent = httpx.HTTPTransport(), []

    def handle_request(self, request):
        self.sent.append(f"{request.method} {request.url.path}")
        return self.inner.handle_request(request)

    def close(self):
        self.inner.close()


class AsyncCountingTransport(httpx.AsyncBaseTransport):
    def __init__(self):
        self.inner, self.sent = httpx.AsyncHTTPTransport(), []

    async def handle_async_request(self, request):
        self.sent.append(f"{request.method} {request.url.path}")
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


def _json_body(document) -> dict:
    return {"content": json.dumps(document).encode(), "headers": {"Content-Type": "application/json"}}


def _npy_body(array, **headers) -> dict:
    return {"content": _npy(array), "headers": {"Content-Type": NPY, **headers}}


ITEMS = f"/v1/indexes/{CHECKS_INDEX}/items"
QUERY = f"/v1/indexes/{CHECKS_INDEX}/query"
IDS3, IDS4 = ["a", "b", "c"], ["a", "b", "c", "d"]
RAGGED = [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1.0, 2.0]]
NAN_ROWS = np.where(np.arange(24).reshape(4, 6) == 7, np.nan, ROWS)
ZERO_ROW = np.vstack([ROWS[:1], np.zeros((1, 6))])
WIDE_SPARSE = sp.csr_matrix(([1.0, 2.0, 3.0], ([0, 1, 1], [0, 2, 7])), shape=(2, 8))
STRINGS = np.array([["x"] * 6])
NAN_SPARSE = sp.csr_matrix(([1.0, np.nan], ([0, 1], [0, 3])), shape=(2, 6))
NEGATIVE = np.array([[0.5, -0.25, 1.0, 2.0]])

# id -> (client call (client, maps) -> awaitable or result, raw request (maps) -> (method, path, httpx kwargs))
REFUSALS = {
    "add: 4 rows, 3 ids (.npy)": (lambda c, m: c.add_items(CHECKS_INDEX, IDS3, ROWS),
                                  lambda m: ("POST", ITEMS, _npy_body(ROWS, **{"X-Item-Ids": json.dumps(IDS3)}))),
    "add: 4 rows, 3 ids (JSON)": (lambda c, m: c.add_items(CHECKS_INDEX, IDS3, ROWS, binary=False),
                                  lambda m: ("POST", ITEMS, _json_body({"ids": IDS3, "vectors": ROWS.tolist()}))),
    "add: 4 rows, 5 ids (JSON)": (lambda c, m: c.add_items(CHECKS_INDEX, IDS4 + ["e"], ROWS.tolist(), binary=False),
                                  lambda m: ("POST", ITEMS, _json_body({"ids": IDS4 + ["e"],
                                                                        "vectors": ROWS.tolist()}))),
    "add: ragged rows (JSON)": (lambda c, m: c.add_items(CHECKS_INDEX, IDS3[:2], RAGGED, binary=False),
                                lambda m: ("POST", ITEMS, _json_body({"ids": IDS3[:2], "vectors": RAGGED}))),
    "add: ragged rows (.npy asked)": (lambda c, m: c.add_items(CHECKS_INDEX, IDS3[:2], RAGGED),
                                      lambda m: ("POST", ITEMS, _json_body({"ids": IDS3[:2], "vectors": RAGGED}))),
    "add: 3-D rows (JSON)": (lambda c, m: c.add_items(CHECKS_INDEX, ["a"], ROWS[None], binary=False),
                             lambda m: ("POST", ITEMS, _json_body({"ids": ["a"], "vectors": ROWS[None].tolist()}))),
    "add: strings (JSON)": (lambda c, m: c.add_items(CHECKS_INDEX, ["a"], [["x"] * 6], binary=False),
                            lambda m: ("POST", ITEMS, _json_body({"ids": ["a"], "vectors": [["x"] * 6]}))),
    "add: strings (.npy)": (lambda c, m: c.add_items(CHECKS_INDEX, ["a"], STRINGS),
                            lambda m: ("POST", ITEMS, _npy_body(STRINGS, **{"X-Item-Ids": '["a"]'}))),
    "add: NaN (.npy)": (lambda c, m: c.add_items(CHECKS_INDEX, IDS4, NAN_ROWS),
                        lambda m: ("POST", ITEMS, _npy_body(NAN_ROWS, **{"X-Item-Ids": json.dumps(IDS4)}))),
    "add: NaN (JSON)": (lambda c, m: c.add_items(CHECKS_INDEX, IDS4, NAN_ROWS, binary=False),
                        lambda m: ("POST", ITEMS, _json_body({"ids": IDS4, "vectors": NAN_ROWS.tolist()}))),
    "add: wrong dimension": (lambda c, m: c.add_items(CHECKS_INDEX, IDS4, ROWS[:, :4]),
                             lambda m: ("POST", ITEMS, _npy_body(ROWS[:, :4], **{"X-Item-Ids": json.dumps(IDS4)}))),
    "add: one vector, 1-D (.npy)": (lambda c, m: c.add_items(CHECKS_INDEX, ["a"], ROWS[0]),
                                    lambda m: ("POST", ITEMS, _npy_body(ROWS[0], **{"X-Item-Ids": '["a"]'}))),
    "add: one vector, 1-D (JSON)": (lambda c, m: c.add_items(CHECKS_INDEX, ["a"], ROWS[0], binary=False),
                                    lambda m: ("POST", ITEMS, _json_body({"ids": ["a"], "vectors": ROWS[0].tolist()}))),
    "add: empty batch": (lambda c, m: c.add_items(CHECKS_INDEX, [], np.empty((0, 6))),
                         lambda m: ("POST", ITEMS, _npy_body(np.empty((0, 6)), **{"X-Item-Ids": "[]"}))),
    "add: all-zero row": (lambda c, m: c.add_items(CHECKS_INDEX, ["a", "b"], ZERO_ROW),
                          lambda m: ("POST", ITEMS, _npy_body(ZERO_ROW, **{"X-Item-Ids": '["a", "b"]'}))),
    "add: sparse index past the map": (lambda c, m: c.add_items(CHECKS_INDEX, ["a", "b"], WIDE_SPARSE),
                                       lambda m: ("POST", ITEMS, _json_body(
                                           {"ids": ["a", "b"], "sparse_vectors": sparse_rows(WIDE_SPARSE)}))),
    "add: sparse NaN": (lambda c, m: c.add_items(CHECKS_INDEX, ["a", "b"], NAN_SPARSE),
                        lambda m: ("POST", ITEMS, _json_body({"ids": ["a", "b"],
                                                              "sparse_vectors": sparse_rows(NAN_SPARSE)}))),
    "add: sparse, no rows": (lambda c, m: c.add_items(CHECKS_INDEX, [], sp.csr_matrix((0, 6))),
                             lambda m: ("POST", ITEMS, _json_body({"ids": [], "sparse_vectors": []}))),
    "add: duplicate id": (lambda c, m: c.add_items(CHECKS_INDEX, ["a", "b", "a", "d"], ROWS),
                          lambda m: ("POST", ITEMS, _json_body({"ids": ["a", "b", "a", "d"],
                                                                "vectors": ROWS.tolist()}))),
    "add: id with a slash": (lambda c, m: c.add_items(CHECKS_INDEX, ["a", "b/c", "d", "e"], ROWS),
                             lambda m: ("POST", ITEMS, _json_body({"ids": ["a", "b/c", "d", "e"],
                                                                   "vectors": ROWS.tolist()}))),
    "add: empty id": (lambda c, m: c.add_items(CHECKS_INDEX, ["", "b", "c", "d"], ROWS, binary=False),
                      lambda m: ("POST", ITEMS, _json_body({"ids": ["", "b", "c", "d"], "vectors": ROWS.tolist()}))),
    "add: ids not strings": (lambda c, m: c.add_items(CHECKS_INDEX, [1, 2, 3, 4], ROWS),
                             lambda m: ("POST", ITEMS, _npy_body(ROWS, **{"X-Item-Ids": "[1, 2, 3, 4]"}))),
    "query: top_k 0 (.npy)": (lambda c, m: c.query_index(CHECKS_INDEX, ROWS, top_k=0),
                              lambda m: ("POST", QUERY, {**_npy_body(ROWS), "params": {"top_k": "0"}})),
    "query: top_k 1001 (JSON)": (lambda c, m: c.query_index(CHECKS_INDEX, ROWS, top_k=1001, binary=False),
                                 lambda m: ("POST", QUERY, _json_body({"vectors": ROWS.tolist(), "top_k": 1001}))),
    "query: min_similarity 1.5": (lambda c, m: c.query_index(CHECKS_INDEX, ROWS, min_similarity=1.5),
                                  lambda m: ("POST", QUERY, {**_npy_body(ROWS), "params": {"min_similarity": "1.5"}})),
    "query: min_similarity not a number, rows too wide": (
        lambda c, m: c.query_index(CHECKS_INDEX, np.ones((1, 8)), min_similarity="high"),
        lambda m: ("POST", QUERY, {**_npy_body(np.ones((1, 8))), "params": {"min_similarity": "high"}})),
    "query: min_similarity 1.5, rows too wide": (
        lambda c, m: c.query_index(CHECKS_INDEX, np.ones((1, 8)), min_similarity=1.5),
        lambda m: ("POST", QUERY, {**_npy_body(np.ones((1, 8))), "params": {"min_similarity": "1.5"}})),
    "query: target_recall -0.1 (JSON)": (
        lambda c, m: c.query_index(CHECKS_INDEX, ROWS, target_recall=-0.1, binary=False),
        lambda m: ("POST", QUERY, _json_body({"vectors": ROWS.tolist(), "target_recall": -0.1}))),
    "query: ragged rows": (lambda c, m: c.query_index(CHECKS_INDEX, RAGGED, binary=False),
                           lambda m: ("POST", QUERY, _json_body({"vectors": RAGGED}))),
    "query_items: no ids": (lambda c, m: c.query_items(CHECKS_INDEX, []),
                            lambda m: ("POST", QUERY, _json_body({"ids": [], "top_k": 10, "min_similarity": 0.0}))),
    "query_items: an id not a string": (
        lambda c, m: c.query_items(CHECKS_INDEX, ["a", 5]),
        lambda m: ("POST", QUERY, _json_body({"ids": ["a", 5], "top_k": 10, "min_similarity": 0.0}))),
    "query_items: top_k 0": (lambda c, m: c.query_items(CHECKS_INDEX, ["a"], top_k=0),
                             lambda m: ("POST", QUERY, _json_body({"ids": ["a"], "top_k": 0, "min_similarity": 0.0}))),
    "query_items: target_recall 2": (
        lambda c, m: c.query_items(CHECKS_INDEX, ["a"], target_recall=2),
        lambda m: ("POST", QUERY, _json_body({"ids": ["a"], "top_k": 10, "min_similarity": 0.0, "target_recall": 2}))),
    "duplicates: threshold 0": (lambda c, m: c.duplicates(CHECKS_INDEX, 0.0),
                                lambda m: ("POST", f"/v1/indexes/{CHECKS_INDEX}/duplicates", _json_body(
                                    {"threshold": 0.0, "mode": "components", "min_cluster_size": 2}))),
    "duplicates: mode unknown": (lambda c, m: c.duplicates(CHECKS_INDEX, mode="chains"),
                                 lambda m: ("POST", f"/v1/indexes/{CHECKS_INDEX}/duplicates", _json_body(
                                     {"mode": "chains", "min_cluster_size": 2}))),
    "duplicates: min_cluster_size 1": (lambda c, m: c.duplicates(CHECKS_INDEX, 0.9, min_cluster_size=1),
                                       lambda m: ("POST", f"/v1/indexes/{CHECKS_INDEX}/duplicates", _json_body(
                                           {"threshold": 0.9, "mode": "components", "min_cluster_size": 1}))),
    "hash: bands not a divisor": (lambda c, m: c.hash(m["gcws"], ROWS, bands=3),
                                  lambda m: ("POST", f"/v1/maps/{m['gcws']}/hash",
                                             {**_npy_body(ROWS), "params": {"bands": "3"}})),
    "hash: bands not an integer (JSON)": (lambda c, m: c.hash(m["gcws"], ROWS, bands=2.5, binary=False),
                                          lambda m: ("POST", f"/v1/maps/{m['gcws']}/hash",
                                                     _json_body({"vectors": ROWS.tolist(), "bands": 2.5}))),
    "hash: bands not an integer (.npy)": (lambda c, m: c.hash(m["gcws"], ROWS, bands="two"),
                                          lambda m: ("POST", f"/v1/maps/{m['gcws']}/hash",
                                                     {**_npy_body(ROWS), "params": {"bands": "two"}})),
    "hash: a map without codes": (lambda c, m: c.hash(m["rff"], ROWS[:, :4]),
                                  lambda m: ("POST", f"/v1/maps/{m['rff']}/hash", _npy_body(ROWS[:, :4]))),
    "transform: dtype float16": (lambda c, m: c.transform(m["rff"], ROWS[:, :4], dtype="float16"),
                                 lambda m: ("POST", f"/v1/maps/{m['rff']}/transform",
                                            {**_npy_body(ROWS[:, :4]), "params": {"dtype": "float16"}})),
    "transform: wrong dimension (JSON)": (lambda c, m: c.transform(m["rff"], ROWS, binary=False),
                                          lambda m: ("POST", f"/v1/maps/{m['rff']}/transform",
                                                     _json_body({"vectors": ROWS.tolist()}))),
    "transform: a negative entry (chi2 map)": (lambda c, m: c.transform(m["chi2"], NEGATIVE, binary=False),
                                               lambda m: ("POST", f"/v1/maps/{m['chi2']}/transform",
                                                          _json_body({"vectors": NEGATIVE.tolist()}))),
    "kernel: sparse x past the map": (lambda c, m: c.kernel(m["rff"], sp.csr_matrix(np.eye(5))),
                                      lambda m: ("POST", f"/v1/maps/{m['rff']}/kernel",
                                                 _json_body({"sparse_x": sparse_rows(sp.csr_matrix(np.eye(5)))}))),
    "kernel: y of the wrong dimension": (lambda c, m: c.kernel(m["rff"], ROWS[:, :4], ROWS),
                                         lambda m: ("POST", f"/v1/maps/{m['rff']}/kernel",
                                                    _json_body({"x": ROWS[:, :4].tolist(), "y": ROWS.tolist()}))),
    "create_index: threshold 0": (lambda c, m: c.create_index(m["gcws"], name="t0", threshold=0.0),
                                  lambda m: ("POST", "/v1/indexes", _json_body({"map_id": m["gcws"], "name": "t0",
                                                                               "threshold": 0.0}))),
    "create_index: bands 0": (lambda c, m: c.create_index(m["gcws"], name="b0", bands=0),
                              lambda m: ("POST", "/v1/indexes", _json_body({"map_id": m["gcws"], "name": "b0",
                                                                           "bands": 0}))),
    "create_index: bad name": (lambda c, m: c.create_index(m["gcws"], name="-docs"),
                               lambda m: ("POST", "/v1/indexes", _json_body({"map_id": m["gcws"], "name": "-docs"}))),
    "create_map: input_dim 0": (lambda c, m: c.create_map("rff", 0, 8),
                                lambda m: ("POST", "/v1/maps", _json_body({"method": "rff", "input_dim": 0,
                                                                         "n_components": 8}))),
    "create_map (a spec dict): input_dim 0": (
        lambda c, m: c.create_map({"method": "rff", "input_dim": 0, "n_components": 8}),
        lambda m: ("POST", "/v1/maps", _json_body({"method": "rff", "input_dim": 0, "n_components": 8}))),
    "create_map (a spec dict): an unknown field": (
        lambda c, m: c.create_map({"method": "rff", "input_dim": 4, "n_components": 8, "gamma": 0.5}),
        lambda m: ("POST", "/v1/maps", _json_body({"method": "rff", "input_dim": 4, "n_components": 8,
                                                  "gamma": 0.5}))),
    "delete_items: no ids": (lambda c, m: c.delete_items(CHECKS_INDEX, []),
                             lambda m: ("POST", f"{ITEMS}/delete", _json_body({"ids": []}))),
    "delete_item: a backslash": (lambda c, m: c.delete_item(CHECKS_INDEX, "a\\b"),
                                 lambda m: ("DELETE", f"{ITEMS}/a%5Cb", {})),
    "delete_item: a dot segment": (lambda c, m: c.delete_item(CHECKS_INDEX, ".."),
                                   lambda m: ("DELETE", f"{ITEMS}/%2E%2E", {})),
    "list_maps: limit 0": (lambda c, m: c.list_maps(limit=0), lambda m: ("GET", "/v1/maps", {"params": {"limit": 0}})),
    "list_indexes: limit 1001": (lambda c, m: c.list_indexes(limit=1001),
                                 lambda m: ("GET", "/v1/indexes", {"params": {"limit": 1001}})),
}
ASYNC_REFUSALS = ("create_map (a spec dict): input_dim 0", "add: 4 rows, 3 ids (.npy)", "add: 4 rows, 3 ids (JSON)", "add: ragged rows (JSON)",
                  "query: top_k 0 (.npy)", "hash: bands not a divisor", "query_items: no ids",
                  "duplicates: threshold 0")


@pytest.fixture(scope="module")
def checks_setup(embedded_server):
    """The maps and the index the cases use, and a client that has seen them (as a program creating them has)."""
    transport = CountingTransport()
    client = FeatureHashClient(embedded_server.url, transport=transport, retry=RetryPolicy(attempts=1))
    maps = {name: client.create_map(**spec)["id"] for name, spec in
            (("gcws", GCWS_SPEC), ("rff", RFF_SPEC), ("chi2", CHI2_SPEC))}
    index = client.create_index(maps["gcws"], name=CHECKS_INDEX, bands=4, rows=4)
    yield client, transport, maps, index
    client.delete_index(CHECKS_INDEX)
    client.close()


def _server_answer(server, request) -> tuple[int, str, str]:
    method, path, kwargs = request
    with httpx.Client(base_url=server.url) as http:
        response = http.request(method, path, **kwargs)
    return response.status_code, response.json()["field"], response.json()["detail"]


@pytest.mark.parametrize("case", list(REFUSALS))
def test_client_refuses_what_the_service_refuses_before_sending(case, checks_setup, embedded_server):
    client, transport, maps, _ = checks_setup
    call, raw = REFUSALS[case]
    transport.sent.clear()
    with pytest.raises(FeatureHashAPIError) as refused:
        call(client, maps)
    assert transport.sent == []
    expected = _server_answer(embedded_server, raw(maps))
    assert (refused.value.status, refused.value.field, refused.value.detail) == expected
    assert str(refused.value) == f"422: {expected[2]}"


def test_async_client_refuses_the_same_before_sending(checks_setup, embedded_server):
    _, _, maps, _ = checks_setup
    transport = AsyncCountingTransport()

    async def run():
        refusals = {}
        async with AsyncFeatureHashClient(embedded_server.url, transport=transport) as client:
            await client.get_map(maps["gcws"])
            await client.get_index(CHECKS_INDEX)
            transport.sent.clear()
            for case in ASYNC_REFUSALS:
                with pytest.raises(FeatureHashAPIError) as refused:
                    await REFUSALS[case][0](client, maps)
                refusals[case] = (refused.value.status, refused.value.field, refused.value.detail)
        return refusals

    refusals = asyncio.run(run())
    assert transport.sent == []
    for case in ASYNC_REFUSALS:
        assert refusals[case] == _server_answer(embedded_server, REFUSALS[case][1](maps)), case


def test_a_refused_batch_adds_nothing_and_a_good_one_adds_every_row(checks_setup):
    client, _, _, _ = checks_setup
    before = client.get_index(CHECKS_INDEX)["items"]
    for binary in (True, False):
        with pytest.raises(FeatureHashAPIError, match="3 ids for 4 vectors"):
            client.add_items(CHECKS_INDEX, IDS3, ROWS, binary=binary)
    with pytest.raises(FeatureHashAPIError, match="batch_rows: must be a positive integer"):
        client.add_items(CHECKS_INDEX, IDS4, ROWS, batch_rows=0)
    assert client.get_index(CHECKS_INDEX)["items"] == before
    ids = [f"good-{i}" for i in range(4)]
    assert client.add_items(CHECKS_INDEX, ids, ROWS.tolist(), binary=False)["items"] == before + 4
    assert client.add_items(CHECKS_INDEX, ids, np.asfortranarray(ROWS), batch_rows=3)["replaced"] == 4
    assert client.add_items(CHECKS_INDEX, ids, np.asfortranarray(ROWS).astype(">f8"), binary=False)["replaced"] == 4
    assert client.delete_items(CHECKS_INDEX, ids)["removed"] == 4


def test_a_client_that_has_not_seen_the_map_checks_all_but_its_dimension(checks_setup, embedded_server):
    """Without the map's spec the client checks what needs no map (ids per row, ragged rows, NaN), and an array
    that is not 2-D goes to the service, which names the dimension it wants."""
    _, _, maps, _ = checks_setup
    transport = CountingTransport()
    with FeatureHashClient(embedded_server.url, transport=transport) as client:
        for case in ("add: 4 rows, 3 ids (.npy)", "add: ragged rows (JSON)", "add: NaN (.npy)"):
            with pytest.raises(FeatureHashAPIError) as refused:
                REFUSALS[case][0](client, maps)
            assert transport.sent == [], case
            assert (refused.value.status, refused.value.field, refused.value.detail) == \
                _server_answer(embedded_server, REFUSALS[case][1](maps)), case
        call, raw = REFUSALS["add: one vector, 1-D (.npy)"]
        with pytest.raises(FeatureHashAPIError) as refused:
            call(client, maps)
        assert transport.sent == [f"POST {ITEMS}"]  # the one request, refused as the raw one is
        assert (refused.value.status, refused.value.field, refused.value.detail) == \
            _server_answer(embedded_server, raw(maps))
        assert "(n, 6)" in refused.value.detail


def test_known_maps_keep_the_most_recently_seen():
    from featurehash.client.checks import KnownMaps

    known = KnownMaps(max_maps=2, max_indexes=2)
    specs = [create_map({**RFF_SPEC, "seed": seed}).describe() for seed in range(4)]
    for spec in specs[:3]:
        known.learn_map(spec)
    known.learn_map(specs[1])  # seen again: the most recent, so spec 2 is the next to go
    for i in range(3):
        known.learn_index({"id": f"ix{i}", "map_id": specs[i]["id"]})
    assert known.for_map(specs[0]["id"]) is None and known.for_index("ix0") is None
    assert known.for_map(specs[1]["id"]) is known.for_index("ix1") is not None
    assert known.for_index("ix2").spec.id == specs[2]["id"]
    known.learn_map(specs[3])
    assert known.for_index("ix2") is None and known.for_index("ix1") is not None
    assert known.for_map("rff-v1-not-a-spec") is None
    known.learn_map({**specs[0], "id": "rff-v1-not-its-id"})  # a spec the library cannot rebuild: unchecked
    assert known.for_map("rff-v1-not-its-id") is None
