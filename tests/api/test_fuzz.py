"""Property-based fuzzing of the API from its OpenAPI schema (schemathesis), on a real Redis:
whatever a client sends, never a 500, and every answer is the one the schema documents.

schemathesis.pytest.from_fixture does not work with pytest 9, so the app is built at import
(it connects to Redis lazily) on a socket whose Redis the module's fixture starts."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from arena.embedded import start_redis, stop
from arena.web.app import create_app
from tasks.app import configure
from tasks.settings import ArenaSettings
from tests.api.conftest import AUTH, TOKEN

pytestmark = pytest.mark.integration

FOLDER = Path(tempfile.mkdtemp(prefix="arena-api-fuzz-"))
SETTINGS = ArenaSettings(
    redis_url=f"unix://{FOLDER}/redis.sock", data_dir=FOLDER / "data", api_tokens=TOKEN
)
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(SETTINGS))
# Schema-valid requests and invalid ones (wrong types, missing fields, bad queries) alike.
schema.config.generation.update(modes=list(GenerationMode))


@pytest.fixture(scope="module", autouse=True)
def fuzz_redis() -> Iterator[None]:
    server = start_redis(FOLDER, FOLDER / "redis.sock")
    configure(SETTINGS)  # other tests' apps pointed this process's Celery app elsewhere
    yield
    stop(server)
    shutil.rmtree(FOLDER, ignore_errors=True)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_answers_as_documented(case: schemathesis.Case) -> None:
    # A schema-valid spec may still be refused (422): its agents, items and params are checked
    # by the workload's own models, which no one JSON Schema of the body can express.
    case.call_and_validate(headers=AUTH, excluded_checks=[positive_data_acceptance])
