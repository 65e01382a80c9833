"""Every path and host from outside is confined; secrets are redacted on the raw values (issue 33,
finding 3 and the lower findings on ARENA_REPO_REMOTES and URL passwords; Build rule 3).

Attacks through the real front doors: the HTTP API (its test client on a real Redis), the
schedules `arena beat` fires, a worker running a stored unit, and a real cluster (password
Redis, API token, workers as uid 65534 where the interpreter allows it) for the control that a
checkpoint under the roots is still played and scored. What happened on c3f317a is in each test.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from arena.web.app import create_app
from tasks.schedules import parse_entry
from tasks.settings import ArenaSettings
from tasks.store import Store
from tasks.validation import InputError
from tasks.workloads import get_workload, validate_batch
from tests.api.conftest import AUTH
from tests.integration.conftest import arena, cluster_env  # noqa: F401 (fixture)
from tests.race.projects import make_feature_repo
from tests.security.cluster import TOKEN, give_to_workers, secure_cluster
from tests.security.test_hostile_specs import refused_over_http, snapshot

pytestmark = pytest.mark.integration
PASSWD_DIGEST = hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def clean_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("ARENA_")]:
        if name != "ARENA_REDIS_URL":
            monkeypatch.delenv(name)


def mario(sb3: str, **agent: Any) -> dict[str, Any]:
    return {
        "workload": "mario",
        "agents": [{"name": "c", "sb3": sb3, **agent}],
        "items": ["1-1"],
        "protocol": {"episodes": 1, "seed": 0},
        "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 20},
    }


class Files:
    """tmp/roots (ARENA_CHECKPOINT_ROOTS) with a checkpoint-shaped file, a FIFO, a sparse file
    past the cap, a link out to /etc/passwd; and what lies outside."""

    def __init__(self, tmp: Path) -> None:
        self.roots = tmp / "roots"
        self.roots.mkdir()
        self.good = self.roots / "good.zip"
        self.good.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: its digest is ours
        self.fifo = self.roots / "pipe.zip"
        os.mkfifo(self.fifo)
        self.big = self.roots / "big.zip"
        with open(self.big, "wb") as handle:
            handle.truncate((2 << 30) + 1)  # sparse: costs no disk
        self.link = self.roots / "passwd.zip"
        self.link.symlink_to("/etc/passwd")

    def refused(self) -> list[str]:
        return [
            "/etc/nonexistent",
            "/etc",
            "/etc/passwd",
            "/dev/zero",
            str(self.roots / "missing.zip"),
            str(self.roots),
            str(self.fifo),
            str(self.big),
            str(self.link),
            str(self.roots / ".." / ".." / "etc" / "passwd"),
            "good.zip",  # relative: to the API's working directory?
        ]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Files:
    made = Files(tmp_path)
    monkeypatch.setenv("ARENA_CHECKPOINT_ROOTS", str(made.roots))
    return made


def post_within(client: TestClient, spec: dict[str, Any], seconds: float) -> Any:
    """POST /batches in a thread: None if no answer came within `seconds` (a hung API thread)."""
    answers: list[Any] = []
    thread = threading.Thread(
        target=lambda: answers.append(client.post("/batches", json=spec, headers=AUTH)),
        daemon=True,
    )
    thread.start()
    thread.join(seconds)
    return answers[0] if answers else None


def everything_in(db: Store) -> str:
    """Every string Redis holds (keys, hash fields, list items), for a digest to hide in."""
    parts = []
    for key in db.r.keys("*"):
        kind = db.r.type(key)
        parts.append(str(key))
        if kind == b"hash" or kind == "hash":
            parts += [str(v) for v in db.r.hgetall(key).items()]
        elif kind in (b"string", "string"):
            parts.append(str(db.r.get(key)))
        elif kind in (b"list", "list"):
            parts += [str(v) for v in db.r.lrange(key, 0, -1)]
        elif kind in (b"zset", "zset"):
            parts += [str(v) for v in db.r.zrange(key, 0, -1)]
    return "\n".join(parts)


# -- finding 3: sb3 paths are no oracle -------------------------------------------------------


@pytest.mark.parametrize("roots", ["set", "empty"])
def test_every_refused_checkpoint_gets_one_answer_at_once_and_nothing_is_stored(
    files: Files, client: TestClient, db: Store, monkeypatch: pytest.MonkeyPatch, roots: str
) -> None:
    """On c3f317a `/etc/nonexistent` answered "No such file or directory", a folder "Is a
    directory", `/etc/passwd` 202 with its sha256 in GET /batches/{id}, and `/dev/zero` never
    answered (an API thread read it at full CPU). Now each is the same 422, within seconds."""
    if roots == "empty":
        monkeypatch.setenv("ARENA_CHECKPOINT_ROOTS", "")
    shapes = {}
    for path in files.refused():
        before = snapshot(db)
        answer = post_within(client, mario(path), 10)
        assert answer is not None, f"{path}: no answer within 10 s"
        assert answer.status_code == 422, (path, answer.text)
        detail = answer.json()["detail"]
        assert snapshot(db) == before, f"{path}: a refusal stored something"
        shapes[path] = detail.replace(repr(path), "<path>")
    assert len(set(shapes.values())) == 1, shapes
    assert set(shapes.values()).pop().startswith("agents[0].sb3: <path> is not a checkpoint")
    # `version:` skips the digest; it does not skip the rule.
    assert refused_over_http(client, db, mario("/etc/passwd", version="1")).startswith(
        "agents[0].sb3: "
    )
    seen = client.get("/batches").text + everything_in(db)
    assert PASSWD_DIGEST not in seen


def test_a_checkpoint_under_the_roots_is_taken_as_its_real_path(
    files: Files, client: TestClient, db: Store
) -> None:
    """The control: a file under the roots is accepted, stored as its real path, its digest
    the file's; through a link inside the roots too."""
    link = files.roots / "latest.zip"
    link.symlink_to(files.good)
    answer = client.post("/batches", json=mario(str(link)), headers=AUTH)
    assert answer.status_code == 202, answer.text
    stored = db.batch(answer.json()["batch_id"])
    assert stored is not None
    assert stored.spec["agents"][0]["sb3"] == str(files.good.resolve())
    digest = hashlib.sha256(files.good.read_bytes()).hexdigest()
    assert stored.identity.agents["c"].digest == digest


def test_a_schedule_names_no_checkpoint_outside_the_roots(
    files: Files, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`arena beat` fires unattended: the API's rule (c3f317a: a schedule took /etc/passwd)."""
    for path in ("/etc/passwd", "/dev/zero", str(files.fifo)):
        with pytest.raises(InputError, match=r"^spec: agents\[0\]\.sb3: .* is not a checkpoint"):
            parse_entry({"name": "n", "cron": "0 3 * * *", "spec": mario(path)})
    assert parse_entry({"name": "n", "cron": "0 3 * * *", "spec": mario(str(files.good))})
    monkeypatch.setenv("ARENA_CHECKPOINT_ROOTS", "")
    with pytest.raises(InputError, match="ARENA_CHECKPOINT_ROOTS is empty"):
        parse_entry({"name": "n", "cron": "0 3 * * *", "spec": mario(str(files.good))})


def test_a_worker_reads_no_tampered_checkpoint(files: Files) -> None:
    """A stored unit whose checkpoint someone with Redis access changed to /dev/zero or a FIFO:
    the worker refuses it before reading (c3f317a read /dev/zero until the unit's time ran
    out, and a FIFO until a writer came)."""
    workload = get_workload("mario")
    unit = workload.expand(validate_batch(mario(str(files.good))))[0]
    for path in ("/dev/zero", str(files.fifo), "/etc/passwd"):
        payload = {**unit.payload, "agent": {**unit.payload["agent"], "sb3": path}}
        started = time.monotonic()
        with pytest.raises(ValueError, match="is not a checkpoint Arena may read"):
            workload.run_unit(unit.model_copy(update={"payload": payload}))
        assert time.monotonic() - started < 5


def test_a_checkpoint_under_the_roots_is_played_and_scored_on_a_real_cluster(
    tmp_path: Path,
) -> None:
    """Through the API with a token, on the secure cluster: a real checkpoint under
    ARENA_CHECKPOINT_ROOTS is played in the agent sandbox and scored; /etc/passwd is refused."""
    if not os.environ.get("CI"):
        pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    from tests.mario.sb3_models import build_checkpoint

    with secure_cluster(tmp_path) as cluster:
        roots = cluster.folder / "checkpoints"
        roots.mkdir()
        build_checkpoint(roots / "ppo.zip")
        give_to_workers(roots)
        settings = ArenaSettings(
            redis_url=cluster.redis_url, data_dir=cluster.data_dir, api_tokens=TOKEN
        )
        auth = {"Authorization": f"Bearer {TOKEN}"}
        os.environ["ARENA_CHECKPOINT_ROOTS"] = str(roots)  # the API's (validation reads it)
        try:
            with TestClient(create_app(settings)) as api:
                refused = api.post("/batches", json=mario("/etc/passwd"), headers=auth)
                assert refused.status_code == 422, refused.text
                answer = api.post("/batches", json=mario(str(roots / "ppo.zip")), headers=auth)
        finally:
            del os.environ["ARENA_CHECKPOINT_ROOTS"]
        assert answer.status_code == 202, answer.text
        batch_id = answer.json()["batch_id"]
        assert cluster.wait(batch_id, timeout=240) == "done", cluster.log_tail()
        results = list(cluster.db.unit_results(batch_id).values())
        assert [r.status for r in results] == ["ok"], [r.reason for r in results]
        assert "arena_score" in results[0].result


# -- remote repositories: listed hosts only, within a deadline --------------------------------


class Listener:
    """A loopback TCP listener that records every connection and never answers."""

    def __init__(self, family: socket.AddressFamily = socket.AF_INET) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                self.accepted.append(self.sock.accept()[0])
            except TimeoutError:
                continue

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def listeners() -> Iterator[list[Listener]]:
    made = [Listener()]
    if socket.has_ipv6:
        with contextlib.suppress(OSError):  # no ::1 here
            made.append(Listener(socket.AF_INET6))
    yield made
    for listener in made:
        listener.close()


def race(repo: str) -> dict[str, Any]:
    """A race with a scoring block: nothing stops validation before git reads `repo`."""
    return {
        "workload": "race",
        "task": "t",
        "repo": repo,
        "agents": [{"name": "a", "branch": "feat"}],
        "scoring": {"test_command": "true"},
    }


@pytest.mark.parametrize("hosts", ["listed elsewhere", "empty"])
def test_a_remote_on_an_unlisted_host_is_refused_before_any_connection(
    listeners: list[Listener],
    client: TestClient,
    db: Store,
    monkeypatch: pytest.MonkeyPatch,
    hosts: str,
) -> None:
    """On c3f317a ARENA_REPO_REMOTES listed schemes only: the API's git fetched from
    http://127.0.0.1:27001 and [::1]. Now the host must be in ARENA_REPO_HOSTS, and the
    listeners on loopback see no connection at all."""
    monkeypatch.setenv("ARENA_REPO_REMOTES", "http,https,git")
    if hosts != "empty":
        monkeypatch.setenv("ARENA_REPO_HOSTS", "git.example.com,127.0.0.2:443")
    four = listeners[0].port
    repos = [
        f"http://127.0.0.1:{four}/r.git",
        f"https://deploy:pw@127.0.0.1:{four}/r.git",
        f"git://127.0.0.1:{four}/r.git",
        f"http://localhost:{four}/r.git",
        f"http://127.0.0.2:{four}/r.git",  # a listed host, another port
        f"http://git.example.com@127.0.0.1:{four}/r.git",  # the listed name as a user
        f"http://git.example.com%40127.0.0.1:{four}/r.git",
    ]
    if len(listeners) > 1:
        repos.append(f"http://[::1]:{listeners[1].port}/r.git")
    for repo in repos:
        detail = refused_over_http(client, db, race(repo))
        assert detail.startswith("repo: "), (repo, detail)
        assert any(w in detail for w in ("ARENA_REPO_HOSTS", "has no host")), (repo, detail)
        assert "deploy:pw" not in detail
    time.sleep(0.3)
    assert [len(listener.accepted) for listener in listeners] == [0] * len(listeners)


def test_a_listed_host_that_never_answers_ends_within_the_deadline(
    listeners: list[Listener], client: TestClient, db: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On c3f317a `git://127.0.0.1:26379` held an API thread 120 s. Now ls-remote at validation
    is stopped after ARENA_GIT_CHECK_TIMEOUT_S, git and its transport killed, one line."""
    port = listeners[0].port
    monkeypatch.setenv("ARENA_REPO_REMOTES", "http,git")
    monkeypatch.setenv("ARENA_REPO_HOSTS", f"127.0.0.1:{port}")
    monkeypatch.setenv("ARENA_GIT_CHECK_TIMEOUT_S", "2")
    for repo in (f"git://127.0.0.1:{port}/r.git", f"http://127.0.0.1:{port}/r.git"):
        before = snapshot(db)
        started = time.monotonic()
        answer = post_within(client, race(repo), 10)
        took = time.monotonic() - started
        assert answer is not None and answer.status_code == 422, repo
        assert answer.json()["detail"] == (
            "repo: git ls-remote took over 2s (stopped) (ARENA_GIT_CHECK_TIMEOUT_S)"
        )
        assert took < 2 + 2, took
        assert snapshot(db) == before
    assert len(listeners[0].accepted) >= 2  # it did connect: the deadline ended it


def test_a_local_race_still_runs_under_the_deadline(
    tmp_path: Path, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: a repository under ARENA_REPO_ROOTS is taken as before."""
    repo = make_feature_repo(tmp_path / "roots" / "repo", '[scoring]\ntest_command = "true"\n')
    monkeypatch.setenv("ARENA_REPO_ROOTS", str(tmp_path / "roots"))
    monkeypatch.setenv("ARENA_GIT_CHECK_TIMEOUT_S", "2")
    answer = client.post("/batches", json=race(str(repo)), headers=AUTH)
    assert answer.status_code == 202, answer.text


# -- redaction on the raw values ----------------------------------------------------------------

# Each password's marker (PwN) is plain ASCII: whatever escaping a read applies, it would show.
PASSWORDS = ['Qz"Pw1', "Qz\\Pw2", "Qz%22Pw3", "Qzé€😀Pw4", "Qz%40Pw5", "Qz@Pw6", 'a"b\\c@Pw7']


def secret_spec() -> dict[str, Any]:
    agents: list[Any] = ["builtin"]
    for index, password in enumerate(PASSWORDS):
        url = f"https://deploy:{password}@agents.example/act{index}"
        agents.append({"name": f"remote{index}", "version": "1", "url": url})
    return {
        "workload": "alympics",
        "leaderboard": "secret-test",
        "items": ["prisoners_dilemma", "public_goods", "auction", "colonel_blotto", "congestion"],
        "agents": agents,
        "protocol": {"seed": 0, "unit_time_limit_s": 60},
        "params": {"suite": "alympics_lite"},
    }


def test_no_read_shows_a_password_with_quotes_or_backslashes(
    client: TestClient,
    db: Store,
    cluster_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On c3f317a a URL password with `"` or `\\` was shown in clear in /batches, the report and
    /ui/batches: the pattern ran on the JSON and HTML, where the quote is `\\"` or `&#34;`. Now
    the raw values are redacted before anything serialises them."""
    monkeypatch.setenv("ARENA_AGENT_HOSTS", "agents.example")
    sub = client.post("/batches?run_id=quotes", json=secret_spec(), headers=AUTH)
    assert sub.status_code == 202, sub.text
    batch_id = sub.json()["batch_id"]
    stored = db.batch(batch_id)
    assert stored is not None and "Pw1" in json.dumps(stored.spec)  # kept for the workers
    assert client.delete(f"/batches/{batch_id}", headers=AUTH).status_code == 200  # a report
    reads = {
        "GET /batches": client.get("/batches").text,
        "GET /batches/{id}": client.get(f"/batches/{batch_id}").text,
        "/ui/batches/{id}": client.get(f"/ui/batches/{batch_id}").text,
        "page": client.get("/").text,
    }
    detail = json.loads(reads["GET /batches/{id}"])
    urls = [a.get("url") for a in detail["report"]["config"]["agents"][1:]]
    assert urls == [f"https://***@agents.example/act{i}" for i in range(len(PASSWORDS))]
    report_file = tmp_path / "report.json"
    for args in (
        ("batches", "--json"),
        ("status", batch_id),
        ("status", batch_id, "--json"),
        ("report", batch_id),
        ("report", batch_id, "--output-path", str(report_file)),
    ):
        done = arena(*args, env=cluster_env)
        assert done.returncode in (0, 1), done.stderr
        reads[f"arena {' '.join(args)}"] = done.stdout + done.stderr
    reads["report file"] = report_file.read_text()
    assert "agents.example" in reads[f"arena status {batch_id} --json"]
    for name, text in reads.items():
        assert "deploy:" not in text and "Qz" not in text, name
        for index in range(1, len(PASSWORDS) + 1):
            assert f"Pw{index}" not in text, (name, index)
