"""Malformed and nonsensical input, for `arena run SPEC` and `arena score`: every case ends with
exit status 2 and one line `arena: error: ...`, never a traceback, a NaN or a nonsense number —
and a bad spec is refused before anything connects to Redis (nothing stored).

Everything runs in-process (arena.cli.main.main) with ARENA_REDIS_URL pointing at a port where
nothing listens and no wait for it (ARENA_REDIS_RETRY_S=0), so a spec that is valid ends with
"cannot reach Redis" (exit 3, the cluster unreachable: never 2, a bad spec) instead of work.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.cli.main import main
from tasks.spec import LOADERS, MAX_SPEC_BYTES, load_spec_file
from tasks.validation import InputError

ROOT = Path(__file__).resolve().parents[2]
SPECS = {
    name: yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())
    for name in ("bandit", "alympics")
}
SCORING_DIR = ROOT / "arena" / "examples" / "scoring"
SCORING = {
    p.name: (p.name.split("-", 1)[0], json.loads(p.read_text()))
    for p in sorted(SCORING_DIR.glob("*.json"))
}
NO_REDIS = "redis://127.0.0.1:1/0"
UNREACHABLE = "cannot reach Redis"
FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch working directory, a data folder that must stay unborn, and the dead Redis."""
    folder = tmp_path_factory.mktemp("malformed")
    saved = {k: v for k, v in os.environ.items() if k.startswith("ARENA_")}
    cwd = os.getcwd()
    for name in saved:
        del os.environ[name]
    os.environ.update(
        {
            "ARENA_REDIS_URL": NO_REDIS,
            "ARENA_DATA_DIR": str(folder / "data"),
            "ARENA_REDIS_RETRY_S": "0",
        }
    )
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(cwd)
        for name in ("ARENA_REDIS_URL", "ARENA_DATA_DIR", "ARENA_REDIS_RETRY_S"):
            os.environ.pop(name, None)
        os.environ.update(saved)
    assert not (folder / "data").exists()  # nothing was stored, nothing started


def arena(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def refused(result: tuple[int, str, str], *needles: str, spec: bool = True) -> str:
    """Exit 2, one `arena: error:` line, no traceback; a spec refused before Redis."""
    code, out, err = result
    assert "Traceback" not in err + out
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arena: error: "), err
    assert "nan" not in out.lower() and "infinity" not in out.lower()
    if spec:
        assert UNREACHABLE not in lines[0], "an invalid spec got as far as connecting"
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def reached_redis(result: tuple[int, str, str]) -> str:
    """A valid spec: exit 3 (the cluster unreachable), one line, no traceback."""
    code, out, err = result
    assert code == 3 and "Traceback" not in err + out, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and UNREACHABLE in lines[0], err
    return lines[0]


def write(folder: Path, name: str, data: bytes | str) -> str:
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def deep_list(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- the fault probe's cases, one by one ---------------------------------------------------------


def test_a_valid_spec_gets_as_far_as_redis(scratch: Path):
    for name, spec in SPECS.items():
        reached_redis(arena("run", write(scratch, f"{name}.yaml", yaml.safe_dump(spec))))


@pytest.mark.parametrize("depth", [40, 300, 900, 3_000, 100_000])
@pytest.mark.parametrize("where", ["params", "agent", "item"])
def test_deep_nesting_inside_a_spec_field_is_one_line(scratch: Path, where: str, depth: int):
    spec = dict(SPECS["bandit"])
    if where == "params":
        spec["params"] = {"pulls": 10, "x": "DEEP"}
    elif where == "agent":
        spec["agents"] = [{"name": "random", "version": "DEEP"}]
    else:
        spec["items"] = [{"name": "easy", "arms": [0.1, "DEEP"]}]
    text = json.dumps(spec).replace('"DEEP"', deep_list(depth))
    refused(arena("run", write(scratch, "deep.json", text)), "nested too deeply")


@pytest.mark.parametrize("depth", [40, 900, 3_000, 100_000])
def test_deep_nesting_inside_a_scoring_field_is_one_line(scratch: Path, depth: int):
    episode = '{"world": 1, "stage": 1, "completed": true, "max_x_pos": 1, "steps": DEEP}'
    path = write(scratch, "deep.json", episode.replace("DEEP", deep_list(depth)))
    refused(arena("score", "mario", path), "nested too deeply", spec=False)


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 100_000,  # flow
        "a:\n" + "- " * 100_000 + "x\n",  # block, one line
    ],
)
def test_every_yaml_parser_refuses_deep_nesting_in_one_line(
    scratch: Path, loader: type[yaml.SafeLoader], text: str
):
    with pytest.raises(InputError, match="nested too deeply") as caught:
        load_spec_file(write(scratch, "deep.yaml", text), loader)
    assert "\n" not in str(caught.value)


def test_undecodable_spec_and_scoring_files_are_one_line(scratch: Path):
    spec = yaml.safe_dump(SPECS["bandit"])
    for name, data in {
        "utf16.yaml": spec.encode("utf-16"),
        "latin1.yaml": b"workload: caf\xe9\n",
        "utf16.json": json.dumps(SCORING["race-example.json"][1]).encode("utf-16"),
    }.items():
        path = write(scratch, name, data)
        if name.endswith(".yaml"):
            refused(arena("run", path), "not UTF-8")
        else:
            refused(arena("score", "race", path), "not UTF-8", spec=False)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("workload: bandit\nworkload: bandit\n", ["duplicate key 'workload'", "line 2", "line 1"]),
        ("protocol:\n  seed: 1\n  seed: 2\n", ["duplicate key 'seed'", "line 3"]),
        (
            "items:\n  - name: a\n    arms: [0.1, 0.2]\n    name: b\n",
            ["duplicate key 'name'", "line 4"],
        ),
        (
            '{"workload": "bandit", "agents": ["random"], "workload": "alympics"}',
            ["duplicate key 'workload'", "line 1, column 46"],
        ),
        ('{"params": {"pulls": 1, "pulls": 2}}', ["duplicate key 'pulls'"]),
    ],
)
def test_duplicate_keys_in_a_spec_are_refused_at_any_depth(
    scratch: Path, text: str, needles: list[str]
):
    refused(arena("run", write(scratch, "dupe.yaml", text)), *needles)


LAUGHS = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
]


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "laughs:\n" + "".join(f"  {line}\n" for line in LAUGHS) + "agents: *i\n",
            "over 200,000 values (counting what aliases repeat)",
        ),
        ("agents: &x [random, *x]\n", "an alias refers to a value that contains it"),
        (
            "a: &x [[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]\nb: [[[[[[[[[[[[[[*x]]]]]]]]]]]]]]\n",
            "nested too deeply",
        ),
    ],
)
def test_aliases_cannot_blow_up_a_spec(
    scratch: Path, loader: type[yaml.SafeLoader], text: str, needle: str
):
    started = time.monotonic()
    with pytest.raises(InputError, match=re.escape(needle)) as caught:
        load_spec_file(write(scratch, "lol.yaml", "workload: bandit\n" + text), loader)
    assert time.monotonic() - started < 1
    assert re.search(r"lol\.yaml: line \d+, column \d+: ", str(caught.value))


def test_a_billion_laughs_is_one_line_from_the_cli(scratch: Path):
    text = "workload: bandit\nitems: [x]\nlaughs:\n" + "".join(f"  {x}\n" for x in LAUGHS)
    refused(arena("run", write(scratch, "lol.yaml", text + "agents: *i\n")), "aliases")


def test_the_aliases_pyyaml_writes_for_shared_values_still_load(scratch: Path):
    arms = [0.2, 0.8]
    spec = {**SPECS["bandit"], "items": [{"name": "a", "arms": arms}, {"name": "b", "arms": arms}]}
    text = yaml.safe_dump(spec)
    assert "&id001" in text and "*id001" in text
    reached_redis(arena("run", write(scratch, "shared.yaml", text)))


def test_a_spec_too_large_is_refused_before_it_is_parsed(scratch: Path):
    text = "workload: bandit\nagents: [" + "random, " * (MAX_SPEC_BYTES // 8) + "]\n"
    refused(arena("run", write(scratch, "big.yaml", text)), "KiB")


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("protocol: {seed: 0x" + "f" * 5_000 + "}", ["protocol.seed", "too large to show"]),
        ("protocol: {seed: " + "9" * 5_000 + "}", ["line 4", "number too large"]),
        ("params: {pulls: 2001-13-45}", ["params.pulls", "'2001-13-45'"]),  # a date is text
        ("workload: !!binary aGVsbG8=", ["binary"]),
        ("agents: !!set {random}", ["set"]),
        ("agents: [{name: x, version: " + "v" * 300 + "}]", ["agents[0].version", "..."]),
    ],
)
def test_values_yaml_makes_but_json_has_not_are_one_line(
    scratch: Path, text: str, needles: list[str]
):
    body = {"workload": "bandit", "agents": "[random]", "items": "[{name: a, arms: [0.1, 0.2]}]"}
    body.pop(text.split(":", 1)[0], None)  # `text` gives that key instead
    lines = "".join(f"{key}: {value}\n" for key, value in body.items()) + text + "\n"
    refused(arena("run", write(scratch, "odd.yaml", lines)), *needles)


@pytest.mark.parametrize(
    ("workload", "data", "needles"),
    [
        (
            "mario",
            {"world": 1, "stage": 1, "completed": True, "max_x_pos": 1, "steps": 10**400},
            ["steps", "less than or equal to 1000000"],
        ),
        (
            "mario",
            {"world": 1, "stage": 1, "completed": True, "max_x_pos": 10**22, "steps": 1},
            ["max_x_pos", "65535"],
        ),
        (
            "mario",
            {
                "world": 1,
                "stage": 1,
                "completed": True,
                "max_x_pos": 1,
                "steps": 1,
                "frame_skip": 10**9,
            },
            ["frame_skip"],
        ),
        (
            "mario",
            {
                "full_game": True,
                "world": 2,
                "stage": 1,
                "max_x_pos": 1,
                "steps": 1,
                "levels_completed": 1,
                "lives_lost": 10**12,
            },
            ["lives_lost"],
        ),
        (
            "race",
            {"weights": {"build": math.inf}, "agents": [{"name": "a", "build": 100}]},
            ["weights.build", "finite"],
        ),
        (
            "race",
            {
                "weights": {"build": 1e308, "tests": 1e308},
                "agents": [{"name": "a", "build": 100, "tests": 100}],
            },
            ["weights.build"],
        ),
        ("race", {"agents": [{"name": "a", "build": math.nan}]}, ["agents[0].build", "finite"]),
        (
            "race",
            {
                "thresholds": {"auto_merge_minimum": 10, "fail_maximum": 50},
                "agents": [{"name": "a", "build": 0}],
            },
            ["thresholds", "auto_merge_minimum", "fail_maximum"],
        ),
        (
            "race",
            {"thresholds": {"auto_merge_minimum": math.inf}, "agents": [{"name": "a"}]},
            ["thresholds.auto_merge_minimum"],
        ),
        (
            "alympics",
            {
                **SCORING["alympics-example.json"][1],
                "games": {
                    **SCORING["alympics-example.json"][1]["games"],
                    "auction": {"strategic": math.inf, "fairness": 1, "robustness": 1},
                },
            },
            ["games.auction.strategic", "finite"],
        ),
    ],
)
def test_nonsense_numbers_are_refused_naming_the_field(
    scratch: Path, workload: str, data: Any, needles: list[str]
):
    path = write(scratch, "input.json", json.dumps(data))
    refused(arena("score", workload, path), *needles, spec=False)
    refused(arena("score", workload, path, "--json"), *needles, spec=False)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"world": 1, "world": 2}', "duplicate key 'world'"),
        ('{"steps": ' + "9" * 5_000 + "}", "5000 digits"),
    ],
)
def test_scoring_json_that_python_reads_oddly_is_one_line(scratch: Path, text: str, needle: str):
    refused(arena("score", "mario", write(scratch, "odd.json", text)), needle, spec=False)


@pytest.mark.parametrize("name", sorted(SCORING))
def test_every_scoring_example_still_scores_and_its_json_is_strict(scratch: Path, name: str):
    workload, _ = SCORING[name]
    code, out, err = arena("score", workload, str(SCORING_DIR / name), "--json")
    assert code == 0, err

    def no_constants(token: str) -> None:
        raise AssertionError(f"{token} in --json output")

    json.loads(out, parse_constant=no_constants)


# -- property-based: malformed specs --------------------------------------------------------------

# Values no field accepts, wherever they land: not None (a valid leaderboard), "" (a valid race
# task) or a bool (a valid `completed`).
BAD = [
    math.nan,
    math.inf,
    -math.inf,
    10**400,
    -(10**30),
    [],
    {"zz_unknown": 1},
    json.loads(deep_list(34)),
]
RAW = [deep_list(40), deep_list(5_000), "9" * 5_000, ".nan", "-.inf", "1.0e+999"]
BAD_BYTES = [b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80", b"\xf8\x88\x80\x80\x80"]
REQUIRED_SPEC_KEYS = {"workload", "agents", "items", "name", "arms"}
REQUIRED_SCORING_KEYS = {
    "world",
    "stage",
    "completed",
    "max_x_pos",
    "steps",
    "levels_completed",
    "agents",
    "name",
    "games",
}


def paths(tree: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every position in a JSON-like tree but the root."""
    if isinstance(tree, dict | list):
        for key, child in tree.items() if isinstance(tree, dict) else enumerate(tree):
            yield (*prefix, key)
            yield from paths(child, (*prefix, key))


def at(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def mappings_in(tree: Any) -> list[tuple[Any, ...]]:
    return [p for p in [(), *paths(tree)] if isinstance(at(tree, p), dict)]


def replaced(tree: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(tree, dict):
        return {**tree, head: replaced(tree[head], rest, value)}
    return [replaced(v, rest, value) if i == head else v for i, v in enumerate(tree)]


def deleted(tree: Any, path: tuple[Any, ...]) -> Any:
    parent = at(tree, path[:-1])
    smaller = {k: v for k, v in parent.items() if k != path[-1]}
    return replaced(tree, path[:-1], smaller)


def dump(tree: Any, as_json: bool) -> str:
    return json.dumps(tree) if as_json else yaml.safe_dump(tree, allow_unicode=True)


def json_with_duplicate(tree: Any, target: tuple[Any, ...], path: tuple[Any, ...] = ()) -> str:
    """JSON text of tree where the object at `target` repeats its first key."""
    if isinstance(tree, dict):
        items = [
            f"{json.dumps(k)}: {json_with_duplicate(v, target, (*path, k))}"
            for k, v in tree.items()
        ]
        if path == target and items:
            items.append(items[0])
        return "{" + ", ".join(items) + "}"
    if isinstance(tree, list):
        return (
            "["
            + ", ".join(json_with_duplicate(v, target, (*path, i)) for i, v in enumerate(tree))
            + "]"
        )
    return json.dumps(tree)


def yaml_with_duplicate(text: str, data: st.DataObject) -> str:
    """YAML text with one `key: ...` line repeated right below itself (same mapping)."""
    lines = text.splitlines()
    keyed = [
        i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("- ")
    ]
    i = data.draw(st.sampled_from(keyed))
    return "\n".join([*lines[: i + 1], lines[i], *lines[i + 1 :]]) + "\n"


def mutated(tree: Any, data: st.DataObject, required: set[str], bad: list[Any]) -> Any:
    """The tree with one change that makes it invalid wherever it lands."""
    spots = list(paths(tree))
    kind = data.draw(st.sampled_from(["replace", "unknown key", "delete"]))
    if kind == "replace":
        return replaced(tree, data.draw(st.sampled_from(spots)), data.draw(st.sampled_from(bad)))
    if kind == "unknown key":
        path = data.draw(st.sampled_from(mappings_in(tree)))
        key = "zz_" + data.draw(st.text("abcxyz_", max_size=5))
        return replaced(tree, path, {**at(tree, path), key: 1})
    keys = [
        p
        for p in spots
        if isinstance(p[-1], str) and p[-1] in required and isinstance(at(tree, p[:-1]), dict)
    ]
    return deleted(tree, data.draw(st.sampled_from(keys)))


def spec_text(data: st.DataObject) -> bytes:
    tree = SPECS[data.draw(st.sampled_from(sorted(SPECS)))]
    as_json = data.draw(st.booleans())
    kind = data.draw(
        st.sampled_from(["mutation", "raw", "duplicate", "bytes", "utf16", "random", "garbage"])
    )
    if kind == "mutation":
        changed = mutated(tree, data, REQUIRED_SPEC_KEYS, BAD)
        # json.dumps writes NaN and Infinity, which YAML (so a spec) reads as text: "NaN" is a
        # fine leaderboard name. YAML's .nan and .inf are the non-finite numbers of a spec.
        finite = "NaN" not in json.dumps(changed) and "Infinity" not in json.dumps(changed)
        return dump(changed, as_json and finite).encode()
    if kind == "raw":  # text no YAML/JSON dumper writes: deep nesting, 5,000 digits, ...
        spot = data.draw(st.sampled_from(list(paths(tree))))
        text = json.dumps(replaced(tree, spot, "RAW")).replace(
            '"RAW"', data.draw(st.sampled_from(RAW))
        )
        return text.encode()
    if kind == "duplicate":
        if as_json:
            target = data.draw(st.sampled_from(mappings_in(tree)))
            return json_with_duplicate(tree, target).encode()
        return yaml_with_duplicate(dump(tree, False), data).encode()
    if kind == "bytes":
        text = dump(tree, as_json).encode()
        cut = data.draw(st.integers(0, len(text)))
        return text[:cut] + data.draw(st.sampled_from(BAD_BYTES)) + text[cut:]
    if kind == "utf16":
        return dump(tree, as_json).encode(data.draw(st.sampled_from(["utf-16", "utf-32"])))
    if kind == "random":
        return dump(data.draw(json_values), as_json).encode()
    return data.draw(st.binary(max_size=200))


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@FUZZ
@given(data=st.data())
def test_malformed_specs_are_refused_in_one_line_before_redis(scratch: Path, data: st.DataObject):
    path = write(scratch, "spec.yaml", spec_text(data))
    refused(arena("run", path))


# -- property-based: malformed scoring inputs ------------------------------------------------------

BAD_SCORING = BAD  # "" is not among them: a race's task may be empty
SCORING_RAW = [deep_list(40), deep_list(5_000), "9" * 5_000, "NaN", "-Infinity", "1e999"]


def scoring_text(data: st.DataObject) -> tuple[str, bytes]:
    workload, tree = SCORING[data.draw(st.sampled_from(sorted(SCORING)))]
    kind = data.draw(st.sampled_from(["mutation", "raw", "duplicate", "bytes", "random"]))
    if kind == "mutation":
        changed = mutated(tree, data, REQUIRED_SCORING_KEYS, BAD_SCORING)
        return workload, json.dumps(changed).encode()
    if kind == "raw":
        spot = data.draw(st.sampled_from(list(paths(tree))))
        raw = data.draw(st.sampled_from(SCORING_RAW))
        return workload, json.dumps(replaced(tree, spot, "RAW")).replace('"RAW"', raw).encode()
    if kind == "duplicate":
        target = data.draw(st.sampled_from(mappings_in(tree)))
        return workload, json_with_duplicate(tree, target).encode()
    if kind == "bytes":
        text = json.dumps(tree).encode()
        cut = data.draw(st.integers(0, len(text)))
        return workload, text[:cut] + data.draw(st.sampled_from(BAD_BYTES)) + text[cut:]
    return workload, json.dumps(data.draw(json_values)).encode()


@FUZZ
@given(data=st.data(), as_json=st.booleans())
def test_malformed_scoring_inputs_are_refused_in_one_line(
    scratch: Path, data: st.DataObject, as_json: bool
):
    workload, body = scoring_text(data)
    path = write(scratch, "input.json", body)
    refused(arena("score", workload, path, *(["--json"] if as_json else [])), spec=False)


# -- the one-line message itself -----------------------------------------------------------------


def describe(model: type[Any], value: Any, prefix: str = "") -> str:
    from pydantic import ValidationError

    from tasks.validation import describe_validation_error

    with pytest.raises(ValidationError) as caught:
        model.model_validate(value)
    return describe_validation_error(caught.value, prefix=prefix)


def test_messages_name_each_field_once_and_stay_short():
    from scoring.mario import FullGameResult
    from tasks.workloads.bandit import BanditAgentSpec, BanditItem

    # A validator's message without a field gets the location; one with a field joins it.
    assert describe(BanditAgentSpec, {"name": "nobody"}, "agents[3].").startswith(
        "agents[3]: unknown built-in agent 'nobody'"
    )
    run = {
        "full_game": True,
        "world": 2,
        "stage": 1,
        "max_x_pos": 1,
        "steps": 1,
        "levels_completed": 9,
    }
    assert describe(FullGameResult, run, "[1].").startswith("[1].levels_completed: 9 levels")
    # Every problem carries the prefix, not only the first.
    text = describe(BanditItem, {"name": "x", "arms": [0.5], "y": 1}, "items[0].")
    assert text == (
        "items[0].arms: List should have at least 2 items after validation, not 1; "
        "items[0].y: unknown field"
    )
    # Ten thousand bad values are ten problems and a count; a huge value is shown cut short.
    text = describe(BanditItem, {"name": "x", "arms": [2.0] * 10_000})
    assert text.count(";") == 10 and text.endswith("and 9990 more problems")
    assert len(describe(BanditItem, {"name": "x" * 100_000, "arms": [0, 1]})) < 200
    assert "too large to show" in describe(BanditItem, {"name": "x", "arms": [0, 16**5000]})


def test_a_score_that_is_not_finite_is_refused_not_printed(monkeypatch: pytest.MonkeyPatch):
    from arena.service import scores

    # The models' bounds make this unreachable today; the guard keeps NaN out of --json anyway.
    monkeypatch.setitem(scores.SCORERS, "race", lambda data: ("", {"composite": math.nan}))
    with pytest.raises(InputError, match="not a finite number"):
        scores.score("race", {})
