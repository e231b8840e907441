"""Storage: the Redis spec store, the LSH index tables and the embedded Redis launcher.

Its names load on first use, so the launcher (featurehash.store.embedded) starts without numpy and scipy."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_WHERE = {"AsyncLSHIndex": "index.handles", "IndexConflict": "index.handles", "IndexNotFound": "index.handles",
          "ItemNotFound": "index.handles", "LSHIndex": "index.handles", "QueryResult": "index.handles",
          "DuplicateCluster": "index.handles", "Duplicates": "index.handles",
          "AsyncLSHIndexes": "lsh_indexes", "LSHIndexes": "lsh_indexes", "plan_index": "lsh_indexes",
          "SpecStore": "specs", "WriteRefused": "durability"}
__all__ = sorted(_WHERE)

if TYPE_CHECKING:
    from .durability import WriteRefused
    from .index.handles import (AsyncLSHIndex, DuplicateCluster, Duplicates, IndexConflict, IndexNotFound, ItemNotFound,
                            LSHIndex, QueryResult)
    from .lsh_indexes import AsyncLSHIndexes, LSHIndexes, plan_index
    from .specs import SpecStore


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value
