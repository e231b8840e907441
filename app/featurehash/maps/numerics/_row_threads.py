"""Row chunks of a large batch computed by several threads at once.

The calling thread and helper threads take chunks in turn from one queue (so a core slowed by other
work takes fewer), and the chunks' BLAS products run single-threaded meanwhile: BLAS forking its own
threads for each chunk onto the same cores made chunked products 2-6x slower on 2 loaded cores than
one thread per chunk (measured), and numpy's ufuncs, BLAS, numba's `nogil` passes and scipy's FFT all
release the GIL, so the chunks' work overlaps. Threads = numpy's OpenBLAS thread count outside shared
sections (OPENBLAS_NUM_THREADS=1 keeps everything on the calling thread), at most the usable cores; 1
without threadpoolctl (which finds that library) or with another BLAS.

The helper threads are numpy's own OpenBLAS pool threads when that library exports `gotoblas_pthread`
(pthreads builds, numpy's wheels among them) and no other section is running: after any numpy product
those threads spin ~0.1 s waiting for more work, and threads of our own then shared the cores with a
spinning one. FEATUREHASH_BLAS_POOL=0 uses a pool of our own always.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

_local = threading.local()


class _BlasThreads:
    """The process's OpenBLAS thread counts, set to 1 while any shared section runs and restored when the
    last one ends (counted, so overlapping sections from several request threads restore them once).

    Every OpenBLAS loaded is held, not only one: numpy and scipy each ship their own, and threadpoolctl
    lists them in an order that followed the hash seed, so holding "the first" held scipy's in about half
    of fresh processes while numpy's, which computes the chunks' products, kept two threads: each chunk's
    product then forked onto cores the other chunk was using (55-90 ms instead of 25-35 ms, measured).
    The count outside sections is numpy's."""

    def __init__(self):
        self._lock = threading.Lock()
        self._active = 0
        self._saved: list[int] = []
        self._libraries: list[tuple] = []   # (get, set) per OpenBLAS, numpy's first
        self._found = False
        self.pool_runner = None   # numpy's OpenBLAS's gotoblas_pthread: run a function on its pool threads
        self._pool_size = None    # numpy's OpenBLAS's blas_num_threads: its pool threads + the caller

    def _find(self) -> None:
        """Look up the OpenBLAS libraries through threadpoolctl (if installed): their get/set calls, by
        ctypes (threadpoolctl's own setter ignores calls from a thread other than the first that used it)."""
        self._found = True
        try:
            import numpy
            from threadpoolctl import ThreadpoolController
        except ImportError:
            return
        numpy_home = os.path.dirname(os.path.dirname(numpy.__file__))
        controllers = ThreadpoolController().select(internal_api="openblas").lib_controllers
        numpy_first = sorted(controllers, key=lambda controller: not _ships_with_numpy(controller.filepath,
                                                                                      numpy_home))
        for controller in numpy_first:
            library = ctypes.CDLL(controller.filepath)
            calls = _thread_calls(library)
            if calls is not None:
                self._libraries.append(calls)
                if len(self._libraries) == 1 and getattr(controller, "threading_layer", "") == "pthreads":
                    self.pool_runner, self._pool_size = _pool_runner(library)

    @property
    def _get(self):
        """numpy's OpenBLAS thread-count getter (None when there is none to hold)."""
        if not self._found:
            self._find()
        return self._libraries[0][0] if self._libraries else None

    def count(self) -> int:
        """BLAS threads outside shared sections; 1 when they cannot be held to one (no threadpoolctl, or
        not OpenBLAS), so that batches are then not shared (no oversubscription)."""
        get = self._get
        if get is None:
            return 1
        with self._lock:
            return self._saved[0] if self._active else int(get())

    def __enter__(self):
        self.enter()
        return self

    def enter(self) -> bool:
        """Enter a section; True when it is the only one (its chunks may then run on numpy's BLAS pool)."""
        with self._lock:
            if self._active == 0 and self._get is not None:
                self._saved = [int(get()) for get, _ in self._libraries]
                for _, set_threads in self._libraries:
                    set_threads(1)
            self._active += 1
            return self._active == 1

    def reserve_pool(self, threads: int) -> None:
        """Inside the only section: make numpy's OpenBLAS pool hold `threads` - 1 workers for the chunks and
        one spare. A chunk's product runs on a pool thread; were another thread to raise the BLAS thread count
        meanwhile (threadpoolctl's limits given back, say), that product would wait for a free pool thread, and
        with none spare it would wait for itself. Setting the count above the pool's size adds threads (they
        sleep once idle); the count goes back to 1 for the section."""
        if self._pool_size.value < threads + 1:
            _, set_threads = self._libraries[0]
            set_threads(threads + 1)
            set_threads(1)

    def __exit__(self, *exc):
        self.leave()

    def leave(self) -> None:
        """Leave a section; the last one out gives the thread counts back."""
        with self._lock:
            self._active -= 1
            if self._active == 0:
                for (_, set_threads), saved in zip(self._libraries, self._saved):
                    set_threads(saved)


def _pool_runner(library):
    """OpenBLAS's `gotoblas_pthread(threads, function, args, stride)` (pthreads builds export it): runs a C
    function on the calling thread and threads - 1 of OpenBLAS's own pool threads, and returns when all are
    done; and its pool size. (None, None) where the library lacks either symbol (OpenMP builds)."""
    runner = getattr(library, "gotoblas_pthread", None)
    try:
        pool_size = ctypes.c_int.in_dll(library, "blas_num_threads")
    except ValueError:
        return None, None
    if runner is not None:
        runner.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        runner.restype = ctypes.c_int
    return runner, pool_size


def _ships_with_numpy(filepath: str, numpy_home: str) -> bool:
    """True for the OpenBLAS inside numpy's wheel (numpy.libs/ or numpy/.libs/ beside the package)."""
    folder = os.path.dirname(os.path.realpath(filepath))
    return folder.startswith(os.path.join(os.path.realpath(numpy_home), "numpy"))


def _thread_calls(library) -> tuple | None:
    """OpenBLAS's get/set thread-count functions under the symbol names its builds use."""
    for prefix in ("scipy_openblas", "openblas"):
        for suffix in ("64_", "_64_", ""):
            getter = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
            setter = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
            if getter is not None and setter is not None:
                return getter, setter
    return None


_AFFINITY_SECONDS = 1.0
_affinity = [-float("inf"), 1]   # [when read (monotonic seconds), usable cores]


def usable_cores() -> int:
    """The cores this process may run on, read at most once every _AFFINITY_SECONDS: the system call took
    ~11 us cache-cold (measured), against ~1 us here, and an affinity narrowed meanwhile costs at most a
    second of spinning BLAS threads."""
    now = time.monotonic()
    if now - _affinity[0] >= _AFFINITY_SECONDS:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        _affinity[:] = [now, cores]
    return _affinity[1]


_blas = _BlasThreads()
_helpers: ThreadPoolExecutor | None = None
_helpers_lock = threading.Lock()


def thread_count() -> int:
    """How many threads share a batch's rows (1 on one core, or with BLAS held to one thread)."""
    return max(1, min(_blas.count(), usable_cores()))


def blas_exceeds_cores() -> bool:
    """True while BLAS has more threads than this process may use: OpenBLAS sized its pool when it was
    loaded, and after the affinity narrowed (e.g. to one core) its threads spun on each block's product: rff
    n=4096 d=512 D=4096 took 755 ms on one core against 109 ms for a process started there (measured). Such
    a product is then computed inside `held_blas()`."""
    return _blas.count() > usable_cores()


def held_blas():
    """A section during which BLAS runs one thread (counted: overlapping sections restore it once)."""
    return _blas


def in_shared_section() -> bool:
    """True on a thread computing chunks of a shared batch: its inner work (FFTs) stays single-threaded."""
    return getattr(_local, "shared", False)


def _pool() -> ThreadPoolExecutor:
    global _helpers
    with _helpers_lock:
        if _helpers is None:
            _helpers = ThreadPoolExecutor(max_workers=max(1, usable_cores() - 1), thread_name_prefix="featurehash-rows")
        return _helpers


_USE_BLAS_POOL = os.environ.get("FEATUREHASH_BLAS_POOL", "1") != "0"
_POOL_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _run_on_blas_pool(worker, threads: int) -> None:
    """worker() on the calling thread and threads - 1 of numpy's OpenBLAS pool threads (a ctypes callback:
    each takes the GIL to start and gives it back inside the compiled passes and BLAS). After a numpy product
    those threads spin ~0.1 s waiting for more BLAS work; helper threads of our own then shared the cores
    with a spinning one (a batch right after a 2-thread GEMM took 1.4-1.5x its time alone, measured), while
    the spinning thread takes this work at once. Only the one section running uses the pool: a second
    caller would spin in OpenBLAS until the first's chunks are done."""
    _blas.reserve_pool(threads)
    job = [worker]
    callback = _POOL_CALLBACK(lambda _unused: job[0]())
    try:
        _blas.pool_runner(threads, ctypes.cast(callback, ctypes.c_void_p), None, 0)
    finally:
        # a ctypes callback and its thunk form a reference cycle: through `worker` it would hold the batch's
        # chunk results until the cyclic collector ran (measured: ~25 MB a batch of 8,192 documents retained,
        # 0.6 GB over 250,000 documents), so the cycle is left holding nothing
        job.clear()


def run_chunks(work, chunks: list, threads: int) -> list:
    """[work(chunk) for chunk in chunks] (results in chunk order), computed by `threads` threads; an
    exception is raised after every thread stopped (the first by chunk order)."""
    if threads <= 1 or len(chunks) <= 1:
        return [work(chunk) for chunk in chunks]
    results: list = [None] * len(chunks)
    errors: list = [None] * len(chunks)
    indices = iter(range(len(chunks)))
    claim_lock = threading.Lock()

    def worker() -> None:
        _local.shared = True
        try:
            while True:
                with claim_lock:
                    index = next(indices, None)
                if index is None:
                    return
                try:
                    results[index] = work(chunks[index])
                except BaseException as exc:  # noqa: BLE001  (re-raised by the caller below)
                    errors[index] = exc
        finally:
            _local.shared = False

    threads = min(threads, len(chunks))
    alone = _blas.enter()
    try:
        if alone and _blas.pool_runner is not None and _USE_BLAS_POOL:
            _run_on_blas_pool(worker, threads)
        else:
            helpers = [_pool().submit(worker) for _ in range(threads - 1)]
            worker()
            for helper in helpers:
                # A helper still queued behind another batch's would find no chunk left: drop it.
                if not helper.cancel():
                    helper.result()
    finally:
        _blas.leave()
    for error in errors:
        if error is not None:
            raise error
    return results
