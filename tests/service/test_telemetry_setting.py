"""FastAPI's native OpenTelemetry is off unless FEATUREHASH_OPENTELEMETRY asks for it."""

from __future__ import annotations

import inspect

import pytest
from fastapi import FastAPI

from featurehash.service.config import Settings
from featurehash.service.app import create_app

NATIVE = "telemetry" in inspect.signature(FastAPI).parameters


@pytest.mark.skipif(not NATIVE, reason="this FastAPI has no native telemetry")
@pytest.mark.parametrize("asked", [False, True])
def test_native_telemetry_follows_the_setting(asked):
    app = create_app(Settings(REDIS_URL="redis://127.0.0.1:1/0", opentelemetry=asked))
    config = app._telemetry
    assert bool(config["tracing"] or config["metrics"] or config["logs"]) is asked


def test_the_setting_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("FEATUREHASH_OPENTELEMETRY", "true")
    assert Settings().opentelemetry is True
    monkeypatch.delenv("FEATUREHASH_OPENTELEMETRY")
    assert Settings().opentelemetry is False
