"""An output folder at an fsspec URL (s3://, gs://, memory://, ...). The run itself, its resumable work
directory included, happens in a local staging folder (`work_dir`, else one under the system's temporary
folder named by the run's fingerprint, so a run started again finds it and resumes); once it has finished, the
shards and duplicates.parquet are uploaded and summary.json last, so a summary at the URL means a whole
output. An output URL already holding a summary is refused unless `force` (which removes what a run writes
there first), as a local output folder is."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from ...maps.errors import InputError
from .stages import OUTPUTS


def is_url(output) -> bool:
    text = os.fspath(output)
    return "://" in text and not text.startswith("file://")


class RemoteOutput:
    def __init__(self, url: str, work_dir, force: bool):
        import fsspec

        self.url = url.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url)
        self.work_dir, self.force = work_dir, force
        if self.fs.exists(f"{self.root}/summary.json") and not force:
            raise InputError(url, "already holds a deduplicated corpus; pass --force to overwrite it")

    def staging(self, print_: str) -> str:
        """The local folder the run writes into."""
        if self.work_dir is not None:
            return os.fspath(self.work_dir)
        return os.path.join(tempfile.gettempdir(), f"featurehash-dedup-{print_[:16]}")

    def publish(self, local: str, summary: dict, keep_work: bool) -> dict:
        """Upload the finished run in `local`; the summary with the URL's names; the staging folder removed
        unless `keep_work`."""
        if self.force and self.fs.exists(self.root):
            for path in self.fs.ls(self.root, detail=False):
                name = path.rstrip("/").rsplit("/", 1)[-1]
                if name.startswith("part-") or name in OUTPUTS:
                    self.fs.rm(path, recursive=True)
        self.fs.makedirs(self.root, exist_ok=True)
        shards = []
        for shard in summary["shards"]:
            target = f"{self.root}/{Path(shard).name}"
            self.fs.put_file(shard, target)
            shards.append(f"{self.url}/{Path(shard).name}")
        self.fs.put_file(os.path.join(local, "duplicates.parquet"), f"{self.root}/duplicates.parquet")
        summary = {**summary, "shards": shards, "duplicates": f"{self.url}/duplicates.parquet",
                   "staged_in": None if not keep_work else local}
        with self.fs.open(f"{self.root}/summary.json", "w") as out:
            out.write(json.dumps(summary, indent=2))
        if not keep_work:
            shutil.rmtree(local, ignore_errors=True)
        return summary
