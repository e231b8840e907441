"""featurehash.client: retries and backoff (against httpx mock transports: no sleeping, no server), the
wire format it picks, and the async client against a real server."""

from __future__ import annotations

import asyncio
import io

import httpx
import numpy as np
import pytest

from featurehash.client import (AsyncFeatureHashClient, FeatureHashAPIError, FeatureHashClient, KernelAnswer,
                                RetryPolicy)
from featurehash.npy_answer import NpyAnswer
from service_support import NPY

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
