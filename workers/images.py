"""An agent image's identity: the content id an image agent is fingerprinted by at submission
(`image_fingerprint`, asked of the Docker engine) and run by on the workers (`image_to_run`), so
a tag moved since still runs the submitted image. Apart from workers/fingerprint.py, which the
sandbox imports: this module needs the engine's client (workers/sandbox/containers.py)."""

from __future__ import annotations

import os

from workers.fingerprint import AgentFingerprint, FingerprintError
from workers.sandbox.containers import EngineUnavailable, docker_client


def image_fingerprint(ref: str) -> AgentFingerprint:
    """The content id of the image `ref` names on the Docker engine (DOCKER_HOST): the sha256 of
    its config, the same for a local build (which has no RepoDigests) and a pulled image."""
    import docker.errors  # here: only workers that use Docker need the engine

    try:
        client = docker_client(timeout_s=30)
    except EngineUnavailable as exc:
        raise FingerprintError(f"cannot resolve image {ref!r}: {exc}") from None
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        where = os.environ.get("DOCKER_HOST", "the local socket")
        raise FingerprintError(
            f"the Docker engine at {where} has no image {ref!r} (build or pull it first)"
        ) from None
    except docker.errors.APIError as exc:
        raise FingerprintError(f"cannot resolve image {ref!r}: {exc.explanation}") from None
    finally:
        client.close()
    digests = image.attrs.get("RepoDigests") or []
    detail = f"image {ref}" + (f" ({digests[0]})" if digests else "")
    return AgentFingerprint(kind="image", digest=str(image.id), detail=detail)


def image_to_run(image: str, fingerprint: AgentFingerprint | None) -> str:
    """The submitted content id when the batch has one, else the reference as given (a spec
    that declares `version:` is taken on trust)."""
    if fingerprint is not None and fingerprint.kind == "image":
        return fingerprint.digest
    return image
