"""The scripted chat-completions server (tests/llm/chat_server.py), driven by the real openai
client over real HTTP on the loopback."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest
from openai import OpenAI

from tests.llm.chat_server import GARBAGE, ChatServer, max_in_window
from workers.games import GAMES, InvalidAction
from workers.llm.prompt import DEFAULT_TEMPLATE, render

MODEL = "arena-test-model"
# A legal round for each game, to have some history in the prompt.
ROUND = {
    "prisoners_dilemma": ["C", "D"],
    "public_goods": [10, 0, 5, {"contribution": 3, "punish": True}],
    "auction": [30, 40],
    "colonel_blotto": [[20, 20, 20, 20, 20], [35, 35, 28, 1, 1]],
    "congestion": [0, 0, 1, "bypass"],
}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(model=MODEL) as server:
        yield server


def client_for(server: ChatServer, max_retries: int = 0, timeout: float = 5.0) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="k", max_retries=max_retries, timeout=timeout)


def ask(client: OpenAI, messages: list[dict[str, str]], model: str = MODEL) -> Any:
    return client.chat.completions.create(
        model=model,
        messages=messages,  # type: ignore[arg-type]
        temperature=0,
        seed=0,
        max_tokens=64,
        response_format={"type": "json_object"},
    )


def prompt(game_name: str, player: int, rounds: list[list[Any]]) -> str:
    game = GAMES[game_name](rounds=3)
    game.reset(7)
    for actions in rounds:
        game.step(actions)
    return render(DEFAULT_TEMPLATE, game.observation(player))


def action_of(response: Any) -> Any:
    return json.loads(response.choices[0].message.content)["action"]


@pytest.mark.parametrize("game_name", sorted(GAMES))
@pytest.mark.parametrize("played", [0, 1])
def test_tit_for_tat_answers_a_legal_action_for_every_game(server, game_name, played):
    client = client_for(server)
    game = GAMES[game_name](rounds=3)
    for player in range(game.n_players):
        text = prompt(game_name, player, [ROUND[game_name]] * played)
        response = ask(client, [{"role": "user", "content": text}])
        assert response.object == "chat.completion"
        assert response.model == MODEL
        assert response.choices[0].finish_reason == "stop"
        action = game.parse_action(player, action_of(response))  # raises if illegal
        if game_name == "auction":
            value = float(text.split("Value: ")[1].split()[0])
            assert action == round(value / 2, 2)


def test_tit_for_tat_copies_the_other_players_last_move_in_the_dilemma(server):
    client = client_for(server)

    def answer(player: int, rounds: list[list[str]]) -> str:
        text = prompt("prisoners_dilemma", player, rounds)
        return str(action_of(ask(client, [{"role": "user", "content": text}])))

    assert answer(0, []) == answer(1, []) == "C"
    assert answer(0, [["C", "D"]]) == "D"
    assert answer(1, [["C", "D"]]) == "C"
    assert answer(0, [["C", "D"], ["D", "C"]]) == "C"
    assert answer(1, [["C", "D"], ["D", "D"]]) == "D"


def test_a_reask_is_answered_from_the_earlier_prompt(server):
    text = prompt("prisoners_dilemma", 1, [["D", "C"]])
    messages = [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "hmm"},
        {"role": "user", "content": 'That was not valid. Answer only {"action": "C" or "D"}.'},
    ]
    assert action_of(ask(client_for(server), messages)) == "D"
    # No Arena prompt at all: a 400, not a guess.
    with pytest.raises(openai.BadRequestError):
        ask(client_for(server), [{"role": "user", "content": "hello"}])


def test_usage_is_returned_and_counted(server):
    client = client_for(server)
    texts = [prompt("auction", 0, []), prompt("congestion", 2, [ROUND["congestion"]])]
    expected_prompt = expected_completion = 0
    for text in texts:
        messages = [{"role": "system", "content": "You play games."}]
        messages.append({"role": "user", "content": text})
        response = ask(client, messages)
        words = len(text.split()) + 3
        content = response.choices[0].message.content
        assert response.usage.prompt_tokens == words
        assert response.usage.completion_tokens == len(content.split())
        assert response.usage.total_tokens == words + len(content.split())
        expected_prompt += words
        expected_completion += len(content.split())
    assert server.usage_totals() == (expected_prompt, expected_completion)
    records = server.ok_requests()
    assert [r.status for r in records] == [200, 200]
    assert records[0].body["model"] == MODEL and records[0].body["seed"] == 0
    assert records[0].body["response_format"] == {"type": "json_object"}
    assert records[0].received <= records[1].received and records[0].wall > 0


def test_a_429_with_retry_after_is_retried_by_the_client():
    with ChatServer(model=MODEL, behaviour="rate-limited", fail_first=1) as server:
        start = time.monotonic()
        response = ask(
            client_for(server, max_retries=2),
            [{"role": "user", "content": prompt("prisoners_dilemma", 0, [])}],
        )
        waited = time.monotonic() - start
        assert action_of(response) == "C"
        assert [r.status for r in server.requests] == [429, 200]
        assert waited >= 1.0
        assert server.requests[1].received - server.requests[0].received >= 1.0
        assert server.usage_totals() == (server.requests[1].prompt_tokens, 2)


def test_always_rate_limited_gives_the_openai_error():
    with ChatServer(model=MODEL, behaviour="rate-limited", retry_after=2) as server:
        with pytest.raises(openai.RateLimitError) as caught:
            ask(client_for(server), [{"role": "user", "content": "Game: auction"}])
        assert caught.value.response.headers["retry-after"] == "2"
        assert caught.value.body["type"] == "rate_limit_error"
        assert server.usage_totals() == (0, 0) and server.ok_requests() == []


@pytest.mark.parametrize("status", [500, 503])
def test_server_error(status):
    with ChatServer(model=MODEL, behaviour="server-error", error_status=status) as server:
        with pytest.raises(openai.InternalServerError) as caught:
            ask(client_for(server), [{"role": "user", "content": "Game: auction"}])
        assert caught.value.status_code == status
        assert [r.status for r in server.requests] == [status]


def test_garbage_and_illegal_answers(server):
    client = client_for(server)
    for name in sorted(GAMES):
        text = prompt(name, 0, [])
        garbage = ask(client, [{"role": "user", "content": text}], model="garbage")
        content = garbage.choices[0].message.content
        assert content == GARBAGE
        with pytest.raises(json.JSONDecodeError):
            json.loads(content)
        illegal = ask(client, [{"role": "user", "content": text}], model="illegal")
        with pytest.raises(InvalidAction):
            GAMES[name](rounds=1).parse_action(0, action_of(illegal))
    assert {r.behaviour for r in server.requests} == {"garbage", "illegal"}
    assert {r.model for r in server.requests} == {"garbage", "illegal"}


def test_constructor_behaviour_and_unknown_model():
    with ChatServer(model="m", behaviour="illegal") as server:
        client = client_for(server)
        assert action_of(ask(client, [{"role": "user", "content": "x"}], model="m")) == "maybe"
        assert [m.id for m in client.models.list()] == ["m"]
        with pytest.raises(openai.NotFoundError):
            ask(client, [{"role": "user", "content": "x"}], model="gpt-4o")
        assert [r.status for r in server.requests] == [200, 404]


def test_a_stopped_server_refuses_connections_and_restarts_on_its_port(server):
    client = client_for(server)
    text = prompt("colonel_blotto", 0, [])
    assert action_of(ask(client, [{"role": "user", "content": text}])) == [20] * 5
    base_url = server.base_url
    server.stop()
    with pytest.raises(openai.APIConnectionError):
        ask(client, [{"role": "user", "content": text}])
    server.start()
    assert server.base_url == base_url
    assert action_of(ask(client, [{"role": "user", "content": text}])) == [20] * 5
    assert len(server.requests) == 2


def test_max_in_flight_and_a_slow_model():
    with ChatServer(model=MODEL, behaviour="slow", delay_s=0.4) as server:
        client = client_for(server)
        text = prompt("public_goods", 3, [])
        start = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            responses = list(
                pool.map(lambda _: ask(client, [{"role": "user", "content": text}]), range(4))
            )
        elapsed = time.monotonic() - start
        assert [action_of(r) for r in responses] == [10] * 4
        assert 0.4 <= elapsed < 1.2  # in parallel, not one after another
        assert server.max_in_flight == 4 and server.in_flight == 0
        # A client timeout shorter than the delay.
        with pytest.raises(openai.APITimeoutError):
            ask(client_for(server, timeout=0.1), [{"role": "user", "content": text}])


def test_max_per_window():
    assert max_in_window([], 60) == 0
    assert max_in_window([5.0], 60) == 1
    assert max_in_window([0, 10, 59.9, 60, 61, 130], 60) == 4  # 10, 59.9, 60, 61
    assert max_in_window([61, 0, 60, 10, 130, 59.9], 60) == 4  # order does not matter
    assert max_in_window([0, 1, 2], 1) == 1  # windows are half-open: [t, t + 1)
    assert max_in_window([0, 0.5, 1, 1.2], 1) == 3
    with ChatServer(model=MODEL) as server:
        client = client_for(server)
        for _ in range(2):
            with pytest.raises(openai.RateLimitError):
                ask(client, [{"role": "user", "content": "Game: auction"}], model="rate-limited")
        ask(client, [{"role": "user", "content": "Game: auction"}])
        assert [r.status for r in server.requests] == [429, 429, 200]
        assert server.max_per_window() == 3  # all statuses count
        assert server.max_per_window(window_s=1e-9) == 1
