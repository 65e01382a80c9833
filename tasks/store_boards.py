"""The Store's leaderboards: each board's rows, the protocol it holds, its version (which the
Store's cache of rows follows) and every agent's history (tasks/keys.py)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

import redis

from tasks.provenance import Provenance
from tasks.records import LeaderboardRow, by_board
from tasks.store_batches import BatchRecords
from tasks.workloads.base import LeaderboardEntry, Reduction


class Boards(BatchRecords):
    def __init__(self, client: redis.Redis, prefix: str = "arena:") -> None:
        super().__init__(client, prefix)
        # Board name -> (its version, its rows): a board changes only when a batch publishes
        # to it, which moves its version (_publish), so a read that finds the version it cached
        # costs one GET (`arena api` reads the same boards over and over).
        self._boards: dict[str, tuple[str, list[LeaderboardRow]]] = {}

    def leaderboard_protocol(self, name: str) -> str | None:
        value: str | None = self.r.get(self.keys.board_protocol(name))
        return value

    def claim_leaderboard(self, name: str, protocol: str) -> str:
        """The board's protocol, set to `protocol` if the board has none yet — atomically, so two
        specs submitted back to back cannot both claim an empty board."""
        key = self.keys.board_protocol(name)
        self.r.set(key, protocol, nx=True)
        return str(self.r.get(key))

    def finish_batch(
        self,
        batch_id: str,
        reduction: Reduction,
        boards: dict[str, str],
        provenance: Provenance,
        entry_provenance: dict[str, dict[str, Any]],
    ) -> None:
        """Summary, leaderboard entries with their provenance, history and the done mark: one
        MULTI/EXEC. Each entry goes to its own board (LeaderboardEntry.board; the first board
        by default)."""
        now = time.time()
        with self.r.pipeline(transaction=True) as pipe:
            for board, entries in by_board(reduction.entries, boards).items():
                self._publish(pipe, batch_id, board, boards[board], entries, entry_provenance, now)
                for entry in entries:  # history keeps every evaluation
                    point = {"batch": batch_id, "score": entry.score, "at": now}
                    pipe.zadd(self.keys.board_history(board, entry.agent), {json.dumps(point): now})
            pipe.hset(
                self.keys.batch(batch_id),
                mapping={
                    "summary": json.dumps(reduction.summary),
                    "entries": json.dumps([e.model_dump(mode="json") for e in reduction.entries]),
                    "entry_provenance": json.dumps(entry_provenance),
                    "status": "done",
                    "finished_at": now,
                    "provenance": provenance.model_dump_json(),
                },
            )
            pipe.srem(self.keys.running(), batch_id)
            pipe.execute()

    def republish(self, batch_id: str) -> None:
        """A finished batch submitted again (same spec, same agents: nothing to run) is again
        the agents' latest evaluation: its entries go back on its boards, with no new history
        point (nothing was evaluated anew)."""
        info = self.batch(batch_id)
        if info is None or info.status != "done" or not info.boards:
            return
        raw = self.r.hget(self.keys.batch(batch_id), "entry_provenance")
        provenance = json.loads(raw) if raw else {}
        now = time.time()
        with self.r.pipeline(transaction=True) as pipe:
            for board, entries in by_board(info.entries, info.boards).items():
                self._publish(pipe, batch_id, board, info.boards[board], entries, provenance, now)
            pipe.execute()

    def _publish(
        self,
        pipe: Any,
        batch_id: str,
        board: str,
        protocol: str,
        entries: Sequence[LeaderboardEntry],
        entry_provenance: dict[str, dict[str, Any]],
        now: float,
    ) -> None:
        """The agent's latest evaluation under the board's protocol replaces its entry."""
        pipe.set(self.keys.board_protocol(board), protocol)
        pipe.sadd(self.keys.leaderboards(), board)
        # A new version in the same MULTI/EXEC: rows a Store kept of the board are stale. A
        # random token, never a counter: a board deleted and filled again cannot repeat one.
        pipe.set(self.keys.board_version(board), uuid.uuid4().hex)
        for entry in entries:
            row_provenance = {
                **entry_provenance.get(entry.agent, {}),
                "protocol_fingerprint": protocol,
            }
            pipe.zadd(self.keys.board(board), {entry.agent: entry.score})
            pipe.hset(
                self.keys.board_entry(board, entry.agent),
                mapping={
                    "score": entry.score,
                    "stats": json.dumps(entry.stats),
                    "batch": batch_id,
                    "updated_at": now,
                    "provenance": json.dumps(row_provenance),
                },
            )

    def leaderboard(self, name: str, limit: int | None = None) -> list[LeaderboardRow]:
        """The board's rows, best score first (the first `limit` of them). Rows are kept per
        Store until the board's version moves (a batch published to it): a repeated read costs
        one GET (docs/performance.md); their stats and provenance must not be modified."""
        version: str | None = self.r.get(self.keys.board_version(name))
        cached = self._boards.get(name)
        if version is not None and cached is not None and cached[0] == version:
            return cached[1][:limit]
        end = -1 if limit is None else limit - 1
        agents: list[str] = self.r.zrevrange(self.keys.board(name), 0, end)
        with self.r.pipeline() as pipe:  # MULTI/EXEC: the rows and the version they belong to
            pipe.get(self.keys.board_version(name))
            for agent in agents:
                pipe.hgetall(self.keys.board_entry(name, agent))
            read_version, *entries = pipe.execute()
        rows = [_row(agent, dict(raw)) for agent, raw in zip(agents, entries, strict=True)]
        # Unchanged since the first GET: no batch published in between, so `agents` and the
        # rows are that version's.
        if version is not None and read_version == version and limit is None:
            self._boards[name] = (version, rows)
        return rows[:limit]

    def leaderboard_names(self) -> list[str]:
        return sorted(self.r.smembers(self.keys.leaderboards()))

    def history(self, name: str, agent: str) -> list[dict[str, Any]]:
        points = self.r.zrange(self.keys.board_history(name, agent), 0, -1)
        return [json.loads(p) for p in points]


def _row(agent: str, data: dict[str, str]) -> LeaderboardRow:
    return LeaderboardRow(
        agent=agent,
        score=float(data["score"]),
        stats=json.loads(data["stats"]),
        batch=data["batch"],
        updated_at=float(data["updated_at"]),
        provenance=json.loads(data.get("provenance", "{}")),
    )
