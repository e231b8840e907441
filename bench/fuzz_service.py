"""A schemathesis fuzz of every operation of `featurehash serve`, as three callers (an admin key, a tenant's
read+write key, no key), with a seed given on the command line: the requests by status code per caller, and
every 5xx with its reproduction (issue 42: "a new fuzz run (new seeds, every operation, three keys): counts by
status, 0 5xx").

    python bench/fuzz_service.py --seed 4242 [--max-examples 20] [--stateful-steps 10] [--callers admin,tenant,none]
        [--default-limits] [--no-pinned] [--workers 1]

One `featurehash serve` (its embedded Redis, in a temporary directory) reads a keys file with two keys: "fuzz-admin"
(tenant "ops", scope admin) and "fuzz-rw" (tenant "team-fuzz", scopes read and write, with rate, concurrency and
stored-bytes limits, as in tests/service/test_service_fuzz.py, so the fuzz reaches the quota scripts). The service's
limits are the suite's fuzz server's (body 1 MiB, maps 64 MiB, batches of 64 rows: a fuzz of cheap requests)
unless --default-limits. For each caller, in turn on the same server:

1. a free-running pass over the whole OpenAPI document (every operation: examples, coverage, fuzzing and, as the
   installed schemathesis supports it, the stateful phase with links inferred from the responses; `--max-examples`
   per operation, `--stateful-steps`);
2. unless --no-pinned, two passes over the operations that take an id, with `map_id` pinned to a dense map, then
   `map_id` / `index_id` pinned to a GCWS map (input_dim 2, so random vectors often fit) and an index over it
   made by that caller (made with the admin key for the caller without one), so requests reach the numerics and
   the index scripts rather than 404s; no DELETE in these passes.

.npy bodies are generated as 2-D arrays of numbers and sent as .npy files (ragged ones as a broken body). Checks:
not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance (the
failures other than 5xx are counted and the first few printed). Printed per caller: the requests by status code,
the operations of the document it reached, the 5xx (each with a curl command reproducing it and the start of
the answer) and the other check failures; last the totals. Exit code 1 if any 5xx.
Nothing is written; the server's log is printed (its last lines) when it answered a 5xx.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import schemathesis
from schemathesis.engine import Status, events

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from service_support import ServiceProcess  # noqa: E402

KEYS = {"admin": "fuzz-admin-key-0123456789", "tenant": "fuzz-tenant-key-0123456789", "none": None}
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance")
NPY_ROWS_SCHEMA = {"type": "array", "minItems": 1, "maxItems": 4,
                   "items": {"type": "array", "minItems": 1, "maxItems": 6, "items": {"type": "number"}}}
DENSE = {"method": "rff", "input_dim": 2, "n_components": 8, "seed": 3, "params": {"gamma": 0.5}}
GCWS = {"method": "gcws", "input_dim": 2, "n_components": 8, "seed": 4, "params": {"bits": 2}}
GENERATING_PHASES = ("examples", "coverage", "fuzzing", "stateful")
FUZZ_LIMITS = {"max_body_bytes": 2**20, "max_map_bytes": 2**26, "max_batch_rows": 64, "map_cache_bytes": 2**26}


class Tally:
    """What the checks saw for the caller being fuzzed."""

    def __init__(self):
        self.statuses: collections.Counter = collections.Counter()
        self.operations: set[str] = set()
        self.server_errors: list[str] = []
        self.headers: dict[str, str] = {}
        self.url = ""
        self.phase = "?"
        self.phases: collections.Counter = collections.Counter()   # requests by phase
        self.phase_states: dict[str, str] = {}


TALLY = Tally()


@schemathesis.serializer("application/x-npy")
def _npy(ctx, value) -> bytes:
    buffer = io.BytesIO()
    try:
        np.save(buffer, np.asarray(value, dtype=np.float64), allow_pickle=False)
    except (TypeError, ValueError):  # ragged rows: not an array, sent as a broken body
        return b"\x93NUMPY broken"
    return buffer.getvalue()


@schemathesis.check
def record_status(ctx, response, case):
    TALLY.statuses[response.status_code] += 1
    TALLY.phases[TALLY.phase] += 1
    TALLY.operations.add(case.operation.label)
    if response.status_code >= 500:
        try:
            curl = case.as_curl_command(headers=TALLY.headers, base_url=TALLY.url)
        except Exception as exc:  # noqa: BLE001 - a body curl cannot carry: the case as data instead
            curl = f"(no curl: {exc}) {case.method} {case.formatted_path} query={case.query} body={case.body!r:.300}"
        TALLY.server_errors.append(f"{case.method} {case.formatted_path} -> {response.status_code}: "
                                   f"{response.text[:300]}\n      {curl[:2000]}")


def keys_file(directory: Path) -> Path:
    def digest(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()
    document = {"keys": [
        {"name": "fuzz-admin", "tenant": "ops", "scopes": ["admin"], "sha256": digest(KEYS["admin"])},
        {"name": "fuzz-rw", "tenant": "team-fuzz", "scopes": ["read", "write"], "sha256": digest(KEYS["tenant"]),
         "limits": {"requests_per_second": 1000, "concurrent_requests": 8}}],
        "tenants": {"team-fuzz": {"stored_bytes": 2**20}}}
    path = directory / "keys.json"
    path.write_text(json.dumps(document))
    return path


def served_document(url: str) -> dict:
    """The served document, with .npy bodies described as the array they carry (for generation only)."""
    document = httpx.get(f"{url}/openapi.json").json()
    for path in document["paths"].values():
        for operation in path.values():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/x-npy" in content:
                content["application/x-npy"]["schema"] = NPY_ROWS_SCHEMA
    return document


def operation_labels(document: dict) -> set[str]:
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    return {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
            if method in methods}


def run_pass(url: str, document: dict, seed: int, max_examples: int, stateful_steps: int, key: str | None,
             parameters: dict | None = None) -> list[str]:
    """One schemathesis pass; the check failures other than 5xx (those are in TALLY) and engine errors."""
    checks = {"enabled": False, "record_status": {"enabled": True}, **{name: {"enabled": True} for name in CHECKS}}
    settings = {"seed": seed, "generation": {"max-examples": max_examples}, "checks": checks,
                "phases": {"stateful": {"enabled": not parameters, "max-steps": stateful_steps}}}
    if key is not None:
        settings["headers"] = {"Authorization": f"Bearer {key}"}
    if parameters:
        settings["parameters"] = parameters
    schema = schemathesis.openapi.from_dict(document, config=schemathesis.Config.from_dict(settings))
    schema.config.update(base_url=url)
    if parameters:
        schema = schema.include(path_regex="|".join(f"{{{name}}}" for name in parameters)).exclude(method="DELETE")
    problems = []
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.PhaseStarted):
            TALLY.phase = event.phase.name.value
        elif isinstance(event, events.PhaseFinished) and event.phase.name.value in GENERATING_PHASES:
            name = event.phase.name.value
            state = f"{event.status.name.lower()}" if event.status is not None else "skipped"
            if event.phase.skip_reason is not None:
                state += f" ({event.phase.skip_reason.value})"
            TALLY.phase_states[name] = TALLY.phase_states.get(name, "") + ("" if name not in TALLY.phase_states else ", ") + state
        elif isinstance(event, events.ScenarioFinished) and event.status in (Status.FAILURE, Status.ERROR):
            for case_id, results in event.recorder.checks.items():
                for result in results:
                    if result.failure_info is not None and result.name != "not_a_server_error":
                        case = event.recorder.cases[case_id].value
                        problems.append(f"{case.operation.label} {result.name}: "
                                        f"{str(result.failure_info.failure)[:300]}")
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            problems.append(f"error: {str(event.info)[:300]}")
    return problems


def pinned_targets(url: str, key: str | None, admin: str) -> tuple[str, str, str]:
    """The dense map, the GCWS map and an index over it of the caller's tenant (made after the free-running pass,
    whose deletes can reach them: a map's id is its spec's)."""
    headers = {"Authorization": f"Bearer {key or admin}"}
    name = f"fuzzed-{int(time.time() * 1000) % 10**8}"
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        dense = http.post("/v1/maps", json=DENSE).json()["id"]
        gcws = http.post("/v1/maps", json=GCWS).json()["id"]
        response = http.post("/v1/indexes", json={"map_id": gcws, "name": name, "bands": 4, "rows": 2})
        assert response.status_code in (200, 201), response.text
    return dense, gcws, name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--max-examples", type=int, default=20, help="examples per operation and pass")
    parser.add_argument("--stateful-steps", type=int, default=10)
    parser.add_argument("--callers", default="admin,tenant,none")
    parser.add_argument("--default-limits", action="store_true", help="the service's default limits instead of the "
                        "fuzz server's small ones")
    parser.add_argument("--no-pinned", action="store_true", help="only the free-running pass")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    callers = [name.strip() for name in args.callers.split(",") if name.strip()]
    for name in callers:
        if name not in KEYS:
            parser.error(f"--callers: {name!r} is not one of {', '.join(KEYS)}")

    import featurehash

    print(f"featurehash from {featurehash.__file__}; schemathesis {schemathesis.__version__ if hasattr(schemathesis, '__version__') else '?'}")
    print(f"seed {args.seed}, max-examples {args.max_examples}, stateful steps {args.stateful_steps}, callers "
          f"{', '.join(callers)}, limits {'default' if args.default_limits else FUZZ_LIMITS}; load average "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    wall, totals, failures, server_errors = time.perf_counter(), collections.Counter(), 0, 0
    with tempfile.TemporaryDirectory(prefix="featurehash-fuzz-") as tmp:
        tmp = Path(tmp)
        limits = {} if args.default_limits else FUZZ_LIMITS
        server = ServiceProcess("fuzz", tmp / "data", workers=args.workers, keys_file=keys_file(tmp), **limits)
        try:
            server.start().wait_ready()
            document = served_document(server.url)
            every = operation_labels(document)
            print(f"{len(every)} operations in the document")
            for caller in callers:
                key = KEYS[caller]
                global TALLY
                TALLY = Tally()
                TALLY.url = server.url
                TALLY.headers = {"Authorization": f"Bearer {key}"} if key else {}
                start = time.perf_counter()
                problems = run_pass(server.url, document, args.seed, args.max_examples, args.stateful_steps, key)
                if not args.no_pinned:
                    dense, gcws, index = pinned_targets(server.url, key, KEYS["admin"])
                    problems += run_pass(server.url, document, args.seed, args.max_examples, args.stateful_steps,
                                         key, {"map_id": dense})
                    problems += run_pass(server.url, document, args.seed, args.max_examples, args.stateful_steps,
                                         key, {"map_id": gcws, "index_id": index})
                reached = TALLY.operations & every
                print(f"\ncaller {caller}: {sum(TALLY.statuses.values())} requests in "
                      f"{time.perf_counter() - start:.0f} s, by status {dict(sorted(TALLY.statuses.items()))}; "
                      f"{len(reached)}/{len(every)} operations reached"
                      + (f" (not: {', '.join(sorted(every - reached))})" if every - reached else ""))
                print(f"  requests by phase {dict(TALLY.phases)}; phases (free-running pass, then pinned ones): "
                      + "; ".join(f"{name} {state}" for name, state in TALLY.phase_states.items()))
                print(f"  5xx: {len(TALLY.server_errors)}")
                for line in TALLY.server_errors[:20]:
                    print(f"    {line}")
                print(f"  other check failures: {len(problems)}")
                for line in problems[:10]:
                    print(f"    {line}")
                totals.update(TALLY.statuses)
                failures += len(problems)
                server_errors += len(TALLY.server_errors)
            ready = httpx.get(f"{server.url}/readyz").status_code
        finally:
            problems = server.terminate()
        if server_errors:
            print("\nthe server's log, last lines:\n" + server.log_tail(3000))
    print(f"\nall callers: {sum(totals.values())} requests, by status {dict(sorted(totals.items()))}; "
          f"5xx {server_errors}; other check failures {failures}; /readyz after: {ready}; "
          f"{time.perf_counter() - wall:.0f} s wall" + (f"; stop problems: {problems}" if problems else ""))
    sys.exit(1 if server_errors else 0)


if __name__ == "__main__":
    main()
