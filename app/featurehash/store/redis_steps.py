"""Redis work written once for sync and async clients.

An operation is a generator that yields steps and receives each step's result; it does
no I/O itself. `run_sync` executes the steps with a `redis.Redis`, `run_async` with a
`redis.asyncio.Redis` (its CPU steps in a worker thread, off the event loop). Steps:

- `RoundTrip`: commands sent as one non-transactional pipeline (one network round trip; `atomic`:
  as MULTI/EXEC); the result is the list of their replies. A single non-atomic command is sent on its
  own; outside MULTI a script (EVAL) goes as EVALSHA, sent again as EVAL when the server lacks it.
- `Transaction`: optimistic: WATCH `watch`, run `reads` as one command, build the write
  commands from the read's reply, MULTI/EXEC them; redone from WATCH when a watched key
  changed meanwhile (up to MAX_TRANSACTION_ATTEMPTS). Three round trips. The result is
  the list of EXEC replies.
- `Scan`: one SCAN page (cursor, keys) of keys matching a pattern, on the node that holds
  `slot_key` when the client is a Redis Cluster (all keys of an index share its slot).
- `Persisted`: the writes answered so far are in Redis's append-only file (INFO persistence, on the
  nodes of `slot_keys`; featurehash.store.durability), else WriteRefused: a write operation's last
  step when its durability is "aof". One round trip (per node).
- `Compute`: a CPU-bound call (hashing, re-ranking); the result is its return value.
  `inline` marks work smaller than a thread hop (docs/benchmarks.md, "Thread hops"): the async driver then
  runs it on the event loop. It may be a function of no arguments that says so, which only the async driver
  calls (measuring an input is cheap beside a near-cache query's own work, and the sync driver runs every step
  in place anyway).

Commands are tuples (name, *args) passed to `execute_command`, so redis-py's reply
parsing applies (SUNION gives a set, MGET a list, ...). An error reply by which Redis refuses a
write (OOM, MISCONF, READONLY, NOREPLICAS) is raised as WriteRefused. Clients must not decode replies:
keys and values here are bytes. Both drivers accept a Redis Cluster client
(redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster) as long as every command,
script, pipeline and transaction of a step stays on one slot (hash-tagged keys).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generator

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError, WatchError

from .durability import persistence_refusal, refusal_of

Command = tuple
Operation = Generator["RoundTrip | Transaction | Scan | Persisted | Compute", Any, Any]
MAX_TRANSACTION_ATTEMPTS = 16


@dataclass(frozen=True)
class RoundTrip:
    commands: list[Command]
    atomic: bool = False


@dataclass(frozen=True)
class Transaction:
    watch: list[bytes]
    read: Command
    writes: Callable[[Any], list[Command]]
    inline: bool = False  # build the writes on the event loop (see Compute)


@dataclass(frozen=True)
class Scan:
    match: bytes
    cursor: int
    count: int
    slot_key: bytes


@dataclass(frozen=True)
class Persisted:
    slot_keys: tuple[bytes, ...]


@dataclass(frozen=True)
class Compute:
    function: Callable[..., Any]
    args: tuple = ()
    inline: bool | Callable[[], bool] = False

    def is_inline(self) -> bool:
        return self.inline() if callable(self.inline) else self.inline


class TransactionConflict(Exception):
    """The watched keys kept changing: MAX_TRANSACTION_ATTEMPTS optimistic attempts failed."""


def is_cluster(redis) -> bool:
    return isinstance(redis, (RedisCluster, AsyncRedisCluster))


def _scan_command(redis, step: Scan) -> tuple[tuple, dict]:
    options = _node_options(redis, step.slot_key)
    return ("SCAN", step.cursor, "MATCH", step.match, "COUNT", step.count), options


def _node_options(redis, slot_key: bytes) -> dict:
    return {"target_nodes": redis.get_node_from_key(slot_key)} if is_cluster(redis) else {}


def _nodes_options(redis, slot_keys: tuple[bytes, ...]) -> list[dict]:
    if not is_cluster(redis):
        return [{}]
    nodes = {node.name: node for node in map(redis.get_node_from_key, slot_keys)}
    return [{"target_nodes": node} for node in nodes.values()]


def persisted(durability: str, *slot_keys: bytes):
    """`yield from persisted(...)`: a Persisted step if the durability asks for it ("aof")."""
    if durability == "aof":
        yield Persisted(slot_keys)


def _persisted(info: dict) -> None:
    refusal = persistence_refusal(info, "aof")
    if refusal is not None:
        raise refusal


def _scan_reply(reply) -> tuple[int, list[bytes]]:
    cursor, keys = reply
    if isinstance(cursor, dict):  # a cluster client answers {node: cursor} (one node here)
        (cursor,) = cursor.values()
    return int(cursor), keys


_SHA1: dict[str, str] = {}


def _single(step: RoundTrip) -> Command | None:
    """The command of a one-command, non-atomic round trip (sent without a pipeline: ~30-50 us less
    client CPU for a query's one script call), else None."""
    return step.commands[0] if len(step.commands) == 1 and not step.atomic else None


def _by_digest(command: Command) -> Command:
    """EVAL sent as EVALSHA: Redis neither receives nor hashes the script's text again (the caller falls back
    to EVAL on NOSCRIPT, once per server and script)."""
    if command[0] != "EVAL":
        return command
    script = command[1]
    digest = _SHA1.get(script)
    if digest is None:
        digest = _SHA1[script] = hashlib.sha1(script.encode()).hexdigest()
    return ("EVALSHA", digest, *command[2:])


def check_client(redis) -> None:
    if redis.get_encoder().decode_responses:
        raise ValueError("the LSH index stores binary keys and values: use a Redis client with "
                         "decode_responses=False (the default)")


def run_sync(redis, operation: Operation) -> Any:
    reply = None
    try:
        while True:
            step = operation.send(reply)
            if isinstance(step, Compute):
                reply = step.function(*step.args)
            elif isinstance(step, Scan):
                command, options = _scan_command(redis, step)
                reply = _scan_reply(redis.execute_command(*command, **options))
            elif isinstance(step, RoundTrip):
                command = _single(step)
                if command is not None:
                    try:
                        reply = [redis.execute_command(*_by_digest(command))]
                    except NoScriptError:
                        reply = [redis.execute_command(*command)]
                    continue
                if step.atomic:
                    with redis.pipeline(transaction=True) as pipe:
                        for command in step.commands:
                            pipe.execute_command(*command)
                        reply = pipe.execute()
                    continue
                reply = _pipelined_sync(redis, step.commands)
            elif isinstance(step, Persisted):
                for options in _nodes_options(redis, step.slot_keys):
                    _persisted(redis.execute_command("INFO", "persistence", **options))
                reply = None
            else:
                reply = _transaction_sync(redis, step)
    except StopIteration as done:
        return done.value
    except ResponseError as exc:
        refusal = refusal_of(exc)
        if refusal is None:
            raise
        raise refusal from exc


def _sent_by_digest(commands: list[Command], replies: list) -> list[Command]:
    """The commands whose EVALSHA met NOSCRIPT (to send again as EVAL); raises any other error reply."""
    again = []
    for command, reply in zip(commands, replies):
        if isinstance(reply, NoScriptError):
            again.append(command)
        elif isinstance(reply, Exception):
            raise reply
    return again


def _merged(replies: list, answers: list) -> list:
    """The replies with the scripts sent again answered."""
    answer = iter(answers)
    return [next(answer) if isinstance(reply, NoScriptError) else reply for reply in replies]


def _pipelined_sync(redis, commands: list[Command]) -> list:
    """A non-transactional pipeline, its scripts sent as EVALSHA (a sharded index sends one a shard)."""
    with redis.pipeline(transaction=False) as pipe:
        for command in commands:
            pipe.execute_command(*_by_digest(command))
        replies = pipe.execute(raise_on_error=False)
    again = _sent_by_digest(commands, replies)
    if not again:
        return replies
    with redis.pipeline(transaction=False) as pipe:
        for command in again:
            pipe.execute_command(*command)
        return _merged(replies, pipe.execute())


async def _pipelined_async(redis, commands: list[Command]) -> list:
    async with redis.pipeline(transaction=False) as pipe:
        for command in commands:
            pipe.execute_command(*_by_digest(command))
        replies = await pipe.execute(raise_on_error=False)
    again = _sent_by_digest(commands, replies)
    if not again:
        return replies
    async with redis.pipeline(transaction=False) as pipe:
        for command in again:
            pipe.execute_command(*command)
        return _merged(replies, await pipe.execute())


def _transaction_sync(redis, step: Transaction) -> list:
    for _ in range(MAX_TRANSACTION_ATTEMPTS):
        with redis.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(*step.watch)
                writes = step.writes(pipe.execute_command(*step.read))
                pipe.multi()
                for command in writes:
                    pipe.execute_command(*command)
                return pipe.execute()
            except WatchError:
                continue
    raise TransactionConflict(f"{MAX_TRANSACTION_ATTEMPTS} attempts met concurrent changes to the same keys")


async def run_async(redis, operation: Operation,
                    offload: Callable[..., Awaitable[Any]] = asyncio.to_thread) -> Any:
    reply = None
    try:
        while True:
            step = operation.send(reply)
            if isinstance(step, Compute):
                reply = step.function(*step.args) if step.is_inline() else await offload(step.function, *step.args)
            elif isinstance(step, Scan):
                command, options = _scan_command(redis, step)
                reply = _scan_reply(await redis.execute_command(*command, **options))
            elif isinstance(step, RoundTrip):
                command = _single(step)
                if command is not None:
                    try:
                        reply = [await redis.execute_command(*_by_digest(command))]
                    except NoScriptError:
                        reply = [await redis.execute_command(*command)]
                    continue
                if step.atomic:
                    async with redis.pipeline(transaction=True) as pipe:
                        for command in step.commands:
                            pipe.execute_command(*command)
                        reply = await pipe.execute()
                    continue
                reply = await _pipelined_async(redis, step.commands)
            elif isinstance(step, Persisted):
                for options in _nodes_options(redis, step.slot_keys):
                    _persisted(await redis.execute_command("INFO", "persistence", **options))
                reply = None
            else:
                reply = await _transaction_async(redis, step, offload)
    except StopIteration as done:
        return done.value
    except ResponseError as exc:
        refusal = refusal_of(exc)
        if refusal is None:
            raise
        raise refusal from exc


async def _transaction_async(redis, step: Transaction, offload) -> list:
    for _ in range(MAX_TRANSACTION_ATTEMPTS):
        async with redis.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(*step.watch)
                read = await pipe.execute_command(*step.read)
                # building a batch's writes is CPU work: off the event loop unless tiny
                writes = step.writes(read) if step.inline else await offload(step.writes, read)
                pipe.multi()
                for command in writes:
                    pipe.execute_command(*command)
                return await pipe.execute()
            except WatchError:
                continue
    raise TransactionConflict(f"{MAX_TRANSACTION_ATTEMPTS} attempts met concurrent changes to the same keys")


SET_PAGE, SETS_PER_TRIP = 1000, 16


def set_members_steps(keys: list[bytes], page: int = SET_PAGE, per_trip: int = SETS_PER_TRIP,
                      enough: dict[bytes, int] | None = None):
    """The members of sets (a list of bytes each, in key order, in the order SSCAN gave them) by SSCAN pages of
    `page`, `per_trip` sets a round trip: however large a set, no command holds Redis for long (SMEMBERS of 100,000
    members holds it ~10 ms). With `enough`, a set is read no further once it gave that many distinct members (a
    key read once, however often listed). Not atomic: a member added or removed meanwhile may be missing or present;
    one present throughout is there once (SSCAN may repeat a member: they are made distinct)."""
    found: dict[bytes, dict[bytes, None]] = {key: {} for key in keys}
    cursors = dict.fromkeys(keys, 0)
    pending = list(dict.fromkeys(keys))
    while pending:
        batch, pending = pending[:per_trip], pending[per_trip:]
        replies = yield RoundTrip([("SSCAN", key, cursors[key], "COUNT", page) for key in batch])
        for key, (cursor, members) in zip(batch, replies):
            found[key].update(dict.fromkeys(members))
            cursors[key] = int(cursor)
            if cursors[key] and (enough is None or len(found[key]) < enough[key]):
                pending.append(key)
    return [list(found[key]) for key in keys]
