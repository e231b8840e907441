"""Per-key limits through real servers: two replicas (`featurehash serve`, two uvicorn workers each) on one Redis,
a keys file with limits. Requests per second and concurrent requests (429 with Retry-After) hold across all four
workers; a sequential client is never refused by its own previous request; a running request's lease is renewed
past lease_seconds; a tenant's stored bytes are refused
past its limit with 507 before the write, and freed by removing; a tenant's new maps count in its stored bytes
(the issue's nystroem case, workers racing near the limit, one spec posted again and by another tenant, deleting);
keys without limits leave nothing in Redis."""

from __future__ import annotations

import hashlib
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import orjson
import pytest
import redis

from service_support import RedisProcess, ServiceProcess, start_all, stop_all

# Its servers start once, on one xdist worker (module fixtures are per worker).
pytestmark = pytest.mark.xdist_group("quotas")

KEYS = {"fast": "key-fast", "paced": "key-paced", "single": "key-single", "small": "key-small", "admin": "key-admin",
        "maps-m": "key-maps-m", "maps-n": "key-maps-n", "racer": "key-racer", "full": "key-full"}
RATE = 20
GCWS = {"method": "gcws", "input_dim": 4, "n_components": 16, "seed": 5}
ROW = [1.0, 2.0, 0.0, 3.0]


def _entry(name: str, tenant: str, scopes: list[str], limits: dict | None = None) -> dict:
    return {"name": name, "tenant": tenant, "scopes": scopes, "sha256": hashlib.sha256(KEYS[name].encode()).hexdigest(),
            **({"limits": limits} if limits else {})}


KEYS_FILE = {"keys": [_entry("fast", "team-a", ["read", "write"]),
                      _entry("paced", "team-a", ["read"], {"requests_per_second": RATE}),
                      _entry("single", "team-b", ["read"], {"concurrent_requests": 1}),
                      _entry("small", "team-c", ["read", "write"]), _entry("admin", "ops", ["admin"]),
                      _entry("maps-m", "team-m", ["read", "write"]), _entry("maps-n", "team-n", ["read", "write"]),
                      _entry("racer", "team-r", ["write"]), _entry("full", "team-z", ["write"])],
             "tenants": {"team-c": {"stored_bytes": 4000}, "team-m": {"stored_bytes": 200_000},
                         "team-r": {"stored_bytes": 2500}, "team-z": {"stored_bytes": 0}}}


def _auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    root = tmp_path_factory.mktemp("quotas")
    keys_file = root / "keys.json"
    keys_file.write_bytes(orjson.dumps(KEYS_FILE))
    store = RedisProcess(root / "redis").start()
    prefix = f"fh-quotas-{uuid.uuid4().hex[:8]}:"
    servers = [ServiceProcess(f"replica-{n}", root / f"replica-{n}", workers=2, redis_url=store.url,
                              key_prefix=prefix, keys_file=str(keys_file), durability="reply",
                              lease_seconds=1) for n in (1, 2)]   # leases renewed every 1/3 s while held
    start_all(servers)
    with servers[0].client() as http:
        map_id = http.post("/v1/maps", json=GCWS, headers=_auth("fast")).json()["id"]
    yield servers, store, prefix, map_id
    problems = stop_all(servers)
    store.stop()
    assert not problems, problems


def _transform(http, map_id: str, key: str):
    return http.post(f"/v1/maps/{map_id}/transform", json={"vectors": [ROW]}, headers=_auth(key))


def test_requests_per_second_hold_across_two_replicas_of_two_workers(replicas):
    servers, _, _, map_id = replicas
    clients = [server.client() for server in servers for _ in range(4)]   # 8 connections over 4 workers
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda n: _transform(clients[n % 8], map_id, "paced"), range(120)))
    elapsed = time.monotonic() - started
    for http in clients:
        http.close()
    accepted = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 429]
    assert len(accepted) + len(refused) == len(answers)
    # GCRA: a burst of RATE (1 s of it), then RATE a second, whichever worker of either replica answers
    assert RATE <= len(accepted) <= RATE + RATE * elapsed + 1
    assert refused, "the limit never refused anything"
    body = refused[0].json()
    assert body["field"] == "requests_per_second" and "'paced'" in body["detail"] and "20 requests" in body["detail"]
    assert refused[0].headers["retry-after"] == "1"


def test_a_sequential_client_is_never_refused_by_its_own_previous_request(replicas):
    """concurrent_requests = 1, alternating replicas: each lease is given back before the answer's last byte."""
    servers, _, _, map_id = replicas
    clients = [server.client() for server in servers]
    try:
        statuses = [_transform(clients[n % 2], map_id, "single").status_code for n in range(30)]
    finally:
        for http in clients:
            http.close()
    assert statuses == [200] * 30


def _held_request(server: ServiceProcess, map_id: str, key: str) -> tuple[socket.socket, bytes]:
    """A transform whose body is still coming: admitted (and holding its lease) while the server waits for it."""
    body = orjson.dumps({"vectors": [ROW]})
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(f"POST /v1/maps/{map_id}/transform HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEYS[key]}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:5])
    return sock, body[5:]


def _whole_answer(sock: socket.socket) -> bytes:
    """The whole HTTP answer on `sock` (headers, then Content-Length bytes of body): a first recv may hold only
    its headers, and the server gives the lease back only before the answer's last byte."""
    answer = b""
    while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
        more = sock.recv(65536)
        assert more, f"the server closed the connection after {answer[:200]!r}"
        answer += more
    return answer


def _length(answer: bytes) -> int:
    head = answer.partition(b"\r\n\r\n")[0]
    return next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:"))


def test_concurrent_requests_hold_across_replicas_and_free_when_the_request_ends(replicas):
    servers, _, _, map_id = replicas
    held, rest = _held_request(servers[0], map_id, "single")
    try:
        with servers[1].client() as http:
            def refused_elsewhere() -> bool:
                return _transform(http, map_id, "single").status_code == 429
            deadline = time.monotonic() + 10
            while not refused_elsewhere():   # until the held request has been admitted
                assert time.monotonic() < deadline, "the held request never took its lease"
                time.sleep(0.02)
            answer = _transform(http, map_id, "single")
            assert answer.status_code == 429 and answer.json()["field"] == "concurrent_requests"
            assert int(answer.headers["retry-after"]) >= 1
            time.sleep(1.5)   # past lease_seconds: the running request's worker has renewed its lease
            assert _transform(http, map_id, "single").status_code == 429
            assert _transform(http, map_id, "fast").status_code == 200   # another key is not held up
            held.sendall(rest)
            assert _whole_answer(held).startswith(b"HTTP/1.1 200")   # its lease is given back before the last byte
            assert _transform(http, map_id, "single").status_code == 200
    finally:
        held.close()


def test_stored_bytes_are_refused_past_the_tenant_limit_before_writing(replicas):
    servers, store, prefix, map_id = replicas
    with servers[0].client() as http, servers[1].client() as other:
        created = http.post("/v1/indexes", json={"map_id": map_id, "name": "small", "bands": 4},
                            headers=_auth("small"))
        assert created.status_code == 201, created.text
        added, n = [], 0
        while True:
            answer = (http if n % 2 else other).post("/v1/indexes/small/items",
                                                    json={"ids": [f"i{n}"], "vectors": [[1.0 + n, 2.0, 0.5, 3.0]]},
                                                    headers=_auth("small"))
            if answer.status_code != 200:
                break
            added.append(f"i{n}")
            n += 1
            assert n < 200, "the limit never refused"
        assert answer.status_code == 507, answer.text
        body = answer.json()
        assert body["field"] == "stored_bytes" and "limit of 4000" in body["detail"]
        assert http.get("/v1/indexes/small", headers=_auth("small")).json()["items"] == len(added)
        client = redis.Redis.from_url(store.url)
        used = int(client.get(f"{prefix}tenant:team-c:stored-bytes") or 0)
        assert f"hold {used} bytes" in body["detail"] and used <= 4000
        removed = http.post("/v1/indexes/small/items/delete", json={"ids": added[:3]}, headers=_auth("small"))
        assert removed.json()["removed"] == 3
        assert int(client.get(f"{prefix}tenant:team-c:stored-bytes") or 0) < used
        again = other.post("/v1/indexes/small/items", json={"ids": ["again"], "vectors": [ROW]}, headers=_auth("small"))
        assert again.status_code == 200, again.text
        # an admin writing into team-c's index (?tenant=) is held to team-c's limit, not its own tenant's
        rows = [[1.0 + n, 2.0, 0.5, 3.0] for n in range(20)]
        by_admin = http.post("/v1/indexes/small/items", params={"tenant": "team-c"},
                             json={"ids": [f"admin-{n}" for n in range(20)], "vectors": rows}, headers=_auth("admin"))
        assert by_admin.status_code == 507 and "limit of 4000" in by_admin.json()["detail"], by_admin.text
        assert http.delete("/v1/indexes/small", headers=_auth("small")).status_code == 204
        assert int(client.get(f"{prefix}tenant:team-c:stored-bytes") or 0) == 0
        metrics = http.get("/metrics").text
        client.close()
    assert 'featurehash_quota_refusals_total{limit="stored_bytes",tenant="team-c"}' in metrics or \
        'featurehash_quota_refusals_total{tenant="team-c",limit="stored_bytes"}' in metrics


def test_keys_without_limits_cost_no_quota_keys(replicas):
    servers, store, prefix, map_id = replicas
    with servers[0].client() as http:
        for _ in range(5):
            assert _transform(http, map_id, "fast").status_code == 200
    client = redis.Redis.from_url(store.url)
    try:
        assert list(client.scan_iter(match=f"{prefix}quota:{{fast}}*")) == []
    finally:
        client.close()


# -- maps count in their creator's stored bytes ---------------------------------------------------------------

# The issue's case: its nystroem map (1000 x 64, 1000 components: 12.3 MB) is refused at once by a 200,000-byte
# tenant; scaled down (~78 KB each: landmarks and L^-1), the tenant holds two of these, not three.
SAMPLE = [[round(((r * 7 + c * 13) % 17) / 17 + r / 100, 3) for c in range(16)] for r in range(100)]


def _nystroem(seed: int) -> dict:
    return {"method": "nystroem", "input_dim": 16, "n_components": 80, "seed": seed, "params": {"fit_sample": SAMPLE}}


def _rff(seed: int) -> dict:
    return {"method": "rff", "input_dim": 3, "n_components": 4, "seed": seed, "params": {"gamma": 0.5}}


def _total(client, prefix: str, tenant: str) -> int:
    return int(client.get(f"{prefix}tenant:{tenant}:stored-bytes") or 0)


def _map_keys(client, prefix: str) -> set[bytes]:
    return {key for pattern in ("map*", "alias:*") for key in client.scan_iter(match=f"{prefix}{pattern}")}


def test_a_tenants_maps_count_in_its_stored_bytes_and_the_first_past_the_limit_is_refused(replicas):
    servers, store, prefix, _ = replicas
    client = redis.Redis.from_url(store.url)
    with servers[0].client() as http, servers[1].client() as other:
        before = _map_keys(client, prefix)
        issue = {"method": "nystroem", "input_dim": 64, "n_components": 1000, "seed": 1,   # ~1 s of fitting
                 "params": {"fit_sample": np.random.default_rng(42).random((1000, 64)).round(6).tolist()}}
        refused = http.post("/v1/maps", json=issue, headers=_auth("maps-m"))
        assert refused.status_code == 507 and refused.json()["field"] == "stored_bytes", refused.text
        needed = int(refused.json()["detail"].split(" needs ")[1].split()[0])
        assert 12_000_000 < needed < 12_500_000 and _map_keys(client, prefix) == before   # the issue's 12 MiB
        first = http.post("/v1/maps", json=_nystroem(1), headers=_auth("maps-m"))
        second = other.post("/v1/maps", json=_nystroem(2), headers=_auth("maps-m"))
        assert first.status_code == second.status_code == 201, (first.text, second.text)
        sizes = [len(first.content), len(second.content)]      # the stored spec is the answer's JSON
        assert [client.strlen(f"{prefix}map:{a.json()['id']}") for a in (first, second)] == sizes
        assert _total(client, prefix, "team-m") == sum(sizes) > 150_000
        before = _map_keys(client, prefix)
        third = http.post("/v1/maps", json=_nystroem(3), headers=_auth("maps-m"))
        assert third.status_code == 507, third.text
        body = third.json()
        assert body["field"] == "stored_bytes" and f"hold {sum(sizes)} bytes of its limit of 200000" in body["detail"]
        assert _map_keys(client, prefix) == before and _total(client, prefix, "team-m") == sum(sizes)  # nothing stored
        # posted again (another worker): the stored map, counted once; another tenant's post of it costs nothing
        again = other.post("/v1/maps", json=_nystroem(1), headers=_auth("maps-m"))
        shared = other.post("/v1/maps", json=_nystroem(1), headers=_auth("maps-n"))
        assert again.status_code == shared.status_code == 200 and again.content == shared.content == first.content
        assert _total(client, prefix, "team-m") == sum(sizes) and _total(client, prefix, "team-n") == 0
        # the third spec, created by team-n (counted there), is shared: team-m posting it, though full, pays nothing
        made = other.post("/v1/maps", json=_nystroem(3), headers=_auth("maps-n"))
        assert made.status_code == 201 and _total(client, prefix, "team-n") == len(made.content)
        assert http.post("/v1/maps", json=_nystroem(3), headers=_auth("maps-m")).status_code == 200
        assert _total(client, prefix, "team-m") == sum(sizes)
        # deleting gives the bytes back to the tenant that paid, whoever deletes and through whichever worker
        assert other.delete(f"/v1/maps/{first.json()['id']}", headers=_auth("maps-m")).status_code == 204
        assert _total(client, prefix, "team-m") == sizes[1]
        assert http.delete(f"/v1/maps/{made.json()['id']}", headers=_auth("maps-m")).status_code == 204
        assert _total(client, prefix, "team-n") == 0 and _total(client, prefix, "team-m") == sizes[1]
        assert http.post("/v1/maps", json=_nystroem(3), headers=_auth("maps-m")).status_code == 201  # room again
        for answer in (second, made):
            http.delete(f"/v1/maps/{answer.json()['id']}", headers=_auth("admin"))
        assert _total(client, prefix, "team-m") == 0
    client.close()


def test_workers_racing_near_the_limit_never_pass_it_together_and_a_spec_posted_at_once_counts_once(replicas):
    """30 new maps of one size s posted at once over four workers by a tenant with room for 2500 // s of them:
    exactly that many are stored; eight posts of one spec at once store it once and count it once."""
    servers, store, prefix, _ = replicas
    client = redis.Redis.from_url(store.url)
    clients = [server.client() for server in servers for _ in range(4)]
    try:
        with ThreadPoolExecutor(8) as pool:
            same = list(pool.map(lambda n: clients[n].post("/v1/maps", json=_rff(999), headers=_auth("maps-n")),
                                 range(8)))
            assert sorted(a.status_code for a in same) == [200] * 7 + [201], [a.text for a in same]
            size = len(same[0].content)
            assert _total(client, prefix, "team-n") == size
            answers = list(pool.map(lambda n: clients[n % 8].post("/v1/maps", json=_rff(100 + n),
                                                                  headers=_auth("racer")), range(30)))
        created = [a for a in answers if a.status_code == 201]
        refused = [a for a in answers if a.status_code == 507]
        assert len(created) == 2500 // size and len(refused) == 30 - len(created), [a.text for a in answers]
        assert {len(a.content) for a in created} == {size}
        assert _total(client, prefix, "team-r") == len(created) * size <= 2500
        assert all(a.json()["field"] == "stored_bytes" for a in refused)
        # a tenant at its limit (0 here) is refused before the map is built: no map fits
        full = clients[0].post("/v1/maps", json=_rff(5), headers=_auth("full"))
        assert full.status_code == 507 and "no new map fits" in full.json()["detail"], full.text
        for answer in created + same[:1]:
            assert clients[1].delete(f"/v1/maps/{answer.json()['id']}", headers=_auth("admin")).status_code == 204
        assert _total(client, prefix, "team-r") == _total(client, prefix, "team-n") == 0
    finally:
        for http in clients:
            http.close()
        client.close()
