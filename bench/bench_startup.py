"""What a fresh process pays before its first answer: imports, and the first call of every method.

    PYTHONPATH=app python bench/bench_startup.py [--repeats 3] [--methods rff,gcws] [--no-warm] [--write]

Every figure is a fresh `python` process (timed from outside: wall, and CPU of the child from
`getrusage`), median over the repeats, contenders interleaved (one repeat of each, then the next):
- `python -c pass` (the interpreter's own floor), `import featurehash`, `from featurehash import create_map`,
  `featurehash --version` (the console script's call: `featurehash.cli.main(["--version"])`);
- per method, its first call: import, `create_map` of a small spec (input_dim 16, n_components 64), and the
  first transform (and hash, for maps with codes) of a 4 x 16 float32 batch. "cold": NUMBA_CACHE_DIR is a
  new empty directory (a fresh container or worker: every kernel it needs compiles); "warm": the directory
  a previous process of the same method filled (numba loads its kernels from the cache). The child also
  reports its own split (import / create / first call) and the numba kernels it compiled.
The machine's load moves every figure: read CPU time beside wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

X_ROWS, INPUT_DIM, N_COMPONENTS = 4, 16, 64
SPECS = {
    "rff": {"gamma": 0.1},
    "nrff": {"gamma": 1.0},
    "gcws": {},
    "ssf": {"gamma": 0.1},
    "srf": {"degree": 3, "bias": 2.0},
    "quadrature": {"gamma": 0.1},
    "binning": {"gamma": 0.1},
    "additive_chi2": {},
    "skewed_chi2": {"skewedness": 0.5},
    "random_maclaurin": {"degree": 2, "coef0": 1.0},
    "tensorsketch": {"degree": 2, "coef0": 1.0},
    "nystroem": {"fit_sample": "__sample__"},
    "hashing": {},
}

# The child: one method's first call, timed inside (its split), with the count of numba compilations.
CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from featurehash import create_map
t1 = time.perf_counter()
import numpy as np
method, params, rows, dim, width = json.loads(sys.argv[1])
X = np.abs(np.random.default_rng(0).standard_normal((rows, dim))).astype(np.float32) + 0.1
if params.get("fit_sample") == "__sample__":
    params["fit_sample"] = (np.abs(np.random.default_rng(1).standard_normal((2 * width, dim))) + 0.1).tolist()
compiled = []
def count_compiles():
    from numba.core import event
    class Count(event.Listener):
        def on_start(self, e): pass
        def on_end(self, e): compiled.append(1)
    event.register("numba:compile", Count())
spec = {"method": method, "n_components": width, "seed": 1, "params": params}
if method == "hashing":
    X = ["the quick brown fox", "jumps over", "the lazy dog", "again and again"][:rows]
else:
    spec["input_dim"] = dim
import importlib.util
if importlib.util.find_spec("numba") is not None and "--count" in sys.argv:
    count_compiles()
t2 = time.perf_counter()
m = create_map(spec)
t3 = time.perf_counter()
m.transform(X)
if getattr(m, "has_hash", False):
    m.hash(X)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "create": t3 - t2, "first_call": t4 - t3, "compiles": len(compiled)}))
"""


def _run(args: list[str], env: dict) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system of the child) of one process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{args[:3]} failed: {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _median(rows: list[tuple]) -> tuple:
    return tuple(statistics.median(column) for column in zip(*rows))


OUTPUT = Path(__file__).resolve().parent / "results" / "startup.txt"
_printed: list[str] = []


def say(line: str) -> None:
    """Print, and keep the line for --write."""
    print(line, flush=True)
    _printed.extend(line.split("\n"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", default=",".join(SPECS))
    parser.add_argument("--no-warm", action="store_true", help="cold first calls only")
    parser.add_argument("--no-imports", action="store_true", help="skip the import figures")
    parser.add_argument("--count", action="store_true", help="count numba compilations (imports numba "
                        "before create_map: its split then shows numba's import under 'import')")
    parser.add_argument("--write", action="store_true", help="also write bench/results/startup.txt")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    env = dict(os.environ)
    python = sys.executable
    say(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, "
          f"repeats {args.repeats} (medians)")

    if not args.no_imports:
        imports = {
            "python -c pass": [python, "-c", "pass"],
            "import featurehash": [python, "-c", "import featurehash"],
            "from featurehash import create_map": [python, "-c", "from featurehash import create_map"],
            "featurehash --version": [python, "-c", "from featurehash.cli import main; main(['--version'])"],
            "... + numpy (for reference)": [python, "-c", "from featurehash import create_map; import numpy"],
        }
        runs = {name: [] for name in imports}
        for _ in range(args.repeats):
            for name, command in imports.items():
                runs[name].append(_run(command, env)[:2])
        say(f"\n{'start-up':40s} {'wall s':>8s} {'cpu s':>8s}")
        for name, rows in runs.items():
            wall, cpu = _median(rows)
            say(f"{name:40s} {wall:8.3f} {cpu:8.3f}")

    kinds = ["cold"] if args.no_warm else ["cold", "warm"]
    with tempfile.TemporaryDirectory(prefix="fh-startup-") as root:
        warm_dirs = {method: os.path.join(root, f"warm-{method}") for method in methods}
        results = {(method, kind): [] for method in methods for kind in kinds}
        for repeat in range(args.repeats):
            for method in methods:
                payload = json.dumps([method, dict(SPECS[method]), X_ROWS, INPUT_DIM,
                                      48 if method == "additive_chi2" else N_COMPONENTS])
                for kind in kinds:
                    cache = os.path.join(root, f"cold-{method}-{repeat}") if kind == "cold" else warm_dirs[method]
                    if kind == "warm" and not os.path.isdir(cache):   # filled once, not timed
                        _run([python, "-c", CHILD, payload], {**env, "NUMBA_CACHE_DIR": cache})
                    wall, cpu, out = _run([python, "-c", CHILD, payload, *(["--count"] if args.count else [])],
                                          {**env, "NUMBA_CACHE_DIR": cache})
                    inner = json.loads(out.strip().splitlines()[-1])
                    results[method, kind].append((wall, cpu, inner["import"], inner["create"],
                                                  inner["first_call"], inner["compiles"]))
        say(f"\n{'first call (fresh process)':26s} {'cache':>5s} {'wall s':>8s} {'cpu s':>8s} "
              f"{'import':>8s} {'create':>8s} {'call':>8s} {'compiles':>8s}")
        for (method, kind), rows in results.items():
            wall, cpu, imp, create, call, compiles = _median(rows)
            say(f"{method:26s} {kind:>5s} {wall:8.2f} {cpu:8.2f} {imp:8.2f} {create:8.2f} {call:8.2f} "
                  f"{compiles if args.count else '-':>8}")
    if args.write:
        OUTPUT.write_text("\n".join(_printed) + "\n")
        print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
