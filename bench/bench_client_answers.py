"""What holding answers to their requests costs the Python client per call: rff d=64 D=1024 transforms of 1 and
10,000 rows over .npy (and 1 row over JSON) against a local `featurehash serve`.

    python bench/bench_client_answers.py [--url URL] [--blocks B] [--calls C]

Two figures. In process, on answers captured from the service (the body fed in 64 KiB pieces, as a socket
gives it): the client's reading with its checks (featurehash.client.wire._read + checked.features: content type,
byte limit, the .npy header against the request's layout, the map's dtype and width, one-hot headers; JSON by the
protocol's model) against the reading it replaced (the .npy answer straight into its array, orjson for JSON).
Over HTTP: the call's p50 with the checks and the deadline transport against the same client with them taken out
(a plain httpx transport, the checks replaced by pass-throughs), interleaved block by block so a shared machine's
load falls on both. Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import nullcontext

import httpx
import numpy as np
import orjson

from bench_service import running_server
from featurehash.client import FeatureHashClient, checked, wire
from featurehash.npy.answer import NpyAnswer

SPEC = {"method": "rff", "input_dim": 64, "n_components": 1024, "seed": 1, "params": {"gamma": 0.1}}
PIECE = 64 * 1024


class Pieces(httpx.SyncByteStream):
    def __init__(self, body: bytes):
        self.body = body

    def __iter__(self):
        for start in range(0, len(self.body), PIECE):
            yield self.body[start:start + PIECE]


def _response(captured: httpx.Response) -> httpx.Response:
    return httpx.Response(captured.status_code, headers=captured.headers, stream=Pieces(captured.content))


def in_process(client: FeatureHashClient, spec: dict, X: np.ndarray, binary: bool, repeats: int) -> tuple[float, float]:
    """Best-of-`repeats` microseconds of reading one answer: with the checks, and as before them."""
    rows = X.shape[0]
    op = client._ops.transform(spec["id"], X, binary=binary)
    call = next(op)
    op.close()
    captured = client.http.post(call.path, content=call.content, headers=call.headers, params=call.params)
    known = client._ops.known.spec(spec["id"])

    def checked_read():
        response = _response(captured)
        answer = wire._read(response, call.expect, None)
        return checked.features(answer, known, rows, "float32")

    def old_read():
        response = _response(captured)
        if binary:
            answer = NpyAnswer()
            for piece in response.iter_bytes():
                answer.add(piece)
            return answer.array()
        response.read()
        return np.asarray(orjson.loads(response.content)["features"], dtype=np.float32)

    np.testing.assert_array_equal(checked_read(), old_read())
    return _best_us((checked_read, old_read), repeats)


def _best_us(functions, repeats: int) -> tuple[float, ...]:
    """Each function's best time, the functions called in turn (a shared machine's load falls on all)."""
    best = [float("inf")] * len(functions)
    for _ in range(repeats):
        for which, function in enumerate(functions):
            start = time.perf_counter()
            function()
            best[which] = min(best[which], time.perf_counter() - start)
    return tuple(seconds * 1e6 for seconds in best)


def unchecked(client_url: str) -> FeatureHashClient:
    """The client with the checks taken out: a plain transport and pass-through readers."""
    return FeatureHashClient(client_url, transport=httpx.HTTPTransport())


class _PassThrough:
    """checked.features and the .npy layout check replaced while the unchecked client runs."""

    def __enter__(self):
        self.saved = checked.features, wire.layout_check
        checked.features = lambda answer, spec, rows, dtype: answer.array if answer.array is not None else \
            np.asarray(orjson.loads(answer.content)["features"], dtype=np.float32)
        wire.layout_check = lambda layout, status, limit: None

    def __exit__(self, *exc):
        checked.features, wire.layout_check = self.saved


def over_http(url: str, X: np.ndarray, binary: bool, blocks: int, calls: int) -> tuple[float, float]:
    """p50 microseconds of client.transform: with the checks, without, interleaved block by block."""
    with FeatureHashClient(url) as with_checks, unchecked(url) as without:
        spec = with_checks.create_map(SPEC)
        without.get_map(spec["id"])
        times: dict[str, list[float]] = {"checked": [], "unchecked": []}
        for _ in range(blocks):
            for name, client, context in (("checked", with_checks, nullcontext()),
                                          ("unchecked", without, _PassThrough())):
                with context:
                    client.transform(spec["id"], X, binary=binary)  # warm the connection
                    for _ in range(calls):
                        start = time.perf_counter()
                        client.transform(spec["id"], X, binary=binary)
                        times[name].append(time.perf_counter() - start)
        return statistics.median(times["checked"]) * 1e6, statistics.median(times["unchecked"]) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = (("1 row, .npy", rng.random((1, 64)), True, args.calls),
             ("1 row, JSON", rng.random((1, 64)), False, args.calls),
             ("10,000 rows, .npy", rng.random((10_000, 64)), True, max(2, args.calls // 10)))
    with (nullcontext(args.url) if args.url else running_server(1)) as url:
        with FeatureHashClient(url) as client:
            spec = client.create_map(SPEC)
            print(f"{'rff d=64 D=1024 transform':<26}{'read+checks':>12}{'read before':>12}{'added':>9}   "
                  f"{'p50 checked':>12}{'unchecked':>11}{'diff':>9}   (us)")
            for name, X, binary, calls in cases:
                with_checks, before = in_process(client, spec, X, binary, 500 if X.shape[0] == 1 else 30)
                p50, p50_without = over_http(url, X, binary, args.blocks, calls)
                print(f"{name:<26}{with_checks:>12.1f}{before:>12.1f}{with_checks - before:>9.1f}   "
                      f"{p50:>12.0f}{p50_without:>11.0f}{p50 - p50_without:>9.0f}")


if __name__ == "__main__":
    main()
