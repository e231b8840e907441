"""The deduplicated corpus written in the input's format, as shards `part-NNNNN<suffix>` of at most `shard_rows`
records each: JSON Lines and plain text lines as they were read (every field, byte for byte), CSV rows under the
input's header, Parquet rows with the input's schema (whole rows taken from the input, every column). Shards are
compressed as the input was (gzip, zstd, ...). A shard is written under `.partial` and renamed once closed."""

from __future__ import annotations

import csv
import io
import os

from .files import CorpusFile, open_output


class ShardWriter:
    """Records appended in order; a new shard every `shard_rows` records (and when a Parquet schema changes)."""

    def __init__(self, folder: str, like: CorpusFile, shard_rows: int, prefix: str = "part"):
        self.folder, self.like, self.shard_rows, self.prefix = folder, like, shard_rows, prefix
        self.shards: list[str] = []
        self.count = self.in_shard = 0
        self.stream = self.csv = self.parquet = None
        self.header = self.schema = None

    def _name(self) -> str:
        return os.path.join(self.folder, f"{self.prefix}-{len(self.shards):05d}{self.like.suffix}")

    def _open(self) -> None:
        self.shards.append(self._name())
        partial = f"{self.shards[-1]}.partial"
        if self.like.format == "parquet":
            import pyarrow.parquet as pq

            self.parquet = pq.ParquetWriter(partial, self.schema, compression="zstd")
        else:
            self.stream = open_output(partial, self.like.compression)
            if self.like.format == "csv":
                self.text = io.TextIOWrapper(self.stream, encoding="utf-8", newline="")
                self.csv = csv.writer(self.text)
                self.csv.writerow(self.header)
        self.in_shard = 0

    def _close(self) -> None:
        if self.parquet is not None:
            self.parquet.close()
        elif self.csv is not None:
            self.text.close()
        elif self.stream is not None:
            self.stream.close()
        if self.shards and (self.parquet or self.stream):
            os.replace(f"{self.shards[-1]}.partial", self.shards[-1])
        self.stream = self.csv = self.parquet = None

    def _room(self, header=None, schema=None) -> None:
        changed = (header is not None and header != self.header) or (schema is not None and schema != self.schema)
        if self.in_shard >= self.shard_rows or changed or (self.stream is None and self.parquet is None):
            self._close()
            self.header = header if header is not None else self.header
            self.schema = schema if schema is not None else self.schema
            self._open()

    def lines(self, raws: list[bytes]) -> None:
        """JSON Lines / plain-text records: their raw lines, written a shard's share at a time."""
        done = 0
        while done < len(raws):
            self._room()
            share = raws[done:done + self.shard_rows - self.in_shard]
            self.stream.write(b"".join(raw if raw.endswith(b"\n") else raw + b"\n" for raw in share))
            self.in_shard += len(share)
            self.count += len(share)
            done += len(share)

    def rows(self, header: list[str], rows: list[list[str]]) -> None:
        for values in rows:
            self._room(header=header)
            self.csv.writerow(values)
            self.in_shard += 1
            self.count += 1

    def table(self, table) -> None:
        """Parquet rows, split across shards at `shard_rows`."""
        start = 0
        while start < table.num_rows:
            self._room(schema=table.schema)
            take = min(table.num_rows - start, self.shard_rows - self.in_shard)
            self.parquet.write_table(table.slice(start, take))
            start += take
            self.in_shard += take
            self.count += take

    def close(self) -> list[str]:
        self._close()
        return self.shards

    def abort(self) -> None:
        try:
            self._close()
        except Exception:   # noqa: BLE001, S110 - already failing; the partial shard is removed below
            pass
        for name in self.shards:
            for path in (name, f"{name}.partial"):
                if os.path.exists(path):
                    os.unlink(path)
