"""When Redis has a write for good, and when it refuses one.

Redis writes its append-only file (write(2), in the event loop) before it sends the replies of the
commands that fed it, so after a write's reply `INFO persistence` showing `aof_enabled:1` and
`aof_last_write_status:ok` proves the write is in the file: it survives a restart of Redis or of
its host process (with `appendfsync everysec`, not a power cut within the second; and Redis may
postpone the write by up to 2 s while a slow disk's fsync runs: such a write rests on the
postponed one succeeding). Redis >= 7.2's WAITAOF would say it per write; not used. A failed write
(a full disk) leaves Redis holding the change in memory only, and until the file can be written
again Redis refuses every write with MISCONF. Durability "aof" checks that after every write
operation (one more round trip) and raises WriteRefused instead of acknowledging; "reply" trusts
Redis's reply, i.e. whatever persistence the server has (none, RDB snapshots, replicas).

Redis also refuses writes when its memory is full (maxmemory with noeviction: OOM), on a read-only
replica (READONLY) and without enough replicas (NOREPLICAS); `refusal_of` names these, and
`readiness_refusal` tells the same from INFO, without writing.
"""

from __future__ import annotations

from typing import Literal

from redis.exceptions import OutOfMemoryError, ReadOnlyError, RedisError, ResponseError

Durability = Literal["aof", "reply"]
DURABILITY_MODES = ("aof", "reply")


class WriteRefused(RedisError):
    """Redis did not take a write, or did not persist it: not acknowledged. `cause` says why;
    `insufficient_storage` when memory or disk is full (HTTP 507, else 503)."""

    def __init__(self, cause: str, insufficient_storage: bool = False):
        super().__init__(cause)
        self.cause = cause
        self.insufficient_storage = insufficient_storage


def check_durability(durability: str) -> str:
    if durability not in DURABILITY_MODES:
        raise ValueError(f"durability must be one of {', '.join(DURABILITY_MODES)}, not {durability!r}")
    return durability


AOF_NOT_WRITTEN = ("Redis could not write its append-only file (aof_last_write_status:err; disk full?): "
                   "writes are not acknowledged until it can again; see the Redis log")
AOF_OFF = ("Redis keeps no append-only file (appendonly no), so a write would not survive its restart and none "
           "is acknowledged: set appendonly yes on that Redis (CONFIG SET appendonly yes, and in its configuration), "
           "or FEATUREHASH_DURABILITY=reply (durability=\"reply\" in the library) to acknowledge on Redis's reply")
OUT_OF_MEMORY = ("Redis is out of memory (used memory above maxmemory, policy noeviction): writes are refused; "
                 "delete items, indexes or maps, or raise maxmemory")
READ_ONLY = "Redis is a read-only replica: writes go to its primary"
NO_REPLICAS = "Redis has fewer good replicas than min-replicas-to-write: writes are refused"


def persistence_refusal(info: dict, durability: str) -> WriteRefused | None:
    """Why the writes answered before this INFO persistence may not be in the append-only file."""
    if int(info.get("aof_enabled", 0)) != 1:
        return WriteRefused(AOF_OFF) if durability == "aof" else None
    if info.get("aof_last_write_status", "ok") != "ok":
        return WriteRefused(AOF_NOT_WRITTEN, insufficient_storage=True)
    return None


def refusal_of(exc: ResponseError) -> WriteRefused | None:
    """The WriteRefused a Redis error reply means (also inside a script's or a pipeline's error), else None."""
    text = str(exc)
    if isinstance(exc, OutOfMemoryError) or "OOM command not allowed" in text or "> 'maxmemory'" in text:
        return WriteRefused(OUT_OF_MEMORY, insufficient_storage=True)
    if "MISCONF" in text:
        return WriteRefused(f"Redis refuses writes (MISCONF: {_after(text, 'MISCONF')}); see the Redis log",
                            insufficient_storage=True)
    if isinstance(exc, ReadOnlyError) or "READONLY" in text:
        return WriteRefused(READ_ONLY)
    if "NOREPLICAS" in text:
        return WriteRefused(NO_REPLICAS)
    return None


def _after(text: str, marker: str) -> str:
    return text[text.index(marker) + len(marker):].strip(" '\",)").split(". ")[0]


READINESS_COMMANDS = (("INFO", "persistence"), ("INFO", "memory"), ("INFO", "replication"))


def readiness_refusal(persistence: dict, memory: dict, replication: dict, durability: str) -> WriteRefused | None:
    """Whether Redis would refuse (or not persist) a write now, from READINESS_COMMANDS' replies."""
    refusal = persistence_refusal(persistence, durability)
    if refusal is not None:
        return refusal
    maxmemory = int(memory.get("maxmemory", 0))
    used = int(memory.get("used_memory", 0)) - int(memory.get("mem_not_counted_for_evict", 0))  # as Redis counts
    if maxmemory and memory.get("maxmemory_policy") == "noeviction" and used > maxmemory:
        return WriteRefused(OUT_OF_MEMORY, insufficient_storage=True)
    if replication.get("role") == "slave":
        return WriteRefused(READ_ONLY)
    return None
