"""Who is calling: API keys, the tenant and scopes each key carries, and the limits that go with it."""

from .principal import ADMIN_SCOPES, KeyLimits, Principal, Scope

__all__ = ["ADMIN_SCOPES", "KeyLimits", "Principal", "Scope"]
