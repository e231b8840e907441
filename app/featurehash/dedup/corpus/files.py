"""The files of a corpus: paths, folders and globs (local or any fsspec URL) expanded to a sorted list of files,
each with its format (JSON Lines, Parquet, CSV or plain text) and compression (gzip, zstd, bz2, xz) read from
its name. The list's order is the corpus's order: a document's place is (file index, record index)."""

from __future__ import annotations

import glob as _glob
import os
from dataclasses import dataclass

from ...maps.errors import InputError

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet",
           ".csv": "csv", ".txt": "text", ".text": "text", ".md": "text"}
COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}


@dataclass(frozen=True)
class CorpusFile:
    """One input file: `path` (local path or URL), `format`, `compression` (None: plain)."""

    path: str
    format: str
    compression: str | None

    @property
    def suffix(self) -> str:
        """The name's format and compression suffix, as the output shards repeat it."""
        ext = {"jsonl": ".jsonl", "parquet": ".parquet", "csv": ".csv", "text": ".txt"}[self.format]
        comp = {None: "", "gzip": ".gz", "zstd": ".zst", "bz2": ".bz2", "xz": ".xz"}[self.compression]
        return ext + comp


def kind_of(path: str, default_format: str | None = None) -> tuple[str, str | None] | None:
    """(format, compression) from a file name, or None when neither the name nor `default_format` says."""
    name = path.rsplit("/", 1)[-1].lower()
    compression = None
    for suffix, kind in COMPRESSIONS.items():
        if name.endswith(suffix):
            compression, name = kind, name[: -len(suffix)]
            break
    for suffix, fmt in FORMATS.items():
        if name.endswith(suffix):
            return fmt, compression
    return (default_format, compression) if default_format else None


def expand(paths, input_format: str | None = None) -> list[CorpusFile]:
    """Every file the paths name: a file as is, a folder's files (recursively, hidden files and names the
    format cannot be told from skipped), a glob's matches; sorted within each path, paths in the order given.
    InputError naming a path that matches nothing, or formats that differ (the output repeats one format)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[CorpusFile] = []
    for given in map(os.fspath, paths):
        found = _matches(given)
        if not found:
            raise InputError(given, "no such file, folder or glob match")
        for path in found:
            kind = kind_of(path, input_format)
            if kind is None:
                if len(found) == 1 and found[0] == given:
                    raise InputError(given, "cannot tell its format from its name (.jsonl, .parquet, .csv, "
                                            ".txt, optionally .gz/.zst); pass --input-format")
                continue
            files.append(CorpusFile(path, *kind))
    if not files:
        raise InputError(os.fspath(paths[0]) if paths else "input", "no corpus files found")
    formats = {f.format for f in files}
    if len(formats) > 1:
        raise InputError("input", f"files of several formats ({', '.join(sorted(formats))}): the deduplicated "
                                  "corpus is written in the input's format, so give one format per run")
    return files


def _matches(given: str) -> list[str]:
    if "://" in given:
        return _remote(given)
    if any(ch in given for ch in "*?["):
        return sorted(p for p in _glob.glob(given, recursive=True) if os.path.isfile(p))
    if os.path.isdir(given):
        out = []
        for root, dirs, names in os.walk(given):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            out.extend(os.path.join(root, n) for n in names if not n.startswith((".", "_")))
        return sorted(out)
    return [given] if os.path.isfile(given) else []


def _remote(url: str) -> list[str]:
    import fsspec

    fs, _, roots = fsspec.get_fs_token_paths(url)
    protocol = url.split("://", 1)[0]
    out = []
    for root in roots:
        if fs.isdir(root):
            out.extend(p for p in fs.find(root) if not p.rsplit("/", 1)[-1].startswith((".", "_")))
        elif fs.exists(root):
            out.append(root)
    return sorted(p if "://" in p else f"{protocol}://{p}" for p in out)


def open_binary(path: str, compression: str | None):
    """A binary file object of the decompressed bytes (fsspec for URLs and for zstd / bz2 / xz)."""
    if compression == "zstd":
        try:
            import zstandard  # noqa: F401 - fsspec's zstd codec needs it
        except ImportError:
            raise InputError(path, "a .zst file needs the zstandard package (pip install zstandard)") from None
    import fsspec

    return fsspec.open(path, "rb", compression=compression).open()


def open_output(path: str, compression: str | None):
    """A binary file object writing `compression`-compressed bytes to `path` (fsspec)."""
    import fsspec

    return fsspec.open(path, "wb", compression=compression).open()
