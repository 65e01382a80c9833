"""A Mario agent as a spec names it (tasks/workloads/mario.py's agent model): a built-in, an
entry point, a Stable-Baselines3 checkpoint or an image. Which checkpoint files a spec may name
is tasks/checkpoint_policy.py's."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tasks.spec import SpecModel
from tasks.workloads.untrusted import IMAGE_REF
from workers.agents import ENTRY_POINT

BUILTIN_NAMES = ("random", "right", "jump-right")  # workers.mario.agents.BUILTIN (a test checks)
# An agent's name: a name, or a checkpoint of a training run, `<run>@<steps>` (`ppo-a@500k`,
# docs/mario.md "Series"): the steps a number, with k (thousands) or M (millions).
AgentName = Annotated[
    str,
    Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}(@[0-9]{1,12}[kM]?)?$", max_length=64),
]


class Preprocess(SpecModel):
    """The observation preprocessing a checkpoint was trained with (the runner applies it)."""

    grayscale: bool = True
    resize: Annotated[int, Field(ge=8, le=256)] = 84
    frame_stack: Annotated[int, Field(ge=1, le=16)] = 4


class MarioAgentSpec(SpecModel):
    """A built-in (the name, or `builtin:`), a Python entry point, a Stable-Baselines3
    checkpoint (`sb3: path.zip`, with its `preprocess`), or a Docker image serving the agent
    contract on a unix socket (`image:`, docs/agents.md "Agents as images")."""

    name: AgentName
    builtin: str | None = None
    entry_point: Annotated[str, Field(pattern=ENTRY_POINT.pattern)] | None = None
    sb3: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    image: Annotated[str, Field(pattern=IMAGE_REF)] | None = None
    # The per-step timeout of an agent run out of the worker: an image, an entry point or a
    # checkpoint in the agent sandbox (None: 10 s).
    timeout_s: Annotated[float, Field(gt=0, le=600)] | None = None
    preprocess: Preprocess | None = None
    device: Literal["cpu", "cuda"] = "cpu"
    version: Annotated[str, Field(min_length=1, max_length=200)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> MarioAgentSpec:
        kinds = [k for k in ("entry_point", "sb3", "image") if getattr(self, k)]
        if len(kinds) > 1 or (kinds and self.builtin):
            raise ValueError("give one of builtin, entry_point, sb3 or image")
        if not kinds and (self.builtin or self.name) not in BUILTIN_NAMES:
            raise ValueError(
                f"unknown built-in agent {self.builtin or self.name!r} (built-ins: "
                f"{', '.join(BUILTIN_NAMES)}; or give entry_point: package.module:factory, "
                "sb3: path/to/model.zip, or image: name:tag)"
            )
        if self.preprocess is not None and not self.sb3:
            raise ValueError("preprocess: applies to an sb3 checkpoint")
        if self.timeout_s is not None and not kinds:
            raise ValueError("timeout_s: applies to an agent run out of the worker, not a built-in")
        if self.image and self.device == "cuda":
            raise ValueError("device: an image agent runs on the CPU (no GPU in its container)")
        return self
