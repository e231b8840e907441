"""How far a reader walks to follow one LSH index operation, and how the package's tree is spread.

    python bench/code_walk.py [--redis-url redis://127.0.0.1:6379/0] [--layout 3] [--shards N] [--tree] [--write]

Run it under any checkout (PYTHONPATH=<checkout>/app) to compare two trees. It prints:
- the tree: per folder of the imported `featurehash` package, its .py files and lines;
- the walk of one add and one query on an index of that layout over a real Redis: every featurehash function
  the call runs, traced by sys.setprofile. "files entered" counts the distinct files; "deepest chain" is the
  longest run of file changes down one call stack (a reader following the call from the handle to the last
  helper); "returns" counts the calls that enter a file already lower on the stack (the walk comes back to a
  file it left: the bounce a reader has to track). The add and query run once untraced first, so imports and
  compiles are not in the walk.
`--tree` prints the folders too; `--write` appends the report to bench/results/code_walk.txt, headed by the
checkout's commit.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import featurehash
import numpy as np
import redis
from featurehash.maps import create_map
from featurehash.store import LSHIndexes

PACKAGE = Path(featurehash.__file__).resolve().parent


def tree() -> dict[str, tuple[int, int]]:
    folders: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path in sorted(PACKAGE.rglob("*.py")):
        folder = str(path.parent.relative_to(PACKAGE.parent))
        folders[folder][0] += 1
        folders[folder][1] += sum(1 for _ in path.open(encoding="utf-8"))
    return {folder: (files, lines) for folder, (files, lines) in sorted(folders.items())}


class Walk:
    """The featurehash files a call passes through, from the profiler's call and return events."""

    def __init__(self):
        self.stack: list[str | None] = []
        self.files: set[str] = set()
        self.returns = 0
        self.deepest = 0
        self.calls = 0

    def _file(self, frame) -> str | None:
        name = frame.f_code.co_filename
        if not name.startswith(str(PACKAGE)):
            return None
        return str(Path(name).relative_to(PACKAGE.parent))

    def __call__(self, frame, event, arg):
        if event == "call":
            file = self._file(frame)
            if file is not None:
                self.calls += 1
                self.files.add(file)
                path = [f for f in self.stack if f is not None] + [file]
                if len(path) > 1 and path[-2] != file and file in path[:-1]:
                    self.returns += 1
                self.deepest = max(self.deepest, sum(a != b for a, b in zip(path, path[1:])))
            self.stack.append(file)
        elif event == "return" and self.stack:
            self.stack.pop()

    def run(self, function):
        sys.setprofile(self)
        try:
            return function()
        finally:
            sys.setprofile(None)


def walks(url: str, layout: int | None, shards: int | None) -> dict[str, Walk]:
    client = redis.Redis.from_url(url)
    prefix = f"walk-{uuid.uuid4().hex[:8]}:"
    indexes = LSHIndexes(client, key_prefix=prefix)
    feature_map = create_map({"method": "gcws", "input_dim": 32, "n_components": 128, "seed": 11})
    options = {"name": "walk", "threshold": 0.7}
    if layout is not None:
        options["layout"] = layout
    if shards is not None:
        options["shards"] = shards
    rng = np.random.default_rng(1)
    X = rng.lognormal(0.0, 2.0, (400, 32)).astype(np.float32)
    try:
        index = indexes.create(feature_map, **options)
        index.add([f"w{i}" for i in range(200)], X[:200])
        index.query(X[:1])
        add, query = Walk(), Walk()
        add.run(lambda: index.add([f"x{i}" for i in range(200)], X[200:]))
        query.run(lambda: index.query(X[:1]))
        return {"add": add, "query": query}
    finally:
        keys = list(client.scan_iter(f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.unlink(*keys[start:start + 500])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--layout", type=int, default=None)
    parser.add_argument("--shards", type=int, default=None)
    parser.add_argument("--tree", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", str(PACKAGE), "rev-parse", "--short", "HEAD"], capture_output=True, check=False,
                            text=True).stdout.strip()
    lines = [f"checkout {commit} ({PACKAGE})"]
    if args.tree:
        total_files = total_lines = 0
        for folder, (files, count) in tree().items():
            lines.append(f"  {folder:<45} {files:>4} files {count:>7,} lines")
            total_files, total_lines = total_files + files, total_lines + count
        lines.append(f"  {'total':<45} {total_files:>4} files {total_lines:>7,} lines")
    label = f"layout {args.layout or 'default'}" + (f", {args.shards} shards" if args.shards else "")
    for name, walk in walks(args.redis_url, args.layout, args.shards).items():
        lines.append(f"{name} ({label}): files entered {len(walk.files)}, deepest chain {walk.deepest} file "
                     f"changes, returns {walk.returns}, featurehash calls {walk.calls}")
        lines.extend(f"    {file}" for file in sorted(walk.files))
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if args.write:
        with (Path(__file__).resolve().parent / "results" / "code_walk.txt").open("a", encoding="utf-8") as out:
            out.write(report + "\n")

if __name__ == "__main__":
    main()
