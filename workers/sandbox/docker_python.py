"""What a Docker sandbox's image has to make a race's Python environment with
(workers/race/builders_docker.py): its base interpreter (outside the image's Arena), that
interpreter's version and the wheel platforms it takes, and an interpreter whose pip can install
into another; asked of a container of the image with no network, once per image ID."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workers.sandbox.base import SandboxUnavailable
from workers.sandbox.containers import EngineUnavailable, hardening, owner_labels
from workers.sandbox.docker_mounts import ARENA_BIN

if TYPE_CHECKING:
    from workers.sandbox.docker import DockerSandbox

PROBE_TIMEOUT_S = 60.0
# An interpreter of the image with a pip that can install into another (pip >= 22.3: --python):
# Arena's, else the image's python3. It says what the environment is made for.
FIND_PIP = (
    f'for p in {ARENA_BIN}/python python3; do if "$p" -c "import pip" 2>/dev/null; then '
    'exec "$p" -c "$1"; fi; done; echo "no Python with pip in the image" >&2; exit 3'
)
PROBE = """\
import json, os, platform, sys
from pip._vendor.packaging import tags
v = sys.version_info
base = os.path.join(sys.base_prefix, "bin", f"python{v.major}.{v.minor}")
base = base if os.path.exists(base) else getattr(sys, "_base_executable", sys.executable)
platforms = list(dict.fromkeys(t.platform for t in tags.sys_tags()))
found = [base, platform.python_version(), sys.executable, tags.interpreter_name(), platforms]
print(json.dumps(found))
"""


@dataclass(frozen=True)
class ImagePython:
    """What an image's environments are made with, asked of a container once per image ID."""

    image_id: str
    base: str  # the base interpreter, outside the image's Arena
    version: str  # its full version: pip resolves for it
    pip: str  # the interpreter whose pip installs
    implementation: str  # "cp"
    platforms: tuple[str, ...]  # the wheel platform tags it takes, best first


_probed: dict[str, ImagePython] = {}


def image_python(sandbox: DockerSandbox) -> ImagePython:
    """The interpreter of `sandbox`'s image (by its ID: a tag moves when the image is rebuilt);
    SandboxUnavailable if the engine, the image or its pip cannot say."""
    import docker.errors  # here: only workers that use Docker need the engine

    try:
        client = sandbox.engine()
        image_id = str(client.images.get(sandbox.image).id)
        if image_id not in _probed:
            out = client.containers.run(
                image_id,
                ["-c", FIND_PIP, "sh", PROBE],
                entrypoint=["/bin/sh"],
                user="65534:65534",
                network_mode="none",
                labels=owner_labels("command", time.time() + PROBE_TIMEOUT_S),
                remove=True,
                **hardening(512, None, 64),
            )
            said = out.decode().splitlines()[-1]  # what the probe printed last
            base, version, pip, implementation, platforms = json.loads(said)
            found = ImagePython(image_id, base, version, pip, implementation, tuple(platforms))
            _probed[image_id] = found
    except docker.errors.ImageNotFound:
        where = os.environ.get("DOCKER_HOST", "the local socket")
        why = f"image {sandbox.image} not found on the Docker engine at {where}"
        raise SandboxUnavailable(f"{why} (build it: scripts/build-images; never pulled)") from None
    except (EngineUnavailable, docker.errors.DockerException, OSError, ValueError, KeyError) as exc:
        why = f"the image {sandbox.image} cannot make a race's environment: {exc}"
        raise SandboxUnavailable(why[:1000]) from None
    return _probed[image_id]
