"""Arena settings: environment variables prefixed ARENA_ (docs/configuration.md)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tasks.data_dir import default_data_dir
from tasks.redis_url import URL_SCHEMES, check_url
from tasks.validation import InputError

REDIS_SCHEMES = URL_SCHEMES


class ArenaSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ARENA_", extra="ignore")

    # redis://, rediss:// or unix:// URL of a shared Redis, or sentinel://h:p;sentinel://h:p
    # naming Sentinels (tasks/redis_url.py). Unset: `arena run` embeds one.
    redis_url: str | None = None
    # Sentinels: the name they know the primary by. WAIT replicas (0: off) after each write
    # that counts (a chunk's results, a batch's start and end), each WAIT up to the timeout.
    redis_master: str = Field("arena", min_length=1, max_length=200, pattern=r"^[\w.\-]+$")
    redis_wait_replicas: int = Field(0, ge=0, le=64)
    redis_wait_timeout_s: float = Field(1.0, gt=0, le=600, allow_inf_nan=False)
    # Where the embedded Redis keeps its data (leaderboards survive between runs). Unset:
    # .arena-data here, or .git/arena-data inside a repository that does not ignore it.
    data_dir: Path = Field(default_factory=default_data_dir)
    key_prefix: str = "arena:"
    # Embedded mode: local worker processes (default: one per core).
    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1, le=1024)
    # The embedded cluster's host stops this long after its last client left (arena/embedded/).
    embedded_linger_s: float = Field(10.0, ge=0, le=86_400, allow_inf_nan=False)
    # Broker redelivery of an unacknowledged task; must exceed the longest chunk's time limit.
    visibility_timeout_s: float = Field(7200.0, gt=0, allow_inf_nan=False)
    # How often each worker looks for units a dead worker left unacknowledged.
    restore_interval_s: float = Field(10.0, gt=0, allow_inf_nan=False)
    # How long Celery keeps task results; must exceed the longest batch.
    result_expires_s: float = Field(7 * 24 * 3600.0, gt=0, allow_inf_nan=False)
    # A chunk redelivered this many times (its worker died each time) becomes error results.
    max_deliveries: int = Field(3, ge=1)
    # A worker process beats this often while it runs a chunk; a chunk silent for lost_worker_s
    # is given to another worker (its worker died) without waiting for the visibility timeout.
    heartbeat_s: float = Field(5.0, gt=0, le=3600, allow_inf_nan=False)
    lost_worker_s: float = Field(30.0, gt=0, le=24 * 3600, allow_inf_nan=False)
    # A worker whose clock is off Redis's by more than this says so once in its log and in
    # `arena queue` (liveness is judged on Redis's clock; timestamps shown are the writer's).
    clock_skew_warn_s: float = Field(5.0, gt=0, le=24 * 3600, allow_inf_nan=False)
    # How long a worker keeps retrying Redis (an outage, a restart) before a task gives up.
    redis_retry_s: float = Field(300.0, ge=0, le=24 * 3600, allow_inf_nan=False)
    # Address-space limit of a worker process while it runs one unit, in MiB (a unit that eats
    # memory gets a MemoryError, and its process is replaced, instead of the OOM killer taking
    # the worker). Unset: each workload's default (docs/configuration.md); 0: no limit.
    unit_memory_mb: int | None = Field(None, ge=0, le=1 << 24)
    # Where a race check's commands run (docs/sandbox.md): "local" processes, or "docker": a
    # sibling container per command through the engine DOCKER_HOST names.
    sandbox: Literal["local", "docker"] = "local"
    # Memory limit of a race check's commands, in MiB (local: per process; docker: the
    # container's cgroup). 0: no limit.
    sandbox_memory_mb: int = Field(8192, ge=0, le=1 << 24)
    # Disk a race check may fill in its work dir, in MiB (local sandbox: the helper measures
    # the work dir and kills the command past it). 0: no limit.
    sandbox_disk_mb: int = Field(10240, ge=0, le=1 << 30)
    # All race environments kept under the work dir together, in MiB: past it, the least
    # recently used go first (one environment is at most sandbox_disk_mb). 0: no limit.
    race_env_cache_mb: int = Field(20480, ge=0, le=1 << 30)
    # Docker sandbox: the image commands run in (it must hold the race's toolchain), CPUs per
    # container (0: no limit) and processes per container (the fork-bomb cap).
    sandbox_image: str = Field("arena-worker-cpu:latest", min_length=1)
    sandbox_cpus: float = Field(0.0, ge=0, le=1024, allow_inf_nan=False)
    sandbox_pids: int = Field(1024, ge=16, le=1 << 22)
    # The Docker network of a race whose scoring block sets `network: true` (others get none).
    sandbox_network_mode: str = Field("bridge", min_length=1)
    # Where checks clone (default: the system's temporary folder). A worker in a container that
    # drives the host's engine keeps it on a bind mount of sandbox_host_work_dir, the same
    # folder as the engine's host names it (docs/deploy.md).
    work_dir: Path | None = None
    sandbox_host_work_dir: Path | None = None
    # Agents given as images or run in the agent sandbox (docs/agents.md): each unit's agent
    # gets this much memory (image: its container's cgroup; sandbox: the process's address
    # space), CPU and processes, and this long to start answering.
    agent_memory_mb: int = Field(2048, ge=64, le=1 << 24)
    agent_cpus: float = Field(1.0, gt=0, le=1024, allow_inf_nan=False)
    agent_pids: int = Field(256, ge=16, le=1 << 22)
    agent_start_timeout_s: float = Field(60.0, gt=0, le=3600, allow_inf_nan=False)
    # A sandboxed agent's CPU seconds in one unit (RLIMIT_CPU on its unit child; past it the
    # child is killed, the agent's fault). 0: ARENA_AGENT_CPUS x the unit's time limit.
    agent_cpu_s: float = Field(0.0, ge=0, le=1e7, allow_inf_nan=False)
    # A checkpoint's lockstep batches (inference_batch > 1) on one inference process per host
    # for all its worker processes (one CUDA context, not one per process): "auto" for `device:
    # cuda` on a host with a GPU, "always", or "never". It exits idle this long after its last
    # worker process left (docs/mario.md, "Batching").
    shared_inference: Literal["auto", "always", "never"] = "auto"
    inference_idle_s: float = Field(60.0, ge=0, le=86_400, allow_inf_nan=False)
    # A worker process waits for a shared inference process's answer as long as it hears from
    # it (a request queued behind others' is told so every second) at least every step
    # timeout + this; only a host silent that long is broken (an infrastructure error).
    inference_silence_s: float = Field(30.0, ge=2, le=3600, allow_inf_nan=False)
    # `arena api`: bearer tokens (comma-separated) that may submit and cancel. None: the API's
    # write endpoints refuse (503); a secret, so never shown in a repr or a log.
    api_tokens: SecretStr = SecretStr("")
    # `arena api`: the operator's teams (docs/configuration.md, "Teams"): YAML or JSON of each
    # team's token digests, role, weight and quotas; read again when it changes (no restart).
    teams_file: Path | None = None
    # The API reads at most this many bytes of a request body (413 beyond; docs/security.md).
    api_max_body_bytes: int = Field(1 << 20, ge=1024, le=1 << 30)
    # Serve /docs (Swagger UI, its assets from Arena's own package) and /openapi.json.
    api_docs: bool = False

    # Isolation (docs/security.md). Untrusted code (Python agents, checkpoints, race commands)
    # runs in a bubblewrap jail; where none can start it is refused, unless the operator says
    # here that every agent is trusted (then it runs unjailed, as the worker).
    trust_agents: bool = False
    # Local repositories a race may name: folders (comma-separated) a `repo:` path must lie
    # under. Empty: the CLI's own user may name any (they are the operator), the API none.
    repo_roots: str = ""
    # URL schemes a race's `repo:` may use for a remote repository (comma-separated, e.g.
    # "https"). Empty: no remote repositories. `ext::` and `file://` are never remotes.
    repo_remotes: str = ""
    # Most units one batch may expand to (checked before expansion).
    max_units: int = Field(100_000, ge=1, le=100_000_000)
    # Sharing a pool (docs/architecture.md, "Sharing"): chunk messages given to the broker beyond
    # the pool's live worker processes (each waits there for the next free process, ahead of
    # an interactive batch's first chunk). 0 measured best: see the docs.
    queue_headroom: int = Field(0, ge=0, le=10_000)
    # Most units an `interactive` batch may have: a spec that asks for more is refused; a front
    # door's interactive default runs such a batch as `scheduled`.
    interactive_max_units: int = Field(1000, ge=1, le=100_000_000)
    # Which API key an `llm` agent may have sent where: "NAME=host|host,NAME=host". A spec names
    # the variable (api_key_env), never the key; without this a spec could send the operator's
    # key to a server of its own (docs/alympics.md, "Keys").
    llm_key_hosts: str = "OPENAI_API_KEY=api.openai.com"
    # Hosts an agent's endpoint (an `llm` agent's base_url, an HTTP agent's url) may name in a
    # spec from the API or a schedule (comma-separated). Empty: the CLI's own user may name any
    # (they are the operator), the API none.
    agent_hosts: str = ""
    # Paths and hosts from outside (docs/security.md, "Every path and host is confined"):
    # folders (comma-separated) a Mario agent's `sb3:` checkpoint must lie under (its real
    # path). Empty: the CLI's own user may name any file (they are the operator), the API none.
    checkpoint_roots: str = ""
    # Hosts a race's remote `repo` URL may name (comma-separated `host` or `host:port`, IPv6 as
    # `[::1]`). Empty: the CLI's own user may name any (they are the operator), the API none.
    repo_hosts: str = ""
    # The total deadline of a git network operation: a worker's clone (git killed past it),
    # and the shorter one of `ls-remote` while a spec is validated (it holds an API thread).
    git_timeout_s: float = Field(120.0, gt=0, le=86_400, allow_inf_nan=False)
    git_check_timeout_s: float = Field(15.0, gt=0, le=3600, allow_inf_nan=False)

    def repo_root_list(self) -> list[Path]:
        return [Path(p.strip()) for p in self.repo_roots.split(",") if p.strip()]

    def repo_remote_schemes(self) -> list[str]:
        return [s.strip().lower() for s in self.repo_remotes.split(",") if s.strip()]

    def checkpoint_root_list(self) -> list[Path]:
        return [Path(p.strip()).expanduser() for p in self.checkpoint_roots.split(",") if p.strip()]

    def repo_host_list(self) -> list[str]:
        return [h.strip().lower() for h in self.repo_hosts.split(",") if h.strip()]

    def agent_host_list(self) -> list[str]:
        return [h.strip().lower() for h in self.agent_hosts.split(",") if h.strip()]

    def llm_key_host_map(self) -> dict[str, set[str]]:
        hosts: dict[str, set[str]] = {}
        for pair in self.llm_key_hosts.split(","):
            name, _, listed = pair.partition("=")
            if name.strip():
                hosts.setdefault(name.strip(), set()).update(
                    h.strip().lower() for h in listed.split("|") if h.strip()
                )
        return hosts

    def api_token_list(self) -> list[str]:
        return [t.strip() for t in self.api_tokens.get_secret_value().split(",") if t.strip()]

    @field_validator("redis_url")
    @classmethod
    def _known_scheme(cls, url: str | None) -> str | None:
        if not url:
            return None  # ARENA_REDIS_URL= (empty) means unset: the embedded default
        check_url(url)
        return url

    @field_validator("key_prefix")
    @classmethod
    def _printable_prefix(cls, prefix: str) -> str:
        if not prefix or not prefix.isprintable() or any(c.isspace() for c in prefix):
            raise ValueError("must be printable, without spaces")
        return prefix


def current_settings() -> ArenaSettings:
    """`ArenaSettings()`, parsed once per distinct set of ARENA_ variables: parsing costs about
    4 ms, and a worker asks for its settings on every chunk (docs/performance.md)."""
    arena_env = frozenset(
        (name.upper(), value)
        for name, value in os.environ.items()
        if name.upper().startswith("ARENA_")
    )
    return _settings_for(arena_env).model_copy()


@lru_cache(maxsize=16)
def _settings_for(arena_env: frozenset[tuple[str, str]]) -> ArenaSettings:
    return ArenaSettings()


def load_settings() -> ArenaSettings:
    """The settings, or one line naming the bad variable (InputError)."""
    try:
        return ArenaSettings()
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = "ARENA_" + "_".join(str(p) for p in error["loc"]).upper()
            message = str(error.get("ctx", {}).get("error", error["msg"]))
            got = error.get("input")
            shown = f" (got {got!r:.60})" if isinstance(got, str) else ""
            problems.append(f"{name}: {message}{shown}")
        raise InputError("; ".join(problems)) from None


def celery_url(redis_url: str) -> str:
    """Celery/kombu spell a unix socket redis+socket://; redis-py spells it unix://."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url.removeprefix("unix://")
    return redis_url
