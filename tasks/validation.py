"""One-line error messages for bad input: what users see instead of a traceback."""

from __future__ import annotations

import re

from pydantic import ValidationError
from pydantic_core import ErrorDetails


class InputError(ValueError):
    """Bad user input; the message is one line that names the offending field."""


class SpecRefused(InputError):
    """The spec itself is refused by a rule found only at submission (an interactive batch too
    big for its class): the API's 422, not the 409 of a conflict with what is stored."""


class RunFailed(RuntimeError):
    """A run that could not be followed to its end (Redis refusing writes for too long, the
    batch gone): one line, exit status 1."""


class ClusterUnreachable(RunFailed):
    """The cluster's Redis did not answer for ARENA_REDIS_RETRY_S: one line, exit status 3
    (nothing wrong with the input; worth trying again once Redis is back)."""


MAX_PROBLEMS = 10  # a list of a million bad values is still one readable line
MAX_SHOWN = 80  # characters of an offending value quoted back
_FIELD_HEAD = re.compile(r"[A-Za-z_][\w.\[\]]*(?=: )")


def _location(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _where(prefix: str, loc: tuple[int | str, ...]) -> str:
    """prefix ('agents[0].', 'params.', '') and the error's own location, as one path."""
    inner = _location(loc)
    if not inner:
        return prefix.rstrip(".")
    return prefix.rstrip(".") + inner if inner.startswith("[") else prefix + inner


def _join(where: str, message: str) -> str:
    """A validator's message may start with its own field ('levels_completed: ...'): one path."""
    if not where:
        return message
    head = _FIELD_HEAD.match(message)
    if head is None:
        return f"{where}: {message}"
    first = re.split(r"[.\[]", head.group(), maxsplit=1)[0]
    if where.rsplit(".", 1)[-1] == first:  # 'weights' + 'weights: ...' names it once
        return where + message[len(first) :]
    return f"{where}.{message}"


def _shown(value: object) -> str:
    """The offending value, short: never a whole structure, never a 20,000-digit number."""
    if isinstance(value, dict | list):
        return ""
    try:
        text = repr(value)
    except ValueError:  # an int beyond Python's str conversion limit
        return " (got a number too large to show)"
    return f" (got {text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + '...'})"


def _describe(error: ErrorDetails, prefix: str) -> str:
    loc = tuple(error["loc"])
    kind = error["type"]
    if loc and loc[-1] == "[key]":
        loc = loc[:-1]
        expected = error.get("ctx", {}).get("expected")
        message = f"unknown key (expected {expected})" if expected else error["msg"]
    elif kind == "extra_forbidden":
        message = "unknown field"
    elif kind == "missing":
        message = "missing required field"
    elif kind == "value_error":
        # A model validator's message may already name its field: joined, not repeated.
        return _join(_where(prefix, loc), str(error.get("ctx", {}).get("error", error["msg"])))
    else:
        message = f"{error['msg']}{_shown(error.get('input'))}"
    where = _where(prefix, loc)
    return f"{where}: {message}" if where else message


def describe_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """All problems on one line (the first few), each naming its field; prefix: where the value
    came from ('agents[0].')."""
    errors = exc.errors()
    parts = list(dict.fromkeys(_describe(e, prefix) for e in errors[:MAX_PROBLEMS]))
    if len(errors) > MAX_PROBLEMS:
        parts.append(f"and {len(errors) - MAX_PROBLEMS} more problems")
    return " ".join("; ".join(parts).split())
