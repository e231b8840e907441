"""What API keys cost a single-vector transform: no auth, FEATUREHASH_API_KEY, and a keys file (tenants, scopes).

    python bench/bench_auth.py [--keys 1000] [--rounds 5] [--requests 2000] [--skip-http]

The check alone first (deps.checked_state on a prepared request, timeit), then two figures, each for three
contenders interleaved round by round (a shared machine's load falls on all):

1. The app's own CPU per request, no HTTP (bench/asgi_cost.py's raw ASGI calls, process_time): rff d=64 D=1024
   single-vector JSON transform, the plain route (`deps.checked_state`), one app whose key source is swapped.
   Best and median block of 1000 requests.
2. Through HTTP: three `featurehash serve` servers (1 worker, embedded Redis each), one keep-alive connection
   each (bench/raw_http.py), p50/p99 of the same request, and the web worker's CPU per request (/proc ticks).

"api key" sends FEATUREHASH_API_KEY's key; "keys file" a read key of a file with --keys keys (lookup by SHA-256
digest: the file's size should not matter). Ratios are against "open" (no key at all).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import sys
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from asgi_cost import JSON, call, running_app  # noqa: E402
from raw_http import Connection, latencies_us  # noqa: E402

from featurehash.service.auth import KeySource  # noqa: E402

SPEC = {"method": "rff", "input_dim": 64, "n_components": 1024, "seed": 1, "params": {"gamma": 1 / 64}}
API_KEY = "bench-api-key"
READ_KEY = "bench-read-key"
CONTENDERS = ("open", "api key", "keys file")


def keys_document(count: int) -> dict:
    """`count` keys over 10 tenants; the last is READ_KEY's (read scope)."""
    keys = [{"name": f"k{i}", "tenant": f"team-{i % 10}", "scopes": ["read", "write"],
             "sha256": hashlib.sha256(f"key-{i}".encode()).hexdigest()} for i in range(count - 1)]
    keys.append({"name": "reader", "tenant": "team-0", "scopes": ["read"],
                 "sha256": hashlib.sha256(READ_KEY.encode()).hexdigest()})
    return {"keys": keys}


def settings_of(contender: str, keys_file: Path) -> dict:
    return {"open": {}, "api key": {"api_key": API_KEY}, "keys file": {"keys_file": str(keys_file)}}[contender]


def auth_header(contender: str) -> list[tuple[bytes, bytes]]:
    key = {"open": None, "api key": API_KEY, "keys file": READ_KEY}[contender]
    return [] if key is None else [(b"authorization", f"Bearer {key}".encode())]


def body() -> bytes:
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    return orjson.dumps({"vectors": x}, option=orjson.OPT_SERIALIZE_NUMPY)


# -- 1. in process ---------------------------------------------------------------------------------------

async def _asgi(keys_file: Path, rounds: int, per_block: int) -> dict[str, list[float]]:
    # One app, its key source swapped between blocks: the contenders differ in the keys alone (three apps
    # differed by +-6 us a request with identical code, their caches and memory apart).
    async with running_app("featurehash-auth-") as app:
        state = app.state.service
        sources = {name: KeySource(**{"open": {"keys_file": None},
                                      "api key": {"keys_file": None, "api_key": API_KEY},
                                      "keys file": {"keys_file": keys_file}}[name]) for name in CONTENDERS}
        status, answer = await call(app, "POST", "/v1/maps", orjson.dumps(SPEC), JSON)
        path = f"/v1/maps/{orjson.loads(answer)['id']}/transform"
        payload = body()
        checks = {}
        for name in CONTENDERS:
            state.keys = sources[name]
            status, answer = await call(app, "POST", path, payload, JSON + auth_header(name))
            if status != 200:
                raise RuntimeError(f"{name}: {status} {answer[:200]!r}")
            checks[name] = _check_cost(app, path, auth_header(name))
        blocks = {name: [] for name in CONTENDERS}
        for round_ in range(rounds):
            for name in CONTENDERS[round_ % 3:] + CONTENDERS[:round_ % 3]:
                state.keys = sources[name]
                headers = JSON + auth_header(name)
                start = time.process_time()
                for _ in range(per_block):
                    await call(app, "POST", path, payload, headers)
                blocks[name].append((time.process_time() - start) / per_block)
        return blocks, checks


def _check_cost(app, path: str, headers) -> float:
    """Seconds per call of the plain route's whole check (deps.checked_state: key, scope, query string) on a
    request of these headers, best of 7 x 20,000 calls."""
    from starlette.requests import Request

    from featurehash.service.api.deps import checked_state

    scope = {"type": "http", "app": app, "method": "POST", "path": path, "query_string": b"",
             "headers": [(b"host", b"bench"), (b"content-length", b"1500"), *JSON, *headers]}

    def check():
        # a coroutine since the quotas (its keys have no limits, so it never awaits: done in one step)
        step = checked_state(Request(dict(scope)))
        try:
            step.send(None)
        except StopIteration:
            return
        step.close()
        raise RuntimeError("the check awaited: the bench's keys must have no limits")

    return min(timeit.repeat(check, number=20_000, repeat=7)) / 20_000


# -- 2. over HTTP ----------------------------------------------------------------------------------------

def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").iterdir():
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.append(child)
                todo.append(child)
    return found


def _web_cpu_seconds(launcher: int) -> float:
    ticks = 0
    for pid in _descendants(launcher):
        try:
            if b"featurehash.service.web" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _connection(server):
    connection = Connection("127.0.0.1", server.port)
    try:
        yield connection
    finally:
        connection.close()


def _http(keys_file: Path, rounds: int, count: int) -> dict[str, dict[str, list[float]]]:
    from service_support import ServiceProcess, start_all, stop_all

    root = Path(tempfile.mkdtemp(prefix="featurehash-auth-http-"))
    servers = {name: ServiceProcess(name.replace(" ", "-"), root / name.replace(" ", "-"),
                                    **settings_of(name, keys_file)) for name in CONTENDERS}
    start_all(list(servers.values()))
    try:
        import httpx

        writers = {"open": {}, "api key": {"Authorization": f"Bearer {API_KEY}"},
                   "keys file": {"Authorization": "Bearer key-0"}}  # keys_document's k0: read and write
        for name, server in servers.items():  # each server has its own Redis: the same spec, the same id
            with httpx.Client(base_url=server.url, headers=writers[name]) as writer:
                created = writer.post("/v1/maps", json=SPEC)
                created.raise_for_status()
        path = f"/v1/maps/{created.json()['id']}/transform"
        payload = body()
        requests = {}
        for name, server in servers.items():
            headers = "".join(f"{k.decode()}: {v.decode()}\r\n" for k, v in auth_header(name))
            requests[name] = [(f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n{headers}"
                               f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload]
            with _connection(server) as connection:
                latencies_us(connection, requests[name], 200)  # warm: the map built, the kernels loaded
        figures = {name: {"p50": [], "p99": [], "cpu": []} for name in CONTENDERS}
        for round_ in range(rounds):
            for name in CONTENDERS[round_ % 3:] + CONTENDERS[:round_ % 3]:
                launcher = servers[name].proc.pid
                # a connection per block: an idle one is closed after FEATUREHASH_HEADER_TIMEOUT_SECONDS
                with _connection(servers[name]) as connection:
                    latencies_us(connection, requests[name], 20)
                    before = _web_cpu_seconds(launcher)
                    samples = latencies_us(connection, requests[name], count)
                    figures[name]["cpu"].append((_web_cpu_seconds(launcher) - before) / count * 1e6)
                figures[name]["p50"].append(float(np.percentile(samples, 50)))
                figures[name]["p99"].append(float(np.percentile(samples, 99)))
        return figures
    finally:
        stop_all(list(servers.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1000, help="keys in the keys file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000, help="requests per contender per round over HTTP")
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args()
    keys_file = Path(tempfile.mkdtemp(prefix="featurehash-keys-")) / "keys.json"
    keys_file.write_bytes(orjson.dumps(keys_document(args.keys)))

    blocks, checks = asyncio.run(_asgi(keys_file, args.rounds, 1000))
    print(f"rff d=64 D=1024 single-vector JSON transform; keys file of {args.keys} keys; {args.rounds} rounds")
    print("0. the plain route's check alone (deps.checked_state: key, scope, query; best of 7 x 20,000 calls):")
    for name in CONTENDERS:
        print(f"   {name:10s} {checks[name] * 1e6:6.2f} us  (+{(checks[name] - checks['open']) * 1e6:5.2f} us over open)")
    print("1. the app's own CPU per request, raw ASGI in process (best / median block of 1000):")
    best_open, median_open = min(blocks["open"]), float(np.median(blocks["open"]))
    for name in CONTENDERS:
        best, median = min(blocks[name]), float(np.median(blocks[name]))
        print(f"   {name:10s} best {best * 1e6:6.1f} us ({best / best_open:5.3f}x, {(best - best_open) * 1e6:+5.1f} us)"
              f"   median {median * 1e6:6.1f} us ({median / median_open:5.3f}x, {(median - median_open) * 1e6:+5.1f} us)")
    if args.skip_http:
        return
    figures = _http(keys_file, args.rounds, args.requests)
    print(f"2. over HTTP, one keep-alive connection, {args.requests} requests a round (median of rounds):")
    base = {what: float(np.median(figures["open"][what])) for what in ("p50", "p99", "cpu")}
    for name in CONTENDERS:
        line = []
        for what, label in (("p50", "p50"), ("p99", "p99"), ("cpu", "worker CPU/request")):
            value = float(np.median(figures[name][what]))
            line.append(f"{label} {value:6.1f} us ({value / base[what]:5.3f}x)")
        print(f"   {name:10s} " + "   ".join(line))


if __name__ == "__main__":
    main()
