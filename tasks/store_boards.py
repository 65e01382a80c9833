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

# A board's rows, one EVAL inside the publishing MULTI/EXEC. KEYS: the board, each entry's row,
# then (or not) each entry's history. ARGV: the batch id, the time, the number of entries N, N x
# (agent, score, stats, provenance), then N history points when KEYS has them. The same
# commands a client would send (a row's HSET, its score's ZADD, its history's ZADD) with the
# same values, in one command.
ROWS = """
local n = tonumber(ARGV[3])
for i = 1, n do
  local at = 3 + (i - 1) * 4
  redis.call('ZADD', KEYS[1], ARGV[at + 2], ARGV[at + 1])
  redis.call('HSET', KEYS[1 + i], 'score', ARGV[at + 2], 'stats', ARGV[at + 3],
    'batch', ARGV[1], 'updated_at', ARGV[2], 'provenance', ARGV[at + 4])
  if #KEYS > 1 + n then redis.call('ZADD', KEYS[1 + n + i], ARGV[2], ARGV[3 + 4 * n + i]) end
end
"""

ROWS_PER_EVAL = 10_000


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
        provenance_json = _dumped(entry_provenance)
        with self.r.pipeline(transaction=True) as pipe:
            for board, entries in by_board(reduction.entries, boards).items():
                protocol = boards[board]
                self._publish(pipe, batch_id, board, protocol, entries, provenance_json, now, True)
            pipe.hset(
                self.keys.batch(batch_id),
                mapping={
                    "summary": json.dumps(reduction.summary),
                    "entries": json.dumps([e.model_dump(mode="json") for e in reduction.entries]),
                    # json.dumps(entry_provenance), from the rows' own
                    "entry_provenance": _joined(provenance_json),
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
        provenance = _dumped(json.loads(raw) if raw else {})
        now = time.time()
        with self.r.pipeline(transaction=True) as pipe:
            for board, entries in by_board(info.entries, info.boards).items():
                protocol = info.boards[board]
                self._publish(pipe, batch_id, board, protocol, entries, provenance, now, False)
            pipe.execute()

    def _publish(
        self,
        pipe: Any,
        batch_id: str,
        board: str,
        protocol: str,
        entries: Sequence[LeaderboardEntry],
        entry_provenance: Dumped,
        now: float,
        history: bool,
    ) -> None:
        """The agent's latest evaluation under the board's protocol replaces its entry; with
        `history`, each entry is also a point of its agent's history. The rows are one EVAL
        (ROWS) in the caller's MULTI: a reducer's 1,000 entries were 3,000 commands to pack
        and as many replies to read, most of its time (docs/performance.md)."""
        pipe.set(self.keys.board_protocol(board), protocol)
        pipe.sadd(self.keys.leaderboards(), board)
        # A new version in the same MULTI/EXEC: rows a Store kept of the board are stale. A
        # random token, never a counter: a board deleted and filled again cannot repeat one.
        pipe.set(self.keys.board_version(board), uuid.uuid4().hex)
        for start in range(0, len(entries), ROWS_PER_EVAL):  # Redis takes 1M arguments
            part = entries[start : start + ROWS_PER_EVAL]
            keys, args = self._rows(batch_id, board, protocol, part, entry_provenance, now)
            if history:  # every evaluation is a point: publishing a batch again adds none
                for entry in part:
                    point = {"batch": batch_id, "score": entry.score, "at": now}
                    keys.append(self.keys.board_history(board, entry.agent))
                    args.append(json.dumps(point))
            pipe.eval(ROWS, len(keys), *keys, *args)

    def _rows(
        self,
        batch_id: str,
        board: str,
        protocol: str,
        entries: Sequence[LeaderboardEntry],
        entry_provenance: Dumped,
        now: float,
    ) -> tuple[list[str], list[Any]]:
        """ROWS' keys and arguments for `entries`, their values as redis-py would send them
        (a float is its repr)."""
        keys, args = [self.keys.board(board)], [batch_id, repr(now), len(entries)]
        for entry in entries:
            provenance, dumped = entry_provenance.get(entry.agent, ({}, "{}"))
            if provenance.get("protocol_fingerprint") != protocol:
                dumped = json.dumps({**provenance, "protocol_fingerprint": protocol})
            keys.append(self.keys.board_entry(board, entry.agent))
            args += [entry.agent, repr(entry.score), json.dumps(entry.stats), dumped]
        return keys, args

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


Dumped = dict[str, tuple[dict[str, Any], str]]  # agent -> (its provenance, that as JSON)


def _dumped(entry_provenance: dict[str, dict[str, Any]]) -> Dumped:
    """Each agent's provenance with its JSON, encoded once for its rows and the batch's record
    (a reducer's write of 1,000 entries spent a tenth of its time encoding it twice)."""
    return {agent: (p, json.dumps(p)) for agent, p in entry_provenance.items()}


def _joined(dumped: Dumped) -> str:
    """json.dumps of the provenance by agent, byte for byte, from each agent's JSON."""
    pairs = (f"{json.dumps(agent)}: {text}" for agent, (_, text) in dumped.items())
    return "{" + ", ".join(pairs) + "}"


def _row(agent: str, data: dict[str, str]) -> LeaderboardRow:
    return LeaderboardRow(
        agent=agent,
        score=float(data["score"]),
        stats=json.loads(data["stats"]),
        batch=data["batch"],
        updated_at=float(data["updated_at"]),
        provenance=json.loads(data.get("provenance", "{}")),
    )
