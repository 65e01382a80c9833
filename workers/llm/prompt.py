"""The prompt of one move, rendered from the game's self-describing observation by a template.

A template is text with `{field}` placeholders (Python's str.format; `{{` and `}}` are literal
braces). Fields: game, player, n_players, round, rounds, rules, action_format, private (the
observation's other keys, e.g. the auction's value, one "Name: value" line each, after a blank
line; empty when there are none), history (one line per round played, oldest first, or "(none
yet)"), observation (the whole observation as JSON). The default is prompts/default.txt.
"""

from __future__ import annotations

import json
import string
from importlib import resources
from typing import Any

DEFAULT_TEMPLATE = (resources.files("workers.llm") / "prompts" / "default.txt").read_text()
STANDARD = ("game", "player", "n_players", "round", "rounds", "rules", "action_format", "history")
FIELDS = frozenset({*STANDARD, "private", "observation"})


def check_template(text: str) -> None:
    """ValueError naming the first unknown, indexed or formatted field: a template only places
    the fields above (no attribute access, no format specs that could fail mid-batch)."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(f"prompt template: {exc}") from None
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if field not in FIELDS or spec or conversion:
            raise ValueError(
                f"prompt template: unknown field {{{field}}} (fields: {', '.join(sorted(FIELDS))})"
            )


def history_lines(observation: dict[str, Any]) -> str:
    me = observation["player"]
    lines = []
    for number, entry in enumerate(observation["history"], start=1):
        moves = ", ".join(
            f"player {p}{' (you)' if p == me else ''} played {json.dumps(action)}"
            for p, action in enumerate(entry["actions"])
        )
        lines.append(f"Round {number}: {moves}; your payoff: {entry['payoff']:g}")
    return "\n".join(lines) or "(none yet)"


def private_lines(observation: dict[str, Any]) -> str:
    extra = {k: v for k, v in observation.items() if k not in STANDARD and k != "player"}
    if not extra:
        return ""
    return "\n\n" + "\n".join(
        f"{key.replace('_', ' ').capitalize()}: {json.dumps(value)}" for key, value in extra.items()
    )


def render(template: str, observation: dict[str, Any]) -> str:
    fields = {key: observation[key] for key in STANDARD if key != "history"}
    fields["history"] = history_lines(observation)
    fields["private"] = private_lines(observation)
    fields["observation"] = json.dumps(observation, sort_keys=True)
    return template.format_map(fields)
