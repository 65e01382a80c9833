"""Batch specs: what to evaluate, validated before anything is enqueued."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NoReturn

import yaml
from pydantic import BaseModel, ConfigDict, Field

from tasks.validation import InputError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Priority = Literal["interactive", "scheduled", "bulk"]
PRIORITIES: tuple[Priority, ...] = ("interactive", "scheduled", "bulk")  # who goes first
RUN_OPTIONS = ("cost_budget_usd", "priority", "weight")  # a spec's keys outside its identity
Occasion = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")]


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Protocol(SpecModel):
    """How each agent is evaluated; part of a leaderboard's identity."""

    episodes: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    seed: Annotated[int, Field(ge=0, lt=2**63)] = 0
    unit_time_limit_s: Annotated[float, Field(gt=0, le=24 * 3600)] = 600.0


class BatchSpec(SpecModel):
    """The generic shape; `agents`, `items` and `params` are checked by the workload's models."""

    workload: str
    leaderboard: Name | None = None
    agents: Annotated[list[str | dict[str, Any]], Field(min_length=1)]
    items: Annotated[list[str | dict[str, Any]], Field(min_length=1)]
    protocol: Protocol = Protocol()
    params: dict[str, Any] = {}
    # A run of its own under the same protocol (a scheduled night, tasks/schedules.py): part of
    # the batch's identity, not of the protocol, so every night is a new batch on the same board.
    occasion: (
        Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")] | None
    ) = None
    # US dollars the batch's paid agents (llm agents, their prices in their specs) may spend;
    # once spent no request is sent and the batch ends cancelled, saying so. A run option, in
    # neither identity: raising it and running again resumes the same batch.
    cost_budget_usd: Annotated[float, Field(gt=0, le=1_000_000)] | None = None
    # Sharing the pool (docs/architecture.md, "Sharing"): who gets the next free worker slot.
    # `interactive` (a person waits), `scheduled` (a nightly), `bulk` (a sweep); None: the
    # front door's default. `weight`: this batch's share among its team's batches of its class.
    # Run options, in neither identity: the same batch at another priority resumes.
    priority: Priority | None = None
    weight: Annotated[float, Field(gt=0, le=1000)] | None = None


def derive_seed(master: int, *parts: str | int) -> int:
    """A 63-bit seed from the master seed and a path (Axelrod style: one seed per job)."""
    digest = hashlib.sha256(":".join(map(str, (master, *parts))).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


MAX_SPEC_BYTES = 256 * 1024  # the examples are under 1 KiB; this keeps parsing well under 1 s
MAX_SPEC_DEPTH = 32  # real specs nest 5 deep at most
MAX_SPEC_VALUES = 200_000  # more than 256 KiB of text can hold without aliases

_TAG = "tag:yaml.org,2002:"
# JSON's kinds of value only: a date, bytes or a set could not be hashed into a batch's identity,
# and '<<' merges and '=' are not worth their surprises. Such text reads as a plain string.
_JSON_TAGS = ("null", "bool", "int", "float", "str", "seq", "map")


class _Refused(yaml.constructor.ConstructorError):
    """Valid YAML that a spec may not use; the message is its problem and line."""


class _SpecResolver(yaml.resolver.Resolver):
    # PyYAML reads this class attribute (declared an instance one in its stubs).
    yaml_implicit_resolvers = {  # noqa: RUF012
        first: [(tag, rx) for tag, rx in resolvers if tag[len(_TAG) :] in _JSON_TAGS]
        for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
    }


class _SpecConstructor(yaml.constructor.SafeConstructor):
    def construct_document(self, node: yaml.Node) -> Any:
        _check_shape(node)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # PyYAML keeps the last of two equal keys: a pasted copy would silently win.
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # an unhashable key: SafeConstructor refuses it
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise _Refused(
                    problem=f"duplicate key {key_node.value!r} (first at line {first_line[key]})",
                    problem_mark=key_node.start_mark,
                )
            first_line[key] = line
        return super().construct_mapping(node, deep)

    def construct_spec_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # over 4,300 digits: Python will not read it
            raise _Refused(problem="number too large", problem_mark=node.start_mark) from None

    yaml_constructors: ClassVar[dict[str | None, Any]] = {
        **{
            _TAG + t: yaml.constructor.SafeConstructor.yaml_constructors[_TAG + t]
            for t in _JSON_TAGS
        },
        _TAG + "int": construct_spec_int,
        None: yaml.constructor.SafeConstructor.construct_undefined,
    }


def _check_shape(root: yaml.Node) -> None:
    """At most MAX_SPEC_DEPTH levels and MAX_SPEC_VALUES values counted as expanded, so aliases
    stay usable (yaml.safe_dump writes them for shared lists) while a "billion laughs" (a few
    lines of aliases naming billions of values) or an alias inside itself is refused at once.
    Iterative: a deep document cannot exhaust the stack here."""
    values = 0
    inside: set[int] = set()  # the collections on the current path
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, leaving = stack.pop()
        if leaving:
            inside.discard(id(node))
            continue
        if id(node) in inside:
            _refuse(node, "an alias refers to a value that contains it")
        values += 1
        if values > MAX_SPEC_VALUES:
            _refuse(node, f"over {MAX_SPEC_VALUES:,} values (counting what aliases repeat)")
        if depth > MAX_SPEC_DEPTH:
            _refuse(node, f"nested too deeply (over {MAX_SPEC_DEPTH} levels)")
        if isinstance(node, yaml.SequenceNode | yaml.MappingNode):
            inside.add(id(node))
            stack.append((node, depth, True))
            children = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else (part for pair in node.value for part in pair)
            )
            stack.extend((child, depth + 1, False) for child in children)


def _refuse(node: yaml.Node, problem: str) -> NoReturn:
    raise _Refused(problem=problem, problem_mark=node.start_mark)


class _PySpecLoader(_SpecConstructor, _SpecResolver, yaml.SafeLoader):
    """PyYAML's own parser, where it was built without libyaml."""


LOADERS: list[type[yaml.SafeLoader] | type[yaml.CSafeLoader]] = [_PySpecLoader]
if hasattr(yaml, "CSafeLoader"):

    class _CSpecLoader(_SpecConstructor, _SpecResolver, yaml.CSafeLoader):
        """libyaml's parser: several times faster, and it caps nesting at 1,000 levels."""

    LOADERS.insert(0, _CSpecLoader)


def _yaml_problem(path: str, exc: yaml.YAMLError) -> str:
    if not isinstance(exc, yaml.MarkedYAMLError):  # e.g. a control character
        return f"{path}: not valid YAML/JSON ({' '.join(str(exc).split())})"
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
    if isinstance(exc, _Refused):
        return f"{path}: {where}: {exc.problem}"
    if "maximum nesting depth" in (exc.problem or ""):  # libyaml's own cap, past ours
        return f"{path}: {where}: nested too deeply (over {MAX_SPEC_DEPTH} levels)"
    what = "; ".join(part for part in (exc.context, exc.problem) if part)
    return f"{path}: not valid YAML/JSON at {where}: {' '.join(what.split())}"


def read_text(path: str, max_bytes: int, too_large: str = "", stdin: bool = False) -> str:
    """A text file of at most `max_bytes` (`stdin`: '-' reads standard input), UTF-8 with any
    BOM dropped: Arena's one reader of a user's file. Every way of failing to read it is one
    InputError naming it (`too_large`: what the refusal of a larger one adds)."""
    try:
        if stdin and path == "-":
            data = sys.stdin.buffer.read(max_bytes + 1)
        else:
            with Path(path).open("rb") as file:
                data = file.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        size = f"{max_bytes // 2**20} MiB" if max_bytes >= 2**20 else f"{max_bytes // 1024} KiB"
        raise InputError(f"{path}: larger than {size}{too_large}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def load_spec_file(
    path: str | Path, loader: type[yaml.SafeLoader] | type[yaml.CSafeLoader] | None = None
) -> Any:
    """YAML or JSON (JSON is YAML), as JSON's kinds of value; the caller validates. Any problem
    with the file itself is one InputError line naming it (and the line, where there is one)."""
    name = str(path)
    text = read_text(name, MAX_SPEC_BYTES, "; a spec is small")
    try:
        return yaml.load(text, Loader=loader or LOADERS[0])
    except yaml.YAMLError as exc:
        raise InputError(_yaml_problem(name, exc)) from None
    except RecursionError:  # PyYAML's own composer recurses; libyaml caps nesting itself
        raise InputError(f"{name}: nested too deeply (over {MAX_SPEC_DEPTH} levels)") from None
