"""What a spec says about an `llm` agent: the endpoint, the model, sampling, the prompt, the
limits the endpoint is held to and its prices."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workers.llm.prompt import DEFAULT_TEMPLATE, check_template

# An environment variable a key may be read from; never an Arena, Celery, Redis or cloud
# setting (ARENA_REDIS_URL holds the cluster's password). Operators also say which hosts each
# key may go to (ARENA_LLM_KEY_HOSTS, tasks/settings.py).
KEY_ENV = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
REFUSED_KEY_ENVS = ("ARENA_", "CELERY_", "REDIS", "AWS_", "DOCKER_", "KUBE")
MAX_TEMPLATE_CHARS = 20_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class LlmLimits(_Model):
    """Shared by every worker that calls the same endpoint and model with the same limits."""

    requests_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    tokens_per_minute: Annotated[int, Field(ge=1, le=1_000_000_000)] | None = None
    concurrent: Annotated[int, Field(ge=1, le=1024)] | None = None


class LlmPrices(_Model):
    """US dollars per 1,000 tokens."""

    prompt_per_1k: Annotated[float, Field(ge=0, le=1000)] = 0.0
    completion_per_1k: Annotated[float, Field(ge=0, le=1000)] = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.prompt_per_1k + completion_tokens * self.completion_per_1k
        ) / 1000


class LlmConfig(_Model):
    base_url: Annotated[str, Field(pattern=r"^https?://[^\s]+$", max_length=500)]
    model: Annotated[str, Field(min_length=1, max_length=200)]
    # The name of the worker's environment variable holding the key (never the key itself).
    api_key_env: str | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    seed: Annotated[int, Field(ge=0, lt=2**31)] | None = 0
    max_tokens: Annotated[int, Field(ge=1, le=32_768)] = 64
    # "default" or a template file's path (read once, at submission, into `template`).
    prompt: Annotated[str, Field(min_length=1, max_length=500)] = "default"
    template: Annotated[str, Field(min_length=1, max_length=MAX_TEMPLATE_CHARS)] | None = None
    # response_format {"type": "json_object"}: off for an endpoint that refuses it.
    json_mode: bool = True
    reasks: Annotated[int, Field(ge=0, le=5)] = 2  # an unparseable or illegal answer is re-asked
    retries: Annotated[int, Field(ge=0, le=10)] = 3  # 429, 5xx, connection errors, timeouts
    timeout_s: Annotated[float, Field(gt=0, le=600)] = 60.0  # per request
    limits: LlmLimits = LlmLimits()
    prices: LlmPrices = LlmPrices()

    @field_validator("api_key_env")
    @classmethod
    def _key_env(cls, name: str | None) -> str | None:
        if name is not None and (not KEY_ENV.match(name) or name.startswith(REFUSED_KEY_ENVS)):
            raise ValueError(
                f"api_key_env {name!r}: the name of an environment variable holding an API key "
                f"(upper case; not one starting {', '.join(REFUSED_KEY_ENVS)})"
            )
        return name

    @field_validator("base_url")
    @classmethod
    def _host(cls, url: str) -> str:
        if not urlsplit(url).hostname:
            raise ValueError(f"base_url {url!r} names no host")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _read_template(self) -> LlmConfig:
        if self.template is None:
            text = DEFAULT_TEMPLATE if self.prompt == "default" else _read(self.prompt)
            object.__setattr__(self, "template", text)
        check_template(self.template or "")
        return self

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).hostname or ""

    @property
    def template_sha256(self) -> str:
        return hashlib.sha256((self.template or "").encode()).hexdigest()

    def identity(self) -> dict[str, object]:
        """What a model's fingerprint covers (docs/alympics.md): the model, the endpoint's host,
        sampling, the prompt's template and how answers are asked for and parsed."""
        return {
            "model": self.model,
            "host": self.host,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "template_sha256": self.template_sha256,
            "json_mode": self.json_mode,
            "reasks": self.reasks,
        }


def _read(path: str) -> str:
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"prompt: cannot read template {path!r} ({type(exc).__name__})") from None
    if len(text) > MAX_TEMPLATE_CHARS:
        raise ValueError(f"prompt: template {path!r} is over {MAX_TEMPLATE_CHARS:,} characters")
    return text
