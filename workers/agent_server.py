"""Serve one agent over HTTP on a unix socket: the agent-image contract (docs/agents.md).

    python -m workers.agent_server package.module:factory --socket /run/arena/agent.sock

The factory is Arena's usual one (docs/agents.md): called with no arguments, it returns an object
with `reset(*, seed, **context)` and `act(observation) -> action`. Arena starts the image with no
network and a host folder at /run/arena; it waits for the socket to answer `GET /health`, then:

- `POST /reset`, JSON `{"seed": int, ...context}` -> `{}`;
- `POST /act`, the observation -> `{"action": ...}`. JSON (`application/json`) for small
  observations; a frame as raw bytes (`application/octet-stream`, C order) with the headers
  `Arena-Shape` ("240,256,3"), `Arena-Dtype` ("uint8"), `Arena-Array-Key` (the observation key
  the array goes under, e.g. "frame") and `Arena-Observation` (JSON of the other keys).
- An agent that raises answers 500 `{"error": "Type: message"}` (a fault) and the server goes on.

Only the standard library (and NumPy, already there for frames) is used, so any image that has
Arena installed (`FROM arena-worker-cpu`) serves an agent with one CMD line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socketserver
import sys
import traceback
from http.server import BaseHTTPRequestHandler
from typing import Any

SOCKET = "/run/arena/agent.sock"
MAX_BODY = 64 << 20  # a frame is 180 KiB; anything near this is not an observation


class BadRequest(ValueError):
    """A request this contract does not describe (answered 400)."""


def load_factory(spec: str) -> Any:
    """Import `package.module:factory` from the working directory first (as `python -m` does,
    and as Arena's workers do), then call it."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"agent_server: {spec!r} is not of the form package.module:factory")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return getattr(importlib.import_module(module_name), attribute)()


def encode_observation(observation: Any) -> tuple[bytes, dict[str, str]]:
    """The body and headers of `POST /act` (Arena's side, workers/agent_image.py): one NumPy
    array in a dict (a Mario frame) travels as raw bytes, its other keys as JSON in a header;
    anything else as JSON. decode_observation undoes it."""
    numpy = sys.modules.get("numpy")  # no array can exist where NumPy was never imported
    if numpy is not None and isinstance(observation, dict):
        arrays = [k for k, v in observation.items() if isinstance(v, numpy.ndarray)]
        if len(arrays) == 1:
            key = arrays[0]
            array = numpy.ascontiguousarray(observation[key])
            rest = {k: v for k, v in observation.items() if k != key}
            headers = {
                "Content-Type": "application/octet-stream",
                "Arena-Shape": ",".join(map(str, array.shape)),
                "Arena-Dtype": array.dtype.str,
                "Arena-Array-Key": key,
                "Arena-Observation": json.dumps(rest, default=plain),
            }
            return array.tobytes(), headers
    body = json.dumps(observation, default=plain).encode()
    return body, {"Content-Type": "application/json"}


def decode_observation(content_type: str, headers: Any, body: bytes) -> Any:
    """The observation as the agent sees it in-process: JSON values, or a read-only NumPy array
    (under `Arena-Array-Key`, beside the JSON of `Arena-Observation`)."""
    if content_type.startswith("application/json"):
        return json.loads(body)
    if not content_type.startswith("application/octet-stream"):
        raise BadRequest(f"unsupported Content-Type {content_type!r}")
    import numpy as np  # only frames need it

    try:
        dtype = np.dtype(headers.get("Arena-Dtype", "uint8"))
        shape = tuple(int(n) for n in headers.get("Arena-Shape", str(len(body))).split(","))
        if dtype.hasobject:
            raise ValueError("object arrays are not data")
        array = np.frombuffer(body, dtype=dtype).reshape(shape)  # read-only, like the live view
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"Arena-Shape/Arena-Dtype do not describe the body: {exc}") from None
    key = headers.get("Arena-Array-Key")
    if not key:
        return array
    observation = json.loads(headers.get("Arena-Observation") or "{}")
    observation[key] = array
    return observation


def plain(value: Any) -> Any:
    """NumPy scalars and arrays an agent returns, as JSON values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


class AgentHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection for a whole episode
    server: AgentServer

    def do_GET(self) -> None:
        if self.path == "/health":
            self._answer(200, {"ok": True})
        else:
            self._answer(404, {"error": f"no {self.path}"})

    def do_POST(self) -> None:
        try:
            body = self._body()
            if self.path == "/reset":
                context = json.loads(body)
                if not isinstance(context, dict) or "seed" not in context:
                    raise BadRequest('reset takes a JSON object with "seed"')
                self.server.agent.reset(**context)
                self._answer(200, {})
            elif self.path == "/act":
                kind = self.headers.get("Content-Type", "application/json")
                observation = decode_observation(kind, self.headers, body)
                self._answer(200, {"action": self.server.agent.act(observation)})
            else:
                self._answer(404, {"error": f"no {self.path}"})
        except (BadRequest, json.JSONDecodeError) as exc:
            self._answer(400, {"error": f"bad request: {exc}"})
        except Exception as exc:  # the agent's own exception: a fault, the server goes on
            traceback.print_exc()
            self._answer(500, {"error": f"{type(exc).__name__}: {exc}"})

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 <= length <= MAX_BODY:
            raise BadRequest(f"Content-Length {length} out of range")
        return self.rfile.read(length)

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        try:
            data = json.dumps(payload, default=plain).encode()
        except (TypeError, ValueError) as exc:
            status, data = 500, json.dumps({"error": f"action not JSON: {exc}"}).encode()
        # One write for the whole answer (send_response would add a Date and two writes).
        head = f"HTTP/1.1 {status} {self.responses[status][0]}\r\nContent-Type: application/json"
        self.wfile.write(f"{head}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a line per step would bury what the agent prints

    def address_string(self) -> str:
        return "unix"  # a unix socket's peer has no address


class AgentServer(socketserver.UnixStreamServer):
    """One connection at a time: Arena asks one question at a time."""

    def __init__(self, path: str, agent: Any) -> None:
        self.agent = agent
        if os.path.exists(path):
            os.unlink(path)  # a socket left by an earlier run of this container
        super().__init__(path, AgentHandler)
        os.chmod(path, 0o666)  # the folder (private to the unit) is what guards it


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workers.agent_server", description=__doc__)
    parser.add_argument("factory", help="package.module:factory")
    parser.add_argument("--socket", default=os.environ.get("ARENA_AGENT_SOCKET", SOCKET))
    args = parser.parse_args(argv)
    agent = load_factory(args.factory)  # before the socket: ready means the agent is loaded
    with AgentServer(args.socket, agent) as server:
        print(f"agent_server: {args.factory} on {args.socket}", file=sys.stderr, flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
