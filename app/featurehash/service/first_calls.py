"""First calls: a map's kernels are compiled when this process builds the map, not in the first request that
computes with it, and an answer that paid for compilation says so.

numba compiles a kernel the first time it is called with new argument types (or loads it from its cache in
milliseconds). Without this, the first transform of a map, and again the first float32 call after float64
ones, blocked for the compilation: 12-20 s on a loaded 2-core host, with nothing in the answer to say why.

`Warmups.start(map)` runs, on one background thread, a few rows through the map in every form the service
decodes (JSON rows: float64; .npy bodies: float32 or float64, read-only; sparse rows: CSR; text for a map
that reads it) to both output dtypes it serves, and its codes when it has them: the service calls it when a
map is created (POST /v1/maps answers without waiting) and when this process first builds a stored map.
A request that computes with a map whose warm-up is still running waits for it (numba compiles under one
process-wide lock, so compiling in the request as well would not answer sooner). `CLOCK` counts, per
request, the seconds it waited and the seconds its own thread spent compiling (a form the warm-up did not
cover, or a map's fit at creation); the middleware then adds `X-Featurehash-Compiled: waited=W compiled=C`
(seconds) to the answer and `compile_ms` to its access-log line. An answer without the header compiled
nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import queue
import threading
import time
from concurrent.futures import Future

import numpy as np
import scipy.sparse as sp

from ..maps import FeatureMap
from ..maps.base import DenseFeatureMap

logger = logging.getLogger("featurehash.first_calls")

HEADER = b"x-featurehash-compiled"
# [seconds waited for a warm-up, seconds compiling in the request's own threads, then callbacks to run when
# the request ends]; None outside a request.
CLOCK: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("featurehash_compile_clock", default=None)
# >= every map's parallel-kernel bound (gcws, binning: PARALLEL_MIN_ROWS = 8), and each form runs with one
# row too: numba compiles the parallel and the sequential kernel apart (a warm-up of 4 rows left a gcws
# map's first batch of 8 to compile for 7 s, measured)
ROWS = 8
DENSE_MAX_DIM = 1 << 16   # past this a dense warm-up batch would be large; such maps take sparse rows
SPARSE_NONZEROS = 8
FIRST_STEPS = 2   # a JSON body's default answer, for a batch and for one row: what a request waits for
IDLE_TIMEOUT = 30.0   # a request that never answers (a stuck stream) holds a warm-up no longer than this
DOCUMENTS = ["the first call of a map compiles its kernels", "so a background thread makes it before requests"] * 4

_local = threading.local()
_installed = threading.Lock()
_listener_on = False


def install_listener() -> None:
    """Count compilations per request (numba's compile events fire in the compiling thread, cache loads not)."""
    global _listener_on
    with _installed:
        if _listener_on:
            return
        from numba.core import event

        class _Clock(event.Listener):
            def on_start(self, ev) -> None:
                depth = getattr(_local, "depth", 0)
                _local.depth = depth + 1
                if depth == 0:   # a kernel compiles the kernels it calls inside its own event: count the outer
                    _local.start = time.perf_counter()

            def on_end(self, ev) -> None:
                _local.depth -= 1
                if _local.depth == 0:
                    clock = CLOCK.get()
                    if clock is not None:
                        clock[1] += time.perf_counter() - _local.start

        event.register("numba:compile", _Clock())
        _listener_on = True


def new_clock() -> list:
    return [0.0, 0.0]


def finish(clock: list) -> None:
    """The request has ended: release what it held (`Warmups.wait`)."""
    for release in clock[2:]:
        release()


def header_value(clock: list) -> bytes | None:
    """The header for a request's clock, None when it neither waited nor compiled."""
    if clock[0] <= 0.0 and clock[1] <= 0.0:
        return None
    return f"waited={clock[0]:.3f} compiled={clock[1]:.3f}".encode()


def _read_only(X: np.ndarray) -> np.ndarray:
    view = X.view()
    view.setflags(write=False)   # as the .npy decoder gives it: numba compiles read-only arrays apart
    return view


def _forms(feature_map: FeatureMap) -> list:
    """The inputs to exercise, the service's most common first: JSON rows (float64), then .npy bodies
    (float32, float64: read-only), then sparse rows; text for a map that reads it."""
    if getattr(feature_map, "text_input", False) or feature_map.text_stage is not None:
        return [DOCUMENTS, [document.split() for document in DOCUMENTS], [{"weighted": 2.0, "tokens": 0.5}]]
    dim = feature_map.spec.input_dim
    forms = []
    if dim <= DENSE_MAX_DIM:
        rng = np.random.default_rng(0)
        # positive, no all-zero row: valid for every method (chi2 maps refuse negatives, GCWS zero rows)
        X = np.abs(rng.standard_normal((ROWS, dim))) / np.sqrt(dim) + 0.01
        forms += [X, _read_only(X.astype(np.float32)), _read_only(X)]
    rng = np.random.default_rng(1)
    nonzeros = min(dim, SPARSE_NONZEROS)
    columns = np.concatenate([np.sort(rng.choice(dim, nonzeros, replace=False)) for _ in range(ROWS)])
    forms.append(sp.csr_matrix((rng.uniform(0.1, 1.0, ROWS * nonzeros), columns,
                                np.arange(0, ROWS * nonzeros + 1, nonzeros)), shape=(ROWS, dim)))
    return forms


def steps(feature_map: FeatureMap) -> list:
    """Calls that compile the map's kernels, in the order a first request most likely needs them: the
    first is a JSON body's default answer (features as float32, codes), the rest every other form and dtype
    (a call that finds its kernels compiled costs microseconds)."""
    dense = isinstance(feature_map, DenseFeatureMap)

    def answers(X, dtypes) -> None:
        for dtype in dtypes:
            feature_map.transform(X, dtype=dtype) if dense else feature_map.transform(X)
        if feature_map.has_hash:
            feature_map.hash(X)

    forms = [(X, X[:1]) for X in _forms(feature_map)]
    found = [lambda X=X: answers(X, (np.float32,)) for X in forms[0]]
    found += [lambda X=X: answers(X, (np.float32, np.float64) if dense else (None,)) for pair in forms for X in pair]
    return found


def exercise(feature_map: FeatureMap) -> None:
    """Every step of `steps`: each input form the service decodes, to each dtype it answers."""
    for step in steps(feature_map):
        step()


class Warmups:
    """One background thread compiling the kernels of the maps this process builds.

    Each map's work is split into steps (`steps`). Its first steps (a JSON body's default answer) go before
    any map's later steps, and are all a request waits for; the later steps (the other forms and dtypes)
    run only while no request is computing or creating a map, so that they never hold numba's compile lock
    in front of one. Measured before this order (one FIFO queue of whole warm-ups, bench/bench_first_calls.py
    on a loaded 2-core host): a map created right after three others waited 38 s for theirs."""

    def __init__(self):
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._order = itertools.count()
        self._first: dict[str, Future] = {}
        self._lock = threading.Lock()
        self._busy = 0   # requests computing with a map, or creating one
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stopped = False

    def start(self, feature_map: FeatureMap) -> None:
        map_id = feature_map.spec.id
        with self._lock:
            if map_id in self._first or self._stopped:
                return
            first: Future = Future()
            self._first[map_id] = first
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="featurehash-warm", daemon=True)
                self._thread.start()
        self._queue.put((0, next(self._order), feature_map, first))

    def _work(self) -> None:
        while True:
            priority, _, feature_map, first = self._queue.get()
            if feature_map is None:
                return
            if priority == 0:
                self._first_steps(feature_map, first)
            else:
                self._later_step(feature_map, first)

    def _first_steps(self, feature_map: FeatureMap, first: Future) -> None:
        try:
            found = steps(feature_map)
            for step in found[:FIRST_STEPS]:
                step()
        except Exception:  # noqa: BLE001  (the request that computes will compile and report the error itself)
            logger.exception("compiling the kernels of map %s failed", feature_map.spec.id)
            found = []
        first.set_result(None)
        for step in found[FIRST_STEPS:]:
            self._queue.put((1, next(self._order), step, feature_map.spec.id))
        with self._lock:
            self._first.pop(feature_map.spec.id, None)

    def _later_step(self, step, map_id: str) -> None:
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0 or self._stopped, timeout=IDLE_TIMEOUT)
        try:
            step()
        except Exception:  # noqa: BLE001
            logger.exception("compiling the kernels of map %s failed", map_id)

    def pending(self, map_id: str) -> bool:
        """Whether the map's first steps are still to run."""
        return map_id in self._first

    def hold(self) -> None:
        """A request computes or creates a map: later steps wait until `release`."""
        with self._lock:
            self._busy += 1

    def release(self) -> None:
        with self._idle:
            self._busy -= 1
            if self._busy == 0:
                self._idle.notify_all()

    def hold_for_request(self) -> None:
        """`hold` until the current request ends (the middleware runs the clock's callbacks)."""
        clock = CLOCK.get()
        if clock is not None and not any(getattr(done, "__self__", None) is self for done in clock[2:]):
            self.hold()
            clock.append(self.release)

    async def wait(self, map_id: str) -> None:
        """Wait for the map's first steps if they are still to run (the wait goes on the request's clock),
        and keep later steps back until the request has answered."""
        self.hold_for_request()
        first = self._first.get(map_id)
        if first is None or first.done():
            return
        start = time.perf_counter()
        await asyncio.wrap_future(first)
        clock = CLOCK.get()
        if clock is not None:
            clock[0] += time.perf_counter() - start

    def shutdown(self) -> None:
        with self._idle:
            self._stopped = True
            self._idle.notify_all()
        self._queue.put((-1, -1, None, None))
