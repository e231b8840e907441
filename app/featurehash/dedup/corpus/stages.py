"""A run's working directory, its stages and their clocks. Each stage writes its output under the work directory
and then a marker (`<stage>.done`, JSON of its figures); a run finding the marker reuses the output, so an
interrupted run started again resumes after the last finished stage (the read stage per input file) and gives
the same output. A fingerprint of the inputs and of every option that changes the result is stored with the
work directory: a run with other inputs or options never reuses it."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import time
from pathlib import Path

from ...maps.errors import InputError

WORK = "_work"
OUTPUTS = ("summary.json", "duplicates.parquet")


def peak_rss() -> int:
    """Bytes: this process's high-water resident set (VmHWM; ru_maxrss where /proc is absent)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss(field: str = "VmRSS") -> int:
    """Bytes resident now (VmRSS, or RssAnon: the anonymous part; 0 where /proc is absent)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class AnonymousPeak:
    """The highest anonymous resident set (RssAnon) seen, sampled every `every` seconds by a daemon thread. The
    kernel keeps no high-water mark of it, and VmHWM also counts the pages of memory-mapped spill files read
    back (file-backed, dropped by the kernel under pressure), which is not memory the run holds."""

    def __init__(self, every: float = 0.05):
        import threading

        self.peak, self.every, self._stop = current_rss("RssAnon"), every, threading.Event()
        self.stage_peak = self.peak
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        """One reading now; a stage's end takes one too, as the watch thread can be kept off the GIL (a
        compile in another thread) for the whole of a short stage."""
        now = current_rss("RssAnon")
        self.peak, self.stage_peak = max(self.peak, now), max(self.stage_peak, now)

    def stage(self) -> int:
        """Start a stage's own peak (the running one hides a later stage's growth under an earlier
        stage's peak); the anonymous bytes held as it starts."""
        now = current_rss("RssAnon")
        self.stage_peak = now
        return now

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, current_rss("RssAnon"))


def fingerprint(files, options: dict) -> str:
    """What the output depends on: each input's path, size and modification time (where it can be read
    cheaply) and the options."""
    described = []
    for f in files:
        try:
            stat = os.stat(f.path)
            described.append([f.path, stat.st_size, stat.st_mtime_ns])
        except OSError:
            described.append([f.path])
    text = json.dumps({"files": described, "options": options}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Workdir:
    """`<output>/_work`: the stages' outputs and markers. Opening it settles what may be overwritten."""

    def __init__(self, output: str, print_: str, force: bool):
        self.output, self.path = Path(output), Path(output) / WORK
        self.resumed = False
        if self.output.exists() and not self.output.is_dir():
            raise InputError(output, "exists and is not a folder")
        if force:
            self.clear()
        elif self.output.exists():
            stored = self.path / "fingerprint"
            if (self.output / "summary.json").exists():
                raise InputError(output, "already holds a deduplicated corpus; pass --force to overwrite it")
            if stored.exists() and stored.read_text() == print_:
                self.resumed = True
            elif stored.exists():
                raise InputError(output, "holds an unfinished run of other inputs or options; pass --force to "
                                         "start over")
            elif any(self.output.iterdir()):
                raise InputError(output, "is not empty; pass --force to write into it")
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "fingerprint").write_text(print_)

    def clear(self) -> None:
        """Remove what a run writes (shards, tables, summary, work), leaving other files alone."""
        if not self.output.is_dir():
            return
        shutil.rmtree(self.path, ignore_errors=True)
        for child in self.output.iterdir():
            if child.name.startswith("part-") or child.name in OUTPUTS:
                child.unlink()

    def done(self, stage: str) -> dict | None:
        marker = self.path / f"{stage}.done"
        return json.loads(marker.read_text()) if marker.exists() else None

    def finish(self, stage: str, figures: dict) -> None:
        partial = self.path / f"{stage}.done.partial"
        partial.write_text(json.dumps(figures))
        os.replace(partial, self.path / f"{stage}.done")

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def abandon(self) -> None:
        """After a refused run: nothing finished is worth resuming, so leave the folder as it was found."""
        if not any(self.path.glob("*.done")):
            self.remove()
            if self.output.is_dir() and not any(self.output.iterdir()):
                self.output.rmdir()


class Clock:
    """Wall and CPU seconds per stage (a reused stage reports the figures of the run that made it), and with a
    `memory` watch (AnonymousPeak) the anonymous peak reached by the end of each stage and the stage's own
    growth (its peak less what was held as it started)."""

    def __init__(self, memory: AnonymousPeak | None = None):
        self.stages: dict[str, dict] = {}
        self.memory = memory

    def start(self):
        held = self.memory.stage() if self.memory is not None else None
        return time.perf_counter(), time.process_time(), held

    def stop(self, stage: str, started, **extra) -> dict:
        wall, cpu, held = started
        figures = {"wall_s": round(time.perf_counter() - wall, 3), "cpu_s": round(time.process_time() - cpu, 3),
                   **extra}
        if self.memory is not None:
            self.memory.sample()
            figures["anonymous_peak_bytes"] = self.memory.peak
            # what the stage itself added on top of what it was handed
            figures["stage_anonymous_growth_bytes"] = max(0, self.memory.stage_peak - held)
        self.stages[stage] = figures
        return figures

    def reused(self, stage: str, figures: dict) -> None:
        self.stages[stage] = {**figures, "reused": True}


def bar(iterable, progress: bool, what: str):
    """A stage's progress bar over `iterable` (tqdm), or the iterable itself."""
    if not progress:
        return iterable
    from tqdm import tqdm
    return tqdm(iterable, desc=f"dedup: {what}")
