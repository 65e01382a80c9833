"""The agent of an Alympics spec: what kinds there are, and what each needs."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from tasks.spec import Name, SpecModel
from tasks.workloads.untrusted import IMAGE_REF
from workers.agents import ENTRY_POINT
from workers.llm.config import LlmConfig


class AlympicsAgent(SpecModel):
    """`builtin`, a Python entry point, an HTTP endpoint (any language), a Docker image serving
    the agent contract on a unix socket (docs/agents.md), or a model behind a chat-completions
    endpoint (`llm`, docs/alympics.md)."""

    name: Name
    entry_point: Annotated[str, Field(pattern=ENTRY_POINT.pattern)] | None = None
    url: Annotated[str, Field(pattern=r"^https?://")] | None = None
    image: Annotated[str, Field(pattern=IMAGE_REF)] | None = None
    llm: LlmConfig | None = None
    # Per move, for the agents Arena waits on: HTTP, image and (sandboxed) entry-point agents.
    timeout_s: Annotated[float, Field(gt=0, le=600)] = 10.0
    # Identifies the agent's code when its files cannot (an HTTP agent) or should not be hashed.
    version: Annotated[str, Field(min_length=1, max_length=200)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> AlympicsAgent:
        kinds = (self.entry_point, self.url, self.image, self.llm)
        if sum(k is not None for k in kinds) > 1:
            raise ValueError("give one of entry_point, url, image or llm")
        if all(k is None for k in kinds) and self.name != "builtin":
            raise ValueError(
                f"unknown built-in agent {self.name!r} (built-in: builtin; or give "
                "entry_point: package.module:factory, url: http://..., image: name:tag, or "
                "llm: {base_url: ..., model: ...})"
            )
        return self
