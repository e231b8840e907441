"""Moving an index's items into another layout while it serves (featurehash.store.lsh_indexes.migrate):
from layouts 1, 2 or 3 into the sharded layout (featurehash.store.index.sharded; S >= 1 shards), as step
generators (no I/O).

1. Start: the target's shards get their meta (the target's configuration), then the index's meta becomes its
   configuration with `migrating_to` set, by a script that checks it is still what was read. From then on a
   writer that opened the index before fails its next batch with IndexConflict ("retry": it reopens), and a
   handle opened during the migration writes to the target, then removes the ids from the source; removes from
   both; queries both side by side (lockstep) and merges each row's results by id, the target's entry winning.
2. Copy: page after page, the source's items (records, ids, stored vectors) are added to the target where the
   target does not hold the id yet (a write made meanwhile is newer: the layout-3 write script checks the id is
   still absent), then removed from the source. Nothing is written to the source during the migration, so one
   pass reads every item; a crash leaves the copied items in the target and the rest in the source, and running
   the migration again goes on from there (copying is idempotent).
3. Cutover, once the source holds no item: the index's meta becomes the target's configuration (checked against
   the migrating one), and the source's other keys are unlinked page by page.

During the migration `query_items` searches the layout that holds each item, and `duplicates` is refused
(IndexConflict: retry after it), since pairs across the two layouts would be missed.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import orjson

from ..lsh_layout import IndexConfig, unpack_records_and_vectors
from ..redis_steps import RoundTrip, Scan
from .queries import QueryResult, query_items_steps, query_steps
from .sharded.lockstep import lockstep
from .state import IndexConflict, IndexNotFound
from .writes import add_steps, remove_steps

MIGRATION_PAGE = 2_000  # items a copy page moves (a few script calls of each layout)

# Compare-and-set of the meta key. KEYS: meta; ARGV: the value read, the new one.
SWAP_META = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""


def _unless_gone(operation):
    """The operation's answer, or None when the source it works on was cut over meanwhile."""
    try:
        return (yield from operation)
    except (IndexNotFound, IndexConflict):
        return None


# -- what a handle does while its index migrates ------------------------------------------------

def migrating_add_steps(index, ids, X):
    """Written to the target, then the ids' old copies leave the source."""
    answer = yield from add_steps(index.migration, ids, X)
    yield from _unless_gone(remove_steps(index, list(ids)))
    return answer


def migrating_remove_steps(index, ids):
    target, source = yield from lockstep([remove_steps(index.migration, ids), _unless_gone(remove_steps(index, ids))])
    gone = set(target) | set(source or ())
    return [item_id for item_id in dict.fromkeys(ids) if item_id in gone]


def migrating_query_steps(index, X, top_k, min_similarity, target_recall, bounds):
    target, source = yield from lockstep([
        query_steps(index.migration, X, top_k, min_similarity, target_recall, bounds),
        _unless_gone(query_steps(index, X, top_k, min_similarity, target_recall, bounds))])
    return target if source is None else _merged(target, source, top_k)


def migrating_query_items_steps(index, ids, top_k, min_similarity, target_recall, bounds):
    """Each id's neighbours from the layout that holds it (the target first)."""
    held = yield from index.migration.steps.held_steps(ids)
    in_target = [item_id for item_id, there in zip(ids, held) if there]
    in_source = [item_id for item_id, there in zip(ids, held) if not there]
    answers = yield from lockstep(
        ([query_items_steps(index.migration, in_target, top_k, min_similarity, target_recall, bounds)]
         if in_target else []) +
        ([query_items_steps(index, in_source, top_k, min_similarity, target_recall, bounds)] if in_source else []))
    by_id = {}
    for group, answer in zip([group for group in (in_target, in_source) if group], answers):
        for row, item_id in enumerate(group):
            by_id[item_id] = tuple(column[row] for column in (answer.results, answer.candidates,
                                                               answer.estimated_recall, answer.rows_probed))
    return QueryResult(*(list(column) for column in zip(*(by_id[item_id] for item_id in ids))))


def _merged(target: QueryResult, source: QueryResult, top_k: int) -> QueryResult:
    """Per row the best top_k of both answers, an id once (the target's entry)."""
    results = []
    for mine, theirs in zip(target.results, source.results):
        seen = {item_id for item_id, _ in mine}
        both = mine + [hit for hit in theirs if hit[0] not in seen]
        results.append(sorted(both, key=lambda hit: -hit[1])[:top_k])  # stable: the target's first among equals
    return QueryResult(results, [a + b for a, b in zip(target.candidates, source.candidates)],
                       [min(a, b) for a, b in zip(target.estimated_recall, source.estimated_recall)],
                       target.rows_probed)


def refuse_duplicates_steps(index, *args):
    raise IndexConflict("index_id", f"index {index.name!r} is being migrated; ask for its duplicates after")
    yield  # a generator, as the operations are


# -- the migration itself ------------------------------------------------------------------------

def start_steps(index, target: IndexConfig, shard_metas: list[bytes]):
    """The target's shard metas, then the index's meta marked as migrating: the new meta."""
    migrating = replace(index.config, migrating_to=orjson.loads(target.to_json())).to_json()
    yield RoundTrip([("SET", key, target.to_json()) for key in shard_metas])
    (swapped,) = yield RoundTrip([("EVAL", SWAP_META, 1, index.layout.meta, index._meta, migrating)])
    if not swapped:
        raise IndexConflict("index_id", f"index {index.name!r} changed while its migration started; retry")
    return migrating


def copy_page_steps(index, cursor, page: int = MIGRATION_PAGE):
    """Moves up to `page` source items into the target from `cursor`: (items moved, the next cursor, None at
    the end)."""
    ids, encoded, cursor = yield from _source_page_steps(index, cursor, page)
    if ids:
        steps = index.migration.steps
        for start in range(0, len(ids), steps.batch_items):
            yield from steps.add_batch_steps(ids, encoded, slice(start, start + steps.batch_items), True)
        yield from remove_steps(index, ids)
    return len(ids), cursor


def _source_page_steps(index, cursor, page: int):
    """(ids, the target's encoding of their records and vectors, next cursor or None) of a page of the source."""
    target = index.migration.steps.shards[0]
    if index.config.layout >= 3:
        start = cursor or 1
        (last,) = yield RoundTrip([("GET", index.steps.compact.next)])
        numbers = np.arange(start, min(int(last or 0), start + page - 1) + 1, dtype=np.int64)
        if not numbers.size:
            return [], None, None
        records = yield from index.steps.records_steps(numbers)
        live, fingerprints, ids, vectors = index.steps.decode_records(records)
        identities = records[1][live]
        next_cursor = int(numbers[-1]) + 1
    else:
        scan_cursor, keys = yield Scan(index.layout.scan_pattern()[:-1] + b"i*", cursor or 0, page, index.layout.meta)
        records = (yield RoundTrip([("MGET", *keys)]))[0] if keys else []
        records = [record for record in records if record is not None]
        fingerprints, ids, vectors = unpack_records_and_vectors(records, index.config.n_codes, index.codec)
        identities = target.compact.identities(fingerprints) if ids else None
        next_cursor = None if int(scan_cursor) == 0 else int(scan_cursor)
    if not ids:
        return [], None, next_cursor
    packed = None if vectors is None else index.codec.pack(vectors)
    return ids, (fingerprints.astype(np.uint32), identities, packed), next_cursor


def finish_steps(index, migrating: bytes, target_meta: bytes, target_layout):
    """The cutover: the index's meta becomes the target's (at the tagged key; a layout-1 source's own meta goes)."""
    if index.layout.meta == target_layout.meta:
        (swapped,) = yield RoundTrip([("EVAL", SWAP_META, 1, index.layout.meta, migrating, target_meta)])
    else:
        yield RoundTrip([("SET", target_layout.meta, target_meta, "NX")])
        (swapped,) = yield RoundTrip([("EVAL", "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                                       "return redis.call('DEL', KEYS[1]) end return 0", 1, index.layout.meta,
                                       migrating)])
    if not swapped:
        raise IndexConflict("index_id", f"index {index.name!r} changed during its migration")


def source_left_steps(index):
    """Whether the source still holds an item."""
    if index.config.layout >= 3:
        (count,) = yield RoundTrip([("GET", index.layout.count)])
        return int(count or 0) > 0
    _, keys = yield Scan(index.layout.scan_pattern()[:-1] + b"i*", 0, 1000, index.layout.meta)
    return bool(keys)
