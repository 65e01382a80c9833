"""Everything Arena reads of kombu's Redis transport, which is not kombu's public API: the
names of its keys and the JSON layout of the messages it keeps there. When kombu changes
either, this module (and tests/integration/test_broker_layout.py, which says what changed)
is the one place to follow it.

Kombu's keys (unprefixed): each queue is a list named after it (`cpu`, `gpu`; priorities
above 0 would add `{queue}\\x06\\x16{n}` lists, which Arena never uses); a message taken by a
worker and not yet acknowledged (acks_late) is in the `unacked` hash, delivery tag ->
JSON [message, exchange, routing key], and in the `unacked_index` sorted set, delivery tag ->
when it was delivered. A message is the JSON kombu published: `headers.task` names the task,
`body` is base64 of Celery's protocol 2 body [args, kwargs, embed].

No Celery or kombu import here: the CLI reads through this module without loading them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from contextlib import suppress
from typing import Any, NamedTuple

QUEUES = ("cpu", "gpu")  # Arena's queues (tasks.app routes to them)
UNACKED, UNACKED_INDEX = "unacked", "unacked_index"  # kombu's redis transport defaults
CHUNK_TASK = "arena.run_chunk"
# What an interrupted embedded run leaves in the broker: queued and unacknowledged messages.
LEFT_BEHIND = (*(f"{queue}*" for queue in QUEUES), f"{UNACKED}*")


class DeliveredChunk(NamedTuple):
    """A run_chunk message delivered to a worker and not acknowledged yet."""

    batch_id: str
    chunk_id: str
    units: int
    queue: str


def queue_key(queue: str) -> str:
    """The list that holds the queue's waiting messages (priority 0: all of Arena's)."""
    return queue


def queue_lengths(client: Any, queues: Iterable[str]) -> dict[str, int]:
    """Messages waiting in each queue: one LLEN each."""
    return {queue: int(client.llen(queue_key(queue))) for queue in queues}


def delivered_before(client: Any, cutoff: float) -> list[tuple[str, float]]:
    """(delivery tag, delivered at) of each unacknowledged message delivered by `cutoff`."""
    tags = client.zrangebyscore(UNACKED_INDEX, "-inf", cutoff, withscores=True)
    return [(str(tag), float(at)) for tag, at in tags]


def delivered_chunk(client: Any, tag: str) -> DeliveredChunk | None:
    """The chunk an unacknowledged message carries (None: gone, or not a chunk of ours)."""
    return chunk_of_delivery(client.hget(UNACKED, tag))


def chunks_in_messages(client: Any, batch_id: str) -> set[str]:
    """Ids of the batch's chunks that a message carries: delivered (unacknowledged) or queued."""
    found = set()
    for raw in client.hvals(UNACKED):
        chunk = chunk_of_delivery(raw)
        if chunk and chunk.batch_id == batch_id:
            found.add(chunk.chunk_id)
    for queue in QUEUES:
        for raw in client.lrange(queue_key(queue), 0, -1):
            with suppress(ValueError, TypeError):
                args = chunk_args(json.loads(raw))
                if args and args[0] == batch_id:
                    found.add(args[1])
    return found


def chunk_of_delivery(raw: str | bytes | None) -> DeliveredChunk | None:
    """The chunk of an `unacked` hash value, else None."""
    if raw is None:
        return None
    try:
        message, _, routing_key = json.loads(raw)
    except (ValueError, TypeError):
        return None
    args = chunk_args(message)
    return DeliveredChunk(args[0], args[1], args[2], str(routing_key)) if args else None


def chunk_args(message: Any) -> tuple[str, str, int] | None:
    """(batch, chunk, number of units) of a run_chunk message as kombu stores it, else None."""
    try:
        if message.get("headers", {}).get("task") != CHUNK_TASK:
            return None
        args = json.loads(base64.b64decode(message["body"]))[0]  # protocol 2: [args, kwargs, …]
        return str(args[0]), str(args[1]), len(args[2])
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None  # not a message of ours, or another kombu format: left to kombu


def restore(connection: Any, tag: str) -> None:
    """Put an unacknowledged message back at the front of its queue, the way kombu does after
    the visibility timeout. `connection`: a kombu connection to the broker."""
    connection.default_channel.qos.restore_by_tag(tag, leftmost=False)


def forget_messages(client: Any) -> None:
    """Delete every queued and unacknowledged message (LEFT_BEHIND)."""
    keys = [key for pattern in LEFT_BEHIND for key in client.scan_iter(pattern)]
    if keys:
        client.delete(*keys)
