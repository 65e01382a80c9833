"""One-line error messages for bad input: what users see instead of a traceback."""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import ErrorDetails


class InputError(ValueError):
    """Bad user input; the message is one line that names the offending field."""


def _location(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _describe(error: ErrorDetails) -> str:
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
        # A model validator's message already names its field.
        return str(error.get("ctx", {}).get("error", error["msg"]))
    else:
        got = error.get("input")
        shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
        message = f"{error['msg']}{shown}"
    where = _location(loc)
    return f"{where}: {message}" if where else message


def describe_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """All problems on one line, each naming its field (prefix: where the value came from)."""
    parts = [_describe(e) for e in exc.errors()]
    text = "; ".join(dict.fromkeys(parts))
    return f"{prefix}{text}".replace("\n", " ")
