"""Storage: the Redis spec store and the embedded Redis launcher."""

from .specs import SpecStore

__all__ = ["SpecStore"]
