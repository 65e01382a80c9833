"""Sandboxes for running code we did not write (race checks): one interface, several backends.

`get_sandbox("local")` returns the local-process sandbox, `get_sandbox("docker")` the Docker
sandbox (a sibling container per session: a check's commands share one); both behind the same
`Sandbox` interface. docs/sandbox.md says what each isolates.
"""

from workers.sandbox.base import (
    CommandResult,
    Sandbox,
    SandboxLimits,
    SandboxSession,
    SandboxUnavailable,
    get_sandbox,
    scrubbed_environment,
)

__all__ = [
    "CommandResult",
    "Sandbox",
    "SandboxLimits",
    "SandboxSession",
    "SandboxUnavailable",
    "get_sandbox",
    "scrubbed_environment",
]
