"""Band keys past memory: hash partitions on disk, grouped one partition at a time.

Each row's L band keys are in two places:
- a row -> keys map (`keys.hash_collection`: in memory, or an (n, L) uint64 memory-mapped file when the
  keys pass their share of the budget): what the "first shared band" rule reads (a pair
  found in band b is kept only if its rows share no band b' < b, `candidates.first_shared_band`), so each
  candidate is still verified once, exactly as in memory, and the rule needs no set of pairs: it is a
  function of the pair and the band alone, whatever order the partitions come in;
- records (key, row * L + band), 16 bytes, written from the keys (read by blocks of rows once the
  collection is hashed, as its size is then known) to one file per (band range, partition), the
  partition being the key's top `log2(partitions)` bits. Equal keys of a band land in the same file, so
  grouping a file alone finds every bucket of its bands in that key range.
A file is then loaded, sorted by (band, row), and each band's keys grouped by `candidates.self_pairs` /
`cross_pairs` (rows ascending, so i < j holds as in memory): the same candidates, band by band.

The partitions are planned before any record is written, from n, L and the budget (`plan_spill`): a record costs about
`RECORD_WORK` bytes while its file is grouped (the record, the sort order, the gathered keys and rows), and
the files are made small enough that one of them takes at most half the budget. Time: one write and one
read of 16 L (n_x + n_y) bytes plus a sort per file; the keys map adds 8 L n bytes of disk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..maps.mapped_pages import mapped_buffers, release
from . import candidates

RECORD = np.dtype([("key", "<u8"), ("tag", "<i8")])
RECORD_WORK = 64      # bytes of memory per record while its partition is grouped
MAX_PARTITIONS = 256  # files per band range; beyond, bands are split into more ranges


@dataclass(frozen=True)
class SpillPlan:
    partitions: int                             # a power of two: the key's top bits pick the file
    band_ranges: tuple[tuple[int, int], ...]    # [start, stop) of the bands sharing a set of files

    @property
    def files(self) -> int:
        return self.partitions * len(self.band_ranges)


def plan_spill(n_rows: int, bands: int, budget: float) -> SpillPlan:
    """Partitions and band ranges so that one file's records take <= budget / 2 while grouped."""
    units = max(1, math.ceil(n_rows * bands * RECORD_WORK / max(1.0, budget / 2)))
    partitions = min(MAX_PARTITIONS, 1 << (units - 1).bit_length())
    ranges = min(bands, math.ceil(units / partitions))
    step = math.ceil(bands / ranges)
    return SpillPlan(partitions, tuple((start, min(bands, start + step)) for start in range(0, bands, step)))


class BandKeySpill:
    """The band keys of one or two collections ("x", "y"), spilled as planned, in `directory`."""

    def __init__(self, directory: Path, plan: SpillPlan, bands: int):
        self.directory, self.plan, self.bands = Path(directory), plan, bands
        self.shift = np.uint64(64 - (plan.partitions.bit_length() - 1))

    def add_all(self, side: str, keys: np.ndarray, chunk_rows: int) -> None:
        """All keys (L, n) of a collection (in memory or memory-mapped), read by blocks of rows."""
        buffers = mapped_buffers(keys)   # memory-mapped keys: read once, their pages handed back as read
        for start in range(0, keys.shape[1], chunk_rows):
            self.add(side, start, np.ascontiguousarray(keys[:, start:start + chunk_rows]))
            release(buffers)

    def add(self, side: str, start: int, chunk_keys: np.ndarray) -> None:
        """Chunk keys (L, c) of rows start .. start + c - 1."""
        count = chunk_keys.shape[1]
        rows = np.arange(start, start + count, dtype=np.int64)
        for number, (first, stop) in enumerate(self.plan.band_ranges):
            records = np.empty((stop - first, count), dtype=RECORD)
            records["key"] = chunk_keys[first:stop]
            records["tag"] = rows[None, :] * self.bands + np.arange(first, stop, dtype=np.int64)[:, None]
            records = records.ravel()
            if self.plan.partitions == 1:
                self._append(side, number, 0, records)
                continue
            part = (records["key"] >> self.shift).astype(np.int64)
            order = np.argsort(part, kind="stable")
            bounds = np.concatenate(([0], np.cumsum(np.bincount(part, minlength=self.plan.partitions))))
            records = records[order]
            for partition in np.flatnonzero(np.diff(bounds)):
                self._append(side, number, partition, records[bounds[partition]:bounds[partition + 1]])

    def candidate_blocks(self, self_join: bool, block_pairs: int, bar=lambda items: items):
        """(band, i, j) blocks of candidate pairs (before the first-shared-band rule), file by file."""
        units = [(number, partition) for number in range(len(self.plan.band_ranges))
                 for partition in range(self.plan.partitions)]
        for number, partition in bar(units):
            x = self._grouped("x", number, partition)
            y = x if self_join else self._grouped("y", number, partition)
            for band, (keys_x, rows_x) in x.items():
                if self_join:
                    for a, b in candidates.self_pairs(keys_x, block_pairs):
                        yield band, rows_x[a], rows_x[b]
                elif band in y:
                    keys_y, rows_y = y[band]
                    for a, b in candidates.cross_pairs(keys_x, keys_y, block_pairs):
                        yield band, rows_x[a], rows_y[b]

    def _path(self, side: str, number: int, partition: int) -> Path:
        return self.directory / f"{side}-r{number}-p{partition}.rec"

    def _append(self, side: str, number: int, partition: int, records: np.ndarray) -> None:
        with open(self._path(side, number, partition), "ab") as file:
            records.tofile(file)

    def _grouped(self, side: str, number: int, partition: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """band -> (keys, rows) of one file, rows ascending within each band."""
        path = self._path(side, number, partition)
        if not path.exists():
            return {}
        records = np.fromfile(path, dtype=RECORD)
        band, row = np.divmod(records["tag"], self.bands)[::-1]
        order = np.lexsort((row, band))
        keys, row, band = records["key"][order], row[order], band[order]
        del records, order
        present, starts = np.unique(band, return_index=True)
        stops = np.append(starts[1:], band.size)
        return {int(b): (keys[lo:hi], row[lo:hi]) for b, lo, hi in zip(present, starts, stops)}
