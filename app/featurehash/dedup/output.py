"""Where a join's verified pairs go: memory, or a file written as they are found.

- memory: blocks gathered, then sorted by (i, j);
- `.npz`: each block appended to three raw files (i, j int64; similarity float64) in the work directory,
  packed at the end into an uncompressed .npz (members i.npy, j.npy, similarity.npy; numpy.load reads it)
  by streaming copies; the arrays handed back are memory maps of the members where they lie in the archive;
- `.parquet` (needs pyarrow): a pyarrow.parquet.ParquetWriter, one row group per `ROW_GROUP` pairs.
Files hold the pairs in the order they were found (not sorted), are written under `<path>.partial` and
renamed once complete, so a failed join never leaves a truncated file under the requested name.
Memory: one block of pairs (and up to one row group for Parquet), never all pairs.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import numpy as np

from ..maps.errors import InputError
from .sources import mapped_member

COLUMNS = (("i", np.dtype("<i8")), ("j", np.dtype("<i8")), ("similarity", np.dtype("<f8")))
ROW_GROUP = 1 << 20


def check_output(path) -> str | None:
    """The output path as a string, refused up front if its suffix or directory is wrong."""
    if path is None:
        return None
    path = os.fspath(path)
    if not path.endswith((".npz", ".parquet")):
        raise InputError("output", f"{path}: must end in .npz or .parquet")
    if not Path(path).resolve().parent.is_dir():
        raise InputError("output", f"{path}: cannot be written, its directory does not exist")
    if path.endswith(".parquet"):
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise InputError("output", "Parquet output needs pyarrow (pip install 'featurehash[dedup]'); "
                                       "or write .npz") from None
    return path


def open_sink(path: str | None, workdir):
    """A sink for `path` (None: memory); `workdir()` gives the directory for temporary blocks."""
    if path is None:
        return MemorySink()
    return ParquetSink(path) if path.endswith(".parquet") else NpzSink(path, Path(workdir()))


class MemorySink:
    path = None

    def __init__(self):
        self.blocks, self.count = {name: [] for name, _ in COLUMNS}, 0

    def add(self, i: np.ndarray, j: np.ndarray, similarity: np.ndarray) -> None:
        for name, values in zip(self.blocks, (i, j, similarity)):
            self.blocks[name].append(values)
        self.count += i.size

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        i, j, s = (np.concatenate(self.blocks[name]).astype(dtype) if self.blocks[name] else np.empty(0, dtype)
                   for name, dtype in COLUMNS)
        order = np.lexsort((j, i))
        return i[order], j[order], s[order]

    def abort(self) -> None:
        pass


class NpzSink:
    def __init__(self, path: str, workdir: Path):
        self.path, self.count = path, 0
        self.raw = {name: workdir / f"pairs-{name}.raw" for name, _ in COLUMNS}
        # open for the whole join (closed by finish / abort), appended to block by block
        self.files = {name: open(raw, "wb") for name, raw in self.raw.items()}  # noqa: SIM115

    def add(self, i: np.ndarray, j: np.ndarray, similarity: np.ndarray) -> None:
        for (name, dtype), values in zip(COLUMNS, (i, j, similarity)):
            np.ascontiguousarray(values, dtype=dtype).tofile(self.files[name])
        self.count += i.size

    def finish(self):
        """Pack the blocks into the .npz; the three columns memory-mapped from it."""
        for file in self.files.values():
            file.close()
        partial = f"{self.path}.partial"
        try:
            with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
                for name, dtype in COLUMNS:
                    with archive.open(f"{name}.npy", "w", force_zip64=True) as member, open(self.raw[name], "rb") as raw:
                        np.lib.format.write_array_header_1_0(member, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                                      "fortran_order": False, "shape": (self.count,)})
                        shutil.copyfileobj(raw, member, 1 << 24)
                    os.unlink(self.raw[name])
            os.replace(partial, self.path)
        finally:
            Path(partial).unlink(missing_ok=True)
        return tuple(mapped_member(self.path, f"{name}.npy") for name, _ in COLUMNS)

    def abort(self) -> None:
        for file in self.files.values():
            file.close()


class ParquetSink:
    def __init__(self, path: str):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa, self.path, self.count = pa, path, 0
        self.schema = pa.schema([(name, pa.from_numpy_dtype(dtype)) for name, dtype in COLUMNS])
        self.writer = pq.ParquetWriter(f"{path}.partial", self.schema)
        self.pending, self.pending_count = [], 0

    def add(self, i: np.ndarray, j: np.ndarray, similarity: np.ndarray) -> None:
        if i.size:
            self.pending.append((i, j, similarity))
            self.pending_count += i.size
            self.count += i.size
        if self.pending_count >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        columns = [np.concatenate([block[k] for block in self.pending]).astype(dtype)
                   for k, (_, dtype) in enumerate(COLUMNS)]
        self.writer.write_table(self.pa.Table.from_arrays(columns, schema=self.schema))
        self.pending, self.pending_count = [], 0

    def finish(self):
        """Close the file; the columns stay in it (None: read them with pyarrow or SimilarPairs.blocks)."""
        self._flush()
        self.writer.close()
        os.replace(f"{self.path}.partial", self.path)
        return None, None, None

    def abort(self) -> None:
        self.writer.close()
        Path(f"{self.path}.partial").unlink(missing_ok=True)


def read_blocks(path: str, block_pairs: int):
    """(i, j, similarity) blocks of a pair file written by a join (.npz or .parquet)."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=block_pairs):
            yield tuple(batch.column(name).to_numpy() for name, _ in COLUMNS)
        return
    columns = [mapped_member(path, f"{name}.npy") for name, _ in COLUMNS]
    for start in range(0, columns[0].shape[0], block_pairs):
        yield tuple(np.asarray(column[start:start + block_pairs]) for column in columns)
