"""The agent API's `reminders`, `escalation` and `timeout` fields: validated, then merged with defaults.

    "reminders":  {"every": "10m", "max": 3}      or "10m" (max 3)           or false (none)
    "escalation": {"levels": [{"after": "30m", "notify": ["U123", "S456"], "add_as_approvers": true}],
                   "loops": 0}                                                or false (none)
    "timeout":    {"after": "4h", "outcome": "expire" | "reject" | "approve"} or "4h" (expire) or false

Absent (or null): the server's default for that part (SIGNOFF_REMIND_*, SIGNOFF_ESCALATE_*,
SIGNOFF_TIMEOUT*). Durations: 90s, 15m, 4h, 2d. Each level's `after` counts from the previous
level (level 1: from the request); after the last level the chain repeats `loops` more times.
A request's timeout never approves: `approve` is a 400 ("only policy can make silence approve": a
policy file's low tier may say so, bot.policy.file). A timeout that would end the request before
its first reminder or first escalation is refused. Every problem is a 400 naming its field.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.domain.durations import DurationError, parse_duration
from bot.domain.model import Risk
from bot.domain.timing import DEFAULT, TIMEOUT_OUTCOMES, Level, Timing, TimingError, combine
from bot.errors import InvalidInput
from bot.approvals.access import Directory

log = logging.getLogger(__name__)

SLACK_TARGET = r"^[UWS][A-Z0-9]{1,39}$"
DEFAULT_REMIND_MAX = 3


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _duration(value: str) -> str:
    try:
        parse_duration(value)
    except DurationError as exc:
        raise ValueError(str(exc)) from None
    return value


class RemindersIn(_Strict):
    every: str
    max: int = Field(default=DEFAULT_REMIND_MAX, ge=1, le=100)

    _every = field_validator("every")(_duration)


class LevelIn(_Strict):
    after: str
    notify: list[str] = Field(min_length=1, max_length=50)
    add_as_approvers: bool = True

    _after = field_validator("after")(_duration)

    @field_validator("notify")
    @classmethod
    def _targets(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not re.match(SLACK_TARGET, entry):
                raise ValueError(f"{entry[:40]!r} is not a Slack user id (U..., W...) or user group id (S...)")
        return list(dict.fromkeys(value))


class EscalationIn(_Strict):
    levels: list[LevelIn] = Field(min_length=1, max_length=10)
    loops: int = Field(default=0, ge=0, le=10)


class TimeoutIn(_Strict):
    after: str
    outcome: Literal["expire", "reject", "approve"] = "expire"

    _after = field_validator("after")(_duration)


def _parse(model: type[_Strict], name: str, raw: Any, shorthand: str | None) -> Any:
    """DEFAULT (absent/null), None (false: off), or the validated model."""
    if raw is None:
        return DEFAULT
    if raw is False:
        return None
    if isinstance(raw, str) and shorthand:
        raw = {shorthand: raw}
    if not isinstance(raw, dict):
        hint = 'an object, a duration string like "15m", or false' if shorthand else "an object or false"
        raise InvalidInput(f"{name} must be {hint}", details=[{"field": name, "message": f"must be {hint}"}])
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        details = []
        for error in exc.errors(include_url=False):
            field = ".".join([name, *(str(p) for p in error["loc"])])
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown field"
            details.append({"field": field, "message": message})
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:5])
        raise InvalidInput(f"invalid request body: {summary}", details=details) from None


def parse_timing(raw_reminders: Any, raw_escalation: Any, raw_timeout: Any, *, risk: Risk, defaults: Timing) -> Timing:
    """The request's Timing from the body's three raw fields, or InvalidInput naming what is wrong."""
    reminders = _parse(RemindersIn, "reminders", raw_reminders, "every")
    escalation = _parse(EscalationIn, "escalation", raw_escalation, None)
    timeout = _parse(TimeoutIn, "timeout", raw_timeout, "after")
    if isinstance(reminders, RemindersIn):
        reminders = (parse_duration(reminders.every), reminders.max)
    if isinstance(escalation, EscalationIn):
        levels = tuple(
            Level(parse_duration(lv.after), tuple(lv.notify), lv.add_as_approvers) for lv in escalation.levels
        )
        escalation = (levels, escalation.loops)
    if isinstance(timeout, TimeoutIn):
        if timeout.outcome == "approve":
            # An agent must not be able to make a request that nobody answers approve itself.
            message = "only policy can make silence approve: use expire or reject"
            raise InvalidInput(f"invalid request body: timeout.outcome: {message}",
                               details=[{"field": "timeout.outcome", "message": message}])
        timeout = (parse_duration(timeout.after), TIMEOUT_OUTCOMES[timeout.outcome])
    try:
        return combine(defaults, risk=risk, reminders=reminders, escalation=escalation, timeout=timeout)
    except TimingError as exc:
        raise InvalidInput(f"invalid request body: {exc.field}: {exc.message}",
                           details=[{"field": exc.field, "message": exc.message}]) from None


async def expand_groups(
    directory: Directory | None, approvers: list[str], timing: Timing, *, escalation_given: bool
) -> tuple[str, ...]:
    """Members of the approver user groups (for the App Home index); checks escalation targets.

    An approver or escalation target that Slack says is no user group is a 400 (nobody could
    ever decide or be reached). If Slack cannot be asked (it is down), the request is accepted
    unchecked rather than refused.
    """
    if directory is None:
        return ()
    members: list[str] = []
    for index, entry in enumerate(approvers):
        if entry.startswith("S"):
            try:
                members.extend(sorted(await directory.group_members(entry)))
            except LookupError:
                field, message = f"approvers.{index}", f"{entry} is not a user group in this Slack workspace"
                raise InvalidInput(f"invalid request body: {field}: {message}",
                                   details=[{"field": field, "message": message}]) from None
            except Exception:
                log.warning("could not list the members of %s", entry, exc_info=True)
    for index, level in enumerate(timing.levels):
        for target in level.notify:
            if not target.startswith("S"):
                continue
            try:
                await directory.group_members(target)
            except LookupError:
                field = f"escalation.levels.{index}.notify"
                message = f"{target} is not a user group in this Slack workspace"
                if not escalation_given:
                    message += " (it comes from the server's SIGNOFF_ESCALATE_TO)"
                raise InvalidInput(f"invalid request body: {field}: {message}",
                                   details=[{"field": field, "message": message}]) from None
            except Exception:
                log.warning("could not check escalation target %s", target, exc_info=True)
    return tuple(dict.fromkeys(members))
