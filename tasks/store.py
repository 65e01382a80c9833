"""Everything Arena keeps in Redis (keys in tasks/keys.py), behind one class. Its parts, one per
kind of record: tasks/store_batches.py, store_results.py, store_boards.py, store_flight.py,
store_sharing.py (how a pool is shared), store_teams.py.
Only the Store and tasks/broker.py (kombu's own keys) talk to Redis."""

from __future__ import annotations

from collections.abc import Iterable

from tasks import broker
from tasks.records import (
    FINISHED,
    BatchInfo,
    BatchStatus,
    LeaderboardRow,
    as_entries,
    by_board,
)
from tasks.store_batches import BATCH_REF, UnitCounts
from tasks.store_boards import Boards
from tasks.store_flight import InFlight
from tasks.store_results import ChunkStart, GroupChange, SaveReply, UnitResults
from tasks.store_sharing import Sharing
from tasks.store_teams import TeamRecords

__all__ = [
    "BATCH_REF",
    "FINISHED",
    "BatchInfo",
    "BatchStatus",
    "ChunkStart",
    "GroupChange",
    "LeaderboardRow",
    "SaveReply",
    "Store",
    "UnitCounts",
    "as_entries",
    "by_board",
]


class Store(Boards, UnitResults, InFlight, Sharing, TeamRecords):
    def ping(self) -> None:
        """Raises redis-py's error when Redis does not answer."""
        self.r.ping()

    def queue_lengths(self, queues: Iterable[str]) -> dict[str, int]:
        """Chunks waiting for a worker in each queue: the broker's messages, and the chunks
        its pool holds back until a slot frees (tasks/fair_share.py; one LLEN each)."""
        queues = list(queues)
        in_broker = broker.queue_lengths(self.r, queues)
        with self.r.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.llen(self.keys.pool_backlog(queue))
            held = pipe.execute()
        return {q: in_broker[q] + int(n) for q, n in zip(queues, held, strict=True)}

    def write_probe(self) -> None:
        """Write one short-lived key: raises redis-py's error when Redis refuses writes."""
        self.r.set(self.keys.write_probe(), "1", px=1000)

    # -- schedules (tasks/schedules.py) ----------------------------------------------------------
    def schedule_entries(self) -> dict[str, str]:
        """Schedule name -> its entry's JSON."""
        return dict(self.r.hgetall(self.keys.schedules()))

    def put_schedule(self, name: str, entry_json: str) -> None:
        self.r.hset(self.keys.schedules(), name, entry_json)

    def drop_schedule(self, name: str) -> bool:
        return bool(self.r.hdel(self.keys.schedules(), name))

    def claim_schedule(self, name: str, slot: str, ttl_s: int) -> bool:
        """True for the one scheduler that fires `name` at `slot` (the claim lasts `ttl_s`)."""
        key = self.keys.schedule_claim(name, slot)
        return bool(self.r.set(key, "fired", nx=True, ex=ttl_s))
