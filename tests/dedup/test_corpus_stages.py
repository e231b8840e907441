"""featurehash.dedup.corpus.stages: what an output folder allows (resume, refuse, --force), stage markers."""

from __future__ import annotations

import pytest
from featurehash.dedup.corpus.files import CorpusFile
from featurehash.dedup.corpus.stages import Clock, Workdir, fingerprint, peak_rss
from featurehash.maps.errors import InputError


def test_fingerprint_follows_inputs_and_options(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text("{}\n")
    files = [CorpusFile(str(path), "jsonl", None)]
    first = fingerprint(files, {"threshold": 0.7})
    assert first == fingerprint(files, {"threshold": 0.7}) != fingerprint(files, {"threshold": 0.8})
    path.write_text('{"text": "changed"}\n')
    assert fingerprint(files, {"threshold": 0.7}) != first


def test_resume_refuse_and_force(tmp_path):
    out = tmp_path / "out"
    work = Workdir(str(out), "print-1", force=False)
    work.finish("read-00000", {"records": 3})
    again = Workdir(str(out), "print-1", force=False)
    assert again.resumed and again.done("read-00000") == {"records": 3} and again.done("near") is None
    with pytest.raises(InputError, match="other inputs or options"):
        Workdir(str(out), "print-2", force=False)
    (out / "summary.json").write_text("{}")
    (out / "part-00000.jsonl").write_text("")
    (out / "mine.txt").write_text("kept")
    with pytest.raises(InputError, match="--force"):
        Workdir(str(out), "print-1", force=False)
    fresh = Workdir(str(out), "print-2", force=True)
    assert not fresh.resumed and fresh.done("read-00000") is None
    assert sorted(p.name for p in out.iterdir()) == ["_work", "mine.txt"]


def test_clock_and_peak_rss():
    clock = Clock()
    clock.stop("read", clock.start(), files=2)
    clock.reused("near", {"wall_s": 1.0})
    assert clock.stages["read"]["files"] == 2 and clock.stages["near"]["reused"]
    assert peak_rss() > 10**6


# Both measure the process's anonymous RSS, which the other threads of a test worker (background compiles,
# engines' clients) move by tens of MiB: they run in a fresh interpreter of their own.
TRANSIENT = """
import json, time
import numpy as np
from featurehash.dedup.corpus.stages import AnonymousPeak, current_rss
watch = AnonymousPeak(every=0.01)
before = current_rss("RssAnon")
block = np.ones(64 * 2**20 // 8)   # 64 MiB touched, then freed
time.sleep(0.1)
del block
print(json.dumps({"before": before, "peak": watch.stop()}))
"""

STAGES = """
import json, time
import numpy as np
from featurehash.dedup.corpus.stages import AnonymousPeak, Clock
watch = AnonymousPeak(every=0.01)
clock = Clock(watch)
started = clock.start()
block = np.ones(96 * 2**20 // 8)   # an earlier stage's 96 MiB peak, freed before the next stage
time.sleep(0.1)
clock.stop("read", started)
del block
started = clock.start()
block = np.ones(32 * 2**20 // 8)
time.sleep(0.1)
clock.stop("near", started)
del block
watch.stop()
print(json.dumps(clock.stages))
"""


def _run_alone(script: str) -> dict:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_anonymous_peak_sees_a_transient_allocation():
    seen = _run_alone(TRANSIENT)
    assert seen["peak"] >= seen["before"] + 60 * 2**20


def test_a_stage_growth_is_its_own_under_an_earlier_higher_peak():
    stages = _run_alone(STAGES)
    near = stages["near"]
    assert stages["read"]["stage_anonymous_growth_bytes"] >= 90 * 2**20
    assert 28 * 2**20 <= near["stage_anonymous_growth_bytes"] < 80 * 2**20
    assert near["anonymous_peak_bytes"] >= stages["read"]["anonymous_peak_bytes"]
