"""What one request may cost: peak memory creating the largest allowed maps, and a worker's extra
memory and /healthz latency while it streams a very large answer.

    python bench/bench_robustness.py [--only creation|answers]

1. Creation: each method's largest map under the service's default limits (1 GiB of parameters,
   256 MiB GCWS / binning tables) is created in a fresh subprocess; printed is its peak RSS above
   the RSS just before, as a ratio to the parameter bytes the map reports (1.0 = no temporaries).
2. Answers: `featurehash serve` (one worker, embedded Redis, default settings) answers a 313 MiB
   .npy and a ~540 MB JSON transform; printed are the worker's peak RSS above its RSS before the
   request (sampled from /proc every 5 ms) and /healthz latency from a concurrent client.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

MIB = 2**20
D = 784
# The largest specs within 1 GiB of parameters (GCWS and binning: within the 256 MiB table budget).
LARGEST = {
    "rff": {"method": "rff", "input_dim": D, "n_components": 684_784},
    "nrff": {"method": "nrff", "input_dim": D, "n_components": 341_955},
    "srf": {"method": "srf", "input_dim": D, "n_components": 341_955},
    "quadrature": {"method": "quadrature", "input_dim": D, "n_components": 682_172},
    "quadrature_anova": {"method": "quadrature", "input_dim": 2**16 + 31, "n_components": 2**22,
                         "params": {"anova": {"window": 32}, "grid": "subsampled"}},
    "random_maclaurin": {"method": "random_maclaurin", "input_dim": D, "n_components": 113_985},
    "tensorsketch": {"method": "tensorsketch", "input_dim": 29_826_161, "n_components": 4096},
    "ssf": {"method": "ssf", "input_dim": 4096, "n_components": 2**15},
    "gcws": {"method": "gcws", "input_dim": D, "n_components": 10_699},
    "binning": {"method": "binning", "input_dim": D, "n_components": 21_399},
}

_CHILD = """
import json, resource, sys, time
from featurehash import create_map

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

spec = json.loads(sys.argv[1])
options = {"table_budget_bytes": 256 * 2**20} if spec["method"] in ("gcws", "binning") else {}
create_map({"method": spec["method"], "input_dim": 4, "n_components": 16}, **options).materialize()  # imports, JIT
before = rss()
start = time.perf_counter()
feature_map = create_map(spec, max_nbytes=2**30, **options).materialize()
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"nbytes": feature_map.nbytes, "extra": peak - before, "seconds": seconds}))
"""


def creation() -> None:
    print("creating the largest allowed map of each method (fresh process each; peak RSS above the RSS before)")
    print(f"{'method':<18}{'parameters MiB':>16}{'peak extra MiB':>16}{'ratio':>8}{'seconds':>9}")
    for name, spec in LARGEST.items():
        out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True, text=True)
        if out.returncode:
            print(f"{name:<18} failed: {out.stderr.strip().splitlines()[-1]}")
            continue
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name:<18}{result['nbytes'] / MIB:>16.1f}{result['extra'] / MIB:>16.1f}"
              f"{result['extra'] / result['nbytes']:>8.2f}{result['seconds']:>9.1f}")


# -- answers ---------------------------------------------------------------------------------------------

def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _worker_pid(launcher: int) -> int:
    """The uvicorn process (`python -m featurehash.service.web`), child of the launcher."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
                command = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if int(stat[1]) == launcher and b"featurehash.service.web" in command:
                return int(name)
    raise RuntimeError("no web worker found")


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _measure(url: str, worker: int, map_id: str, X: np.ndarray, accept: str) -> dict:
    import httpx

    samples, latencies, done = [], [], threading.Event()

    def sample_rss():
        while not done.is_set():
            samples.append(_rss(worker))
            time.sleep(0.005)

    def probe_health():
        with httpx.Client(base_url=url, timeout=30) as http:
            while not done.is_set():
                start = time.perf_counter()
                http.get("/healthz")
                latencies.append(time.perf_counter() - start)
                time.sleep(0.01)

    before = _rss(worker)
    threads = [threading.Thread(target=sample_rss), threading.Thread(target=probe_health)]
    for thread in threads:
        thread.start()
    received, start = 0, time.perf_counter()
    with httpx.Client(base_url=url, timeout=600) as http:
        with http.stream("POST", f"/v1/maps/{map_id}/transform", content=_npy(X),
                         headers={"Content-Type": "application/x-npy", "Accept": accept}) as response:
            assert response.status_code == 200, response.read()[:300]
            for chunk in response.iter_bytes():
                received += len(chunk)
    seconds = time.perf_counter() - start
    done.set()
    for thread in threads:
        thread.join()
    latencies_ms = np.array(latencies) * 1e3
    return {"bytes": received, "seconds": seconds, "extra": max(samples) - before, "before": before,
            "p50": np.percentile(latencies_ms, 50), "p99": np.percentile(latencies_ms, 99),
            "max": latencies_ms.max(), "probes": latencies_ms.size}


def answers() -> None:
    import httpx

    data_dir = Path(tempfile.mkdtemp(prefix="bench-robust-"))
    port = 18000 + os.getpid() % 1000
    env = {key: value for key, value in os.environ.items() if not key.startswith("FEATUREHASH_") and key != "REDIS_URL"}
    launcher = subprocess.Popen([sys.executable, "-m", "featurehash.cli", "serve", "--port", str(port), "--data-dir",
                                 str(data_dir)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server not ready")
            time.sleep(0.1)
        worker = _worker_pid(launcher.pid)
        spec = {"method": "rff", "input_dim": D, "n_components": 4096, "seed": 1, "params": {"gamma": 0.01}}
        map_id = httpx.post(f"{url}/v1/maps", json=spec).json()["id"]
        rng = np.random.default_rng(0)
        print("\na worker streaming large answers (rff 784 -> 4096, float32; body as float32 .npy)")
        print(f"{'answer':<28}{'MB':>8}{'s':>7}{'extra RSS MiB':>15}{'x answer':>10}"
              f"{'healthz p50':>13}{'p99':>8}{'max ms':>8}{'probes':>8}")
        for label, rows, accept in (("npy 20,000 rows", 20_000, "application/x-npy"),
                                    ("JSON 21,000 rows", 21_000, "application/json")):
            X = rng.uniform(0, 1, size=(rows, D)).astype(np.float32)
            result = _measure(url, worker, map_id, X, accept)
            print(f"{label:<28}{result['bytes'] / 1e6:>8.0f}{result['seconds']:>7.1f}{result['extra'] / MIB:>15.0f}"
                  f"{result['extra'] / result['bytes']:>10.3f}{result['p50']:>13.1f}{result['p99']:>8.1f}"
                  f"{result['max']:>8.1f}{result['probes']:>8}")
    finally:
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(60)
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("creation", "answers"))
    args = parser.parse_args()
    if args.only in (None, "creation"):
        creation()
    if args.only in (None, "answers"):
        answers()


if __name__ == "__main__":
    main()
