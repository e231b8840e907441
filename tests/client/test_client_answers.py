"""featurehash.client holds every answer to its request: against a real HTTP server on 127.0.0.1 that answers
wrong (rows, width, dtype, content type, field types, counts), without end, or a byte at a time, both clients
raise AnswerMismatch naming what was expected and what came, stop reading at the answer's limit, cut a request
at its deadline, retry adds and deletes after a timeout or a 503 and never after a mismatch."""

from __future__ import annotations

import asyncio
import inspect
import io
import socket
import threading
import time

import httpx
import numpy as np
import orjson
import pytest

from featurehash import create_map
from featurehash.client import (AnswerMismatch, AsyncFeatureHashClient, FeatureHashAPIError, FeatureHashClient,
                                RetryPolicy)
from featurehash.client.answers import JSON_HEADROOM

NPY, JSON = "application/x-npy", "application/json"
RFF = create_map({"method": "rff", "input_dim": 4, "n_components": 8, "seed": 3, "params": {"gamma": 0.5}}).describe()
GCWS = create_map({"method": "gcws", "input_dim": 6, "n_components": 16, "seed": 3}).describe()
INDEX = {"id": "ix", "name": "ix", "map_id": GCWS["id"], "method": "gcws", "n_codes": 16, "bands": 4, "rows": 4,
         "threshold": 0.8, "recall_at_threshold": 0.9, "bands_chosen_by": "request",
         "collision_probability_at_threshold": 0.9, "half_point": 0.7, "items": 0, "key_prefix": "fh:"}
X10 = np.random.default_rng(7).random((10, 4)) + 0.1
X3 = np.random.default_rng(8).random((3, 6)) + 0.1


# -- a server that answers what it is told to ---------------------------------------------------------------

def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{key}: {value}" for key, value in {**headers, "Connection": "close"}.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def whole(body: bytes, content_type: str = JSON, status: int = 200, **headers: str):
    """An answer written at once, with its Content-Length."""
    def answer(request):
        yield _head(status, {"Content-Type": content_type, "Content-Length": str(len(body)), **headers}) + body, 0
    return answer


def as_json(document, status: int = 200, **headers: str):
    return whole(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY), JSON, status, **headers)


def as_npy(array: np.ndarray, **headers: str):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return whole(buffer.getvalue(), NPY, **headers)


def chunked(pieces, content_type: str = JSON):
    """An answer in chunked transfer encoding, one chunk a piece."""
    def answer(request):
        yield _head(200, {"Content-Type": content_type, "Transfer-Encoding": "chunked"}), 0
        for piece in pieces:
            yield b"%x\r\n%s\r\n" % (len(piece), piece), 0
        yield b"0\r\n\r\n", 0
    return answer


def drip(answer, every: float):
    """`answer` written one byte every `every` seconds."""
    def dripping(request):
        for raw, _ in answer(request):
            for byte in range(len(raw)):
                yield raw[byte:byte + 1], every
    return dripping


class Server:
    """HTTP/1.1 on 127.0.0.1: each connection's one request gets the next of `answers` (the last repeats);
    `requests` holds (method, path, body), `sent` the bytes each answer got out before the client left."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.answers, self.requests, self.sent = [], [], []
        threading.Thread(target=self._accept, daemon=True).start()

    def answer(self, *answers) -> "Server":
        self.answers, self.requests, self.sent = list(answers), [], []
        return self

    def _accept(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket):
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                piece = connection.recv(65536)
                if not piece:
                    return
                data += piece
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {key.lower(): value.strip() for key, value in (line.split(":", 1) for line in lines[1:])}
            while len(body) < int(headers.get("content-length", 0)):
                body += connection.recv(65536)
            method, path, _ = lines[0].split(" ")
            self.requests.append((method, path, body))
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            sent = 0
            try:
                for raw, pause in answer(request=(method, path, body)):
                    time.sleep(pause)
                    connection.sendall(raw)
                    sent += len(raw)
            except OSError:   # the client hung up
                pass
            self.sent.append(sent)

    def close(self):
        self.listener.close()


@pytest.fixture(scope="module")
def server():
    made = Server()
    yield made
    made.close()


def run(driver: str, url: str, steps, every: bool = False, **options):
    """Each step (a function of the client) in order, with the sync or the async client; the last one's result
    (`every`: all the results)."""
    options = {"retry": RetryPolicy(attempts=1), **options}
    if driver == "sync":
        with FeatureHashClient(url, **options) as client:
            results = [step(client) for step in steps]
        return results if every else results[-1]

    async def main():
        async with AsyncFeatureHashClient(url, **options) as client:
            results = []
            for step in steps:
                result = step(client)
                results.append(await result if inspect.isawaitable(result) else result)
            return results if every else results[-1]
    return asyncio.run(main())


# -- answers that are not what the request asked for -------------------------------------------------------

SEEN_RFF = lambda c: c.get_map(RFF["id"])  # noqa: E731  (the client learns the map's widths)
SEEN_GCWS = lambda c: c.get_map(GCWS["id"])  # noqa: E731
SEEN_INDEX = lambda c: c.get_index("ix")  # noqa: E731
F32 = np.float32

# case -> (answers after the map's spec, the call, what the error must say)
WRONG = {
    "npy: 3 rows for 10": (as_npy(np.zeros((3, 8), F32)), lambda c: c.transform(RFF["id"], X10),
                           "shape (10, 8)", "shape (3, 8)"),
    "npy: the wrong width": (as_npy(np.zeros((10, 5), F32)), lambda c: c.transform(RFF["id"], X10),
                             "shape (10, 8)", "shape (10, 5)"),
    "npy: float64 for float32": (as_npy(np.zeros((10, 8))), lambda c: c.transform(RFF["id"], X10),
                                 "dtype float32", "float64"),
    "JSON to an npy request": (as_json({"features": np.zeros((10, 8))}), lambda c: c.transform(RFF["id"], X10),
                               "content type application/x-npy", "application/json"),
    "JSON: 3 rows for 10": (as_json({"features": np.zeros((3, 8))}),
                            lambda c: c.transform(RFF["id"], X10, binary=False), "10 rows of features", "3"),
    "JSON: the wrong width": (as_json({"features": np.zeros((10, 5))}),
                              lambda c: c.transform(RFF["id"], X10, binary=False), "width 8", "width 5"),
    "JSON: a number as a string": (as_json({"features": [["0.5"] * 8] * 10}),
                                   lambda c: c.transform(RFF["id"], X10, binary=False),
                                   "DenseFeatures", "features.0.0: input should be a valid number"),
    "one-hot indices without dim and scale": (as_npy(np.zeros((3, 16), np.int64)),
                                              lambda c: c.transform(GCWS["id"], X3), "one_hot features",
                                              "dense features"),
    "one-hot: another dim": (as_npy(np.zeros((3, 16), np.int64), **{"X-Feature-Dim": "17", "X-Feature-Scale": "0.25"}),
                             lambda c: c.transform(GCWS["id"], X3), f"dim {GCWS['output_dim']}", "dim 17"),
    "codes: the wrong width": (as_npy(np.zeros((3, 12), np.int64)), lambda c: c.hash(GCWS["id"], X3),
                               "shape (3, 16)", "shape (3, 12)"),
    "codes: band keys missing": (as_json({"codes": np.zeros((3, 16), np.int64)}),
                                 lambda c: c.hash(GCWS["id"], X3, bands=4), "3 rows of 4 band keys", "none"),
    "kernel: 3 x 2 for 3 x 3": (as_json({"estimate": np.zeros((3, 2)), "exact": np.zeros((3, 2))}),
                                lambda c: c.kernel(GCWS["id"], X3), "width 3", "width 2"),
    "a map of the wrong types": (as_json({**RFF, "input_dim": "4"}), lambda c: c.get_map(RFF["id"]),
                                 "MapSpecResponse", "input_dim: input should be a valid integer"),
    "another map than asked for": (as_json(GCWS), lambda c: c.get_map(RFF["id"]), f"id {RFF['id']!r}",
                                   f"id {GCWS['id']!r}"),
    "query: 1 row of results for 3": (
        as_json({"results": [[]], "candidates": [0], "estimated_recall": [1.0], "rows_probed": [4]}),
        lambda c: c.query_index("ix", X3), "3 results", "1"),
    "query: a similarity as a string": (
        as_json({"results": [[{"id": "a", "similarity": "high"}]] * 3, "candidates": [1] * 3,
                 "estimated_recall": [1.0] * 3, "rows_probed": [4] * 3}),
        lambda c: c.query_index("ix", X3), "IndexQueryResponse", "similarity: input should be a valid number"),
    "add: fewer items than rows": (as_json({"added": 2, "replaced": 0, "items": 2}),
                                   lambda c: c.add_items("ix", ["a", "b", "c"], X3),
                                   "3 items added or replaced", "2 added, 0 replaced"),
    "delete: a body where none is": (as_json({"deleted": True}), lambda c: c.delete_item("ix", "a"), "no body",
                                     "Content-Length 16"),
    "a header announcing 40 TB": (whole(b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, "
                                        b"'shape': (10, 1099511627776), }" + b" " * 46 + b"\n", NPY),
                                  lambda c: c.transform("unseen", X10), f"at most {4096 + 10 * 2**22 * 4} bytes",
                                  "an array of 43980465111040"),
}
SEEN = {"query": SEEN_INDEX, "add": SEEN_INDEX, "delete": SEEN_INDEX, "a header": None, "another map": None,
        "a map of": None}


def _steps(case: str):
    answer, call, _, _ = WRONG[case]
    seen = next((value for prefix, value in SEEN.items() if case.startswith(prefix)),
                SEEN_GCWS if ("one-hot" in case or "codes" in case or "kernel" in case) else SEEN_RFF)
    if seen is SEEN_INDEX:
        return [as_json(GCWS), as_json(INDEX), answer], [SEEN_GCWS, SEEN_INDEX, call]
    if seen is None:
        return [answer], [call]
    return [as_json(GCWS if seen is SEEN_GCWS else RFF), answer], [seen, call]


@pytest.mark.parametrize("case", list(WRONG))
def test_an_answer_that_is_not_what_was_asked_for_raises_naming_both(case, server):
    answers, steps = _steps(case)
    _, _, expected, got = WRONG[case]
    with pytest.raises(AnswerMismatch) as wrong:
        run("sync", server.answer(*answers).url, steps, retry=RetryPolicy(attempts=4))
    assert isinstance(wrong.value, FeatureHashAPIError) and wrong.value.field == "answer"
    assert expected in wrong.value.expected and got in wrong.value.got, str(wrong.value)
    assert len(server.requests) == len(steps)   # a mismatch is never retried


@pytest.mark.parametrize("case", ["npy: 3 rows for 10", "JSON to an npy request", "a map of the wrong types",
                                  "query: a similarity as a string", "add: fewer items than rows"])
def test_the_async_client_checks_the_same(case, server):
    answers, steps = _steps(case)
    with pytest.raises(AnswerMismatch) as wrong:
        run("async", server.answer(*answers).url, steps, retry=RetryPolicy(attempts=4))
    assert WRONG[case][2] in wrong.value.expected and WRONG[case][3] in wrong.value.got
    assert len(server.requests) == len(steps)


def test_right_answers_pass(server):
    features = np.random.default_rng(1).random((10, 8)).astype(F32)
    for driver in ("sync", "async"):
        server.answer(as_json(RFF), as_npy(features))
        np.testing.assert_array_equal(run(driver, server.url, [SEEN_RFF, lambda c: c.transform(RFF["id"], X10)]),
                                      features)
        server.answer(as_json({"features": features}))
        np.testing.assert_array_equal(run(driver, server.url, [lambda c: c.transform("unseen", X10, binary=False)]),
                                      features)


# -- answers without end, or too large -----------------------------------------------------------------------

CAP = 64 << 20  # the most the server sends: an old client buffered it all


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_an_endless_answer_is_read_only_up_to_what_the_request_can_produce(driver, server):
    endless = chunked([b'{"status":"ok"}'] + [b" " * 65536] * (CAP // 65536))   # valid JSON, then whitespace
    with pytest.raises(AnswerMismatch) as big:
        run(driver, server.answer(endless).url, [lambda c: c.healthz()])
    assert f"at most {JSON_HEADROOM} bytes" in big.value.expected
    deadline = time.monotonic() + 5
    while not server.sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.sent[0] < CAP // 4   # the client hung up: the server got out what the socket buffers hold


def test_max_answer_bytes_is_the_limit_for_every_answer(server):
    with pytest.raises(AnswerMismatch, match="Content-Length"):
        run("sync", server.answer(as_json(RFF)).url, [lambda c: c.get_map(RFF["id"])], max_answer_bytes=100)
    assert run("sync", server.answer(as_json(RFF)).url, [lambda c: c.get_map(RFF["id"])],
               max_answer_bytes=1000)["id"] == RFF["id"]


# -- the deadline: connect, send and every read together ----------------------------------------------------

@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("where", ["head", "body"])
def test_a_server_sending_a_byte_at_a_time_is_cut_at_the_deadline(driver, where, server):
    ok = as_json({"status": "ok", "padding": "x" * 200})
    if where == "head":
        answer = drip(ok, 0.05)
    else:
        def answer(request):
            raw = next(ok(request))[0]
            cut = raw.index(b"\r\n\r\n") + 4
            yield raw[:cut], 0
            yield from ((raw[i:i + 1], 0.05) for i in range(cut, len(raw)))
    start = time.monotonic()
    with pytest.raises(httpx.TimeoutException, match="0.4 s deadline"):
        run(driver, server.answer(answer).url, [lambda c: c.healthz()], timeout=0.4)
    assert 0.4 <= time.monotonic() - start < 1.5   # each read took 0.05 s: no read timed out (answer: 16 s)


# -- retries: adds and deletes are idempotent by item id -----------------------------------------------------

@pytest.mark.parametrize("driver", ["sync", "async"])
def test_adds_and_deletes_are_retried_after_a_timeout_or_a_503(driver, server):
    """Repeating an add stores the same items, repeating a delete removes nothing more: both are retried, with
    the same body, after an attempt cut at its deadline or answered 503."""
    stalled = drip(as_json({"added": 3, "replaced": 0, "items": 3}), 0.25)
    unavailable = as_json({"detail": "store: Redis is unreachable", "field": "store"}, 503, **{"Retry-After": "0"})
    server.answer(as_json(GCWS), as_json(INDEX), stalled, unavailable, as_json({"added": 3, "replaced": 0, "items": 3}),
                  unavailable, as_json({"removed": 1, "missing": ["b"]}))
    sleeps = []

    async def no_sleep(seconds):
        sleeps.append(seconds)

    results = run(driver, server.url, [SEEN_GCWS, SEEN_INDEX, lambda c: c.add_items("ix", ["a", "b", "c"], X3),
                                       lambda c: c.delete_items("ix", ["a", "b"])], every=True, timeout=1.0,
                  retry=RetryPolicy(attempts=3, backoff=0.01), sleep=sleeps.append if driver == "sync" else no_sleep)
    assert results[2:] == [{"added": 3, "replaced": 0, "items": 3}, {"removed": 1, "missing": ["b"]}]
    adds, deletes = server.requests[2:5], server.requests[5:]
    assert len(adds) == 3 and len({body for _, _, body in adds}) == 1 and adds[0][1] == "/v1/indexes/ix/items"
    assert len(deletes) == 2 and deletes[0] == deletes[1]
    assert len(sleeps) == 3
