"""What counting a map's stored bytes (issue 42) costs a map creation in Redis, and what the issue's map counts.

    python bench/bench_map_quota.py [--maps 300] [--rounds 7] [--skip-issue-spec]

Starts its own standalone Redis (tests/service_support.RedisProcess, no persistence) and creates small rff maps
(distinct seeds, ~230-byte specs) through `SpecStore.create` in three ways, interleaved round by round:
"before" (the store's previous create: one MULTI/EXEC of SET NX, ZADD, SET NX alias, SADD), "counted" (the
create script: limit check, spec, listing, charge, alias, total), and "counted + room" (the service's path for
a tenant with a limit: `check_room`'s GET + EXISTS round trip, then the script). Printed per way: the client's
wall time per create (median of the rounds' means, a loopback round trip included) and Redis's own time per
create (INFO commandstats: the usec of every command the way sends, over the creates). Then the issue's spec
(nystroem, fit_sample 1000 x 64, n_components 1000): the bytes it counts and its refusal for a
200,000-byte tenant (nothing stored).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import redis
import redis.asyncio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from service_support import RedisProcess  # noqa: E402

from featurehash.maps import create_map  # noqa: E402
from featurehash.store import SpecStore  # noqa: E402
from featurehash.store.map_accounting import MapBytesExceeded, MapPayer  # noqa: E402


def specs(start: int, count: int) -> list[dict]:
    return [create_map({"method": "rff", "input_dim": 3, "n_components": 4, "seed": seed,
                        "params": {"gamma": 0.5}}).describe() for seed in range(start, start + count)]


async def before(store: SpecStore, spec: dict) -> None:
    """The create the store made before counting (commit 05f8e9d's SpecStore._create_steps)."""
    map_id, prefix = spec["id"], store._prefix
    async with store.redis.pipeline(transaction=True) as pipe:
        pipe.execute_command("SET", f"{prefix}map:{map_id}", orjson.dumps(spec), "NX")
        pipe.execute_command("ZADD", f"{prefix}maps", 0, map_id)
        pipe.execute_command("SET", f"{prefix}alias:{map_id}", map_id, "NX")
        pipe.execute_command("SADD", f"{prefix}map_aliases:{map_id}", map_id)
        await pipe.execute()


async def counted(store: SpecStore, spec: dict, payer: MapPayer) -> None:
    await store.create(spec, alias=spec["id"], payer=payer)


async def with_room(store: SpecStore, spec: dict, payer: MapPayer) -> None:
    await store.check_room(payer, spec["id"])
    await store.create(spec, alias=spec["id"], payer=payer)


def redis_usec(client: redis.Redis) -> float:
    return sum(stats["usec"] for name, stats in client.info("commandstats").items())


async def measure(url: str, maps: int, rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    sync = redis.Redis.from_url(url)
    connection = redis.asyncio.Redis.from_url(url)
    store = SpecStore(connection, "bench:")
    payer = MapPayer("team-a", 10**12)
    ways = {"before": lambda spec: before(store, spec), "counted": lambda spec: counted(store, spec, payer),
            "counted + room": lambda spec: with_room(store, spec, payer)}
    found = {name: ([], []) for name in ways}
    seed = 1
    for _ in range(rounds):
        for name, way in ways.items():
            batch = specs(seed, maps)
            seed += maps
            sync.flushall()
            sync.config_resetstat()
            started = time.perf_counter()
            for spec in batch:
                await way(spec)
            wall = (time.perf_counter() - started) / maps
            usec = redis_usec(sync) / maps
            found[name][0].append(wall * 1e6)
            found[name][1].append(usec)
    await connection.aclose()
    sync.close()
    return found


async def issue_spec(url: str) -> None:
    sample = np.random.default_rng(0).random((1000, 64)).round(6)
    started = time.perf_counter()
    document = create_map({"method": "nystroem", "input_dim": 64, "n_components": 1000, "seed": 1,
                           "params": {"fit_sample": sample.tolist()}}).describe()
    fitted = time.perf_counter() - started
    size = len(orjson.dumps(document))
    connection = redis.asyncio.Redis.from_url(url)
    await connection.flushall()
    store = SpecStore(connection, "bench:", max_spec_bytes=16 * 2**20)
    try:
        await store.create(document, payer=MapPayer("team-a", 200_000))
        print("issue spec: NOT refused")
    except MapBytesExceeded as refused:
        print(f"issue spec (nystroem 1000 x 64, n_components 1000; fit {fitted:.1f} s): counts {size} bytes "
              f"({size / 2**20:.2f} MiB); a 200,000-byte tenant: refused (used {refused.used}, needed "
              f"{refused.needed}); keys stored: {await connection.dbsize()}")
    await connection.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--skip-issue-spec", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server = RedisProcess(Path(folder)).start()
        try:
            found = asyncio.run(measure(server.url, options.maps, options.rounds))
            print(f"{options.maps} creates a round, {options.rounds} rounds, medians of the rounds' means:")
            base_wall, base_usec = (statistics.median(values) for values in found["before"])
            for name, (wall, usec) in found.items():
                print(f"  {name:15s} client wall {statistics.median(wall):6.1f} us/create "
                      f"(+{statistics.median(wall) - base_wall:5.1f})   Redis {statistics.median(usec):5.1f} us/create "
                      f"(+{statistics.median(usec) - base_usec:4.1f})")
            if not options.skip_issue_spec:
                asyncio.run(issue_spec(server.url))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
