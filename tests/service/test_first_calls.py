"""First calls (service/first_calls.py): a map's kernels compile in the background from its creation, every
map's first steps before any later step, no step while a request computes; what a request paid for
compilation is what its header says; and after the warm-up, the forms the service decodes compile nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from featurehash.service import first_calls
from featurehash.service.first_calls import CLOCK, Warmups, finish, header_value, new_clock

ROOT = Path(__file__).resolve().parents[2]


class _Spec:
    def __init__(self, map_id: str):
        self.id = map_id


class _Map:
    def __init__(self, map_id: str):
        self.spec = _Spec(map_id)


def _recording(monkeypatch, ran: list, gate: threading.Event | None = None, steps: int = 4):
    def fake_steps(feature_map):
        def step(number):
            def run():
                if gate is not None:
                    gate.wait(5)
                ran.append((feature_map.spec.id, number))
            return run
        return [step(number) for number in range(steps)]

    monkeypatch.setattr(first_calls, "steps", fake_steps)


def _drain(warmups: Warmups, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while warmups.pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not warmups.pending()


def test_every_maps_first_steps_run_before_any_later_step(monkeypatch):
    ran: list = []
    gate = threading.Event()
    _recording(monkeypatch, ran, gate)
    warmups = Warmups()
    try:
        warmups.start(_Map("a"))
        warmups.start(_Map("b"))
        warmups.start(_Map("a"))   # started once per map
        gate.set()
        _drain(warmups)
    finally:
        warmups.shutdown()
    # a's first step may have begun before b was queued; b's first steps still precede a's later ones
    assert ran[:4] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert sorted(ran[4:]) == [("a", 2), ("a", 3), ("b", 2), ("b", 3)]


def test_no_step_starts_while_a_request_computes(monkeypatch):
    ran: list = []
    _recording(monkeypatch, ran)
    warmups = Warmups()
    clock = new_clock()
    token = CLOCK.set(clock)
    try:
        warmups._started.add("warming")   # as if a map had started: requests hold the steps from then on
        assert warmups.hold_for_request() is None
        warmups.start(_Map("a"))
        time.sleep(0.2)
        assert ran == [], "a step ran during the request"
        finish(clock)   # the request answered
        _drain(warmups)
        assert len(ran) == 4
    finally:
        CLOCK.reset(token)
        warmups.shutdown()


def test_the_header_says_what_the_request_paid():
    assert header_value([0.0, 0.0]) is None
    assert header_value([0.003, 0.0]) is None   # a cache load holds the lock for milliseconds: not a wait
    assert header_value([2.0, 1.5]) == b"waited=0.500 compiled=1.500"
    assert header_value([0.75, 0.0]) == b"waited=0.750 compiled=0.000"
    assert first_calls.spent([2.0, 1.5]) == 2.0 and first_calls.spent([0.003, 0.0]) == 0.0


CHILD = """
import json, sys
import numpy as np
import scipy.sparse as sp
from featurehash.maps import create_map
from featurehash.service import first_calls as fc

fc.install_listener()
found = {}
for spec in json.loads(sys.argv[1]):
    m = create_map(spec).materialize()
    fc.exercise(m)
    clock = fc.new_clock()
    token = fc.CLOCK.set(clock)
    rng = np.random.default_rng(5)
    X = np.abs(rng.standard_normal((20, spec["input_dim"]))) + 0.01   # JSON rows: float64
    read_only = X.astype(np.float32)
    read_only.setflags(write=False)                                    # an .npy body
    for rows in (X, X[:1], X[:9], read_only, sp.csr_matrix(X)):
        for dtype in (np.float32, np.float64):
            m.transform(m.check(rows, "vectors"), dtype=dtype)
        if m.has_hash:
            m.hash(m.check(rows, "vectors"))
    fc.CLOCK.reset(token)
    found[spec["method"]] = clock[1]
print(json.dumps(found))
"""


def test_after_the_warm_up_the_service_forms_compile_nothing(tmp_path):
    """In a fresh process with an empty numba cache (so kernels really compile), a map's warm-up covers what
    the service passes it: batches and single rows, float64 and read-only float32 rows, CSR, both dtypes."""
    specs = [{"method": "rff", "input_dim": 8, "n_components": 16, "seed": 1, "params": {"gamma": 0.5}},
             {"method": "binning", "input_dim": 8, "n_components": 8, "seed": 1, "params": {"gamma": 0.5}}]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT / "app"), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(specs)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    compiled = json.loads(proc.stdout.strip().splitlines()[-1])
    assert compiled == {"rff": 0.0, "binning": 0.0}, f"seconds compiled after the warm-up: {compiled}"


@pytest.mark.parametrize("warm", [True, False])
def test_warm_maps_setting(warm, monkeypatch):
    from featurehash.service.config import Settings

    monkeypatch.setenv("FEATUREHASH_WARM_MAPS", str(warm).lower())
    assert Settings().warm_maps is warm
