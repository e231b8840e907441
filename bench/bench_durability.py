"""What a durable acknowledgement costs: adding LSH index items with FEATUREHASH_DURABILITY=aof against reply.

    python bench/bench_durability.py [--rounds 5] [--single 200] [--batches 10] [--write]

"aof" answers a write only after one more round trip (INFO persistence: the append-only file took it),
"reply" on Redis's reply. Starts two `featurehash serve` (embedded Redis, temporary data directories,
one worker, REDIS_URL removed from their environment), one per setting, and alternates between them,
round by round, so that the host's noise falls on both alike:

- HTTP, one item per request, sequential (where the extra round trip weighs most): median latency;
- HTTP, .npy batches of 1,000 items: items per second;
- library (featurehash.store.LSHIndexes over the first server's Redis socket, durability "aof" and
  "reply"): one item per add() call, and batches of 1,000.

Prints the median over rounds of each figure; --write also saves bench/results/durability.txt.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import redis

from featurehash.maps import create_map
from featurehash.store import LSHIndexes

RESULTS = Path(__file__).parent / "results" / "durability.txt"
GCWS = {"method": "gcws", "input_dim": 64, "n_components": 64, "seed": 3, "params": {"bits": 8}}
BATCH = 1000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(durability: str, data_dir: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("FEATUREHASH_") and key != "REDIS_URL"}
    env.update(FEATUREHASH_DURABILITY=durability, FEATUREHASH_ACCESS_LOG_LEVEL="off")
    process = subprocess.Popen([sys.executable, "-m", "featurehash.cli", "serve", "--port", str(port), "--data-dir",
                                data_dir], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"featurehash serve ({durability}) did not get ready")


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


class Writer:
    """Adds items with fresh ids: `single` gives the median seconds of a one-item add, `batches` items/s."""

    next_id = 0

    def _ids(self, n: int) -> list[str]:
        self.next_id += n
        return [f"i{i}" for i in range(self.next_id - n, self.next_id)]

    def add(self, ids: list[str], X: np.ndarray) -> None:
        raise NotImplementedError

    def single(self, X: np.ndarray) -> float:
        times = []
        for row, item_id in zip(X, self._ids(len(X))):
            start = time.perf_counter()
            self.add([item_id], row[None, :])
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def batches(self, batches: list[np.ndarray]) -> float:
        start = time.perf_counter()
        for X in batches:
            self.add(self._ids(len(X)), X)
        return sum(len(X) for X in batches) / (time.perf_counter() - start)


class Http(Writer):
    """Through the service: one item as JSON, a batch as .npy."""

    def __init__(self, url: str):
        self.http = httpx.Client(base_url=url, timeout=120)
        map_id = self.http.post("/v1/maps", json=GCWS).json()["id"]
        self.http.post("/v1/indexes", json={"map_id": map_id, "name": "bench", "bands": 16, "rows": 4})

    def add(self, ids: list[str], X: np.ndarray) -> None:
        if len(ids) == 1:
            response = self.http.post("/v1/indexes/bench/items", json={"ids": ids, "vectors": X.tolist()})
        else:
            response = self.http.post("/v1/indexes/bench/items", content=_npy(X), params={"ids": ids},
                                      headers={"Content-Type": "application/x-npy"})
        assert response.status_code == 200, response.text


class Library(Writer):
    def __init__(self, socket_path: str, durability: str):
        self.client = redis.Redis(unix_socket_path=socket_path)
        indexes = LSHIndexes(self.client, key_prefix=f"bench-{durability}:", durability=durability)
        self.index = indexes.create(create_map(GCWS), name="bench", bands=16, rows=4)

    def add(self, ids: list[str], X: np.ndarray) -> None:
        self.index.add(ids, X)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--single", type=int, default=200, help="one-item adds per round")
    parser.add_argument("--batches", type=int, default=10, help=f"batches of {BATCH} per round")
    parser.add_argument("--write", action="store_true", help=f"also write the report to {RESULTS}")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {mode: _start(mode, f"{tmp}/{mode}") for mode in ("aof", "reply")}
        try:
            http = {mode: Http(url) for mode, (_, url) in servers.items()}
            library = {mode: Library(f"{tmp}/aof/redis.sock", mode) for mode in ("aof", "reply")}
            for _ in range(args.rounds):
                for mode in ("aof", "reply"):
                    single = rng.random((args.single, GCWS["input_dim"]))
                    batches = [rng.random((BATCH, GCWS["input_dim"])) for _ in range(args.batches)]
                    measured = ((f"http {mode}: one item per request, median ms", http[mode].single(single) * 1e3),
                                (f"http {mode}: batches of {BATCH}, items/s", http[mode].batches(batches)),
                                (f"library {mode}: one item per add(), median ms", library[mode].single(single) * 1e3),
                                (f"library {mode}: batches of {BATCH}, items/s", library[mode].batches(batches)))
                    for name, value in measured:
                        figures.setdefault(name, []).append(value)
        finally:
            for process, _ in servers.values():
                process.send_signal(signal.SIGTERM)
                process.wait(60)
    lines = [f"featurehash durability cost: {args.rounds} rounds, medians; load average {os.getloadavg()[0]:.1f}, "
             f"{os.cpu_count()} cores"]
    lines += [f"{name:55s} {statistics.median(values):10.2f}   (rounds: {', '.join(f'{v:.2f}' for v in values)})"
              for name, values in sorted(figures.items())]
    report = "\n".join(lines)
    print(report)
    if args.write:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(report + "\n")


if __name__ == "__main__":
    main()
