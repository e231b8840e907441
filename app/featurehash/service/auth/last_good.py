"""The last good keys: the launcher's copy of the last keys file it validated, for the workers it starts.

A worker reads the keys file as it starts. Once `featurehash serve` has started, a keys file that does not
validate now (a Secret truncated mid-update, a bad edit, an empty key list) must not keep a worker from starting:
one replacing a killed worker, or the whole web tier after an out-of-memory kill, would otherwise fail, and the
service would stay down even after the file was fixed. So the launcher validates the file at start, again on
SIGHUP and when it changes (looked at once a second), and keeps the bytes of each version that validates in
`LAST_GOOD_NAME` under the data directory (mode 0600, written whole by rename, removed at exit); a worker that
starts while the file is bad serves that copy (`keys.starting_ring`, Settings.keys_last_good_file).

SIGHUP is validated here before any worker hears of it, so a bad file restarts nothing and tells nobody.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .keys import RECHECK_SECONDS, KeyRing, KeysFileError, file_signature, parse_keys_file, read_keys_bytes

LAST_GOOD_NAME = "keys.last-good.json"


class LastGoodKeys:
    """The keys file as the launcher sees it. Invariant: `raw` is the last version of the file that validated
    (with the API key), and once `keep_in` has succeeded the copy on disk holds it, or (a write failed) an
    earlier version that validated."""

    def __init__(self, keys_file: Path, api_key: str | None = None, *, recheck_seconds: float = RECHECK_SECONDS,
                 clock=time.monotonic):
        self.keys_file, self.api_key = keys_file, api_key
        self.recheck_seconds, self.clock = recheck_seconds, clock
        self.copy: Path | None = None
        self._seen = file_signature(self.keys_file)
        self.raw, self.ring = self._validate()  # KeysFileError at the first start: the service does not start
        self._next_check = clock() + recheck_seconds

    def keep_in(self, directory: Path) -> Path:
        """Writes the copy into `directory` (created if needed); its path, for the workers' settings. OSError
        when it cannot be written (then none is kept)."""
        directory.mkdir(parents=True, exist_ok=True)
        copy = directory.resolve() / LAST_GOOD_NAME
        self._write(copy)
        self.copy = copy
        return copy

    def poll(self) -> None:
        """Takes a changed file that validates as the last good one (looked at most every `recheck_seconds`).
        A bad one is not reported here: the workers, which read the file too, log it."""
        if self.clock() < self._next_check:
            return
        self._next_check = self.clock() + self.recheck_seconds
        if (seen := file_signature(self.keys_file)) != self._seen:
            self._seen = seen
            try:
                self._take()
            except KeysFileError:
                pass

    def hangup(self) -> tuple[bool, str]:
        """SIGHUP: the file validated now; (whether the workers are to re-read it, the one line to print)."""
        self._seen = file_signature(self.keys_file)
        try:
            self._take()
        except KeysFileError as exc:
            return False, f"SIGHUP: {exc}; no worker re-reads it, the {len(self.ring.principals)} keys in force stay"
        return True, (f"SIGHUP: keys file {self.keys_file} validated ({len(self.ring.principals)} keys of "
                      f"{len(self.ring.tenants)} tenants); the workers re-read it")

    def close(self) -> None:
        """Removes the copy (at the launcher's exit: it is the next start's to write)."""
        if self.copy is not None:
            self.copy.unlink(missing_ok=True)

    def _validate(self) -> tuple[bytes, KeyRing]:
        raw = read_keys_bytes(self.keys_file)
        return raw, KeyRing.from_document(parse_keys_file(self.keys_file, raw), self.api_key)

    def _take(self) -> None:
        raw, ring = self._validate()
        if raw != self.raw:
            self.raw, self.ring = raw, ring
            if self.copy is not None:
                try:
                    self._write(self.copy)
                except OSError:  # e.g. a full disk: the older copy stays, a version that validated too
                    pass

    def _write(self, copy: Path) -> None:
        staged = copy.with_name(f".{LAST_GOOD_NAME}.{os.getpid()}")
        try:
            # 0600: the digests are not keys, but the copy is kept as private as the Secret it comes from
            descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(self.raw)
            os.replace(staged, copy)  # a worker reading it sees the old copy or the new, never a part
        finally:
            staged.unlink(missing_ok=True)
