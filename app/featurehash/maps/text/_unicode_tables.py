"""Per code point tables of the running interpreter's Unicode rules, for the compiled analyzer
(featurehash.maps.text._compiled_text): which code points `re` calls word characters (\\w) and whitespace
(\\s), and what each code point becomes under `str.lower` and scikit-learn's accent stripping.

Invariant: for every code point c, `flags[c] & WORD` is `re.fullmatch(r"\\w", chr(c)) is not None` and
`flags[c] & SPACE` is the same for \\s (and for `str.isspace`), and for every document d in which no code point
has CONTEXT set, the concatenation of `mapping(c)` over the code points of d equals scikit-learn's preprocessing
of d (`str.lower`, then strip_accents "unicode" or "ascii" when asked). The tables are computed from the
interpreter itself (its `re`, `str.lower` and `unicodedata`, so they follow its Unicode version) on first use
(about 0.3 s for the character classes and 0.1-0.2 s per mapping on an idle core, 3-5x that on a loaded one,
measured) and kept in an .npz file named by the interpreter's cache tag and Unicode version (beside numba's
cache: `__pycache__` here, else ~/.cache/featurehash, else nowhere), so later processes load them in
milliseconds; a file that cannot be read is computed again.

Why per code point is enough: `str.lower` maps each code point to one or more code points (SpecialCasing,
e.g. U+0130 to "i" + U+0307) independently of its neighbours, except Greek capital sigma, whose lower case
depends on the letters around it (Final_Sigma): code points like it get CONTEXT, and a document holding one takes
the Python path. NFKD decomposes each code point on its own and then only reorders combining marks (canonical
ordering moves code points of nonzero combining class), which "unicode" stripping drops and "ascii" stripping
drops too (they are not ASCII), so the per code point decomposition, filtered, is the document's.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import unicodedata
from pathlib import Path
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

CODE_POINTS = 0x110000
WORD, SPACE, CONTEXT = np.uint8(1), np.uint8(2), np.uint8(4)
# in the cache files' names: a change to what a table holds must change it, so no stale file is read
TABLES_FORMAT = 1
_lock = threading.Lock()


def all_code_points() -> str:
    """Every code point once, in order (lone surrogates included: `re` and `str` methods take them)."""
    return np.arange(CODE_POINTS, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")


def _matches(pattern: str, text: str) -> np.ndarray:
    """Boolean per code point of `text` (one character each): whether it matches the one-character `pattern`."""
    # every non-match replaced by NUL in one `re.sub` pass; NUL itself matches neither \w nor \s
    kept = re.sub(pattern, "\0", text)
    return np.frombuffer(kept.encode("utf-32-le", "surrogatepass"), dtype=np.uint32) != 0


def _cache_files(name: str) -> list[Path]:
    """Where a table may be stored: named by what it depends on (the interpreter and its Unicode data)."""
    stem = (f"featurehash-unicode-v{TABLES_FORMAT}-{name}-{sys.implementation.cache_tag}-"
            f"{unicodedata.unidata_version}.npz")
    folders = [Path(__file__).resolve().parent / "__pycache__",
               Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "featurehash"]
    return [folder / stem for folder in folders]


def _stored(name: str, build) -> dict[str, np.ndarray]:
    """The arrays of table `name`, read from its cache file, else built by `build()` and written there (written
    to a temporary name and renamed, so a reader never sees half a file)."""
    files = _cache_files(name)
    for path in files:
        try:
            with np.load(path, allow_pickle=False) as stored:
                return {key: stored[key] for key in stored.files}
        except (OSError, ValueError, KeyError):
            continue
    arrays = build()
    for path in files:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as out:
                np.savez(out, **arrays)
            os.chmod(out.name, 0o644)   # readable by every user of a shared installation, like numba's cache
            os.replace(out.name, path)
            break
        except OSError:
            continue
    return arrays


@lru_cache(maxsize=1)
def character_flags() -> np.ndarray:
    """uint8 per code point: WORD (re's \\w), SPACE (re's \\s) and CONTEXT (its lower case depends on its
    neighbours)."""
    with _lock:
        return _stored("flags", lambda: {"flags": _character_flags()})["flags"]


def _character_flags() -> np.ndarray:
    text = all_code_points()
    flags = np.where(_matches(r"\W", text), WORD, np.uint8(0)).astype(np.uint8)
    flags |= np.where(_matches(r"\S", text), SPACE, np.uint8(0)).astype(np.uint8)
    for code in _changed_by_lower(text):
        character = chr(code)
        # a cased letter before it, or after it, changes its lower case: Final_Sigma and the like
        if ("a" + character).lower()[1:] != character.lower() or (character + "a").lower()[:-1] != character.lower():
            flags[code] |= CONTEXT
    return flags


def _changed_by_lower(text: str) -> list[int]:
    return [code for code, character in enumerate(text) if character.lower() != character]


@dataclass(frozen=True)
class Mapping:
    """What each code point becomes: code point c -> pool[start[c]:start[c + 1]] (int32 code points);
    `longest` is the longest such run (how much a document can grow)."""

    start: np.ndarray
    pool: np.ndarray
    longest: int


def _strip_unicode(text: str) -> str:
    return "".join(character for character in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(character))


def _strip_ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


@lru_cache(maxsize=6)
def mapping(lowercase: bool, strip_accents: str | None) -> Mapping | None:
    """The per code point preprocessing of scikit-learn (lower case first, then accents stripped), or None when
    it is the identity (no lowercase, no stripping)."""
    if not lowercase and strip_accents is None:
        return None
    with _lock:
        arrays = _stored(f"map-{int(lowercase)}-{strip_accents}", lambda: _mapping(lowercase, strip_accents))
    return Mapping(arrays["start"], arrays["pool"], int(arrays["longest"]))


def _mapping(lowercase: bool, strip_accents: str | None) -> dict[str, np.ndarray]:
    strip = {None: None, "unicode": _strip_unicode, "ascii": _strip_ascii}[strip_accents]
    text = all_code_points()
    # only code points that change need a Python call each: str.lower changes ~1,400, NFKD ~6,000
    outputs = list(text)
    changed = set(_changed_by_lower(text)) if lowercase else set()
    if strip is not None:
        changed.update(code for code, character in enumerate(text)
                       if character.isascii() is False and strip(character) != character)
    for code in changed:
        result = chr(code)
        if lowercase:
            result = result.lower()
        if strip is not None:
            result = strip(result)
        outputs[code] = result
    lengths = np.fromiter(map(len, outputs), dtype=np.int32, count=CODE_POINTS)
    start = np.zeros(CODE_POINTS + 1, dtype=np.int32)   # the pool holds ~1.2 M code points: int32 offsets
    np.cumsum(lengths, out=start[1:])
    pool = np.frombuffer("".join(outputs).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return {"start": start, "pool": pool.astype(np.int32), "longest": np.array(int(lengths.max()))}
