"""Step generators (featurehash.store.redis_steps) run side by side as one: each round takes every running
generator's next step, sends the non-atomic round trips of all of them as one RoundTrip (one pipeline; a Redis
Cluster client splits it into one pipeline per node, sent at once) and the other steps one after the other. So a
sharded index's S shards cost the round trips of one shard, not S times as many."""

from __future__ import annotations

from typing import Any

from ...redis_steps import Operation, RoundTrip


def lockstep(operations: list[Operation]):
    """`yield from lockstep([...])`: the operations' return values, in order."""
    results: list[Any] = [None] * len(operations)
    replies: list[Any] = [None] * len(operations)
    running = list(range(len(operations)))
    while running:
        steps = {}
        for at in running:
            try:
                steps[at] = operations[at].send(replies[at])
            except StopIteration as done:
                results[at] = done.value
        running = list(steps)
        merged = [at for at in running if isinstance(steps[at], RoundTrip) and not steps[at].atomic]
        if len(merged) > 1:
            answers = yield RoundTrip([command for at in merged for command in steps[at].commands])
            offset = 0
            for at in merged:
                size = len(steps[at].commands)
                replies[at], offset = answers[offset:offset + size], offset + size
        else:
            merged = []
        for at in running:
            if at not in merged:
                replies[at] = yield steps[at]
    return results
