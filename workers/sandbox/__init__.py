"""Sandboxes for running code we did not write (race checks): one interface, several backends.

`get_sandbox("local")` returns the local-process sandbox; a Docker backend plugs into the same
`Sandbox` interface later. docs/sandbox.md says what each isolates.
"""

from workers.sandbox.base import (
    CommandResult,
    Sandbox,
    SandboxLimits,
    get_sandbox,
    scrubbed_environment,
)

__all__ = ["CommandResult", "Sandbox", "SandboxLimits", "get_sandbox", "scrubbed_environment"]
