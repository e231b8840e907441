"""Timing shared by the bench scripts: the best of a few runs after a warm-up run."""

from __future__ import annotations

import time


def best_time(fn, repeat: int) -> float:
    fn()  # warm-up: JIT, caches, parameter materialisation, FFT plans
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
