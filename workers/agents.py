"""Loading agents given as Python entry points (`package.module:factory`)."""

from __future__ import annotations

import importlib
import re
from typing import Any

ENTRY_POINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def load_entry_point(spec: str) -> Any:
    """Import `package.module:factory` and call the factory with no arguments."""
    if not ENTRY_POINT.match(spec):
        raise ValueError(f"entry point {spec!r} is not of the form package.module:factory")
    module_name, attribute = spec.split(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    return factory()
