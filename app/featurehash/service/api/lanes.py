"""Large batches' threads, at a lower CPU priority than the event loop.

On a worker's few cores the event loop shares the CPU with the threads that decode, check and compute
large batches (the stream pool's and those that make each answer's first chunk): at equal priority the
scheduler gave the loop a fair share at best, and a single vector, answered on the loop in ~0.1 ms of
CPU, waited milliseconds for it (bench/bench_admission.py). These threads run BATCH_NICENESS steps
nicer (Linux: a thread's own nice value; inherited by threads they start, e.g. numba's parallel pool),
so the loop, and the small requests it answers, takes the CPU as soon as it has work. The batches keep
every idle cycle: nice only orders who runs when both want to.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

BATCH_NICENESS = 10
BATCH_THREADS = 8  # batches decoded / first chunks computed at once; more wait their turn (already admitted)


def lower_priority() -> None:
    """Make the calling thread BATCH_NICENESS nicer (no-op where the platform has no per-thread nice)."""
    try:
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + BATCH_NICENESS))
    except (AttributeError, OSError):
        pass


@functools.lru_cache(maxsize=None)
def batch_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=BATCH_THREADS, thread_name_prefix="featurehash-batch",
                              initializer=lower_priority)


async def run_batch(fn, *args):
    """fn(*args) on a low-priority batch thread, in the caller's context (admission's reservation)."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(batch_pool(), call)
