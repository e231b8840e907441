"""What a tenant's maps hold, counted in its stored bytes (featurehash.store.specs.SpecStore's create and delete).

Who pays: the tenant whose request stores a new map (its `MapPayer`). Maps are content-addressed and shared, so
a spec posted again (by the same tenant or another, retried or not) finds the map stored and costs nothing more:
a map is counted once, to the tenant that created it, whoever uses it later. Its counted bytes are the bytes of
its stored spec (the JSON value of `{prefix}map:{id}`, as written), not its listing, its aliases or Redis's
per-key overhead (about 200 bytes a map more in Redis's memory).

Where: the tenant's total of featurehash.store.lsh_accounting (`{tenant key prefix}stored-bytes`), the one its
indexes count in, so `stored_bytes` limits a tenant's maps and indexes together: an index write is refused
when the maps took the room, and a map when the indexes did. The charge is recorded beside the map
(`{prefix}map_charge:{id}` = "<bytes> <tenant>"), so that deleting the map gives the bytes back to the tenant
that paid, whoever deletes it (an admin, or another tenant where the map is unused).

Atomic: one script checks the payer's total against its limit, writes the spec, its listing, its charge and
its alias, and adds the bytes to the total; or, past the limit, writes nothing (MapBytesExceeded). Workers and
replicas racing near the limit never pass it together, a retried POST of a stored map finds it and counts
nothing, and a creation that fails (refused, or never reaching Redis) has counted nothing. Deleting drops the
spec, its charge and the bytes in one script too (its first write a DEL: allowed at maxmemory).

Maps stored before counting began have no charge: they stay uncounted (to anyone) until deleted; a spec posted
again finds them stored and charges nobody. Standalone Redis only: the spec store's keys (map, listing, total)
lie on several slots, as they always did, so the service's map store does not run on a Redis Cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from .lsh_accounting import StoredBytesExceeded, tenant_total_key
from .lsh_layout import tenant_key_prefix

# KEYS: spec, listing, charge, the payer's total (the charge key again when nobody pays), then the alias and the
# aliases' set if any. ARGV: spec JSON, id, charge ('' : nobody pays), bytes, limit (-1: none), alias.
# Returns {1} created, {0} it existed (nothing counted), {-1, used} refused past the limit (nothing written).
CREATE = """
local alias = KEYS[5] ~= nil
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('ZADD', KEYS[2], 0, ARGV[2])
  if alias then redis.call('SET', KEYS[5], ARGV[2], 'NX'); redis.call('SADD', KEYS[6], ARGV[6]) end
  return {0}
end
local paid, size, limit = ARGV[3] ~= '', tonumber(ARGV[4]), tonumber(ARGV[5])
if paid and limit >= 0 then
  local used = tonumber(redis.call('GET', KEYS[4]) or '0')
  if used + size > limit then return {-1, used} end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], 0, ARGV[2])
if paid then
  redis.call('SET', KEYS[3], ARGV[3])
  redis.call('INCRBY', KEYS[4], size)
end
if alias then redis.call('SET', KEYS[5], ARGV[2], 'NX'); redis.call('SADD', KEYS[6], ARGV[6]) end
return {1}
"""
CREATED, EXISTED, OVER_LIMIT = 1, 0, -1

# KEYS: spec, listing, charge, the payer's total (the charge key again when none), the aliases' set, the alias
# keys. ARGV: id, the charge as read ('' : none). Returns 1 deleted, 0 absent, -1 the charge changed since it was
# read (the map was deleted and created again meanwhile: read again). The first write is a DEL, so it runs at
# maxmemory (Redis refuses a script whose first write may grow memory), where deleting must free memory.
DELETE = """
local charge = redis.call('GET', KEYS[3]) or ''
if charge ~= ARGV[2] then return -1 end
local deleted = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if charge ~= '' then
  redis.call('DEL', KEYS[3])
  if redis.call('DECRBY', KEYS[4], tonumber(string.match(charge, '^%d+'))) <= 0 then redis.call('DEL', KEYS[4]) end
end
for i = 5, #KEYS do redis.call('DEL', KEYS[i]) end
return deleted
"""
CHARGE_CHANGED = -1


@dataclass(frozen=True)
class MapPayer:
    """The tenant a new map's stored bytes are counted to, and its stored-bytes limit (None: counted, never
    refused)."""

    tenant: str
    limit: int | None = None


@dataclass(frozen=True)
class MapCharge:
    """What a stored map was counted as: `size` bytes to `tenant` (None: a map stored before counting began,
    counted to nobody)."""

    tenant: str | None
    size: int = 0

    def encode(self) -> bytes:
        return b"" if self.tenant is None else f"{self.size} {self.tenant}".encode()

    @classmethod
    def decode(cls, value: bytes | None) -> MapCharge:
        if not value:
            return cls(None)
        size, tenant = value.decode().split(" ", 1)
        return cls(tenant, int(size))


def total_key(key_prefix: str, tenant: str) -> bytes:
    """The tenant's stored-bytes total, where its indexes count too (lsh_accounting.tenant_total_key)."""
    return tenant_total_key(tenant_key_prefix(key_prefix, tenant))


class MapBytesExceeded(StoredBytesExceeded):
    """A new map that would take its tenant past its stored-bytes limit; nothing of it was stored. `needed` is
    None when refused before the map was built (the tenant already at its limit: no map fits)."""

    def __init__(self, limit: int, used: int, needed: int | None, map_id: str | None = None):
        super().__init__(limit, used, needed or 0)
        self.needed, self.map_id = needed, map_id


class SpecTooLarge(Exception):
    """A map whose stored spec would exceed the store's bound on one spec (`limit` bytes); `field` names the
    spec's largest part (`params.<name>`, or a top-level field), what to make smaller."""

    def __init__(self, field: str, size: int, limit: int):
        super().__init__(f"{field}: {size} > {limit}")
        self.field, self.size, self.limit = field, size, limit


def largest_field(spec: dict[str, Any]) -> str:
    """The part of a spec whose JSON is largest: `params.<name>` for a parameter, else the top-level key."""
    sizes = {name: len(orjson.dumps(value)) for name, value in spec.items() if name != "params"}
    sizes.update({f"params.{name}": len(orjson.dumps(value)) for name, value in (spec.get("params") or {}).items()})
    return max(sizes, key=sizes.__getitem__)
