"""Kombu's Redis layout, as tasks/broker.py reads it: a real Redis, a chunk message published
with Arena's own Celery configuration, taken by a real kombu consumer and left unacknowledged.
Kombu does not promise this layout (it is its transport's private state); when an upgrade
changes it, these tests say what changed, and tasks/broker.py is the one module to follow."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import redis
from celery import Celery
from kombu import Consumer, Exchange, Queue
from kombu.transport.redis import Channel

from tasks import broker
from tasks.app import configure
from tasks.liveness import orphans
from tasks.settings import ArenaSettings, celery_url
from tasks.store import Store
from tasks.units import chunk_signature
from tasks.workloads.base import Unit

CHANGED = "kombu's Redis transport changed its layout; follow it in tasks/broker.py: "


def _unit(batch_id: str, queue: str) -> Unit:
    return Unit(
        id=f"{batch_id}:a:i:0",
        batch_id=batch_id,
        workload="bandit",
        agent="a",
        item="i",
        episode=0,
        env_seed=1,
        agent_seed=2,
        queue=queue,  # type: ignore[arg-type]  # a QueueName
        time_limit_s=5.0,
        payload={},
    )


@pytest.fixture
def probe(redis_url: str) -> Iterator[Celery]:
    """A Celery app with tasks/app.py's configuration, pointed at the test's Redis (the
    process's own app is left as it was)."""
    with mock.patch("tasks.app.app") as fake:
        configure(ArenaSettings(redis_url=redis_url))
    app = Celery("arena-layout-probe", set_as_current=False)
    app.conf.update(dict(fake.conf.update.call_args.kwargs))
    app.conf.update(broker_url=celery_url(redis_url), result_backend=celery_url(redis_url))
    yield app
    app.close()


def _publish(app: Celery, batch_id: str, chunk_id: str, queue: str) -> None:
    """Arena's own chunk message (tasks/units.py's chunk_signature), sent through `app`."""
    message = chunk_signature(batch_id, chunk_id, [_unit(batch_id, queue)])
    app.send_task(message.task, args=message.args, kwargs=message.kwargs, **message.options)


def test_kombu_names_its_keys_as_arena_reads_them(probe: Celery) -> None:
    assert Channel.unacked_key == broker.UNACKED, (
        f"{CHANGED}the unacknowledged messages' hash is {Channel.unacked_key!r}, "
        f"not {broker.UNACKED!r}"
    )
    assert Channel.unacked_index_key == broker.UNACKED_INDEX, (
        f"{CHANGED}the delivery times' sorted set is {Channel.unacked_index_key!r}, "
        f"not {broker.UNACKED_INDEX!r}"
    )
    with probe.connection_for_read() as connection:
        channel = connection.default_channel
        for queue in broker.QUEUES:
            listed = channel._q_for_pri(queue, 0)
            assert listed == broker.queue_key(queue), (
                f"{CHANGED}queue {queue!r} is the list {listed!r}, not {broker.queue_key(queue)!r}"
            )
        assert (channel.unacked_key, channel.unacked_index_key) == (
            broker.UNACKED,
            broker.UNACKED_INDEX,
        ), f"{CHANGED}Arena's transport options rename kombu's keys"


def test_a_queued_message_is_found_where_arena_looks(probe: Celery, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    for queue in broker.QUEUES:
        _publish(probe, "b1", f"chunk-{queue}", queue)
    assert broker.queue_lengths(client, broker.QUEUES) == {q: 1 for q in broker.QUEUES}, (
        f"{CHANGED}a published message is not in its queue's list; keys now: {client.keys('*')}"
    )
    raw = client.lrange(broker.queue_key("cpu"), 0, -1)[0]
    assert broker.chunk_args(json.loads(raw)) == ("b1", "chunk-cpu", 1), (
        f"{CHANGED}a queued message's JSON is no longer headers.task + base64 body "
        f"[args, kwargs, embed]: {raw[:300]}"
    )
    assert broker.chunks_in_messages(client, "b1") == {"chunk-cpu", "chunk-gpu"}
    broker.forget_messages(redis.Redis.from_url(redis_url))  # as arena/embedded.py calls it
    assert broker.queue_lengths(client, broker.QUEUES) == {q: 0 for q in broker.QUEUES}


def test_a_delivered_unacknowledged_message_is_found_and_restored(
    probe: Celery, redis_url: str, db: Store
) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    _publish(probe, "b2", "chunk-0", "cpu")
    taken: list[Any] = []
    with probe.connection_for_read() as connection:
        queue = Queue("cpu", Exchange("cpu", type="direct"), routing_key="cpu")
        consumer = Consumer(
            connection.default_channel,
            queues=[queue],
            callbacks=[lambda _body, message: taken.append(message)],  # never acknowledged
            accept=["json"],
            no_ack=False,
        )
        with consumer:
            connection.drain_events(timeout=10)
        assert len(taken) == 1
        tag = str(taken[0].delivery_tag)
        delivered = broker.delivered_before(client, time.time() + 1)
        assert [t for t, _ in delivered] == [tag], (
            f"{CHANGED}a delivered message's tag is not in {broker.UNACKED_INDEX!r}: "
            f"{delivered}; keys now: {client.keys('*')}"
        )
        found = broker.delivered_chunk(client, tag)
        assert found == broker.DeliveredChunk("b2", "chunk-0", 1, "cpu"), (
            f"{CHANGED}{broker.UNACKED!r}[{tag}] is no longer JSON [message, exchange, routing "
            f"key]: {str(client.hget(broker.UNACKED, tag))[:300]}"
        )
        assert broker.chunks_in_messages(client, "b2") == {"chunk-0"}
        lost = orphans(db, 0.0, "b2", note=True)  # no heartbeat: its worker is gone
        assert [(o.tag, o.chunk_id, o.units, o.queue) for o in lost] == [(tag, "chunk-0", 1, "cpu")]
        broker.restore(connection, tag)  # what the watchdog does (tasks/units.py)
        assert client.hlen(broker.UNACKED) == 0, f"{CHANGED}restore_by_tag left it unacknowledged"
        assert broker.queue_lengths(client, ["cpu"]) == {"cpu": 1}, (
            f"{CHANGED}restore_by_tag did not put the message back in its queue's list"
        )


def test_forgetting_leaves_arena_s_own_keys(redis_url: str, db: Store) -> None:
    """An interrupted embedded run drops the broker's messages, never Arena's records."""
    client = redis.Redis.from_url(redis_url)
    client.rpush("cpu", "m")
    client.hset("unacked", "t", "m")
    client.zadd("unacked_index", {"t": 1.0})
    db.label_run("nightly", "b3")
    broker.forget_messages(client)
    assert sorted(client.keys("*")) == [db.keys.runs().encode()]
