"""The llm agent's spec, prompt and answers, without an endpoint: what is refused at
submission, what a model's fingerprint covers, how answers are read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tasks.validation import InputError
from tasks.workloads import stored_units, validate_batch
from workers.games import GAMES
from workers.llm.answers import UnparseableAnswer, extract_action
from workers.llm.prompt import DEFAULT_TEMPLATE, check_template, render

ITEMS = ["prisoners_dilemma", "public_goods", "auction", "colonel_blotto", "congestion"]


def spec(**llm: Any) -> dict[str, Any]:
    config = {"base_url": "http://127.0.0.1:8000/v1", "model": "m", **llm}
    return {"workload": "alympics", "agents": [{"name": "m", "llm": config}], "items": ITEMS}


def fingerprint(**llm: Any) -> str:
    return validate_batch(spec(**llm), asker="operator").identity.agents["m"].digest


def test_a_models_fingerprint_covers_what_changes_its_answers_and_nothing_else(tmp_path: Path):
    base = fingerprint()
    for changed in (
        {"model": "other"},
        {"base_url": "http://127.0.0.2:8000/v1"},
        {"temperature": 0.5},
        {"seed": 1},
        {"max_tokens": 65},
        {"json_mode": False},
        {"reasks": 0},
        {"template": DEFAULT_TEMPLATE + "\nThink first."},
    ):
        assert fingerprint(**changed) != base, changed
    for same in (
        {"base_url": "http://127.0.0.1:9999/other/v1"},  # the host is the endpoint's identity
        {"retries": 0},
        {"timeout_s": 5.0},
        {"limits": {"requests_per_minute": 10}},
        {"prices": {"prompt_per_1k": 1.0}},
    ):
        assert fingerprint(**same) == base, same
    template = tmp_path / "prompt.txt"
    template.write_text(DEFAULT_TEMPLATE)
    assert fingerprint(prompt=str(template)) == base  # the file's text, not its name


@pytest.mark.parametrize(
    "template", ["{rules.__class__}", "{observation[0]}", "{secret}", "{round:>10}", "{rules!r}"]
)
def test_a_template_places_known_fields_only(template: str):
    with pytest.raises(ValueError, match="unknown field"):
        check_template(template)
    with pytest.raises(InputError, match="template"):
        validate_batch(spec(template=template), asker="operator")


def test_only_the_operator_names_a_template_file(tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the operator's file")
    with pytest.raises(InputError, match=r"agents\[0\]\.llm\.prompt"):
        validate_batch(spec(prompt=str(secret)))  # the API's token holder
    with pytest.raises(InputError, match=r"agents\[0\]\.llm\.prompt"):
        validate_batch(spec(prompt=str(secret)), asker="schedule")
    batch = validate_batch(spec(prompt=str(secret)), asker="operator")
    assert batch.agents[0].llm.template == "the operator's file"


def test_an_endpoint_outside_the_operators_list_is_refused_unless_the_operator_asks():
    with pytest.raises(InputError, match=r"agents\[0\]\.llm\.base_url: '127\.0\.0\.1'"):
        validate_batch(spec())  # an API token holder; ARENA_AGENT_HOSTS lists none
    batch = validate_batch(spec(), asker="operator")
    # A stored batch is rebuilt as it was accepted (a reducer, a report): nothing is re-asked.
    rebuilt, units = stored_units(batch.normalised(), batch.identity)
    assert rebuilt.batch_id == batch.batch_id and len(units) == 13


@pytest.mark.parametrize("name", ["ARENA_REDIS_URL", "CELERY_BROKER_URL", "REDIS_PASSWORD"])
def test_a_key_never_comes_from_a_cluster_setting(name: str):
    with pytest.raises(InputError, match="api_key_env"):
        validate_batch(spec(api_key_env=name), asker="operator")


def test_a_key_goes_only_where_the_operator_sends_it(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(InputError, match=r"llm\.base_url: OPENAI_API_KEY may be sent only to"):
        validate_batch(spec(api_key_env="OPENAI_API_KEY"), asker="operator")
    with pytest.raises(InputError, match=r"llm\.api_key_env: MY_KEY is not a key"):
        validate_batch(spec(api_key_env="MY_KEY"), asker="operator")
    monkeypatch.setenv("ARENA_LLM_KEY_HOSTS", "MY_KEY=127.0.0.1|localhost")
    assert validate_batch(spec(api_key_env="MY_KEY"), asker="operator").agents[0].llm


def test_the_budget_is_a_run_option_in_neither_identity():
    plain = validate_batch(spec(), asker="operator")
    budgeted = validate_batch({**spec(), "cost_budget_usd": 5}, asker="operator")
    assert budgeted.batch_id == plain.batch_id
    assert budgeted.protocol_fingerprint == plain.protocol_fingerprint
    assert budgeted.normalised()["cost_budget_usd"] == 5


@pytest.mark.parametrize(
    ("answer", "action"),
    [
        ('{"action": "C"}', "C"),
        ('  {"action": [20, 20, 20, 20, 20]}\n', [20, 20, 20, 20, 20]),
        ('I will cooperate.\n```json\n{"action": "C"}\n```', "C"),
        ('{"thought": "x"} then {"action": 7.5}', 7.5),
    ],
)
def test_an_action_is_a_json_object_with_an_action(answer: str, action: Any):
    assert extract_action(answer) == action


@pytest.mark.parametrize(
    "answer", ["", "I cooperate", "C", '{"move": "C"}', '["action", "C"]', "{" * 30_000]
)
def test_nothing_else_is_guessed(answer: str):
    with pytest.raises(UnparseableAnswer):
        extract_action(answer)


def test_the_prompt_says_what_the_observation_says():
    game = GAMES["auction"](1)
    game.reset(3)
    observation = game.observation(1)
    prompt = render(DEFAULT_TEMPLATE, observation)
    assert prompt.startswith("Game: auction\nYou are player 1 of 2.")
    assert f"Value: {observation['value']}" in prompt and observation["action_format"] in prompt
    assert "(none yet)" in prompt
