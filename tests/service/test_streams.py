"""Streamed answers (service/api/streams.py): the same bytes as built whole, parts in order, a bounded number made
ahead of the one being sent, and nothing made for a stream whose first chunk failed."""

from __future__ import annotations

import asyncio
import io
import threading

import numpy as np
import orjson
import pytest

from featurehash.service.api import streams
from featurehash.service.api.streams import RowResult, json_answer, npy_answer


def collected(response) -> bytes:
    """The whole body of a Response or StreamingResponse."""
    async def gather() -> bytes:
        if not hasattr(response, "body_iterator"):
            return bytes(response.body)
        return b"".join([part async for part in response.body_iterator])
    return asyncio.run(gather())


def result_of(array: np.ndarray, chunk_rows: int, threads: int = 2, compute=None) -> RowResult:
    width = array.shape[1]
    return RowResult(array.shape[0], width, array.dtype, compute or (lambda rows: array[rows]),
                     chunk_rows * width * array.itemsize, threads)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_streamed_npy_and_json_are_the_bytes_of_the_whole_array(threads):
    array = np.random.default_rng(0).standard_normal((37, 5)).astype(np.float32)
    buffer = io.BytesIO()
    np.save(buffer, array)
    assert collected(npy_answer(result_of(array, 4, threads))) == buffer.getvalue()
    whole = orjson.dumps({"features": array}, option=orjson.OPT_SERIALIZE_NUMPY)
    assert collected(json_answer({}, "features", result_of(array, 4, threads))) == whole


def test_parts_made_ahead_are_bounded_by_threads_plus_one():
    threads, released = 2, threading.Event()
    started: list[int] = []
    lock = threading.Lock()

    def part(index):
        def make():
            with lock:
                started.append(index)
            released.wait(5)
            return bytes([index])
        return make

    ahead = streams._Ahead((part(i) for i in range(10)), threads)
    ahead._refill()
    assert len(ahead._pending) == threads + 1   # queued or being made; the rest not yet taken from the parts
    released.set()

    async def drain() -> bytes:
        return b"".join([made async for made in ahead.stream((b"head",))])

    assert asyncio.run(drain()) == b"head" + bytes(range(10))
    assert sorted(started) == list(range(10))


def test_a_failing_first_chunk_drops_the_chunks_queued_behind_it():
    made: list[int] = []
    second_started, release = threading.Event(), threading.Event()

    def compute(rows):
        if rows.start == 0:
            second_started.wait(5)   # the pool's one thread is making the second chunk, the third is queued
            raise ValueError("bad first chunk")
        if rows.start == 1:
            second_started.set()
            release.wait(5)
        made.append(rows.start)
        return np.zeros((rows.stop - rows.start, 2), dtype=np.float32)

    array = np.zeros((40, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="bad first chunk"):
        npy_answer(result_of(array, 1, threads=1, compute=compute))
    release.set()
    streams._stream_pool(1).submit(lambda: None).result()   # the pool has run all it was left with
    assert made == [1]   # the chunk being made is finished; the queued one was dropped
