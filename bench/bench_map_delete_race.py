"""What a DELETE of a map and a POST /v1/indexes over it answer when they race.

    python bench/bench_map_delete_race.py [--races N] [--workers W]

Starts `featurehash serve` (embedded Redis, W workers; tests/service_support.py), then N times:
create a fresh GCWS map, release DELETE /v1/maps/{id} (no ?force) and POST /v1/indexes over it from
two threads at once, and count the pairs of answers. (204, 201) is the inconsistent one: the map was
deleted without ?force although an index was made over it. (204, 404) and (409, 201) are the two
orders; (409, 404) means each saw the other (the map is put back, the index removed). Prints the
counts and whether any index outlived its map.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from service_support import ServiceProcess, race_map_delete_with_index_create, start_all, stop_all  # noqa: E402


def race(server: ServiceProcess, races: int) -> tuple[collections.Counter, int]:
    outcomes, orphans = collections.Counter(), 0
    with server.client() as deleter, server.client() as creator:
        for i in range(races):
            spec = {"method": "gcws", "input_dim": 4, "n_components": 8, "seed": 500_000 + i}
            map_id = deleter.post("/v1/maps", json=spec).json()["id"]
            name = f"race-{i}"
            outcomes[race_map_delete_with_index_create(deleter, creator, map_id, name)] += 1
            if creator.get(f"/v1/indexes/{name}").status_code == 200 and \
                    deleter.get(f"/v1/maps/{map_id}").status_code == 404:
                orphans += 1
            creator.delete(f"/v1/indexes/{name}")
            deleter.delete(f"/v1/maps/{map_id}", params={"force": "true"})
    return outcomes, orphans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--races", type=int, default=150)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServiceProcess("race", Path(tmp), workers=args.workers)
        start_all([server])
        try:
            outcomes, orphans = race(server, args.races)
        finally:
            problems = stop_all([server])
    print(f"{args.races} races, {args.workers} workers: (DELETE map, POST index) -> count")
    for pair, count in sorted(outcomes.items()):
        print(f"  {pair}: {count}")
    print(f"indexes left over a deleted map: {orphans}")
    if problems:
        print("server did not stop cleanly:", "; ".join(problems))


if __name__ == "__main__":
    main()
