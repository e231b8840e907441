"""Property-based fuzz of the OpenAPI document (schemathesis): no 5xx, and answers as documented.

Schemathesis reads the service's own /openapi.json and runs its example, coverage, fuzzing and
stateful phases (links inferred from the responses: a created map's id feeds its transform, hash,
kernel and delete) against a real `featurehash serve` with its own embedded Redis, with a fixed
seed and a bounded number of examples. Three passes: free-running (random ids, mostly 404s and
422s), then, on the operations that take them, with `map_id` / `index_id` pinned to a dense map, and
to a GCWS map and its index (input_dim 2, so that random vectors often have the right width and reach
the numerics).
.npy bodies are generated as 2-D arrays of numbers and sent as .npy files.

Checks: not_a_server_error, status_code_conformance, content_type_conformance and
response_schema_conformance on every answer; the status codes seen are counted and printed.
A second server has an API key: the free-running pass runs with it in an Authorization header (all
three in longer runs), and one pass runs with a wrong key, where every answer but the open probes,
routing's 404/405 and the body limit's 413 must be a 401. A third server reads a keys file whose one key is a
non-default tenant's (read and write, not admin, with rate, concurrency and stored-bytes limits): the same two
passes reach the scope checks, tenant-scoped indexes and the quota scripts.

Longer runs (not part of the suite): FUZZ_SEED, FUZZ_MAX_EXAMPLES and FUZZ_STATEFUL_STEPS override
the budget below, e.g. `FUZZ_SEED=91 FUZZ_MAX_EXAMPLES=150 FUZZ_STATEFUL_STEPS=25 pytest -s
tests/service/test_service_fuzz.py`.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import os

import httpx
import numpy as np
import pytest

from service_support import ServiceProcess

schemathesis = pytest.importorskip("schemathesis")
from schemathesis.engine import Status, events  # noqa: E402

SEED = int(os.environ.get("FUZZ_SEED", 20240611))
MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", 8))
STATEFUL_STEPS = int(os.environ.get("FUZZ_STATEFUL_STEPS", 6))
API_KEY = "fuzz-key-0123456789"
OPEN_PATHS = ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/redoc")
# Answered before the key is read: routing (no such path or method) and the body-size limit; they tell a caller
# without a key nothing about stored data.
BEFORE_THE_KEY = (401, 404, 405, 413)
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance")
NPY_ROWS_SCHEMA = {"type": "array", "minItems": 1, "maxItems": 4,
                   "items": {"type": "array", "minItems": 1, "maxItems": 6, "items": {"type": "number"}}}
DENSE = {"method": "rff", "input_dim": 2, "n_components": 8, "seed": 3, "params": {"gamma": 0.5}}
GCWS = {"method": "gcws", "input_dim": 2, "n_components": 8, "seed": 4, "params": {"bits": 2}}

STATUSES: collections.Counter = collections.Counter()
SERVER_ERRORS: list[str] = []


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
    STATUSES[response.status_code] += 1
    if response.status_code >= 500:   # what the assertion below names
        SERVER_ERRORS.append(f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}")


def _tenant_keys_file(directory) -> str:
    """A keys file whose one key is a non-default tenant's, read and write (not admin), with limits: the fuzz
    then reaches the scope checks (403), tenant-scoped indexes and the quota scripts."""
    entry = {"name": "fuzz-rw", "tenant": "team-fuzz", "scopes": ["read", "write"],
             "sha256": hashlib.sha256(API_KEY.encode()).hexdigest(),
             "limits": {"requests_per_second": 1000, "concurrent_requests": 8}}
    path = directory / "keys.json"
    path.write_text(json.dumps({"keys": [entry], "tenants": {"team-fuzz": {"stored_bytes": 2**20}}}))
    return str(path)


@pytest.fixture(scope="module", params=["open", "keyed", "tenant"])
def fuzz_server(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp("serve-fuzz")
    key = {"open": {}, "keyed": {"api_key": API_KEY},
           "tenant": {"keys_file": _tenant_keys_file(directory)} if request.param == "tenant" else {}}[request.param]
    server = ServiceProcess(f"fuzz-{request.param}", directory / "data", max_body_bytes=2**20,
                            max_map_bytes=2**26, max_batch_rows=64, map_cache_bytes=2**26, **key)
    server.start().wait_ready()
    server.api_key = None if request.param == "open" else API_KEY
    yield server
    assert not server.terminate()


def _document(url: str) -> dict:
    """The served document, with .npy bodies described as the array they carry (for generation only)."""
    document = httpx.get(f"{url}/openapi.json").json()
    for path in document["paths"].values():
        for operation in path.values():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/x-npy" in content:
                content["application/x-npy"]["schema"] = NPY_ROWS_SCHEMA
    return document


def _run(url: str, document: dict, parameters: dict | None = None, exclude_deletes: bool = False,
         key: str | None = None, checks_enabled: tuple[str, ...] = CHECKS, max_examples: int = MAX_EXAMPLES,
         stateful: bool = True) -> list[str]:
    """One schemathesis pass. With `parameters` pinned, only the operations whose path takes one of them (the
    others would repeat the free-running pass's requests, same seed, on the same server) and no stateful phase
    (its links start at the creating operations, which take no id)."""
    checks = {"enabled": False, "record_status": {"enabled": True},
              **{name: {"enabled": True} for name in checks_enabled}}
    settings = {"seed": SEED, "generation": {"max-examples": max_examples}, "checks": checks,
                "phases": {"stateful": {"enabled": stateful and not parameters, "max-steps": STATEFUL_STEPS}}}
    if key is not None:
        settings["headers"] = {"Authorization": f"Bearer {key}"}
    if parameters:
        settings["parameters"] = parameters
    schema = schemathesis.openapi.from_dict(document, config=schemathesis.Config.from_dict(settings))
    schema.config.update(base_url=url)
    if exclude_deletes:
        schema = schema.exclude(method="DELETE")
    if parameters:
        schema = schema.include(path_regex="|".join(f"{{{name}}}" for name in parameters))
    problems = []
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished) and event.status in (Status.FAILURE, Status.ERROR):
            for case_id, results in event.recorder.checks.items():
                for result in results:
                    if result.failure_info is not None:
                        case = event.recorder.cases[case_id].value
                        problems.append(f"{case.operation.label} {result.name}: {result.failure_info.failure}")
        elif isinstance(event, events.NonFatalError):
            problems.append(f"error: {event.info}")
    return problems


def _pinned_maps(url: str, key: str | None) -> tuple[str, str]:
    """The dense map, and the GCWS map with its index "fuzzed", the pinned passes name. Created after the
    free-running pass, whose deletes can reach them (a map's id is its spec's): created before it, the dense
    map answered 404 to every request of its pinned pass, which then never reached the numerics."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(base_url=url, headers=headers) as http:
        dense = http.post("/v1/maps", json=DENSE).json()["id"]
        gcws = http.post("/v1/maps", json=GCWS).json()["id"]
        assert http.post("/v1/indexes", json={"map_id": gcws, "name": "fuzzed", "bands": 4, "rows": 2}).status_code \
            in (200, 201)
    return dense, gcws


def test_fuzzing_the_openapi_schema_finds_no_5xx(fuzz_server):
    url, key = fuzz_server.url, fuzz_server.api_key
    document = _document(url)
    STATUSES.clear()
    SERVER_ERRORS.clear()
    problems = _run(url, document, key=key)
    if key is None or MAX_EXAMPLES > 8:  # the suite's keyed server: the free-running pass (the pinned ones reach the
        dense, gcws = _pinned_maps(url, key)   # same code past the key)
        problems += _run(url, document, {"map_id": dense}, exclude_deletes=True, key=key)
        problems += _run(url, document, {"map_id": gcws, "index_id": "fuzzed"}, exclude_deletes=True, key=key)
    print(f"\nschemathesis requests by status ({fuzz_server.name}, seed {SEED}): {dict(sorted(STATUSES.items()))}")
    assert sum(STATUSES.values()) > 300, "the fuzz reached too few requests to mean anything"
    assert not SERVER_ERRORS, "\n".join(SERVER_ERRORS[:20])
    assert not problems, "\n".join(problems[:20])
    assert httpx.get(f"{url}/readyz").status_code == 200


@schemathesis.check
def only_probes_answer_a_wrong_key(ctx, response, case):
    if case.formatted_path not in OPEN_PATHS and response.status_code not in BEFORE_THE_KEY:
        raise AssertionError(f"{case.method} {case.formatted_path} answered {response.status_code} to a wrong key")


def test_a_wrong_key_gets_only_401s(fuzz_server):
    if fuzz_server.api_key is None:
        pytest.skip("the open server takes no key")
    url = fuzz_server.url
    STATUSES.clear()
    SERVER_ERRORS.clear()
    # The key is checked before anything reads the request, so a few examples an operation reach the same code as
    # many, and a stateful phase has nothing to link: every creating call answers 401.
    problems = _run(url, _document(url), key="not-the-key",
                    checks_enabled=("not_a_server_error", "only_probes_answer_a_wrong_key"),
                    max_examples=min(MAX_EXAMPLES, 3), stateful=False)
    print(f"\nschemathesis requests by status (wrong key, seed {SEED}): {dict(sorted(STATUSES.items()))}")
    assert STATUSES[401] > 50, "the wrong-key pass reached too few requests to mean anything"
    assert not SERVER_ERRORS, "\n".join(SERVER_ERRORS[:20])
    assert not problems, "\n".join(problems[:20])
