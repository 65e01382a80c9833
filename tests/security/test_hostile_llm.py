"""A hostile spec author against the `llm` agent (docs/alympics.md, "Keys"): a spec names the
environment variable a key is read from, never the key, and the operator says which key may go
to which host (ARENA_LLM_KEY_HOSTS). The author tries to have the cluster's own secrets sent as
a key, the operator's key sent to a server of their own, a prompt template that reaches past its
fields or reads a file, an answer that grows without bound; an endpoint echoes the key it got.

Front doors as in test_hostile_specs.py: the CLI in-process (arena.cli.main.main) with Redis
pointing where nothing listens (a spec that got past validation ends "cannot reach Redis"), and
the HTTP API on a real Redis. A refusal is exit 2 with one line (4xx over HTTP) naming the field,
sends no request to the author's server and stores nothing. What is played runs on real workers
(tests/integration/conftest.py) against real HTTP servers on the loopback.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from fastapi.testclient import TestClient

from arena.service.alympics import benchmark_spec
from tasks.store import Store
from tasks.workloads import validate_batch
from tests.api.conftest import AUTH
from tests.integration.conftest import ARENA, WorkerPools, arena, cluster_env, workers
from tests.llm.chat_server import ChatServer, content_text, tit_for_tat
from tests.security.test_hostile_specs import NO_REDIS, refused_by_cli
from workers.llm.client import MAX_RESPONSE_BYTES

pytestmark = pytest.mark.integration
__all__ = ["cluster_env", "workers"]  # fixtures

KEY_ENV = "LLM_TEST_KEY"  # not ARENA_...: config.py refuses every ARENA_ name as a key's
SECRET = "s3cr3t-llm-key-" + secrets.token_hex(12)  # no shape tasks/redact.py knows


def llm_spec(base_url: str, model: str = "tit-for-tat", **llm: Any) -> dict[str, Any]:
    return benchmark_spec(f"llm:{model}@{base_url}", suite="alympics_smoke", llm=llm)


def write_spec(folder: Path, spec: dict[str, Any]) -> str:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The CLI in this process, pointed at a Redis where nothing listens, the operator's key
    policy the default (OPENAI_API_KEY=api.openai.com), the key set; the data folder must stay
    unborn."""
    monkeypatch.setenv("ARENA_REDIS_URL", NO_REDIS)
    monkeypatch.setenv("ARENA_REDIS_RETRY_S", "0")  # a spec that passes: exit 3 at once
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("ARENA_LLM_KEY_HOSTS", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operators-own-" + secrets.token_hex(16))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    assert not (tmp_path / "data").exists(), "a refused spec started or stored something"


def snapshot(db: Store) -> dict[str, Any]:
    return {k: (db.r.type(k), db.r.dump(k)) for k in sorted(db.r.keys("*"))}


def refused_over_http(client: TestClient, db: Store, spec: Any) -> str:
    before = snapshot(db)
    response = client.post("/batches", json=spec, headers=AUTH)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail, detail
    assert snapshot(db) == before, "a refused spec changed what Redis holds"
    return detail


# -- the cluster's own secrets are never a key ---------------------------------------------------

CLUSTER_SECRETS = [
    "ARENA_REDIS_URL",
    "ARENA_API_TOKENS",
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "REDIS_PASSWORD",
    "REDIS_URL",
    "AWS_SECRET_ACCESS_KEY",
    "DOCKER_AUTH_CONFIG",
    "KUBECONFIG",
    # Not a cluster setting by name, but no key the operator listed either.
    "HOME",
    "PATH",
    "GITHUB_TOKEN",
    "openai_api_key",
    "OPENAI_API_KEY=x",
    "../OPENAI_API_KEY",
]


@pytest.mark.parametrize("name", CLUSTER_SECRETS)
def test_a_cluster_setting_is_never_sent_as_a_key(cli: Path, server: ChatServer, name: str) -> None:
    spec = write_spec(cli, llm_spec(server.base_url, api_key_env=name))
    line = refused_by_cli("run", spec)
    assert "api_key_env" in line, line
    line = refused_by_cli(
        "game",
        "benchmark",
        "--suite",
        "alympics_smoke",
        "--agent",
        f"llm:tit-for-tat@{server.base_url}",
        "--llm",
        f"api_key_env={name}",
    )
    assert "api_key_env" in line, line
    assert server.requests == []


@pytest.mark.parametrize("name", ["ARENA_REDIS_URL", "CELERY_BROKER_URL", "REDIS_PASSWORD"])
def test_the_api_refuses_a_cluster_setting_as_a_key(
    client: TestClient, db: Store, server: ChatServer, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARENA_AGENT_HOSTS", "127.0.0.1")  # the endpoint may be named over the API
    detail = refused_over_http(client, db, llm_spec(server.base_url, api_key_env=name))
    assert "api_key_env" in detail, detail
    assert server.requests == []


# -- the operator's key goes only where the operator said ---------------------------------------


def author_urls(port: int) -> list[str]:
    """The author's server, spelled to look like the allowed host."""
    return [
        f"http://127.0.0.1:{port}/v1",
        f"http://api.openai.com@127.0.0.1:{port}/v1",
        f"http://api.openai.com:x@127.0.0.1:{port}/v1",
        f"http://127.0.0.1:{port}/v1?host=api.openai.com",
        f"http://127.0.0.1:{port}/v1#api.openai.com",
        f"http://api.openai.com.127.0.0.1.nip.io:{port}/v1",
        f"http://localhost:{port}/api.openai.com/v1",
    ]


def test_the_operators_key_is_not_sent_to_the_authors_server(cli: Path, server: ChatServer) -> None:
    for url in author_urls(server.port):
        spec = write_spec(cli, llm_spec(url, api_key_env="OPENAI_API_KEY"))
        line = refused_by_cli("run", spec)
        assert "base_url" in line and "api.openai.com" in line, (url, line)
        line = refused_by_cli(
            "game",
            "benchmark",
            "--suite",
            "alympics_smoke",
            "--agent",
            f"llm:tit-for-tat@{url}",
            "--llm",
            "api_key_env=OPENAI_API_KEY",
        )
        assert "base_url" in line, (url, line)
    assert server.requests == []


def test_the_api_refuses_the_operators_key_for_the_authors_server(
    client: TestClient, db: Store, server: ChatServer
) -> None:
    detail = refused_over_http(client, db, llm_spec(server.base_url, api_key_env="OPENAI_API_KEY"))
    assert "base_url" in detail, detail
    assert server.requests == []


# -- where the key may go it is sent; an endpoint that echoes it never gets it shown ------------


class EchoHandler(BaseHTTPRequestHandler):
    """A chat-completions endpoint that plays tit-for-tat's moves and echoes the Authorization
    header it got in every answer; in a prisoners_dilemma's second round it answers HTTP 400
    with the header in the error (a move that faults, its reason the error's text)."""

    server: EchoServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization", "")
        self.server.seen.append(auth)
        prompt = content_text(body["messages"][-1])
        if prompt.startswith("Game: prisoners_dilemma") and "This is round 2 of" in prompt:
            status = 400
            answer: dict[str, Any] = {"error": {"message": f"bad credentials: {auth}"}}
        else:
            status = 200
            action = json.dumps({"action": tit_for_tat(prompt)})
            content = f"You sent me {auth!r}; {auth.removeprefix('Bearer ')}. {action}"
            message = {"role": "assistant", "content": content}
            answer = {
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 9},
            }
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class EchoServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), EchoHandler)
        self.seen: list[str] = []
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    httpd = EchoServer()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def redis_text(url: str) -> bytes:
    """Every value in Redis, read by type (a DUMP may compress a long string)."""
    r: Any = redis.Redis.from_url(url)  # bytes, synchronous
    parts: list[bytes] = []
    for key in r.scan_iter(count=1000):
        kind = r.type(key)
        parts.append(key)
        if kind == b"string":
            parts.append(r.get(key) or b"")
        elif kind == b"hash":
            parts += [x for pair in r.hgetall(key).items() for x in pair]
        elif kind == b"list":
            parts += r.lrange(key, 0, -1)
        elif kind == b"set":
            parts += list(r.smembers(key))
        elif kind == b"zset":
            parts += r.zrange(key, 0, -1)
        elif kind == b"stream":
            parts += [repr(e).encode() for e in r.xrange(key)]
    return b"\n".join(parts)


def test_the_key_goes_where_allowed_and_is_never_shown(
    redis_url: str,
    cluster_env: dict[str, str],
    workers: WorkerPools,
    echo: EchoServer,
    tmp_path: Path,
) -> None:
    policy = {"ARENA_LLM_KEY_HOSTS": f"OPENAI_API_KEY=api.openai.com,{KEY_ENV}=127.0.0.1"}
    submitter = {k: v for k, v in cluster_env.items() if k != KEY_ENV} | policy
    workers.start(cluster_env | policy | {KEY_ENV: SECRET}, concurrency=1)  # only they hold it
    report = tmp_path / "report.json"
    run = arena(
        "game",
        "benchmark",
        "--suite",
        "alympics_smoke",
        "--agent",
        f"llm:echo@{echo.base_url}",
        "--llm",
        f"api_key_env={KEY_ENV}",
        "--cluster",
        "--run-id",
        "keyrun",
        "--output",
        "json",
        "--output-path",
        str(report),
        "-v",
        env=submitter,
        timeout=180,
    )
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:], workers.log_tail())
    # The key was sent, as a bearer token, on every request.
    assert echo.seen and set(echo.seen) == {f"Bearer {SECRET}"}
    out = json.loads(run.stdout)
    faults = [m for m in out["matches"] if m["measures"]["faults"]]
    assert [m["item"].split("@")[0] for m in faults] == ["prisoners_dilemma"] * 2, faults
    assert all("[redacted]" in " ".join(m["fault_reasons"]) for m in faults), faults
    status = arena("status", "--json", "keyrun", env=submitter, timeout=60)
    logs = arena("logs", "keyrun", env=submitter, timeout=60)
    stored = arena("report", "keyrun", env=submitter, timeout=60)
    assert status.returncode == logs.returncode == stored.returncode == 0
    assert "[redacted]" in logs.stdout and "bad credentials: Bearer [redacted]" in logs.stdout
    in_redis = redis_text(redis_url)
    assert b"[redacted]" in in_redis  # the replay cache and the logs hold the answers
    shown = {
        "results": run.stdout + run.stderr,
        "report file": report.read_text(),
        "status": status.stdout,
        "logs": logs.stdout,
        "report": stored.stdout,
        "Redis": in_redis.decode(errors="replace"),
        "worker log": (tmp_path / "worker.log").read_text(errors="replace"),
    }
    leaked = [where for where, text in shown.items() if SECRET in text]
    assert not leaked, f"the key is in: {leaked}"
    # The spec names the variable, never the key.
    info = json.loads(status.stdout)
    assert info["spec"]["agents"][0]["llm"]["api_key_env"] == KEY_ENV
    assert json.loads(report.read_text())["config"]["agents"][0]["llm"]["api_key_env"] == KEY_ENV


def test_the_validated_spec_holds_the_name_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_LLM_KEY_HOSTS", f"{KEY_ENV}=127.0.0.1")
    monkeypatch.setenv("ARENA_AGENT_HOSTS", "127.0.0.1")
    monkeypatch.setenv(KEY_ENV, SECRET)
    batch = validate_batch(llm_spec("http://127.0.0.1:9/v1", api_key_env=KEY_ENV))
    dumped = json.dumps(batch.model_dump(mode="json"))
    assert KEY_ENV in dumped and SECRET not in dumped


@pytest.mark.parametrize("listed", ["", "api.openai.com,vllm.internal"])
@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:6379/v1", "http://redis:6379/v1", "http://169.254.169.254/v1"]
)
def test_the_api_calls_only_the_agent_endpoints_the_operator_lists(
    client: TestClient,
    db: Store,
    server: ChatServer,
    monkeypatch: pytest.MonkeyPatch,
    listed: str,
    url: str,
) -> None:
    """A token holder's spec must not make workers POST to the cluster's own services (Redis,
    a metadata service) and read the answers in the transcript: its base_url host must be one
    ARENA_AGENT_HOSTS lists (empty: none over the API; the operator's CLI may name any)."""
    monkeypatch.setenv("ARENA_AGENT_HOSTS", listed)
    detail = refused_over_http(client, db, llm_spec(url))
    assert detail.startswith("agents[0].llm.base_url: ") and "ARENA_AGENT_HOSTS" in detail, detail
    http_agent = {
        **llm_spec(url),
        "agents": [{"name": "remote", "url": url.replace("/v1", "/act")}],
    }
    detail = refused_over_http(client, db, http_agent)  # an HTTP agent's url, the same rule
    assert detail.startswith("agents[0].url: ") and "ARENA_AGENT_HOSTS" in detail, detail
    monkeypatch.setenv("ARENA_AGENT_HOSTS", "127.0.0.1")
    accepted = client.post("/batches", json=llm_spec(server.base_url), headers=AUTH)
    assert "ARENA_AGENT_HOSTS" not in accepted.text, accepted.text[:300]


# -- a prompt template places its fields, and reads no file the author names --------------------

HOSTILE_TEMPLATES = {
    "attribute": "Game: {game} {rules.__class__}",
    "globals": "{rules.__class__.__init__.__globals__}",
    "index": "Game: {game} {observation[0]}",
    "key": "{observation[player]}",
    "unknown field": "Game: {game} {password}",
    "positional": "Game: {game} {0}",
    "automatic": "Game: {}",
    "conversion": "Game: {game!r}",
    "format spec": "Game: {game:>999999999}",
    "unclosed": "Game: {game",
    "lone brace": "Game: } {game}",
}


@pytest.mark.parametrize("template", HOSTILE_TEMPLATES.values(), ids=list(HOSTILE_TEMPLATES))
def test_a_template_reaching_past_its_fields_is_refused(
    cli: Path, server: ChatServer, template: str
) -> None:
    path = cli / "prompt.txt"
    path.write_text(template)
    line = refused_by_cli("run", write_spec(cli, llm_spec(server.base_url, prompt=str(path))))
    assert "prompt" in line, line
    line = refused_by_cli(
        "run", write_spec(cli, llm_spec(server.base_url, template=template))
    )  # given inline
    assert "prompt" in line or "template" in line, line
    assert server.requests == []


def test_a_template_file_over_the_cap_or_unreadable_is_refused(
    cli: Path, server: ChatServer
) -> None:
    big = cli / "big.txt"
    big.write_text("Game: {game}\n" + "x" * 20_001)
    for path in (big, cli / "missing.txt", cli):
        spec = write_spec(cli, llm_spec(server.base_url, prompt=str(path)))
        assert "prompt" in refused_by_cli("run", spec)
    assert server.requests == []


def test_the_api_reads_no_file_the_author_names_as_a_prompt(
    client: TestClient, db: Store, server: ChatServer, tmp_path: Path
) -> None:
    """A token holder names no file on the API's machine: its contents would become the
    prompt, stored in the spec (arena status shows it) and sent to the author's endpoint
    (/proc/self/environ holds ARENA_REDIS_URL and ARENA_API_TOKENS)."""
    private = tmp_path / "operators-notes.txt"
    private.write_text("PRIVATE-" + secrets.token_hex(8))
    for path in (str(private), "/proc/self/environ"):
        detail = refused_over_http(client, db, llm_spec(server.base_url, prompt=path))
        assert "prompt" in detail, detail
    assert private.read_text().encode() not in b"".join(db.r.dump(k) or b"" for k in db.r.keys("*"))
    assert server.requests == []


# -- an answer without bound is a fault, not memory -----------------------------------------------


class FloodHandler(BaseHTTPRequestHandler):
    """model `endless`: 200 and a body that never ends (HTTP/1.0, no length: until the client
    hangs up); model `big`: a well-formed completion of 2 MiB with its Content-Length."""

    server: FloodServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        sent = 0
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if body["model"] == "big":
                content = '{"action": "C"}' + " " * (2 * MAX_RESPONSE_BYTES)
                data = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                sent = len(data)
            else:
                self.end_headers()
                chunk = b'{"choices": [{"message": {"content": "' + b"A" * 65536
                while sent < 1 << 30:  # a 1 GiB bound, so an unbounded client is seen, not fatal
                    self.wfile.write(chunk)
                    sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.server.sent.append(sent)

    def log_message(self, *args: object) -> None:
        pass


class FloodServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FloodHandler)
        self.sent: list[int] = []
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()


PEAK_RSS = (
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); "
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
    "sys.exit(code)"
)


@pytest.mark.parametrize("model", ["endless", "big"])
def test_an_answer_over_1_mib_is_a_fault_not_memory(tmp_path: Path, model: str) -> None:
    flood = FloodServer()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env["ARENA_DATA_DIR"] = str(tmp_path / "data")
    peak_file = tmp_path / "peak-kib"
    try:
        started = time.monotonic()
        # Run under a fresh Python whose only child is the command: its RUSAGE_CHILDREN is that
        # command's peak (this pytest process's would count every child it ever waited for).
        agent = f"llm:{model}@http://127.0.0.1:{flood.server_address[1]}/v1"
        command = [ARENA, "game", "benchmark", "--suite", "alympics_smoke", "--agent", agent]
        command += ["--llm", "retries=0", "--output", "json"]
        run = subprocess.run(
            [sys.executable, "-c", PEAK_RSS, str(peak_file), *command],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        wall_s = time.monotonic() - started
    finally:
        flood.shutdown()
        flood.server_close()
    assert run.returncode == 1, (run.stdout[-1000:], run.stderr[-1000:])
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "the answer is over 1,048,576 bytes" in lines[0], run.stderr
    assert wall_s < 60, wall_s
    out = json.loads(run.stdout)
    assert all(m["status"] == "error" for m in out["matches"])
    # The client hung up soon after the cap (the kernel's buffers hold a few MiB more).
    assert flood.sent and max(flood.sent) < 64 << 20, max(flood.sent)
    peak_mib = int(peak_file.read_text()) / 1024
    assert peak_mib < 600, f"the command peaked at {peak_mib:.0f} MiB"
