"""Arena settings: environment variables prefixed ARENA_ (docs/configuration.md)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ArenaSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ARENA_", extra="ignore")

    # redis://, rediss:// or unix:// URL of a shared Redis. Unset: `arena run` embeds one.
    redis_url: str | None = None
    # Where the embedded Redis keeps its data (leaderboards survive between runs).
    data_dir: Path = Path(".arena-data")
    key_prefix: str = "arena:"
    # Embedded mode: local worker processes (default: one per core).
    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    # Broker redelivery of an unacknowledged task; must exceed the longest chunk's time limit.
    visibility_timeout_s: float = Field(7200.0, gt=0)
    # How often each worker looks for units a dead worker left unacknowledged.
    restore_interval_s: float = Field(10.0, gt=0)
    # How long Celery keeps task results; must exceed the longest batch.
    result_expires_s: float = Field(7 * 24 * 3600.0, gt=0)
    # A chunk redelivered this many times (its worker died each time) becomes error results.
    max_deliveries: int = Field(3, ge=1)


def celery_url(redis_url: str) -> str:
    """Celery/kombu spell a unix socket redis+socket://; redis-py spells it unix://."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url.removeprefix("unix://")
    return redis_url
