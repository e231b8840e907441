"""Per-key limits (issue 35): do they hold across workers and replicas, and what do they cost a single vector?

    python bench/bench_quotas.py [--limit 50] [--drive 200] [--seconds 5] [--samples 400] [--rounds 5]
                                 [--reservation 0.1]

Starts one standalone Redis and two replicas (`featurehash serve --workers 2`, tests/service_support.py) sharing
it, with a keys file (FEATUREHASH_KEYS_FILE) of four keys:

1. Rate across 2 replicas x 2 workers: a key limited to --limit requests/s, driven open-loop at --drive
   requests/s for --seconds over 8 connections spread over both replicas. Printed: accepted/s against the limit
   over the whole run (GCRA admits a burst of 1 s of the rate first: the bound is (limit x T + burst) / T), and
   over the run after its first second (the steady rate, which should be the limit).
2. Cost on single-vector latency: rff d=16 D=256 transform (JSON), sequential on one keep-alive connection to
   replica 1, for a key without limits, one with a rate (10^6/s: never refusing, always checked), one with a
   concurrency limit (1000: a lease taken and given back) and one with both; interleaved round by round, with
   the CPU time per request of replica 1's processes and Redis beside the wall-clock p50/p99; each as a ratio to
   no limits. With --reservation 0 the rate costs a round trip per request (the workers reserve nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import orjson

import raw_http

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from service_support import RedisProcess, ServiceProcess, group_members, start_all, stop_all  # noqa: E402

SPEC = {"method": "rff", "input_dim": 16, "n_components": 256, "seed": 3}
KEYS = {"none": "bench-none", "rate": "bench-rate", "leases": "bench-leases", "both": "bench-both",
        "paced": "bench-paced"}


def keys_file(limit: float) -> dict:
    limits = {"none": None, "rate": {"requests_per_second": 1e6}, "leases": {"concurrent_requests": 1000},
              "both": {"requests_per_second": 1e6, "concurrent_requests": 1000},
              "paced": {"requests_per_second": limit}}
    return {"keys": [{"name": name, "tenant": "bench", "scopes": ["read", "write"],
                      "sha256": hashlib.sha256(key.encode()).hexdigest(),
                      **({"limits": limits[name]} if limits[name] else {})} for name, key in KEYS.items()]}


def request(map_id: str, key: str) -> bytes:
    body = orjson.dumps({"vectors": [np.linspace(0.1, 1.6, 16).tolist()]})
    return (f"POST /v1/maps/{map_id}/transform HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {key}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def drive(servers: list[ServiceProcess], payload: bytes, rate: float, seconds: float,
                connections: int = 8) -> list[tuple[float, int]]:
    """Open loop: request i is sent at start + i / rate on connection i % connections (each connection waits
    for its previous answer, so 8 connections carry up to 8 in flight). Returns (send time, status) per request."""
    streams = []
    for c in range(connections):
        server = servers[c % len(servers)]
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        streams.append((reader, writer, asyncio.Lock()))
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.1
    results: list[tuple[float, int]] = []

    async def one(i: int) -> None:
        await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
        reader, writer, lock = streams[i % connections]
        async with lock:
            sent = loop.time() - start
            writer.write(payload)
            head = await reader.readuntil(b"\r\n\r\n")
            status, length = raw_http._parse_head(head[:-4])
            await reader.readexactly(length or 0)
        results.append((sent, status))

    await asyncio.gather(*(one(i) for i in range(int(rate * seconds))))
    for _, writer, _ in streams:
        writer.close()
    return results


def cpu_seconds(pids: list[int]) -> float:
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=float, default=50.0)
    parser.add_argument("--drive", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--samples", type=int, default=400, help="requests per key per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reservation", type=float, default=0.1,
                        help="FEATUREHASH_RATE_RESERVATION_SECONDS of the servers (0: a round trip per request)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-quotas-"))
    (root / "keys.json").write_bytes(orjson.dumps(keys_file(args.limit)))
    store = RedisProcess(root / "redis").start()
    prefix = f"bench-quotas-{uuid.uuid4().hex[:6]}:"
    servers = [ServiceProcess(f"replica-{n}", root / f"replica-{n}", workers=2, redis_url=store.url, key_prefix=prefix,
                              keys_file=str(root / "keys.json"), durability="reply", access_log_level="off",
                              rate_reservation_seconds=args.reservation)
               for n in (1, 2)]
    start_all(servers)
    try:
        with httpx.Client(base_url=servers[0].url) as http:
            map_id = http.post("/v1/maps", json=SPEC, headers={"Authorization": f"Bearer {KEYS['none']}"}).json()["id"]

        print(f"1. rate limit {args.limit:g}/s, driven at {args.drive:g}/s for {args.seconds:g} s over 8 connections, "
              "2 replicas x 2 workers, one Redis")
        results = asyncio.run(drive(servers, request(map_id, KEYS["paced"]), args.drive, args.seconds))
        sent = np.array([t for t, _ in results])
        ok = np.array([status == 200 for _, status in results])
        refused = sum(status == 429 for _, status in results)
        span = max(sent.max(), 1e-9)
        whole = ok.sum() / args.seconds
        later = ok[sent >= 1.0].sum() / max(span - 1.0, 1e-9)
        bound = (args.limit * args.seconds + args.limit) / args.seconds   # GCRA: burst of 1 s of the rate
        print(f"   sent {len(results)}, accepted {ok.sum()}, refused (429) {refused}, other {len(results) - ok.sum() - refused}")
        print(f"   accepted/s over the run   {whole:7.1f}  = {whole / args.limit:.3f} x limit  "
              f"(bound with the 1 s burst: {bound / args.limit:.3f} x)")
        print(f"   accepted/s after 1 s      {later:7.1f}  = {later / args.limit:.3f} x limit")

        print(f"\n2. single-vector transform latency (rff d=16 D=256, JSON, one keep-alive connection to replica 1), "
              f"{args.rounds} interleaved rounds x {args.samples} requests per key")
        names = ("none", "rate", "leases", "both")
        payloads = {name: [request(map_id, KEYS[name])] for name in names}
        samples: dict[str, list[np.ndarray]] = {name: [] for name in names}
        cpu: dict[str, float] = dict.fromkeys(names, 0.0)
        pids = group_members(servers[0].pgid) + [store.pid]   # the replica and Redis
        connection = raw_http.Connection("127.0.0.1", servers[0].port)
        for name in names:   # warm up every path
            raw_http.latencies_us(connection, payloads[name], 100)
        for _ in range(args.rounds):
            for name in names:
                before = cpu_seconds(pids)
                samples[name].append(raw_http.latencies_us(connection, payloads[name], args.samples))
                cpu[name] += cpu_seconds(pids) - before
        base = np.concatenate(samples["none"])
        base_p50, base_p99 = np.percentile(base, 50), np.percentile(base, 99)
        print(f"   {'key':<22}{'p50 us':>9}{'p99 us':>9}{'p50 x':>8}{'p99 x':>8}{'+p50 us':>9}{'CPU us/req (server+Redis)':>28}")
        labels = {"none": "no limits", "rate": "requests/s", "leases": "concurrent requests", "both": "both"}
        for name in names:
            values = np.concatenate(samples[name])
            p50, p99 = np.percentile(values, 50), np.percentile(values, 99)
            per_request = cpu[name] / values.size * 1e6
            print(f"   {labels[name]:<22}{p50:9.0f}{p99:9.0f}{p50 / base_p50:8.2f}{p99 / base_p99:8.2f}"
                  f"{p50 - base_p50:9.0f}{per_request:28.0f}")
    finally:
        problems = stop_all(servers)
        store.stop()
        if problems:
            print("servers did not stop cleanly:", problems, file=sys.stderr)


if __name__ == "__main__":
    main()
