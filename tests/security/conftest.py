"""The API's and the integration suite's fixtures (a real Redis, an API client on it), shared
with the adversarial tests."""

from tests.api.conftest import api_settings, client
from tests.integration.conftest import db, redis_url

__all__ = ["api_settings", "client", "db", "redis_url"]
