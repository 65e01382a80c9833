"""Reading an action out of a model's answer, strictly (docs/alympics.md, "Answers").

The answer must contain a JSON object with an "action" key: the whole answer (what JSON mode
gives), else the first such object in the text (a model that wraps it in prose or a ``` block).
Nothing else is guessed: "I cooperate" is not an action. Whether the action is legal is the
game's to say (Game.parse_action); an answer that fails either is asked again.
"""

from __future__ import annotations

import json
from typing import Any

MAX_ANSWER_CHARS = 20_000
REASK = (
    "Your answer could not be used: {why}. Reply with only a JSON object "
    '{{"action": <your action>}}, where the action is {action_format}.'
)


class UnparseableAnswer(ValueError):
    pass


def extract_action(content: str) -> Any:
    text = content.strip()
    if not text:
        raise UnparseableAnswer("the answer is empty")
    if len(text) > MAX_ANSWER_CHARS:
        raise UnparseableAnswer(f"the answer is over {MAX_ANSWER_CHARS:,} characters")
    whole = _loads(text)
    if isinstance(whole, dict) and "action" in whole:
        return whole["action"]
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            found, _ = decoder.raw_decode(text, start)
        except ValueError:
            found = None
        if isinstance(found, dict) and "action" in found:
            return found["action"]
        start = text.find("{", start + 1)
    raise UnparseableAnswer('no JSON object with an "action" in the answer')


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
