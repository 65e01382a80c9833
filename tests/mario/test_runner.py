"""The episode runner on the real emulator, checked against plain env.step frame by frame."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")

from tests.mario.reference import Reference, logged, reference_run, screen_digest
from workers.mario.agents import BUILTIN, InvalidAction
from workers.mario.emulator import game_for, read_info
from workers.mario.protocol import FULL_GAME, MarioProtocol
from workers.mario.runner import (
    EpisodeOutcome,
    decode_actions,
    encode_actions,
    replay_episode,
    run_episode,
)


class Script:
    """Plays the given actions, then `then` forever."""

    def __init__(self, actions: bytes, then: int = 1) -> None:
        self.actions, self.then = actions, then

    def reset(self, *, seed: int, **context: Any) -> None:
        self.i = 0

    def act(self, observation: Any) -> int:
        self.i += 1
        return self.actions[self.i - 1] if self.i <= len(self.actions) else self.then


class Watching:
    """Delegates to an agent and keeps what it was told and shown."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def reset(self, **context: Any) -> None:
        self.context = context
        self.seen: list[tuple[dict[str, Any], str]] = []
        self.frame: Any = None
        self.agent.reset(**context)

    def act(self, observation: Any) -> Any:
        self.frame = observation["frame"]
        self.seen.append((dict(observation["info"]), screen_digest(observation["frame"])))
        return self.agent.act(observation)


def same(outcome: EpisodeOutcome) -> dict[str, Any]:
    return outcome.model_dump(exclude={"wall_s"})


def check_against_reference(
    level: str, agent: Any, protocol: MarioProtocol, env_seed: int = 0
) -> EpisodeOutcome:
    """Every outcome field and every observation equal the slow path's."""
    return compare_with_reference(level, agent, protocol, env_seed)[0]


def compare_with_reference(
    level: str,
    agent: Any,
    protocol: MarioProtocol,
    env_seed: int = 0,
    pokes: dict[int, dict[int, int]] | None = None,
) -> tuple[EpisodeOutcome, Reference]:
    """check_against_reference, and the slow path's run (each step's info, room or course).
    `pokes` ({step: {address: value}}): what the agent wrote to RAM before those steps."""
    watching = Watching(agent)
    outcome = run_episode(level, watching, protocol, env_seed, 0)
    ref = reference_run(level, decode_actions(outcome.actions), protocol, env_seed, pokes)
    fields = outcome.model_dump(exclude={"wall_s", "actions", "level"})
    assert {k: fields[k] for k in ref.expected(level)} == ref.expected(level)
    if level != FULL_GAME:
        assert outcome.levels_completed is None and outcome.furthest_level is None
    # What the agent saw: the reset state, then each step's info and screen but the last's.
    without_room = [{k: v for k, v in i.items() if k != "room"} for i in ref.infos]
    first = {k: v for k, v in ref.first.items() if k != "room"}
    assert [info for info, _ in watching.seen] == [first, *without_room[:-1]]
    assert [frame for _, frame in watching.seen[1:]] == ref.screens[:-1]
    return outcome, ref


def check_replay(level: str, outcome: EpisodeOutcome) -> None:
    """The action log replays the outcome bit for bit; on_frame sees every frame."""
    frames: list[np.ndarray] = []
    protocol = MarioProtocol(sticky_p=0.0, max_steps=outcome.steps)
    replayed = replay_episode(level, outcome.actions, protocol, 0, frames.append)
    assert same(replayed) == same(outcome)
    assert len(frames) == outcome.frames + 1  # the reset frame, then every agent frame
    assert frames[0].shape == (240, 256, 3) and frames[0].dtype == np.uint8


@pytest.mark.parametrize(
    ("agent", "protocol"),
    [
        (BUILTIN["random"](), MarioProtocol(action_set="complex", sticky_p=0.25, max_steps=150)),
        (
            BUILTIN["jump-right"](),
            MarioProtocol(sticky_p=0.0, frame_skip=7, max_steps=300),
        ),  # dies mid-step
        (
            BUILTIN["random"](),
            MarioProtocol(sticky_p=0.0, action_set="simple", frame_skip=1, max_steps=200),
        ),
    ],
    ids=["complex-sticky", "frame-skip-7", "frame-skip-1"],
)
def test_single_stage_equals_env_step(agent: Any, protocol: MarioProtocol) -> None:
    check_against_reference("1-1", agent, protocol, env_seed=3)


def test_a_cleared_level() -> None:
    log = logged("clear-1-1")
    protocol = MarioProtocol(sticky_p=0.0, max_steps=len(log) + 50)
    cleared = check_against_reference("1-1", Script(log), protocol)
    assert cleared.completed and cleared.lives_lost == 0
    assert cleared.steps == 302 and cleared.frames == 1205  # ends at the flag, mid-step
    assert (cleared.max_x, cleared.time_remaining, cleared.coins) == (3161, 340, 1)
    check_replay("1-1", cleared)


def test_the_full_game_across_a_level_transition() -> None:
    # 1-1 cleared by the logged actions, then right into 1-2's first goomba until game over.
    full_game = check_against_reference(
        FULL_GAME, Script(logged("clear-1-1")), MarioProtocol(sticky_p=0.0)
    )
    assert full_game.furthest_level == "1-2" and (full_game.world, full_game.stage) == (1, 2)
    assert full_game.levels_completed == 1 and not full_game.completed
    assert full_game.lives_lost == 3  # three goombas: game over ends the episode
    assert full_game.steps < MarioProtocol(sticky_p=0.0).max_steps
    assert 40 < full_game.max_x < 300  # 1-2's own x, not 1-1's 3,161
    assert full_game.emulator_frames > full_game.frames  # the env skipped the castle and deaths
    check_replay(FULL_GAME, full_game)


def test_the_full_game_ends_when_8_4_is_cleared() -> None:
    # After 8-4 the game waits for a button forever (the env's own skip would never return).
    # No test plays 32 levels: the RAM says 8-4 and the end of the world at step 20.
    class Poke(Script):
        def act(self, observation: Any) -> int:
            if self.i == 19:
                ram = game_for(FULL_GAME).env.ram
                ram[0x75F], ram[0x75C], ram[0x770] = 7, 3, 2
            return super().act(observation)

    outcome = run_episode(FULL_GAME, Poke(b""), MarioProtocol(sticky_p=0.0, max_steps=100), 0, 0)
    assert outcome.completed and outcome.furthest_level == "8-4" and outcome.steps == 20
    assert outcome.levels_completed == 2  # "1-1" (the poke moved on) and 8-4 itself


def test_info_read_from_ram_equals_the_envs_own() -> None:
    game = game_for("1-1")
    rng = np.random.default_rng(0)
    addresses = [
        0x0E,
        0x16,
        0x17,
        0x18,
        0x19,
        0x1A,
        0x1D,
        0x6D,
        0x86,
        0xB5,
        0x3B8,
        0x756,
        0x75A,
        0x75C,
        0x75F,
        0x770,
        *range(0x7DE, 0x7E4),
        0x7ED,
        0x7EE,
        0x7F8,
        0x7F9,
        0x7FA,
    ]
    try:
        for trial in range(300):
            # Small values too, where the flag, status and digit cases are.
            high = 256 if trial % 2 else 12
            for address in addresses:
                game.env.ram[address] = rng.integers(high)
            if trial % 3 == 0:
                game.env.ram[0x1D], game.env.ram[0x18] = 3, 0x31  # on the flag pole
            with np.errstate(over="ignore"):  # the env's uint8 `stage + 1` wraps at 255
                assert read_info(game.ram) == game.env._get_info()
    finally:
        game.reset()


def test_bonus_room_coordinates_do_not_count() -> None:
    log = logged("bonus-room-1-1")
    protocol = MarioProtocol(sticky_p=0.0, action_set="complex", max_steps=len(log))
    outcome = check_against_reference("1-1", Script(log), protocol)
    # Down the pipe at x 910, the room's own x (24..226), out at 2,616 in the main area.
    assert outcome.max_x >= 2616 and not outcome.completed


def test_sticky_actions_change_the_trajectory_and_replay_exactly() -> None:
    protocol = MarioProtocol(sticky_p=0.25, max_steps=120)
    sticky = run_episode("1-1", BUILTIN["jump-right"](), protocol, 11, 5)
    actions = decode_actions(sticky.actions)
    plain = run_episode(
        "1-1", Script(actions), MarioProtocol(sticky_p=0.0, max_steps=sticky.steps), 11, 0
    )
    assert same(plain) != same(sticky)  # the same actions without sticky frames: another game
    assert same(replay_episode("1-1", sticky.actions, protocol, 11)) == same(sticky)
    other_seed = run_episode("1-1", BUILTIN["jump-right"](), protocol, 12, 5)
    assert same(other_seed) != same(sticky)  # the agent's actions, other sticky frames


def test_same_seeds_same_episode_other_agent_seed_other_actions() -> None:
    protocol = MarioProtocol(sticky_p=0.0, action_set="simple", max_steps=100)
    first = run_episode("1-1", BUILTIN["random"](), protocol, 0, 7)
    assert same(run_episode("1-1", BUILTIN["random"](), protocol, 0, 7)) == same(first)
    assert run_episode("1-1", BUILTIN["random"](), protocol, 0, 8).actions != first.actions


def test_built_in_agents() -> None:
    protocol = MarioProtocol(sticky_p=0.0, max_steps=400)
    right = run_episode("1-1", BUILTIN["right"](), protocol, 0, 0)
    assert set(decode_actions(right.actions)) == {1}
    assert right.max_x > 250 and right.lives_lost == 1  # the first goomba
    jumps = [run_episode("1-1", BUILTIN["jump-right"](), protocol, 0, s) for s in range(3)]
    assert max(j.max_x for j in jumps) > right.max_x + 300  # over the goomba and pipes
    assert len({j.actions for j in jumps}) == 3


def test_observation_and_reset_context() -> None:
    watching = Watching(BUILTIN["random"]())
    run_episode(
        "4-2", watching, MarioProtocol(sticky_p=0.0, action_set="simple", max_steps=3), 0, 42
    )
    context = watching.context
    assert context["seed"] == 42 and context["level"] == "4-2"
    assert context["action_set"] == "simple" and context["actions"][6] == ["left"]
    first, _ = watching.seen[0]
    assert (first["world"], first["stage"], first["time"]) == (4, 2, 400)
    frame = watching.frame
    assert frame.shape == (240, 256, 3) and frame.dtype == np.uint8
    assert not frame.flags.writeable  # the emulator's screen, lent for the step


def test_replay_refuses_a_log_that_does_not_fit() -> None:
    with pytest.raises(ValueError, match="actions"):
        replay_episode("1-1", "not base64!", MarioProtocol(sticky_p=0.0), 0)
    right = run_episode("1-1", BUILTIN["right"](), MarioProtocol(sticky_p=0.0, max_steps=10), 0, 0)
    with pytest.raises(ValueError, match="actions"):  # more steps than the cap allows
        replay_episode("1-1", right.actions, MarioProtocol(sticky_p=0.0, max_steps=5), 0)
    with pytest.raises(InvalidAction, match="out of range"):  # right_only has 5 actions
        replay_episode("1-1", encode_actions(bytes([1, 7])), MarioProtocol(sticky_p=0.0), 0)


def test_replays_write_a_gif(tmp_path: Any) -> None:
    imageio = pytest.importorskip("imageio.v3")
    right = run_episode("1-1", BUILTIN["right"](), MarioProtocol(sticky_p=0.0, max_steps=10), 0, 0)
    frames: list[np.ndarray] = []
    replay_episode(
        "1-1", right.actions, MarioProtocol(sticky_p=0.0, max_steps=10), 0, frames.append
    )
    path = tmp_path / "replay.gif"
    imageio.imwrite(path, frames[::4], extension=".gif")
    assert imageio.imread(path, index=None).shape[1:3] == (240, 256)


def test_the_pages_replay_of_a_log_that_cannot_be_played_is_a_refusal_not_a_crash() -> None:
    """A stored action log that is not one (corrupt, cut short, missing) is RunFailed, which
    the API answers 409 with the reason, instead of a 500."""
    from arena.service.replays import replay
    from tasks.validation import RunFailed
    from tasks.workloads import get_workload, validate_batch
    from tasks.workloads.base import UnitResult

    spec = {
        "workload": "mario",
        "agents": ["right"],
        "items": ["1-1"],
        "protocol": {"episodes": 1, "seed": 5},
        "params": {"frame_skip": 4, "action_set": "right_only", "max_steps": 100},
    }
    (unit,) = get_workload("mario").expand(validate_batch(spec))
    for actions in ("garbage!!", "", None):
        stored = UnitResult.model_construct(
            unit_id=unit.id, agent="right", status="ok", result={"actions": actions}
        )
        with pytest.raises(RunFailed, match="the stored action log cannot be played again"):
            replay(unit, stored, 0)
