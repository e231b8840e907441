"""First calls: a map's kernels are compiled when this process builds the map, not in the first request that
computes with it, and an answer that paid for compilation says so.

numba compiles a kernel the first time it is called with new argument types (or loads it from its cache in
milliseconds). Without this, the first transform of a map, and again the first float32 call after float64
ones, blocked for the compilation: 12-20 s on a loaded 2-core host, with nothing in the answer to say why.

`Warmups.start(map)` queues, for one background thread, a few rows through the map in every form the service
decodes (JSON rows: float64; .npy bodies: float32 or float64, read-only; sparse rows: CSR; text for a map
that reads it), a batch and one row each, to both output dtypes it serves, and its codes when it has them:
the service calls it when a map is created (POST /v1/maps answers without waiting) and when this process
first builds a stored map. Steps start only while no request is computing or creating a map, so a request
never waits for forms it does not use; one that needs a kernel not yet compiled compiles it itself, after
the step running then, if any (numba compiles under one process-wide lock). `CLOCK` counts, per request, the
seconds its threads waited for that lock and spent compiling; the middleware then adds
`X-Featurehash-Compiled: waited=W compiled=C` (seconds) to the answer and `compile_ms` to its access-log line.
An answer without the header compiled nothing and waited for no compilation.
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
# [seconds in numba's compile lock (waiting for it, then compiling), seconds compiling, then callbacks to run
# when the request ends]; None outside a request.
CLOCK: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("featurehash_compile_clock", default=None)
# >= every map's parallel-kernel bound (gcws, binning: PARALLEL_MIN_ROWS = 8), and each form runs with one
# row too: numba compiles the parallel and the sequential kernel apart (a warm-up of 4 rows left a gcws
# map's first batch of 8 to compile for 7 s, measured)
ROWS = 8
DENSE_MAX_DIM = 1 << 16   # past this a dense warm-up batch would be large; such maps take sparse rows
SPARSE_NONZEROS = 8
FIRST_STEPS = 2   # a JSON body's default answer, for a batch and for one row: before any map's later steps
WAIT_REPORTED = 0.005   # loading kernels from numba's cache takes the lock for a few ms: not a wait to report
IDLE_TIMEOUT = 30.0   # a request that never answers (a stuck stream) holds a warm-up no longer than this
DOCUMENTS = ["the first call of a map compiles its kernels", "so a background thread makes it before requests"] * 4

_local = threading.local()
_installed = threading.Lock()
_listener_on = False


def install_listener() -> None:
    """Count, per request, the seconds its threads spent compiling and waiting for numba's compile lock.

    numba fires "numba:compiler_lock" around taking and holding its process-wide lock (its start before the
    lock is taken) and "numba:compile" around a compilation (not a cache load), in the thread doing it; a
    kernel compiles the kernels it calls inside its own events, so only a thread's outermost event counts."""
    global _listener_on
    with _installed:
        if _listener_on:
            return
        from numba.core import event

        class _Timer(event.Listener):
            def __init__(self, slot: int):
                self.slot, self.depth, self.start = slot, f"depth{slot}", f"start{slot}"

            def on_start(self, ev) -> None:
                depth = getattr(_local, self.depth, 0)
                setattr(_local, self.depth, depth + 1)
                if depth == 0:
                    setattr(_local, self.start, time.perf_counter())

            def on_end(self, ev) -> None:
                depth = getattr(_local, self.depth, 1) - 1
                setattr(_local, self.depth, depth)
                if depth == 0:
                    clock = CLOCK.get()
                    if clock is not None:
                        clock[self.slot] += time.perf_counter() - getattr(_local, self.start)

        event.register("numba:compiler_lock", _Timer(0))   # waiting for the lock, then holding it
        event.register("numba:compile", _Timer(1))
        _listener_on = True


def new_clock() -> list:
    return [0.0, 0.0]


def finish(clock: list) -> None:
    """The request has ended: release what it held (`Warmups.wait`)."""
    for release in clock[2:]:
        release()


def header_value(clock: list) -> bytes | None:
    """The header for a request's clock, None when it compiled nothing and waited for no compilation.
    The lock's seconds hold the compilations' and cache loads' (milliseconds): waited is the rest."""
    compiled = clock[1]
    waited = max(0.0, clock[0] - compiled)
    if compiled <= 0.0 and waited < WAIT_REPORTED:
        return None
    return f"waited={waited:.3f} compiled={compiled:.3f}".encode()


def spent(clock: list) -> float:
    """Seconds the request waited for or spent compiling (the access log's compile_ms)."""
    return clock[0] if header_value(clock) is not None else 0.0


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
        if not isinstance(X, list):   # the service checks rows before it computes; the check compiles too
            X = feature_map.check(X, "vectors")
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
    """One background thread compiling the kernels of the maps this process builds, a step at a time.

    Every map's first steps (a JSON body's default answer) go before any map's later steps (the other
    forms and dtypes), and a step starts only while no request is computing with a map or creating one.
    Measured on a loaded 2-core host before this order (one queue of whole warm-ups, which requests waited
    for): a map created right after three others waited 38 s for theirs, and a request on a warm map
    waited seconds for another map's step."""

    def __init__(self):
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0   # requests computing with a map, or creating one
        self._running: Future | None = None   # the step being compiled
        self._started: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def start(self, feature_map: FeatureMap) -> None:
        with self._lock:
            if feature_map.spec.id in self._started or self._stopped:
                return
            self._started.add(feature_map.spec.id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="featurehash-warm", daemon=True)
                self._thread.start()
        try:
            found = steps(feature_map)
        except Exception:  # noqa: BLE001  (a request computing with the map meets the same error itself)
            logger.exception("planning the warm-up of map %s failed", feature_map.spec.id)
            return
        for number, step in enumerate(found):
            self._queue.put((0 if number < FIRST_STEPS else 1, next(self._order), step, feature_map.spec.id))

    def _work(self) -> None:
        while True:
            _, _, step, map_id = self._queue.get()
            if step is None:
                return
            with self._idle:
                self._idle.wait_for(lambda: self._busy == 0 or self._stopped, timeout=IDLE_TIMEOUT)
                if self._stopped:
                    return
                running = self._running = Future()
            try:
                step()
            except Exception:  # noqa: BLE001  (the request that computes will compile and report the error itself)
                logger.exception("compiling the kernels of map %s failed", map_id)
            finally:
                with self._lock:
                    self._running = None
                running.set_result(None)

    def pending(self) -> int:
        """Steps not yet run (of every map)."""
        return self._queue.qsize() + (self._running is not None)

    def _hold(self) -> Future | None:
        with self._lock:
            self._busy += 1
            return self._running

    def _release(self) -> None:
        with self._idle:
            self._busy -= 1
            if self._busy == 0:
                self._idle.notify_all()

    def hold_for_request(self) -> Future | None:
        """Keep steps from starting until the current request ends (the middleware runs the clock's
        callbacks); the step running now, if any. Outside a request (no clock): nothing to hold."""
        clock = CLOCK.get()
        if clock is None or not self._started:
            return None
        if any(getattr(done, "__self__", None) is self for done in clock[2:]):
            return self._running
        running = self._hold()
        clock.append(self._release)
        return running

    async def wait(self, map_id: str) -> None:
        """Before a request computes with a map: no step starts until it has answered. A step already
        running delays it only if it must compile too (numba's lock), which its clock counts."""
        self.hold_for_request()

    def shutdown(self) -> None:
        with self._idle:
            self._stopped = True
            self._idle.notify_all()
        self._queue.put((-1, -1, None, None))
