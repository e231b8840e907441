"""Step generators run side by side: their round trips merged into one, their other steps one by one."""

from featurehash.store.index.sharded.lockstep import lockstep
from featurehash.store.redis_steps import Compute, RoundTrip


def _reads(name: str, rounds: int):
    total = []
    for round_ in range(rounds):
        reply = yield RoundTrip([("GET", f"{name}{round_}"), ("GET", f"{name}{round_}b")])
        total += reply
    doubled = yield Compute(lambda values: [value * 2 for value in values], (total,))
    return name, doubled


def _drive(operation, log):
    reply = None
    try:
        while True:
            step = operation.send(reply)
            log.append(step)
            if isinstance(step, Compute):
                reply = step.function(*step.args)
            else:
                reply = [command[1] for command in step.commands]  # each GET answers its key
    except StopIteration as done:
        return done.value


def test_round_trips_merge_and_results_come_back_in_order():
    log = []
    result = _drive(lockstep([_reads("a", 2), _reads("b", 1), _reads("c", 0)]), log)
    assert result == [("a", ["a0a0", "a0ba0b", "a1a1", "a1ba1b"]), ("b", ["b0b0", "b0bb0b"]), ("c", [])]
    trips = [step for step in log if isinstance(step, RoundTrip)]
    # round 1: a's and b's first reads in one pipeline; round 2: a's second read alone
    assert [len(step.commands) for step in trips] == [4, 2]
    assert sum(isinstance(step, Compute) for step in log) == 3


def test_atomic_round_trips_are_not_merged():
    def atomic(name):
        reply = yield RoundTrip([("GET", name)], atomic=True)
        return reply

    log = []
    assert _drive(lockstep([atomic("x"), atomic("y")]), log) == [["x"], ["y"]]
    assert [step.commands for step in log] == [[("GET", "x")], [("GET", "y")]]
