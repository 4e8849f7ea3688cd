"""What happened when a decided action ran: kept on the request, apart from the decision.

A decision says what a person allowed; it does not say the action worked. When a call that ran
after a decision fails (or its outcome is lost to a restart), its `RunOutcome` is stored in the
request's `extra["outcome"]`:

    single request:  {"status": "failed", "error": "...", "at": "...Z"}
    batch request:   {"items": {tool_use_id: {"status": ..., "error": ..., "at": ...}}}

A success records nothing (the card, the run and Home stay as they are). An outcome, once
recorded for a call, is never replaced: `with_outcome` returns None for a second one, so a
replay after a restart writes nothing and shows nothing twice. Pure values, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.domain.runs import Gate, ToolExecution
from bot.domain.values import from_iso, iso

OUTCOME_KEY = "outcome"
ERROR_MAX = 1000  # what is kept of the tool's error text (the run's log has all of it)


class RanStatus(enum.StrEnum):
    FAILED = "failed"  # it ran and reported an error
    UNKNOWN = "unknown"  # it was running when Signoff restarted and is not safe to repeat


@dataclass(frozen=True)
class RunOutcome:
    status: RanStatus
    error: str
    at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status.value, "error": self.error, "at": iso(self.at)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunOutcome:
        return cls(RanStatus(str(data["status"])), str(data.get("error") or ""), from_iso(data["at"]))

    @classmethod
    def failed(cls, error: str, at: datetime) -> RunOutcome:
        error = " ".join(error.split())
        return cls(RanStatus.FAILED, error if len(error) <= ERROR_MAX else error[: ERROR_MAX - 1] + "…", at)


def with_outcome(extra: Mapping[str, Any], outcome: RunOutcome, *, item: str | None = None) -> dict[str, Any] | None:
    """`extra` with `outcome` recorded (for batch item `item`), or None if one is recorded already."""
    current = extra.get(OUTCOME_KEY)
    if item is None:
        if current:
            return None
        return {**extra, OUTCOME_KEY: outcome.to_json()}
    items = dict((current or {}).get("items") or {})
    if item in items:
        return None
    items[item] = outcome.to_json()
    return {**extra, OUTCOME_KEY: {"items": items}}


def outcome_of(extra: Mapping[str, Any], *, item: str | None = None) -> RunOutcome | None:
    """The recorded outcome of a single request, or of one batch item (by its key)."""
    current = extra.get(OUTCOME_KEY)
    if not isinstance(current, Mapping):
        return None
    if item is not None:
        current = (current.get("items") or {}).get(item)
        if not isinstance(current, Mapping):
            return None
    if "status" not in current:
        return None
    return RunOutcome.from_json(current)


def any_failed(extra: Mapping[str, Any]) -> bool:
    """True if the action (or any item of a batch) did not succeed when it ran."""
    current = extra.get(OUTCOME_KEY)
    if not isinstance(current, Mapping):
        return False
    return "status" in current or bool(current.get("items"))


def ran_after_decision(execution: ToolExecution) -> bool:
    """A call that a decision let through (a person, policy or a grant) and that was then run."""
    return execution.gate is Gate.ASK and execution.request_id is not None and execution.attempts > 0


def failed_after_decision(executions: Iterable[ToolExecution]) -> list[ToolExecution]:
    """The finished calls that ran after a decision and did not succeed, in the order they were made."""
    return [e for e in executions if e.is_error and ran_after_decision(e)]
