"""The `llm` agent against endpoints that fail (docs/alympics.md): `arena game benchmark --suite
alympics_smoke --agent llm:<behaviour>@<base_url>` in its own process, against the scripted
chat-completions server (tests/llm/chat_server.py: the model name picks the behaviour) over real
HTTP on the loopback; in one process and on an embedded cluster.

Every failure ends the same way: exit status 1 and one line on stderr (`arena: ...`, never a
traceback) that says why, within a bounded time, with nothing earned for the match sets that
failed, and the requests accounted as the server saw them.

alympics_smoke is 13 match sets, 87 moves: prisoners_dilemma 2 x 20 rounds, public_goods
4 x 10, auction 2 x 1, colonel_blotto 2 x 1, congestion 3 x 1. A match set is forfeit as soon as
more than half of its moves fault: 11 of 20, 6 of 10, 1 of 1, so an agent that never answers
usefully plays 2 x 11 + 4 x 6 + 7 x 1 = 53 moves before every match set is lost.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import arena
from tests.llm.chat_server import ChatServer

pytestmark = pytest.mark.integration

MATCH_SETS = 13
MOVES = 87
FORFEIT_MOVES = 53  # moves played until every match set is forfeit (module docstring)
SMOKE = ("game", "benchmark", "--suite", "alympics_smoke", "--output", "json")


def embedded_env(data_dir: Path) -> dict[str, str]:
    """No cluster named (an embedded one with --cluster), the data folder the test's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return {**env, "ARENA_DATA_DIR": str(data_dir)}


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    wall_s: float

    @property
    def out(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data

    def line(self) -> str:
        """The one line a failed run ends with (and nothing else on stderr, no traceback)."""
        assert self.code == 1, (self.code, self.stdout[-2000:], self.stderr[-2000:])
        assert "Traceback" not in self.stdout + self.stderr, self.stderr
        lines = self.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("arena: "), self.stderr
        return lines[0]

    def usage(self) -> dict[str, Any]:
        totals: dict[str, Any] = self.out["llm"]
        return totals

    def matches(self) -> list[dict[str, Any]]:
        matches: list[dict[str, Any]] = self.out["matches"]
        return matches


def benchmark(
    env: dict[str, str], model: str, base_url: str, *args: str, timeout: float = 120
) -> Run:
    started = time.monotonic()
    result = arena(*SMOKE, "--agent", f"llm:{model}@{base_url}", *args, env=env, timeout=timeout)
    return Run(result.returncode, result.stdout, result.stderr, time.monotonic() - started)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return embedded_env(tmp_path / "data")


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(retry_after=0.1) as chat:
        yield chat


def statuses(server: ChatServer) -> dict[int, int]:
    seen: dict[int, int] = {}
    for record in server.requests:
        seen[record.status] = seen.get(record.status, 0) + 1
    return seen


def assert_nothing_earned(run: Run) -> None:
    out = run.out
    assert out.get("composite_score", 0) == 0, out.get("composite_score")
    for category in out.get("categories", {}).values():
        assert category["score"] == 0, category
    matches = run.matches()
    assert len(matches) == MATCH_SETS
    assert all(m["status"] == "error" for m in matches), [m["status"] for m in matches]


def assert_forfeit(match: dict[str, Any]) -> None:
    """Its reason counts the faulted moves: more than half of the match set's."""
    moves = {"prisoners_dilemma": 20, "public_goods": 10}.get(match["item"].split("@")[0], 1)
    faulted = moves // 2 + 1
    assert match["reason"].startswith(
        f"AgentForfeit: {faulted} of {moves} moves faulted (forfeit: more than half)"
    ), match["reason"]
    assert match["llm"]["moves"] == faulted, match


# -- answers that cannot be used: re-asked, then a fault ---------------------------------------


@pytest.mark.parametrize("where", ["in-process", "cluster, 2 workers"])
def test_garbage_answers_are_reasked_then_forfeit(
    env: dict[str, str], server: ChatServer, where: str
) -> None:
    cluster = ("--cluster", "--workers", "2") if where.startswith("cluster") else ()
    run = benchmark(env, "garbage", server.base_url, *cluster)
    line = run.line()
    assert f"{MATCH_SETS} of {MATCH_SETS} units failed" in line, line
    assert "NoLegalAction: " in line and "(3 answers)" in line, line
    assert 'no JSON object with an "action"' in line, line
    assert_nothing_earned(run)
    for match in run.matches():
        assert_forfeit(match)
        usage = match["llm"]
        assert usage["requests"] == usage["moves"] * 3, usage  # the answer and 2 re-asks
        assert usage["reasks"] == usage["moves"] * 2, usage
        assert usage["failed_moves"] == usage["moves"], usage
    usage = run.usage()
    assert usage["moves"] == FORFEIT_MOVES
    assert usage["requests"] == usage["attempts"] == FORFEIT_MOVES * 3
    assert len(server.requests) == FORFEIT_MOVES * 3 and statuses(server) == {200: 159}
    assert run.wall_s < (60 if cluster else 20), run.wall_s


def test_illegal_answers_are_reasked_and_the_reason_names_the_action(
    env: dict[str, str], server: ChatServer
) -> None:
    run = benchmark(env, "illegal", server.base_url, "--llm", "reasks=1")
    line = run.line()
    assert "NoLegalAction: " in line and "(2 answers)" in line, line
    assert "'maybe'" in line, line
    assert_nothing_earned(run)
    for match in run.matches():
        assert_forfeit(match)
        usage = match["llm"]
        assert usage["requests"] == usage["moves"] * 2 and usage["reasks"] == usage["moves"]
        assert usage["failed_moves"] == usage["moves"], usage
    assert len(server.requests) == run.usage()["requests"] == FORFEIT_MOVES * 2
    # The re-ask says why, and the server gets the first answer back in the conversation.
    reask = next(r.body for r in server.requests if len(r.body["messages"]) == 3)
    assert reask["messages"][1] == {"role": "assistant", "content": '{"action": "maybe"}'}
    assert reask["messages"][2]["content"].startswith("Your answer could not be used: ")
    # What the user reads to fix the prompt: the action the game refused, in every match set's
    # reason (not only in the one-shot games', whose refusals are short enough to survive).
    unnamed = [m["reason"] for m in run.matches() if "maybe" not in m["reason"]]
    assert not unnamed, unnamed


# -- the endpoint refuses, is gone, or is slow: retried, then a fault, in bounded time ---------


def test_a_429_storm_is_retried_then_faults_and_never_hangs(
    env: dict[str, str], server: ChatServer
) -> None:
    run = benchmark(env, "rate-limited", server.base_url, "--llm", "retries=1", timeout=90)
    line = run.line()
    assert "ChatError: HTTP 429 after 2 attempt(s)" in line, line
    assert run.wall_s < 30, run.wall_s
    assert_nothing_earned(run)
    for match in run.matches():
        assert_forfeit(match)
        assert re.search(r"HTTP 429 after \d attempt|endpoint down", match["reason"]), match
    sent = len(server.requests)
    assert statuses(server) == {429: sent}
    # The process's circuit breaker for the endpoint: 3 moves asked (2 attempts each), then
    # one probe in ten moves, of one attempt.
    assert sent <= 3 * 2 + FORFEIT_MOVES // 10 + MATCH_SETS, sent
    usage = run.usage()
    assert usage["moves"] == FORFEIT_MOVES and usage["requests"] == 0
    # Every move ended with no legal action; every HTTP request sent is counted.
    assert (usage["failed_moves"], usage["attempts"]) == (usage["moves"], sent), (usage, sent)


def test_a_transient_429_is_retried_and_costs_nothing(env: dict[str, str], tmp_path: Path) -> None:
    with ChatServer(retry_after=0.1, fail_first=2) as server:
        run = benchmark(env, "rate-limited", server.base_url)
    assert run.code == 0, run.stderr
    assert statuses(server) == {429: 2, 200: MOVES}
    assert run.out["composite_score"] > 0
    for match in run.matches():
        assert match["status"] == "ok" and match["measures"]["faults"] == 0, match
    retried = [m for m in run.matches() if m["llm"]["attempts"] > m["llm"]["requests"]]
    assert len(retried) == 1 and retried[0]["llm"]["attempts"] == retried[0]["llm"]["requests"] + 2
    usage = run.usage()
    assert usage["requests"] == MOVES and usage["attempts"] == MOVES + 2
    assert usage["failed_moves"] == 0 and usage["reasks"] == 0


def test_a_dead_endpoint_fails_in_seconds(env: dict[str, str], server: ChatServer) -> None:
    """With the default retries (3): the circuit breaker stops asking a dead endpoint."""
    base_url = server.base_url
    server.stop()
    run = benchmark(env, "tit-for-tat", base_url, timeout=150)
    line = run.line()
    assert "connection failed: ConnectError" in line, line
    assert_nothing_earned(run)
    assert server.requests == []
    assert run.wall_s < 20, f"a dead endpoint took {run.wall_s:.1f} s"


def test_a_port_nobody_listens_on_fails_on_the_cluster(env: dict[str, str]) -> None:
    with socket.socket() as taken:  # bound, never listening: connections are refused
        taken.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{taken.getsockname()[1]}/v1"
        run = benchmark(
            env, "tit-for-tat", base_url, "--llm", "retries=0", "--cluster", "--workers", "2"
        )
    line = run.line()
    assert "cancelled" not in line and "connection failed" in line, line
    assert "Connection refused" in line, line
    assert_nothing_earned(run)
    assert run.wall_s < 60, run.wall_s


def test_a_slow_endpoint_times_out_in_bounded_time(env: dict[str, str]) -> None:
    with ChatServer(delay_s=1.0) as server:
        run = benchmark(
            env, "slow", server.base_url, "--llm", "timeout_s=0.2", "--llm", "retries=0"
        )
    line = run.line()
    deadline = "no answer within 0.2s (the deadline for the whole answer) after 1 attempt(s)"
    assert deadline in line, line
    assert_nothing_earned(run)
    for match in run.matches():
        assert_forfeit(match)
    # 13 match sets, at most 3 moves each asked before the breaker trips, 0.2 s each.
    assert run.wall_s < 30, run.wall_s
    assert len(server.requests) <= MATCH_SETS * 3


# -- the cost budget -----------------------------------------------------------------------------

# The default prompt is about 220 words: at $1 per 1,000 prompt tokens, a prisoners_dilemma
# match set costs about $4.40, so a budget of $5 is spent in the second match set.
PRICED = ("--llm", "prices.prompt_per_1k=1", "--cost-budget", "5")
BUDGET_SPENT = "the batch's cost budget of $5 is spent"


def assert_spent_as_the_server_counts(run: Run, server: ChatServer) -> None:
    prompt_tokens, _ = server.usage_totals()
    usage = run.usage()
    assert usage["requests"] == len(server.requests) < MOVES
    assert usage["prompt_tokens"] == prompt_tokens
    assert usage["cost_usd"] == pytest.approx(prompt_tokens / 1000)
    # Spent, and not by much more than the request that spent it (under 1,000 words: $1).
    assert 5 <= usage["cost_usd"] < 6, usage


def test_a_spent_budget_stops_the_run_in_process(env: dict[str, str]) -> None:
    with ChatServer() as server:
        run = benchmark(env, "tit-for-tat", server.base_url, *PRICED)
    line = run.line()
    assert BUDGET_SPENT in line, line
    assert_spent_as_the_server_counts(run, server)
    matches = run.matches()
    played = [m for m in matches if m["status"] == "ok"]
    stopped = [m for m in matches if m["status"] != "ok"]
    assert played and stopped and len(matches) == MATCH_SETS
    for match in stopped:
        assert match["reason"].startswith(f"BudgetSpent: {BUDGET_SPENT}"), match
    assert "composite_score" not in run.out, "a benchmark whose match sets did not run is scored"


def test_a_spent_budget_cancels_the_batch_on_the_cluster(
    env: dict[str, str], tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    with ChatServer() as server:
        run = benchmark(
            env,
            "tit-for-tat",
            server.base_url,
            *PRICED,
            "--cluster",
            "--workers",
            "1",
            "--run-id",
            "budget",
            "--output-path",
            str(report),
        )
    line = run.line()
    assert re.search(r"batch \w+ cancelled \(the batch's cost budget of \$5 is spent", line), line
    assert_spent_as_the_server_counts(run, server)
    written = json.loads(report.read_text())
    assert written["status"] == "cancelled" and BUDGET_SPENT in written["reason"]
    assert written["counts"]["total"] == MATCH_SETS
    status = arena("status", "budget", env=env, timeout=60)
    assert status.returncode == 1, status
    assert "cancelled" in status.stdout and BUDGET_SPENT in status.stdout, status.stdout
    as_json = arena("status", "--json", "budget", env=env, timeout=60)
    info = json.loads(as_json.stdout)
    assert info["status"] == "cancelled" and BUDGET_SPENT in info["reason"], info
    assert info["completed"] < MATCH_SETS
