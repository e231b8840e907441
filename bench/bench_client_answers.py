"""What holding answers to their requests costs the Python client per call: rff d=64 D=1024 transforms of 1 and
10,000 rows over .npy (and 1 row over JSON) against a local `featurehash serve`.

    python bench/bench_client_answers.py [--url URL] [--blocks B] [--calls C]

Two figures. In process, on answers captured from the service (the body fed in 64 KiB pieces, as a socket
gives it): the client's reading with its checks (featurehash.client.wire._read + checked.features: content type,
byte limit, the .npy header against the request's layout, the map's dtype and width, one-hot headers; JSON by the
protocol's model) against the reading it replaced (the .npy answer straight into its array, orjson for JSON).
Over HTTP: the call's p50 with the checks and the deadline transport, with each alone, and with neither (a plain
httpx transport, the checks replaced by pass-throughs), in a rotating order block by block so a shared machine's
load falls on all four. Prints a table; writes nothing.
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


class _PassThrough:
    """checked.features and the .npy layout check replaced while a client without the checks runs."""

    def __enter__(self):
        self.saved = checked.features, wire.layout_check
        checked.features = lambda answer, spec, rows, dtype: answer.array if answer.array is not None else \
            np.asarray(orjson.loads(answer.content)["features"], dtype=np.float32)
        wire.layout_check = lambda layout, status, limit: None

    def __exit__(self, *exc):
        checked.features, wire.layout_check = self.saved


VARIANTS = ("checks + deadline", "checks", "deadline", "neither")


def over_http(url: str, X: np.ndarray, binary: bool, blocks: int, calls: int) -> dict[str, float]:
    """p50 microseconds of client.transform with and without the checks and the deadline transport (a plain
    httpx transport), the four variants in a rotating order block by block."""
    clients = {name: FeatureHashClient(url, transport=None if "deadline" in name else httpx.HTTPTransport())
               for name in VARIANTS}
    try:
        spec = clients[VARIANTS[0]].create_map(SPEC)
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for name, client in clients.items():
            client.get_map(spec["id"])
        for block in range(blocks):
            for name in VARIANTS[block % 4:] + VARIANTS[:block % 4]:
                with nullcontext() if name.startswith("checks") else _PassThrough():
                    clients[name].transform(spec["id"], X, binary=binary)  # warm the connection
                    for _ in range(calls):
                        start = time.perf_counter()
                        clients[name].transform(spec["id"], X, binary=binary)
                        times[name].append(time.perf_counter() - start)
        return {name: statistics.median(found) * 1e6 for name, found in times.items()}
    finally:
        for client in clients.values():
            client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = (("1 row, .npy", rng.random((1, 64)), True, args.calls),
             ("1 row, JSON", rng.random((1, 64)), False, args.calls),
             ("10,000 rows, .npy", rng.random((10_000, 64)), True, max(2, args.calls // 10)))
    with (nullcontext(args.url) if args.url else running_server(1)) as url:
        with FeatureHashClient(url) as client:
            spec = client.create_map(SPEC)
            print(f"{'rff d=64 D=1024 transform':<22}{'read+checks':>12}{'read before':>12}{'added':>8}   p50 over "
                  "HTTP: " + ", ".join(VARIANTS) + "   (us)")
            for name, X, binary, calls in cases:
                with_checks, before = in_process(client, spec, X, binary, 500 if X.shape[0] == 1 else 30)
                p50 = over_http(url, X, binary, args.blocks, calls)
                print(f"{name:<22}{with_checks:>12.1f}{before:>12.1f}{with_checks - before:>8.1f}   "
                      + "  ".join(f"{p50[variant]:>8.0f}" for variant in VARIANTS))


if __name__ == "__main__":
    main()
