"""The worker as deployed (compose, Kubernetes) can make the jails untrusted code runs in, and
without Arena's seccomp profile it refuses untrusted code instead of running it unjailed.

Real engine, real worker image (built from this tree by scripts/test): a container started as
compose starts `worker-cpu` (read-only root, no capabilities, no new privileges, the worker's
uid 10001), with deploy/seccomp/arena-worker.json and with the engine's default profile.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.docker_support import DOCKER_GROUP, ROOT, WORKER_IMAGE, require_engine, require_image

pytestmark = [pytest.mark.integration, DOCKER_GROUP]
PROFILE = ROOT / "deploy" / "seccomp" / "arena-worker.json"

# Inside the container: probe, then run a jailed Python that tries what a hostile agent would.
SCRIPT = r"""
import json, os, subprocess
from pathlib import Path
from workers.sandbox import bwrap, seccomp
why = bwrap.probe()
report = {"probe": why, "own_proc": bwrap.own_proc() if why is None else None}
if why is None:
    os.makedirs("/tmp/unit")
    fd = seccomp.jail_filter()
    jail = bwrap.Jail(workdir=Path("/tmp/unit"), readable=bwrap.python_paths(),
                      env=bwrap.default_env())
    attempt = (
        "import ctypes, json, os, socket\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "out = {'uid': os.getuid(), 'env': sorted(os.environ)}\n"
        "out['unshare'] = libc.unshare(0x10000000)\n"
        "out['worker_env_visible'] = os.path.exists('/proc/1/environ')\n"
        "out['docker_socket'] = os.path.exists('/var/run/docker.sock')\n"
        "s = socket.socket(); s.settimeout(1)\n"
        "out['tcp'] = s.connect_ex(('127.0.0.1', 6379))\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(jail.argv(["/opt/arena/bin/python", "-c", attempt], seccomp_fd=fd),
                          capture_output=True, text=True, pass_fds=[fd], timeout=60)
    report["jailed"] = json.loads(done.stdout) if done.returncode == 0 else done.stderr
print(json.dumps(report))
"""


def run_worker_container(security_opt: list[str]) -> dict[str, Any]:
    client = require_engine()
    image = require_image(WORKER_IMAGE)
    output = client.containers.run(
        image,
        ["python", "-c", SCRIPT],
        remove=True,
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": ""},
        cap_drop=["ALL"],
        user="10001:10001",
        security_opt=["no-new-privileges:true", *security_opt],
        environment={"ARENA_REDIS_URL": "redis://:hunter2@127.0.0.1:6379/0"},
    )
    report: dict[str, Any] = json.loads(output.decode().strip().splitlines()[-1])
    return report


def test_a_worker_under_arenas_profile_makes_jails_that_see_nothing_of_it() -> None:
    report = run_worker_container([f"seccomp={PROFILE.read_text()}"])
    assert report["probe"] is None
    jailed = report["jailed"]
    assert isinstance(jailed, dict), jailed
    assert jailed["uid"] == 65534
    assert not any(name.startswith("ARENA_") for name in jailed["env"])
    assert jailed["unshare"] == -1  # the jail's own filter: no namespaces of its own
    assert jailed["worker_env_visible"] is False  # no /proc of the worker (none, or its own)
    assert jailed["docker_socket"] is False
    assert jailed["tcp"] != 0  # no network


def test_under_the_engines_default_profile_no_jail_starts_and_the_probe_says_why() -> None:
    report = run_worker_container([])
    assert report["probe"] is not None
    assert "arena-worker.json" in report["probe"]  # it names the fix
