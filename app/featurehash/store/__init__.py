"""Storage: the Redis spec store, the LSH index tables and the embedded Redis launcher."""

from .lsh_index import AsyncLSHIndex, IndexConflict, IndexNotFound, ItemNotFound, LSHIndex, QueryResult
from .lsh_indexes import AsyncLSHIndexes, LSHIndexes, plan_index
from .specs import SpecStore

__all__ = ["AsyncLSHIndex", "AsyncLSHIndexes", "IndexConflict", "IndexNotFound", "ItemNotFound", "LSHIndex",
           "LSHIndexes", "QueryResult", "SpecStore", "plan_index"]
