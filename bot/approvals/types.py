"""The service's value types and errors: what an agent asks (ApprovalSpec), how a decision or a guarded
change ended (DecideResult, Guarded), and the errors a guarded write raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from bot.domain.model import Action, Item, Kind, Preview, Request, Risk, Status
from bot.domain.timing import Timing, initial_state, next_due

T = TypeVar("T")


@dataclass(frozen=True)
class ApprovalSpec:
    """A validated approval request from an agent."""

    action: Action
    summary: str
    risk: Risk
    channel: str
    context: str | None = None
    preview: Preview | None = None
    approvers: tuple[str, ...] = ()
    callback_url: str | None = None
    requested_by: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    kind: Kind = Kind.APPROVAL
    thread_ts: str | None = None  # post the card as a reply in this thread (an agent run's thread)
    timing: Timing | None = None  # reminders, escalation, timeout; None: the service's default_timing
    approver_users: tuple[str, ...] = ()  # members of listed user groups, for the App Home inbox
    destructive: bool | None = None  # a tool's destructive hint (MCP destructiveHint): an input to policy
    timing_given: frozenset[str] = frozenset()  # which of reminders/escalation/timeout the caller gave
    # Quorum, separation of duties, typed confirmation, batches (policy tiers fill these in later):
    # see bot.domain.model.Request.
    quorum: int = 1
    requester_may_approve: bool = True
    confirm: str | None = None
    requester_user: str | None = None
    items: tuple[Item, ...] = ()  # a batch: several actions on one card (`action` is then BATCH_ACTION)
    # Who set the bar. `trusted`: Signoff's own runner, from operator config (the tool's declared risk,
    # SIGNOFF_RUN_APPROVERS, the Slack user who started the run). Otherwise an agent did (the API):
    # its `risk` is only `asked_risk` (None: it named none) and may only raise policy's tier, and
    # approvers a policy tier names hold over the ones it lists (bot.approvals.gate.apply_evaluation).
    trusted: bool = False
    asked_risk: Risk | None = None

    def pending(self, request_id: str, now: datetime, default_timing: Timing | None, *,
                idempotency_key: str | None = None, body_hash: str | None = None) -> Request:
        """The pending request this spec describes, made `now` (not stored yet: see `Service.stage`)."""
        timing = self.timing if self.timing is not None else default_timing
        timers = initial_state(timing, now) if timing is not None else None
        return Request(
            id=request_id,
            kind=self.kind,
            status=Status.PENDING,
            action=self.action,
            summary=self.summary,
            risk=self.risk,
            channel=self.channel,
            created_at=now,
            updated_at=now,
            context=self.context,
            preview=self.preview,
            approvers=self.approvers,
            callback_url=self.callback_url,
            requested_by=self.requested_by,
            thread_ts=self.thread_ts,
            idempotency_key=idempotency_key,
            body_hash=body_hash,
            extra=dict(self.extra),
            timing=timing,
            timers=timers,
            next_due_at=next_due(timers) if timers is not None else None,
            quorum=self.quorum,
            requester_may_approve=self.requester_may_approve,
            confirm=self.confirm,
            requester_user=self.requester_user,
            items=self.items,
        )


@dataclass(frozen=True)
class DecideResult:
    request: Request
    won: bool
    counted: bool = False  # a change was stored and the request is still pending (a quorum vote, batch items)
    duplicate: bool = False  # this person had already approved: nothing was written
    stale: bool = False  # `only_on_read` and the request had changed since: nothing was written
    refused: str | None = None  # bot.approvals.checked: the person may not decide it as it is now (why); nothing written
    held: bool = False  # an approval held in the request's undo window (bot/domain/undo.py): still pending
    waiting: bool = False  # `unless` said not now (a timeout under a person's stored click): nothing written


class StaleCheck(Exception):
    """The gate's check relied on a cached view that the unit found out of date (a tool's grants
    changed in some process): `submit` rolls the unit back and checks again, reading afresh."""


class LostRace(Exception):
    """A guarded write found another version: someone wrote first. `Service.guarded` retries."""


@dataclass(frozen=True)
class Guarded(Generic[T]):
    """How a guarded change ended: `value` when it ran; else `request` is what stopped it
    (`settled`: no longer pending; neither: it kept changing through every retry)."""

    request: Request
    value: T | None = None
    ran: bool = False

    @property
    def settled(self) -> bool:
        return not self.ran and not self.request.is_pending
