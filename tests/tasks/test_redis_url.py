"""ARENA_REDIS_URL's forms (tasks/redis_url.py): one Redis, or Sentinels in kombu's form."""

from __future__ import annotations

import pytest

from tasks.app import app, configure
from tasks.redis_url import parse_sentinels, transport_options
from tasks.settings import ArenaSettings, load_settings
from tasks.validation import InputError

SENTINELS = "sentinel://:pw@10.0.0.1:26379/2;sentinel://:pw@10.0.0.2:26380/2"


def test_sentinels_are_read_as_kombu_reads_them():
    address = parse_sentinels(SENTINELS)
    assert address.sentinels == [("10.0.0.1", 26379), ("10.0.0.2", 26380)]
    assert (address.db, address.password) == (2, "pw")
    options = transport_options(SENTINELS, "arena")
    assert options["master_name"] == "arena"
    assert options["sentinel_kwargs"]["password"] == "pw"  # the Sentinels' requirepass
    assert transport_options("redis://h:1/0", "arena") == {}


def test_celery_is_pointed_at_the_sentinels():
    before = dict(app.conf.changes)
    try:
        configure(ArenaSettings(redis_url=SENTINELS, redis_master="main"))
        assert app.conf.broker_url == SENTINELS and app.conf.result_backend == SENTINELS
        assert app.conf.broker_transport_options["master_name"] == "main"
        assert app.conf.result_backend_transport_options["master_name"] == "main"
    finally:
        app.conf.changes.clear()
        app.conf.update(before)  # the app is the process's: as it was for other tests


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("sentinel://10.0.0.1", "part 1 ('10.0.0.1') must name host:port"),
        ("sentinel://h:1;redis://h:2", "part 2 ('redis://h:2') does not start with sentinel://"),
        ("sentinel://h:1/x", "the db ('x') must be a number"),
        ("http://h:1", "must start with redis://, rediss://, unix:// or sentinel://"),
    ],
)
def test_a_bad_url_is_one_line_naming_the_setting(monkeypatch, url, said):
    monkeypatch.setenv("ARENA_REDIS_URL", url)
    with pytest.raises(InputError, match="ARENA_REDIS_URL") as raised:
        load_settings()
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_the_wait_settings_are_bounded(monkeypatch):
    monkeypatch.setenv("ARENA_REDIS_WAIT_REPLICAS", "-1")
    with pytest.raises(InputError, match="ARENA_REDIS_WAIT_REPLICAS"):
        load_settings()
