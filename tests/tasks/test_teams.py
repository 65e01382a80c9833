"""The operator's teams file (tasks/teams.py) and the quotas' check-and-count on a real Redis
(tasks/store_teams.py): a bad file is one line naming the field (never echoing a token), a
changed file is read again within a second, and concurrent submissions of one team cannot
pass a quota together."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import yaml

from tasks.store import Store
from tasks.teams import Team, TeamDirectory, identify, load_teams, token_digest
from tasks.validation import InputError
from tests.integration.conftest import db, redis_url  # noqa: F401 (fixtures)

TOKEN = "team-token-vision-1"


def write(path: Path, teams: list[dict]) -> Path:
    path.write_text(yaml.safe_dump({"teams": teams}))
    return path


def vision(**extra: object) -> dict:
    return {"name": "vision", "tokens": [token_digest(TOKEN)], "role": "submit", **extra}


def refusal(path: Path, teams: object) -> str:
    path.write_text(yaml.safe_dump(teams))
    with pytest.raises(InputError) as caught:
        load_teams(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"ARENA_TEAMS_FILE {path}: ")
    return message


def test_a_good_file_reads_with_its_defaults(tmp_path: Path) -> None:
    path = write(tmp_path / "teams.yaml", [vision(max_units_per_day=10), {"name": "nlp"}])
    teams = load_teams(path)
    assert [t.name for t in teams.teams] == ["vision", "nlp"]
    assert teams.teams[0].max_units_per_day == 10 and teams.teams[0].max_units_in_flight is None
    assert (teams.teams[1].role, teams.teams[1].weight, teams.teams[1].tokens) == ("submit", 1, [])


def test_a_plain_token_is_refused_without_being_repeated(tmp_path: Path) -> None:
    plain = "ghp_plainTokenPastedByMistake0123456789"
    message = refusal(tmp_path / "t.yaml", {"teams": [{"name": "vision", "tokens": [plain]}]})
    assert "teams[0].tokens[0]: not a SHA-256 hex digest" in message
    assert "arena team token-hash" in message
    assert plain not in message


@pytest.mark.parametrize(
    ("team", "named"),
    [
        ({"name": "vision", "weight": 0}, "teams[0].weight: Input should be greater than 0"),
        ({"name": "vision", "role": "owner"}, "teams[0].role: Input should be 'read'"),
        ({"name": "vision", "colour": "red"}, "teams[0].colour: unknown field"),
        ({"name": "bad name"}, "teams[0].name: String should match pattern"),
        ({"name": "vision", "max_units_per_day": 0}, "teams[0].max_units_per_day: Input should"),
    ],
)
def test_a_bad_team_is_one_line_naming_its_field(tmp_path: Path, team: dict, named: str) -> None:
    assert named in refusal(tmp_path / "t.yaml", {"teams": [team]})


def test_two_teams_may_not_share_a_name_or_a_token(tmp_path: Path) -> None:
    message = refusal(tmp_path / "t.yaml", {"teams": [vision(), {"name": "vision"}]})
    assert "two teams named 'vision'" in message
    message = refusal(tmp_path / "t.yaml", {"teams": [vision(), {**vision(), "name": "nlp"}]})
    assert "one token digest in both 'vision' and 'nlp'" in message


def test_a_token_finds_its_team_and_a_plain_api_token_is_an_admin_of_no_team(
    tmp_path: Path,
) -> None:
    teams = load_teams(write(tmp_path / "teams.yaml", [vision(weight=3)]))
    caller = identify(TOKEN, [b"plain-admin"], teams)
    assert caller is not None and caller.team is not None
    assert (caller.role, caller.team.name, caller.team.weight) == ("submit", "vision", 3)
    admin = identify("plain-admin", [b"plain-admin"], teams)
    assert admin is not None and (admin.role, admin.team) == ("admin", None)
    assert identify(TOKEN[:-1] + "X", [b"plain-admin"], teams) is None  # one byte differs
    assert identify(token_digest(TOKEN), [], teams) is None  # the digest is no token


def test_a_rewritten_file_is_read_within_a_second(tmp_path: Path) -> None:
    path = write(tmp_path / "teams.yaml", [vision()])
    directory = TeamDirectory(path)
    assert identify(TOKEN, [], directory.current()) is not None
    write(path, [{**vision(), "tokens": []}])  # revoked, same second, maybe the same size
    deadline = time.monotonic() + 1.0
    while identify(TOKEN, [], directory.current()) is not None:
        assert time.monotonic() < deadline, "the revoked token was still taken after 1 s"
        time.sleep(0.02)
    path.write_text("teams: [")  # broken: every team token refused, saying why
    time.sleep(0.05)
    with pytest.raises(InputError, match=r"ARENA_TEAMS_FILE .*not valid YAML/JSON"):
        for _ in range(60):
            directory.current()
            time.sleep(0.02)


def test_concurrent_reservations_never_pass_the_quota_together(db: Store) -> None:  # noqa: F811
    team = Team(name="vision", max_units_in_flight=10)
    passed: list[str] = []
    start = threading.Barrier(8)

    def reserve(index: int) -> None:
        start.wait()
        if db.reserve_team_units(team, f"batch-{index}", 3) is None:
            passed.append(f"batch-{index}")

    threads = [threading.Thread(target=reserve, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(passed) == 3  # 9 of 10; a fourth would make 12
    assert db.team_units_in_flight("vision") == 9
    refused = db.reserve_team_units(team, "one-more", 2)
    assert refused is not None and refused.message() == (
        "max_units_in_flight: team 'vision' has 9 units in flight; this batch adds 2; "
        "the quota is 10"
    )
    assert refused.retry_after_s is None


def test_the_day_quota_counts_what_was_enqueued_and_says_when_to_retry(
    db: Store,  # noqa: F811
) -> None:
    team = Team(name="nlp", max_units_per_day=10_000)
    assert db.reserve_team_units(team, "a", 9_000) is None
    db.settle_team_units("nlp", "a", 9_000, 9_800)  # more were enqueued than reserved
    refused = db.reserve_team_units(team, "b", 400)
    assert refused is not None and refused.message() == (
        "max_units_per_day: team 'nlp' has submitted 9,800 units today (UTC); this batch adds "
        "400; the quota is 10,000"
    )
    assert refused.retry_after_s is not None and 0 < refused.retry_after_s <= 86_401
    too_big = db.reserve_team_units(Team(name="nlp", max_units_per_day=100), "c", 101)
    assert too_big is not None and too_big.retry_after_s is None  # tomorrow will not help
    assert db.reserve_team_units(team, "d", 200) is None
    db.release_team_units("nlp", "d", 200)  # refused after all: not counted
    assert db.reserve_team_units(team, "e", 200) is None
