"""The keys file and the key ring (featurehash.service.auth.keys): validation errors as one line naming the entry
and field, key resolution, FEATUREHASH_API_KEY alone or beside the file, reloading on change (with a clock the
test moves) and keeping the ring in force when the new file is bad; a start with a bad file falling back to the
launcher's last good copy (featurehash.service.auth.last_good), and that copy following the good versions only."""

from __future__ import annotations

import hashlib
import logging
import os

import orjson
import pytest

from featurehash.service.auth import (ADMIN_SCOPES, DEFAULT_TENANT, KeyLimits, KeyRing, KeysFileError, KeySource,
                                      Principal, Scope, key_ring)
from featurehash.service.auth.keys import starting_ring
from featurehash.service.auth.last_good import LAST_GOOD_NAME, LastGoodKeys


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


GOOD = {"keys": [{"name": "scoring-a", "tenant": "team-a", "scopes": ["read"], "sha256": digest("ka"),
                  "limits": {"requests_per_second": 50, "concurrent_requests": 4}},
                 {"name": "ops", "tenant": "ops", "scopes": ["admin"], "sha256": digest("kops").upper()}],
        "tenants": {"team-a": {"stored_bytes": 1024}}}


def write(path, document) -> None:
    path.write_bytes(document if isinstance(document, bytes) else orjson.dumps(document))


def test_a_key_resolves_to_its_principal(tmp_path):
    write(tmp_path / "keys.json", GOOD)
    ring = key_ring(tmp_path / "keys.json", None)
    assert ring.resolve("ka") == Principal("team-a", "scoring-a", frozenset({Scope.READ}),
                                           KeyLimits(requests_per_second=50, concurrent_requests=4, stored_bytes=1024))
    assert ring.resolve("kops").is_admin and ring.resolve("kops").limits == KeyLimits()  # upper-case hex is fine
    for unknown in ("", "kb", "KA", "ka ", digest("ka")):
        assert ring.resolve(unknown) is None
    assert ring.tenants == {"team-a", "ops", DEFAULT_TENANT} and not ring.open


def test_the_api_key_alone_is_one_admin_key_of_the_default_tenant(tmp_path):
    ring = key_ring(None, "secret")
    assert ring.resolve("secret") == Principal(DEFAULT_TENANT, "api-key", ADMIN_SCOPES)
    assert ring.resolve("Secret") is None and ring.resolve("") is None
    both = key_ring(_written(tmp_path, GOOD), "secret")  # beside a keys file: one more admin key of "default"
    assert both.resolve("secret").tenant == DEFAULT_TENANT and both.resolve("ka").tenant == "team-a"


def test_without_keys_every_caller_is_the_default_admin():
    ring = key_ring(None, None)
    assert ring.open and ring.resolve("") == ring.resolve("anything") == Principal(DEFAULT_TENANT, "anonymous")


def _written(tmp_path, document):
    path = tmp_path / "keys.json"
    write(path, document)
    return path


def _key(**fields):
    return {"name": "k1", "tenant": "team-a", "scopes": ["read"], "sha256": digest("x"), **fields}


@pytest.mark.parametrize("document, message", [
    (b"{not json", "not JSON"),
    ([], "Input should be a valid dictionary"),
    ({"keys": [_key(tenant="Team-A")]}, "keys[0].tenant (key 'k1'): String should match pattern"),
    ({"keys": [_key(tenant="a" * 64)]}, "keys[0].tenant (key 'k1')"),
    ({"keys": [_key(scopes=["read", "reed"])]}, "keys[0].scopes[1] (key 'k1'): Input should be 'read', 'write' or "
                                                "'admin'"),
    ({"keys": [_key(scopes=[])]}, "keys[0].scopes (key 'k1'): List should have at least 1 item"),
    ({"keys": [_key(sha256="abc")]}, "keys[0].sha256 (key 'k1'): String should match pattern"),
    ({"keys": [_key(key="plain")]}, "keys[0].key (key 'k1'): Extra inputs are not permitted"),
    ({"keys": [_key(limits={"requests_per_second": 0})]}, "keys[0].limits.requests_per_second (key 'k1'): Input "
                                                         "should be greater than 0"),
    ({"keys": [_key(), _key(sha256=digest("y"))]}, "keys: Value error, entry 1: name 'k1' is also entry 0's"),
    ({"keys": [_key(), _key(name="k2")]}, "entry 1 (k2): the same sha256 as entry 0"),
    ({"keys": [{"tenant": "t", "scopes": ["read"], "sha256": digest("x")}]}, "keys[0].name: Field required"),
    ({"keys": []}, "keys: no key: every request would get 401"),
    ({"keys": [_key()], "tenants": {"team-b": {}}}, "tenants.team-b: no key of that tenant"),
    ({"keys": [_key()], "tenants": {"team-a": {"stored_bytes": -1}}}, "tenants.team-a.stored_bytes: Input should be "
                                                                     "greater than or equal to 0"),
], ids=["not_json", "not_an_object", "tenant_case", "tenant_length", "scope", "no_scopes", "digest", "plain_key",
        "limit", "name_twice", "digest_twice", "no_name", "no_key", "unknown_tenant", "negative_bytes"])
def test_a_bad_file_is_one_line_naming_the_entry_and_field(tmp_path, document, message):
    path = _written(tmp_path, document)
    with pytest.raises(KeysFileError) as refused:
        key_ring(path, None)
    text = str(refused.value)
    assert text.startswith(f"keys file {path}: ") and "\n" not in text
    assert message.removeprefix("keys: Value error, ") in text, text


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(KeysFileError, match="cannot be read"):
        key_ring(tmp_path / "absent.json", None)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_source_rereads_a_changed_file_at_most_once_a_second(tmp_path):
    path, clock = _written(tmp_path, GOOD), Clock()
    source = KeySource(path, None, clock=clock)
    rotated = {**GOOD, "keys": [*GOOD["keys"], _key(name="new", sha256=digest("knew"))]}
    staged = tmp_path / "staged.json"
    write(staged, rotated)
    os.replace(staged, path)
    assert source.current().resolve("knew") is None   # looked at no sooner than a second after the last look
    clock.now += 1.0
    assert source.current().resolve("knew").key_id == "new"
    assert source.current() is source.current()  # nothing re-read while the file stays


def test_a_bad_new_file_keeps_the_ring_in_force(tmp_path, caplog):
    path, clock = _written(tmp_path, GOOD), Clock()
    source = KeySource(path, None, clock=clock)
    write(path, {"keys": [_key(scopes=["everything"])], "padding": "changes the size"})
    clock.now += 1.0
    with caplog.at_level(logging.ERROR, logger="featurehash"):
        assert source.current().resolve("ka").tenant == "team-a"
    assert "keys[0].scopes[0] (key 'k1')" in caplog.text
    assert "keeping the 2 keys in force" in caplog.text
    path.unlink()  # a vanished file: the same
    clock.now += 1.0
    assert source.current().resolve("ka") is not None


def test_reload_reads_the_file_even_unchanged_on_disk(tmp_path):
    path = _written(tmp_path, GOOD)
    source = KeySource(path, None, clock=Clock())
    before = os.stat(path)
    swapped = orjson.dumps(GOOD).replace(digest("ka").encode(), digest("kz").encode())
    path.write_bytes(swapped)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert source.reload() and source.current().resolve("kz").key_id == "scoring-a"
    assert source.current().resolve("ka") is None


def test_a_ring_without_the_file_never_looks_at_the_disk():
    source = KeySource(None, "secret")
    assert isinstance(source.current(), KeyRing) and not source.reload()
    assert source.current().resolve("secret").is_admin


def test_a_start_with_a_bad_file_serves_the_last_good_copy_with_one_warning(tmp_path, caplog):
    last_good = tmp_path / "last-good.json"
    write(last_good, GOOD)
    path = _written(tmp_path, b"")  # a Secret truncated mid-update
    with caplog.at_level(logging.WARNING, logger="featurehash"):
        source = KeySource(path, "secret", last_good=last_good)
    assert source.current().resolve("ka").key_id == "scoring-a" and source.current().resolve("secret").is_admin
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and f"keys file {path}: not JSON" in record.getMessage()
    assert "serving the last keys file featurehash serve validated (3 keys of 3 tenants)" in record.getMessage()
    write(path, {"keys": []})  # quietly, for the launcher's own check
    caplog.clear()
    assert starting_ring(path, None, last_good, quiet=True).resolve("ka") is not None and not caplog.records


def test_without_a_good_copy_a_bad_file_stops_the_start(tmp_path):
    path = _written(tmp_path, {"keys": [_key(scopes=["reed"])]})
    broken = tmp_path / "broken.json"
    write(broken, b"{")
    for last_good in (None, tmp_path / "absent.json", broken):
        with pytest.raises(KeysFileError, match=r"keys\[0\]\.scopes\[0\] \(key 'k1'\)"):  # about the keys file
            KeySource(path, None, last_good=last_good)


def test_the_launcher_keeps_the_last_version_that_validated(tmp_path):
    path, clock = _written(tmp_path, GOOD), Clock()
    keys = LastGoodKeys(path, None, clock=clock)
    copy = keys.keep_in(tmp_path / "data")
    assert copy == (tmp_path / "data" / LAST_GOOD_NAME).resolve() and copy.read_bytes() == path.read_bytes()
    assert copy.stat().st_mode & 0o777 == 0o600
    rotated = {**GOOD, "keys": [*GOOD["keys"], _key(name="new", sha256=digest("knew"))]}
    write(path, rotated)
    keys.poll()  # looked at no sooner than a second after the last look
    assert copy.read_bytes() == orjson.dumps(GOOD)
    clock.now += 1.0
    keys.poll()
    assert copy.read_bytes() == orjson.dumps(rotated)
    for bad in (b"", {"keys": []}, {"keys": [_key(scopes=["reed"])]}):
        write(path, bad)
        clock.now += 1.0
        keys.poll()
        good, line = keys.hangup()
        assert not good and line.startswith(f"SIGHUP: keys file {path}: ") and "\n" not in line, line
        assert line.endswith("no worker re-reads it, the 3 keys in force stay")
        assert copy.read_bytes() == orjson.dumps(rotated)
    write(path, GOOD)
    assert keys.hangup() == (True, f"SIGHUP: keys file {path} validated (2 keys of 3 tenants); the workers re-read it")
    assert copy.read_bytes() == orjson.dumps(GOOD)
    keys.close()
    assert not copy.exists() and not list(copy.parent.iterdir())


def test_a_copy_that_cannot_be_written_is_an_error_at_start_only(tmp_path):
    import shutil

    path, clock = _written(tmp_path, GOOD), Clock()
    keys = LastGoodKeys(path, None, clock=clock)
    (tmp_path / "a-file").write_bytes(b"")
    with pytest.raises(OSError):
        keys.keep_in(tmp_path / "a-file")
    assert keys.copy is None
    copy = keys.keep_in(tmp_path / "data")
    shutil.rmtree(tmp_path / "data")  # later writes fail: the launcher goes on, with the ring it validated
    write(path, {**GOOD, "keys": GOOD["keys"][:1]})
    assert keys.hangup()[0] and len(keys.ring.principals) == 1 and not copy.exists()


def test_the_launcher_refuses_a_bad_file_at_the_first_start(tmp_path):
    with pytest.raises(KeysFileError, match="keys: no key: every request would get 401"):
        LastGoodKeys(_written(tmp_path, {"keys": []}), None)
    with pytest.raises(KeysFileError, match="the name FEATUREHASH_API_KEY's key goes by"):  # as the workers would
        LastGoodKeys(_written(tmp_path, {"keys": [_key(name="api-key")]}), "secret")
