"""Layout 3's Lua scripts (featurehash.store.index.compact.scripts), pinned: stored indexes depend on what they
read and write, so a change must be deliberate (a new layout), never a side effect. Their behaviour in Redis is
tests/store/index/compact/test_steps.py and test_probe.py."""

from __future__ import annotations

import hashlib

from featurehash.store.index.compact import scripts

PINS = {"LOOKUP": "6d204384ee67cd469de25e852c41360d61ff6b57",
        "RECORDS": "7bcb53bbd578032486d7c2cb89bfabd305e885fa",
        "TAILS": "726657f2639add04514b0ba972a0d77b4d6dc32b",
        "PROBE_FETCH": "a007d7b4f9dc01670f50af3aa078a52e94337c42",
        "ALLOCATE": "f6aa9fdbd9bb53c7dbf39caef1e4f2e06dd19e7b",
        "WRITE": "96c0285924831c7adffcae2ab601923c2cfa056a"}


def test_the_scripts_are_pinned():
    assert {name: hashlib.sha1(getattr(scripts, name).encode()).hexdigest() for name in PINS} == PINS
