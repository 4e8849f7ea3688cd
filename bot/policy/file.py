"""The policy file (YAML, `SIGNOFF_POLICY`): parsed, validated with pydantic, compiled to a `Policy`.

Every problem is one `PolicyError` line naming the file, the line and what is wrong:
unknown keys, a bad regex or glob, an unknown tier, a quorum larger than the listed approvers,
a duplicate key or rule name. Line numbers come from PyYAML's node marks (the composed node
tree is walked once to map each key path to its line).

    default_tier: high          # the tier of a call that names no risk (default high)
    grant_admins: [U0123ABCD, S0456EFGH]  # may see and revoke every grant in Slack (default: nobody)
    tiers:
      high:     {approvers: [U0123ABCD, S0456EFGH], quorum: 1, reminders: {every: 30m, max: 3}, undo: 30s}
      critical: {approvers: [U0123ABCD, U0999ZZZZ], quorum: 2, requester_may_approve: false,
                 confirm: "{params.resource}", timeout: {after: 4h, outcome: reject}}
    rules:
      - name: never-drop-prod
        tool: "db_*"
        params: {database: {glob: "prod*"}, statement: {regex: "(?i)\\bdrop\\b"}}
        effect: deny
        reason: production tables are never dropped by an agent
      - name: small-refunds
        tool: refund
        params: {amount: {le: 100}, currency: [USD, EUR]}
        effect: allow
        tier: medium
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.api.timing_in import EscalationIn, RemindersIn, TimeoutIn
from bot.domain.durations import parse_duration
from bot.domain.model import Risk
from bot.domain.matching import ValueMatch
from bot.domain.policy import DEFAULT_TIERS, Effect, Policy, Rule, TierSettings
from bot.domain.timing import DEFAULT, TIMEOUT_OUTCOMES, Level
from bot.process.settings import SettingsError

TIERS = tuple(r.value for r in Risk)
SLACK_APPROVER = re.compile(r"^[UWS][A-Z0-9]{1,39}$")
MATCH_KEYS = ("equals", "any_of", "glob", "regex", "lt", "le", "gt", "ge")


# libyaml's loader when PyYAML was built with it (10x faster on a 1,000-rule file); both keep marks.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class PolicyError(SettingsError):
    """A policy file that cannot be used: `file:line: problem`."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source, self.line, self.message = source, line, message
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _tier(value: Any) -> Any:
    if value is not None and value not in TIERS:
        raise ValueError(f"unknown tier {value!r} (one of: {', '.join(TIERS)})")
    return value


def _globs(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) and i for i in items):
        raise ValueError("must be a non-empty string or a list of non-empty strings")
    return tuple(items)


def _value_match(value: Any) -> ValueMatch:
    """A parameter condition: a scalar (exact), a list (any of), or a mapping of MATCH_KEYS."""
    if not isinstance(value, dict):
        return ValueMatch(any_of=tuple(value) if isinstance(value, list) else (value,))
    unknown = [k for k in value if k not in MATCH_KEYS]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (one of: {', '.join(MATCH_KEYS)})")
    if not value:
        raise ValueError("an empty condition matches everything: give equals, any_of, glob, regex, lt, le, gt or ge")
    any_of = None
    if "equals" in value:
        any_of = (value["equals"],)
    if "any_of" in value:
        if not isinstance(value["any_of"], list) or not value["any_of"]:
            raise ValueError("any_of must be a non-empty list")
        any_of = (*(any_of or ()), *value["any_of"]) if "equals" not in value else any_of
    for key in ("glob", "regex"):
        if key in value and not isinstance(value[key], str):
            raise ValueError(f"{key} must be a string")
    if "regex" in value:
        try:
            re.compile(value["regex"])
        except re.error as exc:
            raise ValueError(f"bad regex {value['regex']!r}: {exc}") from None
    bounds = {}
    for key in ("lt", "le", "gt", "ge"):
        if key in value:
            if isinstance(value[key], bool) or not isinstance(value[key], int | float):
                raise ValueError(f"{key} must be a number")
            bounds[key] = float(value[key])
    return ValueMatch(any_of=any_of, glob=value.get("glob"), regex=value.get("regex"), **bounds)


def _slack_ids(value: list[str]) -> list[str]:
    """Slack user ids (U..., W...) and user group ids (S...), each once, in order."""
    for entry in value:
        if not isinstance(entry, str) or not SLACK_APPROVER.match(entry):
            raise ValueError(f"{entry!r} is not a Slack user id (U..., W...) or user group id (S...)")
    return list(dict.fromkeys(value))


class RuleIn(_Strict):
    name: str = Field(min_length=1, max_length=100)
    tool: Any = "*"
    params: dict[str, Any] = Field(default_factory=dict)
    requester: Any = None
    channel: Any = None
    effect: Effect | None = None
    tier: str | None = None
    reason: str | None = Field(default=None, max_length=500)

    _tier = field_validator("tier")(_tier)

    @field_validator("tool")
    @classmethod
    def _tool(cls, value: Any) -> tuple[str, ...]:
        return _globs(value)

    @field_validator("requester", "channel")
    @classmethod
    def _who(cls, value: Any) -> tuple[str, ...]:
        return () if value is None else _globs(value)

    @field_validator("params")
    @classmethod
    def _params(cls, value: dict[str, Any]) -> dict[str, ValueMatch]:
        out = {}
        for name, condition in value.items():
            try:
                out[name] = _value_match(condition)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return out

    @model_validator(mode="after")
    def _does_something(self) -> RuleIn:
        if self.effect is None and self.tier is None:
            raise ValueError("a rule needs an effect (deny, ask, allow), a tier, or both")
        if self.effect is Effect.ALLOW and self.tier == "critical":
            raise ValueError("an allow rule cannot name tier critical: critical calls ask with a typed confirmation")
        return self


class TierIn(_Strict):
    approvers: list[str] = Field(default_factory=list, max_length=50)
    quorum: int = Field(default=1, ge=1, le=50)
    requester_may_approve: bool | None = None
    confirm: str | None = Field(default=None, min_length=1, max_length=200)
    reminders: Any = None
    escalation: Any = None
    timeout: Any = None
    # After a person's Approve, how long they may still take it back; the agent hears only then.
    undo: str | None = Field(default=None, min_length=2, max_length=20)
    # An AI note on the tier's cards (docs/ai-notes.md): on only where ANTHROPIC_API_KEY is set.
    note: bool = False

    @field_validator("approvers")
    @classmethod
    def _ids(cls, value: list[str]) -> list[str]:
        return _slack_ids(value)

    @field_validator("confirm")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None:
            for found in re.findall(r"\{([^{}]*)\}", value):
                if found != "action" and not re.fullmatch(r"params\.[A-Za-z0-9_.\-]+", found):
                    raise ValueError(f"unknown placeholder {{{found}}} (use {{action}} or {{params.NAME}})")
        return value

    @model_validator(mode="after")
    def _quorum_fits(self) -> TierIn:
        people = [a for a in self.approvers if not a.startswith("S")]
        if self.approvers and len(people) == len(self.approvers) and self.quorum > len(people):
            raise ValueError(f"quorum {self.quorum} is larger than the {len(people)} approver(s) listed")
        return self


class TiersIn(_Strict):
    low: TierIn | None = None
    medium: TierIn | None = None
    high: TierIn | None = None
    critical: TierIn | None = None


class PolicyIn(_Strict):
    version: int = 1
    default_tier: str = "high"
    tiers: TiersIn = Field(default_factory=TiersIn)
    rules: list[RuleIn] = Field(default_factory=list, max_length=100_000)
    grant_admins: list[str] = Field(default_factory=list, max_length=50)

    _tier = field_validator("default_tier")(_tier)
    _admins = field_validator("grant_admins")(_slack_ids)


# -- line numbers ---------------------------------------------------------------------------------


def _lines(node: yaml.Node, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], int]]:
    """(key path, 1-based line) for every node; raises PolicyError-ready ValueError on duplicate keys."""
    yield path, node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key, value in node.value:
            name = key.value
            if name in seen:
                raise _Duplicate(key.start_mark.line + 1, f"duplicate key {name!r}")
            seen.add(name)
            yield (*path, name), key.start_mark.line + 1
            for sub, line in _lines(value, (*path, name)):
                if sub != (*path, name):
                    yield sub, line
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _lines(item, (*path, index))


class _Duplicate(Exception):
    def __init__(self, line: int, message: str) -> None:
        self.line, self.message = line, message


def _line_of(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    for end in range(len(loc), -1, -1):
        key = tuple(str(p) if not isinstance(p, int) else p for p in loc[:end])
        if key in lines:
            return lines[key]
    return None


# -- loading ----------------------------------------------------------------------------------------


def load_policy(path: str | Path) -> Policy:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise PolicyError(source, None, f"cannot read the file: {exc}") from None
    return parse_policy(text, source)


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else {}
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise PolicyError(source, mark.line + 1 if mark else None, f"not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise PolicyError(source, None, f"not valid YAML: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PolicyError(source, 1, "the file must be a mapping (default_tier, tiers, rules, grant_admins)")
    try:
        lines = {path: line for path, line in _lines(node)} if node is not None else {}
    except _Duplicate as dup:
        raise PolicyError(source, dup.line, dup.message) from None
    lines = {tuple(str(p) if not isinstance(p, int) else p for p in k): v for k, v in lines.items()}
    try:
        model = PolicyIn.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = tuple(error["loc"])
        where = ".".join(str(p) for p in loc) or "file"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = f"unknown key {str(loc[-1])!r}"
            where = ".".join(str(p) for p in loc[:-1]) or "top level"
        head = message.split(": ", 1)[0]
        if (*loc, head) in lines:  # a per-parameter problem names the parameter: point at its line
            loc = (*loc, head)
        raise PolicyError(source, _line_of(lines, loc), f"{where}: {message}") from None
    names: dict[str, int] = {}
    for index, rule in enumerate(model.rules):
        if rule.name in names:
            raise PolicyError(source, _line_of(lines, ("rules", index, "name")),
                              f"rules.{index}.name: {rule.name!r} is already the name of rules.{names[rule.name]}")
        names[rule.name] = index
    try:
        tiers = {Risk(name): _tier_settings(Risk(name), getattr(model.tiers, name)) for name in TIERS}
    except _TierProblem as problem:
        raise PolicyError(source, _line_of(lines, problem.loc), f"{'.'.join(map(str, problem.loc))}: "
                          f"{problem.message}") from None
    rules = tuple(
        Rule(name=r.name, tools=r.tool, params=tuple(r.params.items()), requesters=r.requester or (), channels=r.channel or (),
             effect=r.effect, tier=Risk(r.tier) if r.tier else None, reason=r.reason,
             line=_line_of(lines, ("rules", i)))
        for i, r in enumerate(model.rules)
    )
    return Policy(rules=rules, tiers=tiers, default_tier=Risk(model.default_tier), source=source,
                  sha256=hashlib.sha256(text.encode()).hexdigest(), grant_admins=tuple(model.grant_admins))


class _TierProblem(Exception):
    def __init__(self, loc: tuple[Any, ...], message: str) -> None:
        self.loc, self.message = loc, message


def _tier_settings(tier: Risk, given: TierIn | None) -> TierSettings:
    base = DEFAULT_TIERS[tier]
    if given is None:
        return base
    parts: dict[str, Any] = {}
    for name, model, shorthand in (("reminders", RemindersIn, "every"), ("escalation", EscalationIn, None),
                                   ("timeout", TimeoutIn, "after")):
        parts[name] = _timing_part(tier, name, getattr(given, name), model, shorthand)
    return TierSettings(
        approvers=tuple(given.approvers), quorum=given.quorum,
        requester_may_approve=base.requester_may_approve if given.requester_may_approve is None
        else given.requester_may_approve,
        confirm=given.confirm if given.confirm is not None else base.confirm,
        undo=_undo_window(tier, given.undo),
        note=given.note,
        **parts,
    )


UNDO_MAX = timedelta(minutes=10)


def _undo_window(tier: Risk, raw: str | None) -> timedelta | None:
    """A tier's `undo:` (e.g. `30s`): at most UNDO_MAX, since the agent waits that long after every Approve."""
    if raw is None:
        return None
    try:
        window = parse_duration(raw)
    except ValueError as exc:
        raise _TierProblem(("tiers", tier.value, "undo"), str(exc)) from None
    if window > UNDO_MAX:
        raise _TierProblem(("tiers", tier.value, "undo"), f"{raw!r} is longer than the maximum of 10m")
    return window


def _timing_part(tier: Risk, name: str, raw: Any, model: type[BaseModel], shorthand: str | None) -> Any:
    """A tier's reminders/escalation/timeout in the API's syntax -> the tuple `combine` takes."""
    loc: tuple[Any, ...] = ("tiers", tier.value, name)
    if raw is None:
        return DEFAULT
    if raw is False:
        return None
    if isinstance(raw, str) and shorthand:
        raw = {shorthand: raw}
    try:
        parsed: Any = model.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        message = "unknown key" if error["type"] == "extra_forbidden" else error["msg"].removeprefix("Value error, ")
        raise _TierProblem((*loc, *error["loc"]), message) from None
    if isinstance(parsed, RemindersIn):
        return parse_duration(parsed.every), parsed.max
    if isinstance(parsed, EscalationIn):
        return tuple(Level(parse_duration(lv.after), tuple(lv.notify), lv.add_as_approvers)
                     for lv in parsed.levels), parsed.loops
    assert isinstance(parsed, TimeoutIn)
    if parsed.outcome == "approve" and tier is not Risk.LOW:
        raise _TierProblem((*loc, "outcome"), "approve on timeout is only allowed for the low tier")
    return parse_duration(parsed.after), TIMEOUT_OUTCOMES[parsed.outcome]
