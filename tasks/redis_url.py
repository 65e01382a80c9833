"""Redis clients from ARENA_REDIS_URL: the one place that reads its forms.

- `redis://`, `rediss://`, `unix://`: one Redis (redis-py's URL).
- `sentinel://[:password@]host:port[/db];sentinel://host:port;...`: Sentinels watching a
  replicated primary named by ARENA_REDIS_MASTER, the form kombu's broker and Celery's result
  backend read (transport option `master_name`). Every client asks a Sentinel where the primary
  is on each new connection, so after a failover it reconnects to the promoted replica. The
  password (and db) of the first address is the primary's and the Sentinels' own (Sentinel's
  `requirepass` set to Redis's, as compose.yaml does).

With ARENA_REDIS_WAIT_REPLICAS = N > 0, every MULTI/EXEC the Store runs (a chunk's results,
a batch's start, its end and boards) is followed on the same connection by `WAIT N timeout`;
fewer than N replicas holding it within the timeout is an error retried like an outage (the
transaction sent again: Arena's transactions are idempotent), so a write counts only once a
replica that could be promoted has it (docs/deploy.md, "Redis that fails over").
"""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel
from redis.client import Pipeline

SENTINEL = "sentinel://"
URL_SCHEMES = ("redis://", "rediss://", "unix://", SENTINEL)


# Commands that write nothing: a transaction of these alone waits for no replica (a status read
# goes on while no replica is left). Any other command, EVAL included, counts as a write.
# fmt: off
READS = frozenset((
    "EXISTS", "GET", "HEXISTS", "HGET", "HGETALL", "HKEYS", "HLEN", "HMGET", "HVALS", "LINDEX",
    "LLEN", "LRANGE", "MGET", "PTTL", "SCARD", "SISMEMBER", "SMEMBERS", "STRLEN", "TIME", "TTL",
    "TYPE", "ZCARD", "ZCOUNT", "ZRANGE", "ZRANGEBYSCORE", "ZRANK", "ZREVRANGE",
    "ZREVRANGEBYSCORE", "ZREVRANK", "ZSCORE",
))
# fmt: on


class SentinelAddress(NamedTuple):
    """What a sentinel:// URL names: the Sentinels, and the primary's db and credentials."""

    sentinels: list[tuple[str, int]]
    db: int
    username: str | None
    password: str | None


class WaitRule(NamedTuple):
    """WAIT `replicas` `timeout_ms` after every transaction (replicas 0: none)."""

    replicas: int = 0
    timeout_ms: int = 1000


class ReplicasBehind(redis.ConnectionError):
    """Fewer replicas than asked hold a transaction: retried like a lost connection."""


def is_sentinel(url: str) -> bool:
    return url.startswith(SENTINEL)


def parse_sentinels(url: str) -> SentinelAddress:
    """The Sentinels of a sentinel:// URL; ValueError saying which part is wrong."""
    sentinels, db, username, password = [], 0, None, None
    for i, part in enumerate(p.strip() for p in url.split(";")):
        if not part.startswith(SENTINEL):
            raise ValueError(f"part {i + 1} ({part[:40]!r}) does not start with sentinel://")
        try:
            split = urlsplit(part)
            host, port = split.hostname, split.port
        except ValueError as exc:
            raise ValueError(f"part {i + 1}: {exc}") from None
        if not host or port is None:
            raise ValueError(f"part {i + 1} ({split.netloc!r}) must name host:port")
        sentinels.append((host, port))
        if i == 0:
            path = split.path.strip("/") or "0"
            if not path.isdigit():
                raise ValueError(f"the db ({path!r}) must be a number")
            db = int(path)
            username = unquote(split.username) if split.username else None
            password = unquote(split.password) if split.password else None
    return SentinelAddress(sentinels, db, username, password)


def check_url(url: str) -> None:
    """ValueError unless redis-py (or, for sentinel://, Arena's reading above) takes `url`."""
    if not url.startswith(URL_SCHEMES):
        raise ValueError("must start with redis://, rediss://, unix:// or sentinel://")
    if is_sentinel(url):
        parse_sentinels(url)
        return
    try:
        redis.connection.parse_url(url)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a Redis URL ({exc})") from None


class SentinelConnection(redis.sentinel.SentinelManagedConnection):
    """Asks the Sentinels where the primary is whenever it connects again. redis-py (7.4)
    reconnects a dropped connection inside a command's retry to the address it had
    (send_packed_command -> connect_check_health): after a failover such a command knocks at
    the dead primary for as long as it retries (tests/integration/test_failover.py)."""

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self._sock:
            self.connect()  # type: ignore[no-untyped-call]
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


class WaitingPipeline(Pipeline):
    """A transaction followed by WAIT on its own connection (WAIT counts that client's writes)."""

    wait_rule = WaitRule()

    def _execute_transaction(self, connection: Any, commands: Any, raise_on_error: Any) -> Any:
        replies = super()._execute_transaction(connection, commands, raise_on_error)
        replicas, timeout_ms = self.wait_rule
        if replicas > 0 and not all(str(args[0]).upper() in READS for args, _ in commands):
            connection.send_command("WAIT", replicas, timeout_ms)
            acked = int(connection.read_response())
            if acked < replicas:
                raise ReplicasBehind(
                    f"WAIT: {acked} of {replicas} replicas hold the write after {timeout_ms} ms"
                )
        return replies


class WaitingRedis(redis.Redis):
    """redis.Redis whose transactions wait for replicas (WaitRule)."""

    wait_rule = WaitRule()

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Pipeline:
        pipe = WaitingPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.wait_rule = self.wait_rule
        return pipe


NO_WAIT = WaitRule()


def client(url: str, master: str, wait: WaitRule = NO_WAIT, **kwargs: Any) -> redis.Redis:
    """A redis-py client on `url` (any form above); kwargs go to each connection."""
    if is_sentinel(url):
        address = parse_sentinels(url)
        sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            address.sentinels, sentinel_kwargs=_sentinel_kwargs(address, kwargs)
        )
        made: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
            master,
            redis_class=WaitingRedis,
            connection_class=SentinelConnection,
            **_primary_kwargs(address),
            **kwargs,
        )
    else:
        made = WaitingRedis.from_url(url, **kwargs)
    assert isinstance(made, WaitingRedis)
    made.wait_rule = wait
    return made


def async_client(url: str, master: str, **kwargs: Any) -> redis.asyncio.Redis:
    """A redis.asyncio client on `url` (any form above; no WAIT: the API's reads only)."""
    if not is_sentinel(url):
        return redis.asyncio.Redis.from_url(url, **kwargs)
    address = parse_sentinels(url)
    sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        address.sentinels, sentinel_kwargs=_sentinel_kwargs(address, kwargs)
    )
    made: redis.asyncio.Redis = sentinel.master_for(master, **_primary_kwargs(address), **kwargs)
    return made


def transport_options(url: str, master: str) -> dict[str, Any]:
    """What kombu's broker and Celery's result backend need besides the URL to find the
    primary (nothing for one Redis)."""
    if not is_sentinel(url):
        return {}
    return {"master_name": master, "sentinel_kwargs": _sentinel_kwargs(parse_sentinels(url), {})}


def _primary_kwargs(address: SentinelAddress) -> dict[str, Any]:
    found = {"db": address.db, "username": address.username, "password": address.password}
    return {k: v for k, v in found.items() if v is not None}


def _sentinel_kwargs(address: SentinelAddress, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The Sentinels take the primary's password and the same socket timeouts."""
    found: dict[str, Any] = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}
    found.update({k: v for k, v in kwargs.items() if k.startswith("socket_")})
    if address.password is not None:
        found["password"] = address.password
    if address.username is not None:
        found["username"] = address.username
    return found
