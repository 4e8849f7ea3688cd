"""What happened when a decided action ran: kept on the request, apart from the decision.

A decision says what a person allowed; it does not say what then ran. Three things stay apart:
what the agent proposed (`action.params`), what the person approved (`decision.params`) and what ran
(this module's `RunOutcome`: its status, the parameters actually used, a short result, an error). An
outcome (an execution receipt) is reported by the agent (`POST /api/v1/approvals/{id}/outcome`) or
by Signoff's runner, and stored in the request's `extra["outcome"]`:

    single request:  {"status": "ran", "error": "", "at": "...Z", "params": {...}, "result": ...,
                      "same_params": true, "by": "agent-token-name"}
    batch request:   {"items": {key: {"status": ..., "error": ..., "at": ...}}}

An outcome, once recorded for a call, is never replaced: `with_outcome` returns None for a second
one, so a replay after a restart writes nothing and shows nothing twice; `same_report` tells a
repeated report (answered as it was) from a different one (a conflict). Pure values, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from bot.domain.runs import Gate, ToolExecution
from bot.domain.values import from_iso, iso

OUTCOME_KEY = "outcome"
STATE_KEY = "state"  # what the agent said its preview was computed from (a hash, an etag, a version)
ERROR_MAX = 1000  # what is kept of the tool's error text (the run's log has all of it)


RESULT_MAX = 2000  # characters of the JSON of a reported result
PARAMS_MAX = 32_000  # characters of the JSON of the parameters a report says were used


class RanStatus(enum.StrEnum):
    RAN = "ran"  # it ran (the agent or the runner says so)
    FAILED = "failed"  # it ran and reported an error
    SKIPPED = "skipped"  # the agent decided not to run it after all (e.g. the state it was approved on changed)
    UNKNOWN = "unknown"  # it was running when Signoff restarted and is not safe to repeat


RUNNER = "runner"  # `by` of an outcome Signoff's own agent runner recorded
RESULT_SHOWN = 500  # what the runner keeps of a tool's output as the result (the run's log has all of it)
NOT_REPORTED = "not_reported"  # approved, and no outcome reported (yet)


@dataclass(frozen=True)
class RunOutcome:
    status: RanStatus
    error: str
    at: datetime
    params: dict[str, Any] | None = None  # the parameters actually used, when reported
    result: Any = None  # a short result (bounded by the API), when reported
    same_params: bool | None = None  # params equal to what was approved (None: no params reported)
    by: str | None = None  # who reported it: an API token's name, or "runner"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status.value, "error": self.error, "at": iso(self.at)}
        for key in ("params", "result", "same_params", "by"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunOutcome:
        params = data.get("params")
        same = data.get("same_params")
        return cls(RanStatus(str(data["status"])), str(data.get("error") or ""), from_iso(data["at"]),
                   dict(params) if isinstance(params, Mapping) else None, data.get("result"),
                   same if isinstance(same, bool) else None, data.get("by"))

    def same_report(self, other: RunOutcome) -> bool:
        """True if `other` says what this says (when and by whom aside): a repeated report."""
        return (self.status, self.error, self.params, self.result) == (other.status, other.error, other.params,
                                                                       other.result)

    def against(self, approved: Mapping[str, Any] | None) -> RunOutcome:
        """This outcome with `same_params` set by comparing the reported params with the approved ones."""
        if self.params is None or approved is None:
            return self
        return replace(self, same_params=dict(approved) == self.params)

    @classmethod
    def failed(cls, error: str, at: datetime) -> RunOutcome:
        error = " ".join(error.split())
        return cls(RanStatus.FAILED, error if len(error) <= ERROR_MAX else error[: ERROR_MAX - 1] + "…", at)


def short_result(text: str) -> str:
    """A tool's output as an outcome's short result: one line, at most RESULT_SHOWN characters."""
    text = " ".join(text.split())
    return text if len(text) <= RESULT_SHOWN else text[: RESULT_SHOWN - 1] + "…"


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


_BAD = {RanStatus.FAILED.value, RanStatus.UNKNOWN.value}


def any_failed(extra: Mapping[str, Any]) -> bool:
    """True if the action (or any item of a batch) did not succeed when it ran."""
    current = extra.get(OUTCOME_KEY)
    if not isinstance(current, Mapping):
        return False
    if "status" in current:
        return current["status"] in _BAD
    items = current.get("items")
    return isinstance(items, Mapping) and any(isinstance(i, Mapping) and i.get("status") in _BAD
                                              for i in items.values())


def changed_fields(approved: Mapping[str, Any], ran: Mapping[str, Any]) -> list[str]:
    """The parameter names whose value ran differs from the approved one (added and dropped too), sorted."""
    return sorted(k for k in set(approved) | set(ran) if approved.get(k, _ABSENT) != ran.get(k, _ABSENT))


_ABSENT = object()


def ran_after_decision(execution: ToolExecution) -> bool:
    """A call that a decision let through (a person, policy or a grant) and that was then run."""
    return execution.gate is Gate.ASK and execution.request_id is not None and execution.attempts > 0


def failed_after_decision(executions: Iterable[ToolExecution]) -> list[ToolExecution]:
    """The finished calls that ran after a decision and did not succeed, in the order they were made."""
    return [e for e in executions if e.is_error and ran_after_decision(e)]
