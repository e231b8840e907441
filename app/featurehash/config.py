"""Service settings, all from the environment (prefix FEATUREHASH_, plus REDIS_URL)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 2**20


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FEATUREHASH_", extra="ignore")

    # Unset: `featurehash serve` starts an embedded Redis persisting under data_dir.
    redis_url: str | None = Field(default=None, validation_alias=AliasChoices("REDIS_URL", "FEATUREHASH_REDIS_URL"))
    data_dir: Path = Path("data")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1)
    api_key: SecretStr | None = None
    key_prefix: str = "featurehash:"

    max_body_bytes: int = Field(default=64 * MIB, ge=1)
    max_batch_rows: int = Field(default=100_000, ge=1)
    map_cache_bytes: int = Field(default=512 * MIB, ge=0)
    max_map_bytes: int = Field(default=1024 * MIB, ge=1)
    # GCWS and binning: per-map table of random constants; past it they are made on demand.
    table_budget_bytes: int = Field(default=256 * MIB, ge=0)

    redis_timeout_seconds: float = Field(default=2.0, gt=0)
    retry_after_seconds: int = Field(default=1, ge=1)


@lru_cache
def get_settings() -> Settings:
    return Settings()
