"""Sandboxes for running code we did not write (race checks): one interface, several backends.

The interface (`Sandbox`, its sessions, limits and results) is re-exported here; choosing a
backend is workers/sandbox/choose.py's: `get_sandbox("local")` returns the local-process sandbox,
`get_sandbox("docker")` the Docker sandbox (a sibling container per session: a check's commands
share one); both behind the same `Sandbox` interface. docs/sandbox.md says what each isolates.
"""

from workers.sandbox.base import (
    CommandResult,
    Sandbox,
    SandboxLimits,
    SandboxSession,
    SandboxUnavailable,
    scrubbed_environment,
)

__all__ = [
    "CommandResult",
    "Sandbox",
    "SandboxLimits",
    "SandboxSession",
    "SandboxUnavailable",
    "scrubbed_environment",
]
