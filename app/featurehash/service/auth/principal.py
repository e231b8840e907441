"""The caller a request runs as, once its key has been checked.

A key belongs to one tenant and grants scopes: `read` (transform, hash, kernel, query), `write` (create maps,
add and remove items, create and delete one's own indexes) and `admin` (others' data, every tenant). Limits are
per key and per tenant; None means unlimited. The key itself is never kept here: `key_id` is the name the key
file gives it (or a digest prefix), safe to log."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Scope(str, Enum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


ADMIN_SCOPES = frozenset(Scope)


@dataclass(frozen=True)
class KeyLimits:
    requests_per_second: float | None = None
    concurrent_requests: int | None = None
    # Counted per tenant (every key of the tenant shares it): the bytes its maps and indexes hold in Redis.
    stored_bytes: int | None = None


@dataclass(frozen=True)
class Principal:
    tenant: str
    key_id: str
    scopes: frozenset[Scope] = field(default=ADMIN_SCOPES)
    limits: KeyLimits = field(default_factory=KeyLimits)

    def allows(self, scope: Scope) -> bool:
        return scope in self.scopes or Scope.ADMIN in self.scopes

    @property
    def is_admin(self) -> bool:
        return Scope.ADMIN in self.scopes
