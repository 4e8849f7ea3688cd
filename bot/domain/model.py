"""The approval domain: plain, frozen values with no I/O and no Slack types.

A `Request` is what an agent asked; a `Decision` is what a person (or a policy,
a grant, a timeout) answered. They are kept apart so the proposal, the
decision and what finally ran can each be read on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from bot.domain.params_hash import params_sha256
from bot.domain.timing import TimerState, Timing
from bot.domain.values import Kind, Outcome, Risk, Status, Via, from_iso, iso

__all__ = [
    "Action", "Actor", "AuditEvent", "Change", "Decision", "Kind", "Outcome", "Preview", "Request", "Risk",
    "Status", "Via", "iso", "PREVIEW_KINDS", "Vote", "Item",
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
    """A person in Slack: their user id and, when known, their name."""

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
class Vote:
    """One person's approval of a pending request (quorum rules: bot.domain.votes)."""

    voter: Actor
    at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"id": self.voter.id, "name": self.voter.name, "at": iso(self.at)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Vote:
        return cls(Actor(str(data["id"]), data.get("name")), from_iso(data["at"]))


@dataclass(frozen=True)
class Item:
    """One action of a batch and, while the batch is pending, where it stands (rules: bot.domain.batch)."""

    action: Action
    preview: Preview | None = None
    key: str | None = None  # the caller's id for it (Signoff's runner: the tool_use_id)
    params: dict[str, Any] | None = None  # the edited parameters; None: as proposed
    changes: tuple[Change, ...] = ()
    outcome: Outcome | None = None
    decided_by: Actor | None = None
    # Which decisions this item offers (bot.domain.choices names); None: the usual three.
    allowed: tuple[str, ...] | None = None
    comment: str | None = None  # the reason it was rejected, or the reply given in its place
    via: Via | None = None  # how it was decided; `reply`: "Reply instead" (rejected, the action must not run)

    @property
    def final_params(self) -> dict[str, Any]:
        return self.action.params if self.params is None else self.params

    def evolve(self, **changes: Any) -> Item:
        return replace(self, **changes)

    def decision_json(self) -> dict[str, Any]:
        """The item in a decision: what the agent may run (and its hash), or that it must not."""
        params = self.final_params
        return {
            "name": self.action.name,
            "key": self.key,
            "outcome": self.outcome.value if self.outcome else None,
            "params": params,
            "changes": [c.to_json() for c in self.changes],
            "params_sha256": params_sha256(params),
            "decided_by": self.decided_by.to_json() if self.decided_by else None,
            "comment": self.comment,
            "via": self.via.value if self.via else None,
        }

    def to_json(self) -> dict[str, Any]:
        """Storage form (the request row's `items` column)."""
        return {
            "action": {"name": self.action.name, "params": self.action.params,
                       "params_schema": self.action.params_schema},
            "preview": {"kind": self.preview.kind, "data": self.preview.data} if self.preview else None,
            "key": self.key,
            "params": self.params,
            "changes": [c.to_json() for c in self.changes],
            "outcome": self.outcome.value if self.outcome else None,
            "decided_by": self.decided_by.to_json() if self.decided_by else None,
            "allowed": list(self.allowed) if self.allowed is not None else None,
            "comment": self.comment,
            "via": self.via.value if self.via else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Item:
        a = data["action"]
        p = data.get("preview")
        d = data.get("decided_by")
        return cls(
            action=Action(a["name"], a.get("params") or {}, a.get("params_schema")),
            preview=Preview(p["kind"], p["data"]) if p else None,
            key=data.get("key"),
            params=data.get("params"),
            changes=tuple(Change(c["field"], c.get("from"), c.get("to")) for c in data.get("changes") or ()),
            outcome=Outcome(data["outcome"]) if data.get("outcome") else None,
            decided_by=Actor(d["id"], d.get("name")) if d else None,
            allowed=tuple(data["allowed"]) if data.get("allowed") is not None else None,
            comment=data.get("comment"),
            via=Via(data["via"]) if data.get("via") else None,
        )


@dataclass(frozen=True)
class Decision:
    """How a request ended (`outcome`), by what means (`via`: a person's click, a policy, a grant, the
    clock, the API...) and with which parameters to run (`params`, a person's edits applied; `changes`
    lists them)."""

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
    undo_until: datetime | None = None  # an approval held in its undo window until then (bot.domain.undo)
    # When a person first opened it (bot/domain/stats.py): a statistic, not request state (stamped without a
    # version bump), so not compared either: a request is the same request whether or not someone looked.
    first_viewed_at: datetime | None = field(default=None, compare=False)

    @property
    def is_batch(self) -> bool:
        return bool(self.items)

    @property
    def is_pending(self) -> bool:
        return self.status is Status.PENDING

    @property
    def has_card(self) -> bool:
        """Its card is in Slack: the channel and ts it was posted at are stored."""
        return bool(self.card_ts and self.card_channel)

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
