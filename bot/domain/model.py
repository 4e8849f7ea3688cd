"""The approval domain: plain, frozen values with no I/O and no Slack types.

A `Request` is what an agent asked; a `Decision` is what a person (or a policy,
a grant, a timeout) answered. They are kept apart so the proposal, the
decision and what finally ran can each be read on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from bot.domain.timing import TimerState, Timing
from bot.domain.values import Kind, Outcome, Risk, Status, Via, iso

__all__ = [
    "Action", "Actor", "AuditEvent", "Change", "Decision", "Kind", "Outcome", "Preview", "Request", "Risk",
    "Status", "Via", "iso", "PREVIEW_KINDS",
]


PREVIEW_KINDS = ("email", "diff", "table", "markdown", "json")


@dataclass(frozen=True)
class Action:
    """The tool call the agent proposes: its name, parameters and (optional) JSON Schema."""

    name: str
    params: dict[str, Any]
    params_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class Preview:
    """What the person actually looks at before deciding.

    `kind` is one of PREVIEW_KINDS; `data` holds that kind's fields:
    email {to, cc, subject, body}; diff {path?, before?, after?, unified?};
    table {columns, rows}; markdown {text}; json {value}.
    """

    kind: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Actor:
    id: str
    name: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name}


@dataclass(frozen=True)
class Change:
    """One edited parameter: `field` is the parameter name, `before`/`after` its values."""

    field: str
    before: Any
    after: Any

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "from": self.before, "to": self.after}


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    params: dict[str, Any]
    changes: tuple[Change, ...]
    comment: str | None
    decided_by: Actor | None
    decided_at: datetime
    via: Via

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "params": self.params,
            "changes": [c.to_json() for c in self.changes],
            "comment": self.comment,
            "decided_by": self.decided_by.to_json() if self.decided_by else None,
            "decided_at": iso(self.decided_at),
            "via": self.via.value,
        }


@dataclass(frozen=True)
class Request:
    """One approval (or question) and where it stands.

    `version` grows by one on every write; guarded writes compare it so two
    racing writers can never both win.
    """

    id: str
    kind: Kind
    status: Status
    action: Action
    summary: str
    risk: Risk
    channel: str
    created_at: datetime
    updated_at: datetime
    version: int = 1
    context: str | None = None
    preview: Preview | None = None
    approvers: tuple[str, ...] = ()
    callback_url: str | None = None
    requested_by: str | None = None
    card_channel: str | None = None
    card_ts: str | None = None
    thread_ts: str | None = None
    decision: Decision | None = None
    idempotency_key: str | None = None
    body_hash: str | None = None
    next_due_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    timing: Timing | None = None  # reminders, escalation, timeout: fixed at submit
    timers: TimerState | None = None  # how far along that timeline the request is
    card_permalink: str | None = None

    @property
    def is_pending(self) -> bool:
        return self.status is Status.PENDING

    def evolve(self, **changes: Any) -> Request:
        return replace(self, **changes)


@dataclass(frozen=True)
class AuditEvent:
    """An append-only fact about a request: created, posted, decided, reminded..."""

    request_id: str
    type: str
    at: datetime
    actor: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
