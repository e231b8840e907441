"""Who is calling: API keys, the tenant and scopes each key carries, and the limits that go with it."""

from .keys import DEFAULT_TENANT, KeyRing, KeysFileError, KeySource, is_tenant_name, key_ring, read_keys_file
from .principal import ADMIN_SCOPES, KeyLimits, Principal, Scope

__all__ = ["ADMIN_SCOPES", "DEFAULT_TENANT", "KeyLimits", "KeyRing", "KeySource", "KeysFileError", "Principal",
           "Scope", "is_tenant_name", "key_ring", "read_keys_file"]
