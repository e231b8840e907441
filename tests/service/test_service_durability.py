"""What a 2xx promises when the store is in trouble: real `featurehash serve`, real Redis, real faults.

- A full disk (a small tmpfs as the data directory): every write is either acknowledged and still
  there after a restart, or refused with a JSON 507/503 naming the store, with Retry-After.
- Redis at maxmemory with noeviction (the embedded 6.2; a 7.x server from the binary of $REDIS_URL's
  when set): adds are refused (507), deletes of items, indexes and maps work and free memory, /readyz
  says why it is not ready. A read-only replica: 503 READONLY, /readyz too. A Redis without an
  append-only file: refused (503) unless FEATUREHASH_DURABILITY=reply, said once at start and by /readyz.
- A corrupt append-only file: `featurehash serve` exits 4 with one line naming `featurehash repair-aof`,
  which repairs it. A killed single web worker: the launcher says so and serves again.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import redis

from featurehash.maps import create_map
from featurehash.store import LSHIndexes, WriteRefused
from featurehash.store.embedded import repair_append_only_file
from service_support import (RedisProcess, ServiceProcess, children, cmdline, serve_command, service_env, start_all,
                             wait_until)

GCWS = {"method": "gcws", "input_dim": 16, "n_components": 16, "seed": 5, "params": {"bits": 4}}
RFF = {"method": "rff", "input_dim": 4, "n_components": 8, "seed": 1}
BATCH = 20
ITEMS = 1000


def _vectors(seed: int, rows: int = BATCH) -> np.ndarray:
    return np.random.default_rng(seed).random((rows, GCWS["input_dim"])) + 0.01


def _refused_for_the_store(response, statuses=(503, 507)) -> str:
    """A refused write: JSON naming the store, with Retry-After; its detail."""
    assert response.status_code in statuses, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.text
    assert response.json()["field"] == "store", response.text
    assert int(response.headers["retry-after"]) >= 1
    return response.json()["detail"]


def _fresh(server: ServiceProcess, method: str, path: str, **kwargs):
    """One request on its own connection (a plain 500 closed the connection before the fix)."""
    with server.client() as http:
        return http.request(method, path, **kwargs)


def _setup_index(http, name: str = "ix") -> str:
    map_id = http.post("/v1/maps", json=GCWS).json()["id"]
    response = http.post("/v1/indexes", json={"map_id": map_id, "name": name, "bands": 4, "rows": 4})
    assert response.status_code == 201, response.text
    return map_id


# -- a full disk -------------------------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(path: Path, leave_bytes: int) -> None:
    """Fill the file system, then free `leave_bytes` (a few batches' worth of append-only file)."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave_bytes))
    os.close(fd)


def test_a_write_is_acknowledged_only_once_it_survives_a_restart(small_disk, tmp_path):
    server = ServiceProcess("disk", small_disk, log_dir=tmp_path)
    start_all([server])
    acknowledged, refused = {}, []
    try:
        with server.client() as http:
            _setup_index(http)
            _fill(small_disk, leave_bytes=16 * 1024)
            for batch in range(10):
                ids = [f"b{batch}-{i}" for i in range(BATCH)]
                response = _fresh(server, "POST", "/v1/indexes/ix/items",
                                  json={"ids": ids, "vectors": _vectors(batch).tolist()})
                if response.status_code == 200:
                    acknowledged.update(zip(ids, _vectors(batch).tolist()))
                else:
                    refused.append(response)
        refused.append(_fresh(server, "POST", "/v1/maps", json=RFF))
        ready = _fresh(server, "GET", "/readyz")
    finally:
        assert not server.terminate()

    again = ServiceProcess("after-restart", small_disk, log_dir=tmp_path)
    start_all([again])
    try:
        with again.client() as http:
            found = http.post("/v1/indexes/ix/query", json={"vectors": list(acknowledged.values()), "top_k": 3})
            assert found.status_code == 200, found.text
            lost = [item_id for item_id, results in zip(acknowledged, found.json()["results"])
                    if {"id": item_id, "similarity": 1.0} not in results]
            assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged items were lost: {lost[:3]}..."
    finally:
        assert not again.terminate()

    details = [_refused_for_the_store(response, (507,)) for response in refused]
    print(f"\n{len(acknowledged) // BATCH} batches acknowledged, {len(refused) - 1} refused: {details[0]}")
    assert len(refused) > 1 and acknowledged, "the free space should take some batches, not all"
    assert "append-only file" in _refused_for_the_store(ready, (503,))


# -- memory full, read-only replica ---------------------------------------------------------------------------------

def _system_redis_server() -> str | None:
    """A redis-server binary of the version $REDIS_URL's server runs (7.x here), if that is set."""
    url = os.environ.get("REDIS_URL")
    if not url:
        return None
    try:
        with redis.Redis.from_url(url, socket_timeout=2) as client:
            server = client.info("server")
    except redis.RedisError:
        return None
    for candidate in (server.get("executable"), "/usr/bin/redis-server", "/usr/local/bin/redis-server"):
        if candidate and os.path.isfile(candidate):
            version = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
            if f"v={server['redis_version']} " in version:
                return candidate
    return None


@pytest.fixture(params=["embedded", "redis-of-REDIS_URL"])
def service_and_redis(request, tmp_path):
    """A service and a client of its Redis (one that keeps an append-only file)."""
    if request.param == "embedded":
        server = ServiceProcess("embedded", tmp_path / "data")
        start_all([server])
        client = redis.Redis(unix_socket_path=str(server.data_dir / "redis.sock"))
        stop = []
    else:
        executable = _system_redis_server()
        if executable is None:
            pytest.skip("REDIS_URL is unset (or its server's binary is not on this machine)")
        store = RedisProcess(tmp_path / "redis", executable=executable,
                             extra_args=("--appendonly", "yes", "--appendfsync", "everysec")).start()
        server = ServiceProcess("external", tmp_path / "data", redis_url=store.url)
        start_all([server])
        client = redis.Redis.from_url(store.url)
        stop = [store]
    try:
        yield server, client
    finally:
        client.close()
        problems = server.terminate()
        for store in stop:
            store.stop()
        assert not problems, problems


def test_full_memory_refuses_adds_deletes_free_it_and_a_read_only_replica_refuses(service_and_redis):
    server, store = service_and_redis
    with server.client() as http:
        map_id = _setup_index(http)
        before = store.info("memory")["used_memory"]
        ids = [f"item-{i}" for i in range(ITEMS)]
        assert http.post("/v1/indexes/ix/items", json={"ids": ids, "vectors": _vectors(1, ITEMS).tolist()}
                         ).status_code == 200
        used = store.info("memory")["used_memory"]
        # Past the limit by all the items' bytes: the used memory measured just after a big write also holds
        # transient client buffers that Redis frees later (a limit between the two let a write through once).
        limit = before
        print(f"\nRedis {store.info('server')['redis_version']}: {before} bytes used, {used} with the items")
        store.config_set("maxmemory-policy", "noeviction")
        store.config_set("maxmemory", limit)
        try:
            added = http.post("/v1/indexes/ix/items", json={"ids": ["late"], "vectors": _vectors(99, 1).tolist()})
            assert "out of memory" in _refused_for_the_store(added, (507,))
            assert "out of memory" in _refused_for_the_store(http.post("/v1/maps", json=RFF), (507,))
            created = http.post("/v1/indexes", json={"map_id": map_id, "name": "another", "bands": 4, "rows": 4})
            assert "out of memory" in _refused_for_the_store(created, (507,))
            assert "out of memory" in _refused_for_the_store(http.get("/readyz"), (503,))

            assert http.delete("/v1/indexes/ix/items/item-0").status_code == 204
            removed = http.post("/v1/indexes/ix/items/delete", json={"ids": ids[1:BATCH + 1] + ["nope"]})
            assert removed.status_code == 200 and removed.json() == {"removed": BATCH, "missing": ["nope"]}
            assert http.get("/v1/indexes/ix").json()["items"] == ITEMS - BATCH - 1
            assert http.delete("/v1/indexes/ix").status_code == 204
            assert http.delete(f"/v1/maps/{map_id}").status_code == 204
            freed = used - store.info("memory")["used_memory"]
            print(f"deleting freed {freed} bytes; {store.dbsize()} keys left")
            assert freed > 0 and store.dbsize() < 5
        finally:
            store.config_set("maxmemory", 0)
        assert http.get("/readyz").status_code == 200
        assert http.post("/v1/maps", json=RFF).status_code == 201

        store.replicaof("127.0.0.1", 1)  # no primary answers there: the data stays, writes are refused
        try:
            assert "read-only replica" in _refused_for_the_store(http.post("/v1/maps", json=GCWS), (503,))
            assert "read-only replica" in _refused_for_the_store(http.get("/readyz"), (503,))
        finally:
            store.replicaof("NO", "ONE")
        assert http.get("/readyz").status_code == 200
        assert http.post("/v1/maps", json=GCWS).status_code == 201


def test_a_redis_without_an_append_only_file_is_not_trusted(tmp_path):
    """Unless FEATUREHASH_DURABILITY=reply (as the main servers on $REDIS_URL's Redis run); the library
    only when asked (durability="aof")."""
    store = RedisProcess(tmp_path / "redis").start()  # appendonly no
    strict = ServiceProcess("strict", tmp_path / "strict", redis_url=store.url).start()
    try:
        with redis.Redis.from_url(store.url) as client:
            with pytest.raises(WriteRefused, match="appendonly no"):
                LSHIndexes(client, "lib:", durability="aof").create(create_map(GCWS), name="lib", bands=4, rows=4)
            index = LSHIndexes(client, "lib:").open("lib")  # written, though not acknowledged
            assert index.add(["a"], _vectors(1, 1)) == {"added": 1, "replaced": 0, "items": 1}
        with strict.client() as http:
            assert wait_until(lambda: _status(http, "/readyz") == 503, 60.0), strict.log_tail()
            cause = _refused_for_the_store(http.get("/readyz"), (503,))
            assert "appendonly yes" in cause and "FEATUREHASH_DURABILITY=reply" in cause, cause
            assert "FEATUREHASH_DURABILITY=reply" in _refused_for_the_store(http.post("/v1/maps", json=RFF), (503,))
        # said once at start, before anyone asks /readyz (before, nothing at start said why it stayed 503)
        (line,) = [line for line in strict.log_tail(200_000).splitlines() if "append-only" in line]
        said = cause.removeprefix("store: ")
        assert line == f"featurehash: REDIS_URL {store.url}: {said}; until then writes get 503 and /readyz answers 503"
    finally:
        problems = strict.terminate()
        store.stop()
    assert not problems, problems


def _status(http, path: str) -> int | None:
    try:
        return http.get(path).status_code
    except Exception:  # noqa: BLE001  (not up yet)
        return None


# -- a corrupt append-only file, a killed web worker --------------------------------------------------------------

def _featurehash(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(serve_command() + list(args), env=service_env(), capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)


def test_a_corrupt_append_only_file_is_one_line_and_repairable_then_a_killed_worker_comes_back(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    good = b'*3\r\n$3\r\nSET\r\n$20\r\nfeaturehash:map:hand\r\n$13\r\n{"id":"hand"}\r\n'
    (data / "appendonly.aof").write_bytes(good + b"*9\r\ngarbage that no Redis can replay\r\n")

    failed = _featurehash("serve", "--port", "0", "--data-dir", str(data))
    assert failed.returncode == 4, failed.stderr
    assert "Traceback" not in failed.stderr
    (line,) = [line for line in failed.stderr.splitlines() if "corrupt" in line]
    assert f"featurehash repair-aof --data-dir {data.resolve()}" in line

    repaired = _featurehash("repair-aof", "--data-dir", str(data))
    assert repaired.returncode == 0, repaired.stderr
    assert f"kept its first {len(good)} of" in repaired.stderr
    assert len(list(data.glob("appendonly.aof.*.bak"))) == 1
    assert repair_append_only_file(data).endswith("nothing to repair")

    server = ServiceProcess("repaired", data)
    start_all([server])
    try:
        with server.client(timeout=5.0) as http:
            assert http.get("/v1/maps/hand").json() == {"id": "hand"}
            (web,) = [pid for pid in children(server.pid) if "featurehash.service.web" in cmdline(pid)]
            os.kill(web, signal.SIGKILL)
            assert wait_until(lambda: _status(http, "/readyz") == 200 and web not in children(server.pid), 30.0), \
                server.log_tail()
            assert http.get("/v1/maps/hand").status_code == 200
        assert "web tier was killed by SIGKILL; starting it again" in server.log_tail()
    finally:
        assert not server.terminate()
