"""What a hostile agent tries, in one function of the standard library only, so that both an
entry-point agent (a package the test writes) and a pickle payload hidden in an SB3 checkpoint
can carry this file's source whole (tests/security/test_hostile_agents.py).

`attack(cfg)` tries, and reports in one printed line (`HOSTILE {json}`) what came of each try:
(a) writing a leaderboard through Redis: the URL in its environment, in /proc/*/environ and
/proc/*/cmdline, the embedded Redis's unix socket, the default port and the test Redis's port;
(b) reading the API token (environment, /proc) and ~/.ssh; (c) connecting out to the test's
loopback listener; (d) writing outside its /tmp; (e) a fork bomb (bounded: a jail that let it
fork must not take the machine down with it); (f) filling the disk (bounded the same way); (g)
the shared inference hosts' sockets (workers/sandbox/inference_host.py): listing their folders
and connecting to every socket there, which would let it answer for, or ask, another agent's
checkpoint.
"""

import contextlib
import json
import os
import socket

FORKS = 16  # a bomb's first generations: enough to tell a jail that lets it fork
FILL_LIMIT = 256 << 20  # more than the agent's /tmp holds


def _secrets_in(text, cfg):
    found = [name for name in ("password", "token", "ssh") if cfg[name] in text]
    return found + (["redis url"] if "redis://" in text else [])


def _proc_leaks(cfg):
    seen, leaked = [], []
    for pid in [p for p in os.listdir("/proc") if p.isdigit()] if os.path.isdir("/proc") else []:
        seen.append(pid)
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as handle:
                    text = handle.read().decode(errors="replace")
            except OSError:
                continue
            leaked += [f"{pid}/{part}: {s}" for s in _secrets_in(text, cfg)]
    return seen, leaked


def _redis(family, address, cfg):
    """AUTH with the password (as if it had found it), then put itself at #1 of every board."""
    command = "".join(f"ZADD {key} 1000000000 {cfg['name']}\r\n" for key in cfg["board_keys"])
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(address)
            sock.sendall(f"AUTH {cfg['password']}\r\n{command}".encode())
            return "answered: " + sock.recv(200).decode(errors="replace")
    except OSError as exc:
        return f"failed: {type(exc).__name__}"


def _read(path):
    try:
        with open(os.path.expanduser(path)) as handle:
            return "read: " + handle.read(200)
    except OSError as exc:
        return f"failed: {type(exc).__name__}"


def _write(path):
    try:
        with open(path, "w") as handle:
            handle.write("owned by a hostile agent")
        return "written"
    except OSError as exc:
        return f"failed: {type(exc).__name__}"


def _fork_bomb():
    started = 0
    for _ in range(FORKS):
        try:
            pid = os.fork()
        except OSError:
            continue
        if pid == 0:
            os._exit(0)
        started += 1
        os.waitpid(pid, 0)
    return started


def _fill(folder):
    written = 0
    try:
        with open(os.path.join(folder, "fill"), "wb") as handle:
            while written < FILL_LIMIT:
                handle.write(bytes(1 << 20))
                handle.flush()
                written += 1 << 20
    except OSError as exc:
        return written, f"stopped: {type(exc).__name__}"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, "fill"))
    return written, "not stopped"


def _hosts(folders):
    """Each folder's listing, then a connection to each socket in it: "failed: ..." for each
    try that did not get through (a jail's /tmp is its own: the folder is not even there)."""
    tries = {}
    for folder in folders:
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".sock"))
        except OSError as exc:
            tries[folder] = f"failed: {type(exc).__name__}"
            continue
        tries[folder] = f"listed: {len(names)} sockets"
        for name in names:
            path = os.path.join(folder, name)
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(2)
                    sock.connect(path)
                tries[path] = "connected"
            except OSError as exc:
                tries[path] = f"failed: {type(exc).__name__}"
    return tries


def attack(cfg):
    out = {"name": cfg["name"]}
    out["env_leaks"] = _secrets_in(json.dumps(dict(os.environ)), cfg)
    out["proc_seen"], out["proc_leaks"] = _proc_leaks(cfg)
    tcp = [("127.0.0.1", 6379), ("127.0.0.1", cfg["redis_port"])]
    out["redis"] = {f"tcp {port}": _redis(socket.AF_INET, (h, port), cfg) for h, port in tcp}
    for path in cfg["redis_sockets"]:
        out["redis"][path] = _redis(socket.AF_UNIX, path, cfg)
    out["ssh"] = [_read("~/.ssh/id_ed25519"), _read(cfg["ssh_path"])]
    try:
        socket.create_connection(("127.0.0.1", cfg["listener_port"]), timeout=2).close()
        out["outside"] = "connected"
    except OSError as exc:
        out["outside"] = f"failed: {type(exc).__name__}"
    out["writes"] = {path: _write(path) for path in cfg["write_paths"]}
    out["forks"] = _fork_bomb()
    out["fill"] = {folder: _fill(folder) for folder in ("/tmp", *cfg["fill_folders"])}
    out["hosts"] = _hosts(cfg["host_dirs"])
    print("HOSTILE " + json.dumps(out), flush=True)
    return out
