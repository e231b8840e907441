"""Tenants through a real server (`featurehash serve` with FEATUREHASH_KEYS_FILE, embedded Redis): every operation
x {no key, wrong key, read, write, admin, another tenant's key} -> the expected status; indexes that belong to a
tenant; map deletion while another tenant's index uses the map; the default tenant's keys as before tenants;
the keys file re-read on change and on SIGHUP, and the last good keys served by a web tier started while it is bad
(one server for all of it)."""

from __future__ import annotations

import hashlib
import os
import signal
import time
import uuid

import httpx
import numpy as np
import orjson
import pytest
import redis

from featurehash.client import FeatureHashClient, ScopeRequired
from service_support import ServiceProcess, start_all

KEYS = {"a-read": "key-a-read", "a-write": "key-a-write", "admin": "key-admin", "b-rw": "key-b-rw",
        "d-rw": "key-default-rw"}
GCWS = {"method": "gcws", "input_dim": 4, "n_components": 16, "seed": 5}
ROW = [[1.0, 2.0, 0.0, 3.0]]


def _entry(name: str, tenant: str, scopes: list[str], key: str | None = None) -> dict:
    return {"name": name, "tenant": tenant, "scopes": scopes,
            "sha256": hashlib.sha256((key or KEYS[name]).encode()).hexdigest()}


KEYS_FILE = {"keys": [_entry("a-read", "team-a", ["read"]), _entry("a-write", "team-a", ["write"]),
                      _entry("admin", "ops", ["admin"]), _entry("b-rw", "team-b", ["read", "write"]),
                      _entry("d-rw", "default", ["read", "write"])],
             "tenants": {"team-a": {"stored_bytes": 1 << 30}}}


def _auth(name: str | None) -> dict[str, str]:
    if name is None:
        return {}
    return {"Authorization": f"Bearer {KEYS.get(name, 'not-a-key')}"}


@pytest.fixture(scope="module")
def tenant_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("tenants")
    keys_file = root / "keys.json"
    keys_file.write_bytes(orjson.dumps(KEYS_FILE))
    server = ServiceProcess("tenants", root / "data", keys_file=str(keys_file))
    server.keys_file = keys_file
    start_all([server])
    with server.client() as http:
        map_id = http.post("/v1/maps", json=GCWS, headers=_auth("a-write")).json()["id"]
        created = http.post("/v1/indexes", json={"map_id": map_id, "name": "docs", "bands": 4},
                            headers=_auth("a-write"))
        assert created.status_code == 201, created.text
        added = http.post("/v1/indexes/docs/items", json={"ids": ["x", "y"], "vectors": ROW * 2},
                          headers=_auth("a-write"))
        assert added.status_code == 200, added.text
    server.map_id = map_id
    yield server
    problems = server.terminate()
    assert not problems, problems


def _store(server: ServiceProcess) -> redis.Redis:
    return redis.Redis(unix_socket_path=str(server.data_dir / "redis.sock"))


# -- the matrix ----------------------------------------------------------------------------------------------

# key -> (query string for team-a's indexes: the admin names the tenant, every other key its own)
def _tenant_query(key: str | None) -> dict[str, str]:
    return {"tenant": "team-a"} if key == "admin" else {}


def _new_map(http: httpx.Client) -> str:
    spec = {**GCWS, "seed": int(uuid.uuid4().int % 100_000) + 1000}
    return http.post("/v1/maps", json=spec, headers=_auth("admin")).json()["id"]


def _scratch_index(http: httpx.Client, map_id: str) -> str:
    name = f"tmp-{uuid.uuid4().hex[:8]}"
    response = http.post("/v1/indexes", json={"map_id": map_id, "name": name, "bands": 4}, headers=_auth("a-write"))
    assert response.status_code == 201, response.text
    return name


def _delete_index(http, key, server):
    name = _scratch_index(http, server.map_id)
    return http.delete(f"/v1/indexes/{name}", headers=_auth(key), params=_tenant_query(key))


def _delete_item(http, key, server):
    item = f"tmp-{uuid.uuid4().hex[:8]}"
    http.post("/v1/indexes/docs/items", json={"ids": [item], "vectors": ROW}, headers=_auth("a-write")).raise_for_status()
    return http.delete(f"/v1/indexes/docs/items/{item}", headers=_auth(key), params=_tenant_query(key))


def _create_index(http, key, server):
    """team-a's "docs" again (200: the same configuration); another tenant's key makes its own "docs" (201),
    deleted at once (test_index_names_are_per_tenant makes team-b's over another map)."""
    response = http.post("/v1/indexes", json={"map_id": server.map_id, "name": "docs", "bands": 4},
                         headers=_auth(key), params=_tenant_query(key))
    if key == "b-rw" and response.status_code == 201:
        assert http.delete("/v1/indexes/docs", headers=_auth(key)).status_code == 204
    return response


def _delete_unused_map(http, key, server):
    return http.delete(f"/v1/maps/{_new_map(http)}", headers=_auth(key))


OPERATIONS = {  # name: (scope, whether team-a's index is named, the call)
    "transform": ("read", False, lambda http, key, s: http.post(f"/v1/maps/{s.map_id}/transform", json={
        "vectors": ROW}, headers=_auth(key))),
    "hash": ("read", False, lambda http, key, s: http.post(f"/v1/maps/{s.map_id}/hash", json={"vectors": ROW},
                                                           headers=_auth(key))),
    "kernel": ("read", False, lambda http, key, s: http.post(f"/v1/maps/{s.map_id}/kernel", json={"x": ROW},
                                                             headers=_auth(key))),
    "list_maps": ("read", False, lambda http, key, s: http.get("/v1/maps", headers=_auth(key))),
    "get_map": ("read", False, lambda http, key, s: http.get(f"/v1/maps/{s.map_id}", headers=_auth(key))),
    "create_map": ("write", False, lambda http, key, s: http.post("/v1/maps", json=GCWS, headers=_auth(key))),
    "delete_map": ("write", False, _delete_unused_map),
    "list_indexes": ("read", False, lambda http, key, s: http.get("/v1/indexes", headers=_auth(key),
                                                                  params=_tenant_query(key))),
    "get_index": ("read", True, lambda http, key, s: http.get("/v1/indexes/docs", headers=_auth(key),
                                                              params=_tenant_query(key))),
    "create_index": ("write", True, _create_index),
    "delete_index": ("write", True, _delete_index),
    "add_items": ("write", True, lambda http, key, s: http.post(
        "/v1/indexes/docs/items", json={"ids": ["x"], "vectors": ROW}, headers=_auth(key), params=_tenant_query(key))),
    "delete_item": ("write", True, _delete_item),
    "delete_items": ("write", True, lambda http, key, s: http.post(
        "/v1/indexes/docs/items/delete", json={"ids": ["nothing"]}, headers=_auth(key), params=_tenant_query(key))),
    "query": ("read", True, lambda http, key, s: http.post("/v1/indexes/docs/query", json={"vectors": ROW},
                                                           headers=_auth(key), params=_tenant_query(key))),
    "duplicates": ("read", True, lambda http, key, s: http.post(
        "/v1/indexes/docs/duplicates", json={"threshold": 0.9}, headers=_auth(key), params=_tenant_query(key))),
    "list_tenants": ("admin", False, lambda http, key, s: http.get("/v1/tenants", headers=_auth(key))),
}
SCOPES = {"a-read": {"read"}, "a-write": {"write"}, "admin": {"read", "write", "admin"}, "b-rw": {"read", "write"}}
OK = {"create_map": 200, "create_index": 200, "delete_index": 204, "delete_item": 204, "delete_map": 204}


def _expected(operation: str, key: str | None) -> int:
    scope, names_the_index, _ = OPERATIONS[operation]
    if key is None or key == "wrong":
        return 401
    if scope not in SCOPES[key]:
        return 403
    if key == "b-rw" and names_the_index and operation != "create_index":
        return 404  # team-a's index is not found by team-b
    if key == "b-rw" and operation == "create_index":
        return 201
    return OK.get(operation, 200)


@pytest.mark.parametrize("key", [None, "wrong", "a-read", "a-write", "admin", "b-rw"],
                         ids=["no_key", "wrong_key", "read", "write", "admin", "other_tenant"])
@pytest.mark.parametrize("operation", OPERATIONS)
def test_every_operation_for_every_key(tenant_server, operation, key):
    with tenant_server.client() as http:
        response = OPERATIONS[operation][2](http, key, tenant_server)
    expected = _expected(operation, key)
    assert response.status_code == expected, (operation, key, response.text)
    if expected == 403:
        body = response.json()
        assert body["field"] == "scope" and f"requires the '{OPERATIONS[operation][0]}' scope" in body["detail"]
    if expected == 401:
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    if expected == 404:
        assert response.json()["field"] == "index_id"  # as for an index that does not exist


def test_a_non_admin_cannot_name_another_tenant(tenant_server):
    with tenant_server.client() as http:
        response = http.get("/v1/indexes", params={"tenant": "team-a"}, headers=_auth("b-rw"))
        assert response.status_code == 403 and "'admin' scope" in response.json()["detail"]
        own = http.get("/v1/indexes", params={"tenant": "team-b"}, headers=_auth("b-rw"))
        assert own.status_code == 200
        bad = http.get("/v1/indexes", params={"tenant": "Team A"}, headers=_auth("admin"))
        assert bad.status_code == 422 and bad.json()["field"] == "tenant"


# -- indexes belong to a tenant ------------------------------------------------------------------------------

def test_index_names_are_per_tenant(tenant_server):
    with tenant_server.client() as http:
        other_map = http.post("/v1/maps", json={**GCWS, "seed": 7}, headers=_auth("b-rw")).json()["id"]
        created = http.post("/v1/indexes", json={"map_id": other_map, "name": "docs", "bands": 2},
                            headers=_auth("b-rw"))
        assert created.status_code == 201, created.text  # team-a's "docs" (another map, banding) is no conflict
        assert created.json()["key_prefix"].endswith("tenant:team-b:index:{docs}:")
        mine = http.get("/v1/indexes", headers=_auth("b-rw")).json()["indexes"]
        assert [(index["id"], index["map_id"]) for index in mine] == [("docs", other_map)]
        theirs = http.get("/v1/indexes/docs", headers=_auth("a-read")).json()
        assert theirs["map_id"] == tenant_server.map_id and theirs["items"] >= 2
        listed = http.get("/v1/indexes", params={"tenant": "team-a"}, headers=_auth("admin")).json()["indexes"]
        assert "docs" in [index["id"] for index in listed]
        assert http.get("/v1/indexes", headers=_auth("admin")).json()["indexes"] == []  # the admin's own: none
        tenants = http.get("/v1/tenants", headers=_auth("admin")).json()["tenants"]
        assert {"default", "ops", "team-a", "team-b"} <= set(tenants)
        assert http.delete("/v1/indexes/docs", headers=_auth("b-rw")).status_code == 204
        assert http.get("/v1/indexes/docs", headers=_auth("a-read")).status_code == 200  # team-a's is still there


def test_the_default_tenants_keys_are_those_before_tenants(tenant_server):
    """An index of tenant "default" is stored where the service stored every index before tenants
    (`featurehash:index:{name}:*`, registered in `featurehash:indexes`); one made by the library without a
    tenant is the default tenant's over HTTP."""
    from featurehash.maps import create_map
    from featurehash.store.lsh_indexes import LSHIndexes

    with tenant_server.client() as http:
        map_id = http.post("/v1/maps", json={**GCWS, "seed": 8}, headers=_auth("d-rw")).json()["id"]
        created = http.post("/v1/indexes", json={"map_id": map_id, "name": "legacy", "bands": 4},
                            headers=_auth("d-rw")).json()
        assert created["key_prefix"] == "featurehash:index:{legacy}:"
        with _store(tenant_server) as store:
            assert store.exists(b"featurehash:index:{legacy}:meta")
            assert store.zscore(b"featurehash:indexes", b"legacy") is not None
            assert store.zscore(b"featurehash:tenant:team-a:indexes", b"docs") is not None
            assert not store.sismember(b"featurehash:tenants", b"default")
            library = LSHIndexes(store, "featurehash:").create(create_map(GCWS), name="from-library", bands=4)
            library.add(["z"], np.array(ROW))
        found = http.get("/v1/indexes/from-library", headers=_auth("d-rw"))
        assert found.status_code == 200 and found.json()["items"] == 1
        assert http.get("/v1/indexes/from-library", headers=_auth("a-write"),
                        params={"tenant": "default"}).status_code == 403
        assert http.get("/v1/indexes/from-library", headers=_auth("a-read")).status_code == 404


# -- maps are shared ------------------------------------------------------------------------------------------

def test_a_map_another_tenants_index_uses_is_not_deleted(tenant_server):
    with tenant_server.client() as http:
        map_id = _new_map(http)
        name = _scratch_index(http, map_id)   # team-a's
        for params in ({}, {"force": "true"}):
            refused = http.delete(f"/v1/maps/{map_id}", params=params, headers=_auth("b-rw"))
            assert refused.status_code == 409, refused.text
            detail = refused.json()["detail"]
            assert "1 other tenant " in detail and name not in detail and "team-a" not in detail
        assert http.get(f"/v1/maps/{map_id}", headers=_auth("b-rw")).status_code == 200
        own = http.delete(f"/v1/maps/{map_id}", headers=_auth("a-write"))
        assert own.status_code == 409 and repr(name) in own.json()["detail"]  # its own index: named
        admin = http.delete(f"/v1/maps/{map_id}", headers=_auth("admin"))
        assert admin.status_code == 409 and f"'team-a/{name}'" in admin.json()["detail"]
        assert http.delete(f"/v1/maps/{map_id}", params={"force": "true"}, headers=_auth("admin")).status_code == 204
        # the index keeps answering from its copy of the spec
        assert http.post(f"/v1/indexes/{name}/query", json={"vectors": ROW}, headers=_auth("a-read")).status_code == 200
        assert http.delete(f"/v1/indexes/{name}", headers=_auth("a-write")).status_code == 204


def test_an_owner_force_deletes_a_map_only_its_own_indexes_use(tenant_server):
    with tenant_server.client() as http:
        map_id = _new_map(http)
        name = _scratch_index(http, map_id)
        assert http.delete(f"/v1/maps/{map_id}", params={"force": "true"},
                           headers=_auth("a-write")).status_code == 204
        assert http.delete(f"/v1/indexes/{name}", headers=_auth("a-write")).status_code == 204


# -- what the service reports ----------------------------------------------------------------------------------

def test_metrics_and_access_log_carry_the_tenant_never_the_key(tenant_server):
    with tenant_server.client() as http:
        http.post(f"/v1/maps/{tenant_server.map_id}/hash", json={"vectors": ROW}, headers=_auth("a-read"))
        http.get("/v1/maps", headers=_auth("wrong"))
        text = http.get("/metrics").text
    assert 'route="/v1/maps/{map_id}/hash",status="200",tenant="team-a"' in text
    assert 'status="401",tenant="other"' in text
    time.sleep(0.3)  # the access log is written in batches (middleware.AccessLines)
    log = tenant_server.log_tail(200_000)
    assert '"tenant":"team-a","key_id":"a-read"' in log
    for key in KEYS.values():
        assert key not in text and key not in log


def test_the_clients_raise_scope_required(tenant_server):
    with FeatureHashClient(tenant_server.url, api_key=KEYS["a-read"]) as client:
        with pytest.raises(ScopeRequired) as refused:
            client.create_map(GCWS)
        assert refused.value.status == 403 and refused.value.scope == "write"
        assert "'write' scope" in str(refused.value)
        with pytest.raises(ScopeRequired, match="admin"):
            client.list_tenants()
    with FeatureHashClient(tenant_server.url, api_key=KEYS["admin"]) as client:
        assert "team-a" in client.list_tenants()


def test_the_openapi_document_names_each_operations_scope(tenant_server):
    with tenant_server.client() as http:
        document = http.get("/openapi.json").json()
    scopes = {(method, path): operation.get("x-required-scope") for path, operations in document["paths"].items()
              for method, operation in operations.items()}
    assert scopes[("post", "/v1/maps/{map_id}/transform")] == "read"
    assert scopes[("post", "/v1/indexes/{index_id}/items")] == "write"
    assert scopes[("get", "/v1/tenants")] == "admin"
    assert scopes[("get", "/healthz")] is None
    transform = document["paths"]["/v1/maps/{map_id}/transform"]["post"]
    assert transform["security"] == [{"HTTPBearer": ["read"]}] and "`read` scope" in transform["description"]
    assert "403" in transform["responses"]


# -- rotation -------------------------------------------------------------------------------------------------

def _wait_status(server, key: str, status: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    with server.client() as http:
        while time.monotonic() < deadline:
            if http.get("/v1/maps", params={"limit": 1}, headers={"Authorization": f"Bearer {key}"}).status_code \
                    == status:
                return True
            time.sleep(0.1)
    return False


def _write_atomically(path, document: dict) -> None:
    staged = path.with_suffix(".new")
    staged.write_bytes(orjson.dumps(document))
    os.replace(staged, path)  # a new inode, as a Kubernetes Secret's update swaps its files


def test_the_keys_file_is_reread_when_it_changes_and_a_bad_one_is_ignored(tenant_server):
    rotated = {**KEYS_FILE, "keys": KEYS_FILE["keys"] + [_entry("c-read", "team-c", ["read"], "key-c-new")]}
    try:
        _write_atomically(tenant_server.keys_file, rotated)
        assert _wait_status(tenant_server, "key-c-new", 200)
        _write_atomically(tenant_server.keys_file, {"keys": [{"name": "broken", "tenant": "team-a"}]})
        time.sleep(1.5)  # past the once-a-second look at the file
        assert _wait_status(tenant_server, "key-c-new", 200, timeout=0.5)  # the ring in force was kept
        assert "keys[0].scopes (key 'broken'): Field required" in tenant_server.log_tail(200_000)
    finally:
        _write_atomically(tenant_server.keys_file, KEYS_FILE)
    assert _wait_status(tenant_server, "key-c-new", 401)


def test_sighup_rereads_the_keys_file(tenant_server):
    """The new file has the same size, mtime and inode as the old (one key's digest replaced in place), so only
    the SIGHUP to the launcher (forwarded to the web tier) makes the service read it."""
    path = tenant_server.keys_file
    before = os.stat(path)
    swapped = orjson.dumps(KEYS_FILE).replace(hashlib.sha256(KEYS["b-rw"].encode()).hexdigest().encode(),
                                              hashlib.sha256(b"key-b-rotated").hexdigest().encode())
    try:
        with open(path, "r+b") as file:
            file.write(swapped)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        time.sleep(1.2)
        assert _wait_status(tenant_server, KEYS["b-rw"], 200, timeout=0.3)  # not seen without the signal
        tenant_server.proc.send_signal(signal.SIGHUP)
        assert _wait_status(tenant_server, "key-b-rotated", 200)
        assert _wait_status(tenant_server, KEYS["b-rw"], 401, timeout=0.5)
        assert tenant_server.running()
    finally:
        _write_atomically(path, KEYS_FILE)
    assert _wait_status(tenant_server, KEYS["b-rw"], 200)


def test_a_web_tier_killed_while_the_file_is_bad_comes_back_with_the_last_good_keys(tenant_server):
    """One worker: the web tier is the worker. Before, a web tier killed (as by the out-of-memory killer) while the
    file was bad could not start again, and the launcher exited: down until restarted, even once the file was fixed."""
    from service_support import children, cmdline, wait_until

    path = tenant_server.keys_file
    (web,) = [pid for pid in children(tenant_server.pid) if "featurehash.service.web" in cmdline(pid)]
    try:
        path.write_bytes(b"")  # a Secret truncated mid-update
        tenant_server.proc.send_signal(signal.SIGHUP)  # validated by the launcher: the worker is not told
        line = f"featurehash: SIGHUP: keys file {path}: not JSON"
        assert wait_until(lambda: line in tenant_server.log_tail(200_000), 5.0), tenant_server.log_tail()
        os.kill(web, signal.SIGKILL)
        assert wait_until(lambda: _ready(tenant_server), 60.0), tenant_server.log_tail()
        assert "web tier was killed by SIGKILL; starting it again" in tenant_server.log_tail(200_000)
        assert _wait_status(tenant_server, KEYS["a-read"], 200, timeout=1.0)
        assert tenant_server.running()
        assert f"keys file {path}: not JSON (Input is a zero-length, empty document: line 1 column 1 (char 0)); " \
               "serving the last keys file featurehash serve validated (5 keys of 4 tenants) until this one does" \
               in tenant_server.log_tail(200_000)
        fixed = {**KEYS_FILE, "keys": KEYS_FILE["keys"] + [_entry("c-read", "team-c", ["read"], "key-c-fixed")]}
        _write_atomically(path, fixed)
        assert _wait_status(tenant_server, "key-c-fixed", 200)
    finally:
        _write_atomically(path, KEYS_FILE)
    assert _wait_status(tenant_server, "key-c-fixed", 401)


def _ready(server) -> bool:
    try:
        return httpx.get(f"{server.url}/readyz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_bad_keys_file_stops_serve_with_one_line(tmp_path):
    import subprocess

    from service_support import serve_command, service_env

    bad = tmp_path / "keys.json"
    bad.write_bytes(orjson.dumps({"keys": [{**_entry("a-read", "team-a", ["read"]), "scopes": ["reed"]}]}))
    done = subprocess.run(serve_command() + ["serve", "--port", "0", "--data-dir", str(tmp_path / "data")],
                          env=service_env(keys_file=str(bad)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2  # a bad setting, as docs/guides/command-line.md says (it was 1)
    assert done.stderr.strip() == (f"featurehash: keys file {bad}: keys[0].scopes[0] (key 'a-read'): Input should be "
                                   "'read', 'write' or 'admin'")
    assert not (tmp_path / "data").exists()  # refused before the embedded Redis started
