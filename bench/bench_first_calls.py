"""First calls over HTTP, before and after the service compiled a map's kernels in the background.

    python bench/bench_first_calls.py [--methods rff,nrff,srf,ssf,gcws,binning,nystroem] [--grid-repeats 3] [--write]

Three services are started one after the other, each with its own empty numba cache (NUMBA_CACHE_DIR in a
temporary directory) and embedded Redis: "before" with FEATUREHASH_WARM_MAPS=false (the behaviour before
service/first_calls.py: every kernel compiles inside the request that first needs it), "after" with the
default (a map's kernels compile on a background thread from its creation), then a third service as "after" whose
first transform comes `--idle` seconds (15) after each creation. For each method in turn, in the same order in
all three: the map's creation (POST /v1/maps), at once (or after the idle seconds) its first transform asking
float64 features (8 JSON rows), then its first float32 call (the default), then one more float32 call. Wall seconds as the client sees them, and what the answer's X-Featurehash-Compiled
header said (waited / compiled seconds; "-" when absent). The first request of each service also pays the
imports of numpy, scipy and numba in the worker (in both runs alike). Load average printed before each run.
Then the first GridSearchCV(n_jobs=2) of a fresh process, whose loky workers are fresh processes too: RBFSampler
against RandomFourierFeatures with an empty numba cache and with the cache that run left (wall, and CPU counting
the workers). Only --write writes bench/results/first_calls.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "first_calls.txt"
DIM = 64
FIT_SAMPLE = np.abs(np.random.default_rng(3).standard_normal((64, DIM))).round(4).tolist()
SPECS = {
    "rff": {"n_components": 1024, "params": {"gamma": 0.1}},
    "nrff": {"n_components": 1024, "params": {"gamma": 1.0}},
    "srf": {"n_components": 1024, "params": {"degree": 3, "bias": 2.0}},
    "ssf": {"n_components": 1024, "params": {"gamma": 0.1}},
    "gcws": {"n_components": 256, "params": {"bits": 8}},
    "binning": {"n_components": 256, "params": {"gamma": 0.1}},
    "nystroem": {"n_components": 32, "params": {"gamma": 0.1, "fit_sample": FIT_SAMPLE}},
}
ROWS = np.abs(np.random.default_rng(4).standard_normal((8, DIM))).round(4).tolist()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def timed(call):
    start = time.perf_counter()
    answer = call()
    answer.raise_for_status()
    return time.perf_counter() - start, answer.headers.get("x-featurehash-compiled", "-")


def run(label: str, warm: bool, methods: list[str], say, idle: float = 0.0) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f"first-calls-{'after' if warm else 'before'}-"))
    port = free_port()
    env = {**os.environ, "NUMBA_CACHE_DIR": str(scratch / "numba"), "FEATUREHASH_WARM_MAPS": str(warm).lower(),
           "FEATUREHASH_ACCESS_LOG_LEVEL": "off"}
    server = subprocess.Popen([sys.executable, "-m", "featurehash.cli", "serve", "--port", str(port), "--data-dir",
                               str(scratch / "data")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=600) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the service did not start")
                time.sleep(0.2)
            say(f"\n{label} (FEATUREHASH_WARM_MAPS={str(warm).lower()}; load average "
                f"{' '.join(f'{v:.2f}' for v in os.getloadavg())})")
            say(f"  {'method':9s} {'create s':>9s} {'first f64 s':>12s} {'first f32 s':>12s} {'next f32 s':>11s}   "
                f"X-Featurehash-Compiled (create | first f64 | first f32)")
            for method in methods:
                spec = {"method": method, "input_dim": DIM, "seed": 1, **SPECS[method]}
                created, created_header = timed(lambda: client.post("/v1/maps", json=spec))
                map_id = client.post("/v1/maps", json=spec).json()["id"]
                time.sleep(idle)   # a first request some time after the creation (the background's chance)
                body = {"vectors": ROWS}
                f64, f64_header = timed(lambda: client.post(f"/v1/maps/{map_id}/transform?dtype=float64", json=body))
                f32, f32_header = timed(lambda: client.post(f"/v1/maps/{map_id}/transform", json=body))
                again, _ = timed(lambda: client.post(f"/v1/maps/{map_id}/transform", json=body))
                say(f"  {method:9s} {created:9.2f} {f64:12.2f} {f32:12.2f} {again:11.3f}   "
                    f"{created_header} | {f64_header} | {f32_header}")
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(scratch, ignore_errors=True)


# -- GridSearchCV(n_jobs=2): each loky worker is a fresh process ---------------------------------------------

GRID_SCRIPT = """
import json, resource, sys, time
start = time.perf_counter()
import numpy as np
from joblib.externals.loky import get_reusable_executor
from sklearn.datasets import make_classification
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
X, y = make_classification(n_samples=2000, n_features=64, random_state=0)
if sys.argv[1] == "RBFSampler":
    from sklearn.kernel_approximation import RBFSampler as Features
else:
    from featurehash.sklearn import RandomFourierFeatures as Features
pipeline = make_pipeline(Features(n_components=256, random_state=0), RidgeClassifier())
name = pipeline.steps[0][0]
GridSearchCV(pipeline, {name + "__gamma": [0.003, 0.01, 0.03]}, cv=3, n_jobs=2).fit(X, y)
wall = time.perf_counter() - start
get_reusable_executor().shutdown(wait=True)   # the workers reaped, so that their CPU counts below
cpu = sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
          for field in ("ru_utime", "ru_stime"))
print(json.dumps({"wall": wall, "cpu": cpu}))
"""


def grid_search(say, repeats: int) -> None:
    """The first GridSearchCV of a fresh process (n_jobs=2, D = 256, 3 gammas x 3 folds): RBFSampler, then
    RandomFourierFeatures with an empty numba cache (each worker compiles the kernels), then with the cache
    the previous run left (each worker loads them); interleaved rounds, medians."""
    runs: dict[str, list[dict]] = {"RBFSampler": [], "featurehash, empty cache": [], "featurehash, warm cache": []}
    for _ in range(repeats):
        cache = Path(tempfile.mkdtemp(prefix="first-calls-grid-"))
        try:
            for label, estimator in (("RBFSampler", "RBFSampler"), ("featurehash, empty cache", "rff"),
                                     ("featurehash, warm cache", "rff")):
                env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
                out = subprocess.run([sys.executable, "-c", GRID_SCRIPT, estimator], env=env, check=True,
                                     capture_output=True, text=True).stdout
                runs[label].append(json.loads(out.splitlines()[-1]))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    say(f"\nGridSearchCV(n_jobs=2) in a fresh process: pipeline(features D = 256, RidgeClassifier), 2000 x 64, "
        f"3 gammas x 3 folds; {repeats} interleaved rounds, medians; CPU counts the loky workers (load average "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())})")
    say(f"  {'features':26s} {'wall s':>7s} {'CPU s':>7s} {'wall / RBFSampler':>18s} {'CPU / RBFSampler':>17s}")
    base = {key: float(np.median([run[key] for run in runs["RBFSampler"]])) for key in ("wall", "cpu")}
    for label, measured in runs.items():
        wall, cpu = (float(np.median([run[key] for run in measured])) for key in ("wall", "cpu"))
        say(f"  {label:26s} {wall:7.2f} {cpu:7.2f} {wall / base['wall']:18.2f} {cpu / base['cpu']:17.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(SPECS))
    parser.add_argument("--idle", type=float, default=15.0, help="seconds between creation and first transform "
                        "in the third run")
    parser.add_argument("--grid-repeats", type=int, default=3, help="rounds of the GridSearchCV section (0: none)")
    parser.add_argument("--http", action=argparse.BooleanOptionalAction, default=True,
                        help="the three services' first calls (--no-http: the GridSearchCV section alone)")
    parser.add_argument("--write", action="store_true", help=f"overwrite {RESULTS.relative_to(RESULTS.parents[2])}")
    args = parser.parse_args()
    printed: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    methods = args.methods.split(",")
    say(f"First calls over HTTP on {os.cpu_count()} cores, d = {DIM}, 8 JSON rows a request, each service with an "
        "empty numba cache; wall seconds seen by the client")
    if args.http:
        run("before: kernels compile in the request", False, methods, say)
        run("after: kernels compile in the background from the map's creation", True, methods, say)
        run(f"after, first transform {args.idle:g} s after the creation", True, methods, say, args.idle)
    if args.grid_repeats:
        grid_search(say, args.grid_repeats)
    if args.write:
        RESULTS.write_text("\n".join(printed) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
