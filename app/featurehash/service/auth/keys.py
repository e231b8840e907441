"""API keys: the keys file (FEATUREHASH_KEYS_FILE), the ring of key digests it makes, and its reloading.

The file (a mounted Kubernetes Secret is a file too) is JSON:

    {"keys": [{"name": "scoring-a", "tenant": "team-a", "scopes": ["read"],
               "sha256": "<64 hex: sha256 of the key's UTF-8 bytes>",
               "limits": {"requests_per_second": 50, "concurrent_requests": 4}}],
     "tenants": {"team-a": {"stored_bytes": 1073741824}}}

Plain keys are never stored, logged or kept in memory past the request: a presented token is hashed once
(SHA-256) and its digest looked up. A dict keyed by digest is safe: the digest of a wrong guess tells an
attacker nothing about a right key (finding a key from its digest is a preimage search), so the lookup's timing
leaks nothing a brute-force search could use; the one comparison made on a hit is hmac.compare_digest anyway.

`KeySource` re-reads the file when it changes (mtime, size or inode, looked at no more than once a second: one
monotonic clock read on the other requests) or on demand (SIGHUP); a new file that does not validate is logged
and the ring in force is kept, so a bad rotation never locks everyone out. A file with no key is one that does not
validate (every request would get 401). At a first start a bad file is an error (`KeysFileError`), one line naming
the entry and field; a process started later by `featurehash serve` (a restarted worker) serves the last file the
launcher validated instead (`starting_ring`, `auth.last_good`), so a bad Secret never stops a started service.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator

from .principal import ADMIN_SCOPES, KeyLimits, Principal, Scope

logger = logging.getLogger("featurehash")

DEFAULT_TENANT = "default"
TENANT_PATTERN = r"[a-z0-9][a-z0-9_-]{0,62}"
_TENANT = re.compile(TENANT_PATTERN)
# The key id of FEATUREHASH_API_KEY's key, and of every caller of a service with no keys at all.
API_KEY_ID = "api-key"
OPEN_KEY_ID = "anonymous"
RECHECK_SECONDS = 1.0

TenantName = Annotated[str, StringConstraints(pattern=f"^{TENANT_PATTERN}$")]


def is_tenant_name(name: object) -> bool:
    return isinstance(name, str) and _TENANT.fullmatch(name) is not None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LimitsEntry(_Strict):
    requests_per_second: float | None = Field(default=None, gt=0)
    concurrent_requests: int | None = Field(default=None, ge=1)


class KeyEntry(_Strict):
    name: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")]
    tenant: TenantName
    scopes: Annotated[list[Scope], Field(min_length=1)]
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{64}$")]
    limits: LimitsEntry = LimitsEntry()


class TenantEntry(_Strict):
    stored_bytes: int | None = Field(default=None, ge=0)


class KeysFile(_Strict):
    keys: list[KeyEntry]
    tenants: dict[TenantName, TenantEntry] = {}

    @field_validator("keys")
    @classmethod
    def _distinct(cls, keys: list[KeyEntry]) -> list[KeyEntry]:
        if not keys:  # a Secret emptied by mistake would answer every request 401: refused like a broken file
            raise ValueError("no key: every request would get 401; list at least one key")
        names: dict[str, int] = {}
        digests: dict[str, int] = {}
        for at, entry in enumerate(keys):
            if entry.name in names:
                raise ValueError(f"entry {at}: name {entry.name!r} is also entry {names[entry.name]}'s")
            if entry.sha256.lower() in digests:
                raise ValueError(f"entry {at} ({entry.name}): the same sha256 as entry {digests[entry.sha256.lower()]}")
            names[entry.name], digests[entry.sha256.lower()] = at, at
        return keys

    @model_validator(mode="after")
    def _known_tenants(self) -> "KeysFile":
        keyed = {entry.tenant for entry in self.keys}
        for tenant in self.tenants:
            if tenant not in keyed:
                raise ValueError(f"tenants.{tenant}: no key of that tenant")
        return self


class KeysFileError(ValueError):
    """The keys file cannot be used: one line naming the file, the entry and the field."""


@dataclass(frozen=True)
class KeyRing:
    """Principals by the SHA-256 digest of their key; `open` (no key configured): every caller is the
    admin of tenant "default"; `tenants`: every tenant the keys name (the bounded set metrics label by)."""

    principals: dict[bytes, Principal]
    tenants: frozenset[str]
    open: bool = False

    def resolve(self, token: str) -> Principal | None:
        """The principal of a presented key, None for an unknown (or empty) one."""
        if self.open:
            return OPEN_PRINCIPAL
        if not token:
            return None
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found = self._entries.get(digest)
        # The dict found it by an equal digest: compare_digest restates that in constant time.
        if found is None or not hmac.compare_digest(found[0], digest):
            return None
        return found[1]

    def __post_init__(self):
        object.__setattr__(self, "_entries", {digest: (digest, p) for digest, p in self.principals.items()})

    @classmethod
    def opened(cls) -> "KeyRing":
        return cls({}, frozenset({DEFAULT_TENANT}), open=True)

    @classmethod
    def single(cls, api_key: str) -> "KeyRing":
        """FEATUREHASH_API_KEY alone: one admin key of tenant "default", no limits."""
        return cls({_digest(api_key): Principal(DEFAULT_TENANT, API_KEY_ID, ADMIN_SCOPES)}, frozenset({DEFAULT_TENANT}))

    @classmethod
    def from_document(cls, document: KeysFile, api_key: str | None = None) -> "KeyRing":
        principals: dict[bytes, Principal] = {}
        for entry in document.keys:
            tenant = document.tenants.get(entry.tenant, TenantEntry())
            limits = KeyLimits(entry.limits.requests_per_second, entry.limits.concurrent_requests, tenant.stored_bytes)
            principals[bytes.fromhex(entry.sha256)] = Principal(entry.tenant, entry.name, frozenset(entry.scopes), limits)
        tenants = {principal.tenant for principal in principals.values()} | {DEFAULT_TENANT}
        if api_key is not None and _digest(api_key) not in principals:
            if any(principal.key_id == API_KEY_ID for principal in principals.values()):
                raise KeysFileError(f"a key is named {API_KEY_ID!r}, the name FEATUREHASH_API_KEY's key goes by: "
                                    "rename it, or unset FEATUREHASH_API_KEY")
            principals[_digest(api_key)] = Principal(DEFAULT_TENANT, API_KEY_ID, ADMIN_SCOPES)
        return cls(principals, frozenset(tenants))


OPEN_PRINCIPAL = Principal(DEFAULT_TENANT, OPEN_KEY_ID, ADMIN_SCOPES)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def read_keys_file(path: Path) -> KeysFile:
    """The validated document, or KeysFileError: one line naming the file and the first problem's entry and field."""
    return parse_keys_file(path, read_keys_bytes(path))


def read_keys_bytes(path: Path) -> bytes:
    """The file's bytes, or KeysFileError naming it."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeysFileError(f"keys file {path}: cannot be read ({exc.strerror or exc})") from None


def parse_keys_file(path: Path, raw: bytes) -> KeysFile:
    """`raw` (the bytes of the file at `path`) validated, or KeysFileError as `read_keys_file` says."""
    try:
        return KeysFile.model_validate(orjson.loads(raw))
    except orjson.JSONDecodeError as exc:
        raise KeysFileError(f"keys file {path}: not JSON ({exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
        where = f"{where}{_entry_name(raw, first['loc'])}: " if where else ""
        message = first["msg"].removeprefix("Value error, ")
        raise KeysFileError(f"keys file {path}: {where}{message}".replace("\n", " ")) from None


def _entry_name(raw: bytes, location: tuple) -> str:
    """' (name ...)' for an error inside keys[i] whose entry has a name: the entry as the operator knows it."""
    if len(location) < 2 or location[0] != "keys" or not isinstance(location[1], int):
        return ""
    try:
        name = orjson.loads(raw)["keys"][location[1]].get("name")
    except (orjson.JSONDecodeError, LookupError, TypeError, AttributeError):
        return ""
    return f" (key {name!r})" if isinstance(name, str) and name else ""


def key_ring(keys_file: Path | None, api_key: str | None) -> KeyRing:
    """The ring the settings make: the keys file (plus FEATUREHASH_API_KEY as one more admin key of "default"),
    else FEATUREHASH_API_KEY alone, else open."""
    if keys_file is not None:
        return KeyRing.from_document(read_keys_file(keys_file), api_key)
    if api_key is not None:
        return KeyRing.single(api_key)
    return KeyRing.opened()


def starting_ring(keys_file: Path | None, api_key: str | None, last_good: Path | None = None, *,
                  quiet: bool = False) -> KeyRing:
    """The ring a starting process serves: `key_ring`'s; or, when the keys file does not validate and `last_good`
    (the copy `featurehash serve` keeps of the last keys file it validated) does, that copy's ring, with one warning
    logged (none if `quiet`). KeysFileError about the keys file when neither can be used."""
    try:
        return key_ring(keys_file, api_key)
    except KeysFileError as exc:
        if keys_file is None or last_good is None:
            raise
        try:
            ring = KeyRing.from_document(read_keys_file(last_good), api_key)
        except KeysFileError:
            raise exc from None
        if not quiet:
            logger.warning("%s; serving the last keys file featurehash serve validated (%d keys of %d tenants) "
                           "until this one does", exc, len(ring.principals), len(ring.tenants))
        return ring


class KeySource:
    """The ring in force, re-read from the keys file when it changes (checked at most every RECHECK_SECONDS,
    from the request path) or on `reload()` (SIGHUP). A file that no longer validates keeps the ring in force,
    logged once per change of the file. It starts with `starting_ring(keys_file, api_key, last_good)`."""

    def __init__(self, keys_file: Path | None, api_key: str | None = None, *, last_good: Path | None = None,
                 recheck_seconds: float = RECHECK_SECONDS, clock=time.monotonic):
        self.keys_file, self.api_key = keys_file, api_key
        self.recheck_seconds, self.clock = recheck_seconds, clock
        self._seen = self._stat()
        self.ring = starting_ring(keys_file, api_key, last_good)  # KeysFileError: neither file can be used
        self._next_check = clock() + recheck_seconds

    def current(self) -> KeyRing:
        """The ring, looking at the file first when the last look is RECHECK_SECONDS old."""
        if self.keys_file is not None and self.clock() >= self._next_check:
            self._next_check = self.clock() + self.recheck_seconds
            seen = self._stat()
            if seen != self._seen:
                self._seen = seen
                self.reload()
        return self.ring

    def reload(self) -> bool:
        """Read the file again now; False (logged, the ring kept) if it cannot be used."""
        if self.keys_file is None:
            return False
        self._seen = self._stat()
        try:
            ring = key_ring(self.keys_file, self.api_key)
        except KeysFileError as exc:
            logger.error("%s; keeping the %d keys in force", exc, len(self.ring.principals))
            return False
        self.ring = ring
        logger.info("keys file %s loaded: %d keys of %d tenants", self.keys_file, len(ring.principals),
                    len(ring.tenants))
        return True

    def _stat(self) -> tuple | None:
        return None if self.keys_file is None else file_signature(self.keys_file)


def file_signature(path: Path) -> tuple | None:
    """What changes when the file does (mtime, size, inode, device); None while it cannot be looked at."""
    try:
        found = os.stat(path)  # follows symlinks: a Kubernetes Secret swaps its ..data link
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size, found.st_ino, found.st_dev
