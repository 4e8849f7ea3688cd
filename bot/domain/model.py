"""The approval domain: plain, frozen values with no I/O and no Slack types.

A `Request` is what an agent asked; a `Decision` is what a person (or a policy,
a grant, a timeout) answered. They are kept apart so the proposal, the
decision and what finally ran can each be read on their own.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # timing, votes and batch import this module; at run time the annotations stay strings
    from bot.domain.batch import Item
    from bot.domain.timing import TimerState, Timing
    from bot.domain.votes import Vote


class Status(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    ANSWERED = "answered"


class Outcome(enum.StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    ANSWERED = "answered"


class Via(enum.StrEnum):
    BUTTON = "button"
    MODAL = "modal"
    POLICY = "policy"
    GRANT = "grant"
    TIMEOUT = "timeout"
    API = "api"
    THREAD = "thread"  # a reply in the Slack thread (answers to an agent's questions)


class Risk(enum.StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Kind(enum.StrEnum):
    APPROVAL = "approval"
    QUESTION = "question"


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
    # Quorum (issue 12): every approval counted, in order; `decided_by` cast the one that completed it.
    votes: tuple[Vote, ...] = ()
    # What the approval is bound to: sha256 of `params` as canonical JSON (bot.domain.params_hash).
    params_sha256: str | None = None
    # A batch's per-item outcomes (bot.domain.batch); empty for a single action.
    items: tuple[Item, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "params": self.params,
            "params_sha256": self.params_sha256,
            "changes": [c.to_json() for c in self.changes],
            "comment": self.comment,
            "decided_by": self.decided_by.to_json() if self.decided_by else None,
            "decided_at": iso(self.decided_at),
            "via": self.via.value,
            "votes": [v.to_json() for v in self.votes],
            "items": [i.decision_json() for i in self.items] if self.items else None,
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
    # Issue 12 (filled by policy tiers later; given on the API today):
    quorum: int = 1  # distinct approvers needed
    requester_may_approve: bool = True  # False: `requester_user` may not approve (separation of duties)
    confirm: str | None = None  # Approve asks to type this string first
    requester_user: str | None = None  # the Slack user who asked (started the run, configured the hook)
    votes: tuple[Vote, ...] = ()  # approvals counted so far (quorum > 1)
    items: tuple[Item, ...] = ()  # a batch's actions and their per-item state

    @property
    def is_batch(self) -> bool:
        return bool(self.items)

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


def iso(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    return dt.isoformat().replace("+00:00", "Z")
