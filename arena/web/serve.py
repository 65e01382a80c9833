"""`arena run --serve PORT`: the HTTP API and its page beside a run, so one laptop gets the page
of its embedded cluster (docs/api.md). The server lives in a thread of the `arena run` process
and stops when the run's Redis does: after the batch, it serves until Ctrl-C."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tasks.settings import ArenaSettings
from tasks.validation import InputError

START_TIMEOUT_S = 10.0


@contextmanager
def serving(settings: ArenaSettings, port: int | None, host: str = "127.0.0.1") -> Iterator[None]:
    """Serve the API on `host:port` during the block and, when the block ends normally (the
    batch is done), on until Ctrl-C. Nothing when `port` is None."""
    if port is None:
        yield
        return
    # The server and the app (FastAPI) only when --serve asks for them.
    import uvicorn

    from arena.web.app import create_app

    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host=host, port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="arena-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise InputError(f"--serve: cannot serve on {host}:{port} (is the port in use?)")
        time.sleep(0.05)
    try:
        yield
        _until_interrupted(port)
    finally:
        server.should_exit = True
        thread.join(START_TIMEOUT_S)


def _until_interrupted(port: int) -> None:
    print(f"serving http://127.0.0.1:{port}/ until Ctrl-C", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopped serving", file=sys.stderr, flush=True)
