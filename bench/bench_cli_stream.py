"""The CLI on an .npy larger than memory: peak RSS and throughput against the in-process transform.

    python bench/bench_cli_stream.py [--gigabytes 2.2] [--dir /tmp] [--dim 128] [--components 128] [--keep]

Writes X (float32, n x --dim, --gigabytes in all) under --dir, then in two child processes, each
measured by wait4 (peak RSS = ru_maxrss, which counts mapped file pages too):
1. `featurehash transform --spec rff.json --input X.npy --output Z.npy --quiet` (memory-mapped
   input, output streamed chunk by chunk);
2. the in-process transform of the same rows: np.load(X.npy) whole, then
   `create_map(spec).transform(X)` (timed alone, without the load).
Prints rows/s of both, their ratio, both peak RSS figures, and the largest deviation of the CLI's
output from the in-process one (float32 rounding: the chunks are separate BLAS calls). The files are
deleted at the end unless --keep. The input is in the page cache when the CLI reads it (it was just
written), as it would be on a second pass; nothing here drops caches.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

IN_PROCESS = """
import sys, time, json
import numpy as np
from featurehash import create_map
X = np.load(sys.argv[1])
feature_map = create_map(json.load(open(sys.argv[2]))).materialize()
start = time.perf_counter()
Z = feature_map.transform(X)
seconds = time.perf_counter() - start
np.save(sys.argv[3], Z)
print(seconds)
"""


def write_input(path: Path, rows: int, dim: int, chunk_rows: int = 1 << 18) -> None:
    rng = np.random.default_rng(0)
    with open(path, "wb") as out:
        np.lib.format.write_array_header_1_0(out, {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)})
        for start in range(0, rows, chunk_rows):
            rng.standard_normal((min(chunk_rows, rows - start), dim), dtype=np.float32).tofile(out)


def run_measured(command: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes, stdout) of a child process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as stdout:
        child = subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        stderr = child.stderr.read().decode()
        stdout.seek(0)
        text = stdout.read().decode()
    if child.returncode != 0:
        raise SystemExit(f"{command[:3]} failed ({child.returncode}): {stderr[-2000:]}")
    return wall, usage.ru_maxrss * 1024, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gigabytes", type=float, default=2.2)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--components", type=int, default=128)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    rows = int(args.gigabytes * 1e9) // (4 * args.dim)
    need = rows * 4 * (args.dim + 2 * args.components) * 1.05
    if shutil.disk_usage(args.dir).free < need:
        raise SystemExit(f"{args.dir} has less than {need / 1e9:.1f} GB free")
    work = Path(tempfile.mkdtemp(prefix="featurehash-stream-", dir=args.dir))
    try:
        spec = {"method": "rff", "input_dim": args.dim, "n_components": args.components, "seed": 1,
                "params": {"gamma": 1.0 / args.dim}}
        (work / "spec.json").write_text(json.dumps(spec))
        write_input(work / "x.npy", rows, args.dim)
        size = (work / "x.npy").stat().st_size
        featurehash = shutil.which("featurehash", path=str(Path(sys.executable).parent))
        cli = [featurehash] if featurehash else [sys.executable, "-m", "featurehash.cli"]
        cli_wall, cli_rss, _ = run_measured(cli + ["transform", "--spec", str(work / "spec.json"), "--input",
                                                   str(work / "x.npy"), "--output", str(work / "z_cli.npy"),
                                                   "--quiet"])
        in_wall, in_rss, printed = run_measured([sys.executable, "-c", IN_PROCESS, str(work / "x.npy"),
                                                 str(work / "spec.json"), str(work / "z_in.npy")])
        in_transform = float(printed.split()[-1])
        streamed, whole = np.load(work / "z_cli.npy", mmap_mode="r"), np.load(work / "z_in.npy", mmap_mode="r")
        block = 1 << 18
        deviation = max(float(np.abs(streamed[s:s + block] - whole[s:s + block]).max())
                        for s in range(0, rows, block))
        print(f"input {size / 1e9:.2f} GB ({rows} x {args.dim} float32), rff D = {args.components}, "
              f"output {rows * args.components * 4 / 1e9:.2f} GB float32")
        print(f"{'':34s} {'seconds':>8s} {'Mrows/s':>8s} {'peak RSS':>10s}")
        print(f"{'CLI (mmap in, streamed out)':34s} {cli_wall:8.2f} {rows / cli_wall / 1e6:8.3f} "
              f"{cli_rss / 2**20:7.0f} MiB")
        print(f"{'in-process transform (no I/O)':34s} {in_transform:8.2f} {rows / in_transform / 1e6:8.3f} "
              f"{in_rss / 2**20:7.0f} MiB")
        print(f"{'in-process load + transform + save':34s} {in_wall:8.2f} {rows / in_wall / 1e6:8.3f}")
        print(f"CLI throughput / in-process transform: {in_transform / cli_wall:.2f}; "
              f"/ in-process with I/O: {in_wall / cli_wall:.2f}")
        print(f"CLI peak RSS: {cli_rss / 2**20:.0f} MiB (goal < 300 MiB); largest |CLI - in-process|: {deviation:.2e}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
