"""Use cases: submit, decide, cancel, wait. The only caller of storage.

Every state change is one unit: the guarded request update, its decision, its
audit row and its outbox rows commit together, then waiters and the outbox
dispatcher are woken. A writer that loses the version guard re-reads and, if
the request is no longer pending, reports the winner instead of overwriting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from bot.clock import Clock, SystemClock, new_id
from bot.domain.model import (
    Action,
    Actor,
    AuditEvent,
    Change,
    Decision,
    Kind,
    Outcome,
    Preview,
    Request,
    Risk,
    Status,
    Via,
    iso,
)
from bot.domain.timing import Timing, initial_state, next_due, state_json
from bot.domain.transitions import next_status
from bot.errors import Conflict, IdempotencyMismatch, InvalidInput, NotFound
from bot.inbox import enqueue_homes, republish_homes, user_ids
from bot.metrics import Metrics
from bot.notify import Waiters
from storage.base import DuplicateIdempotencyKey, OutboxItem, Store, Unit

log = logging.getLogger(__name__)

MAX_WAIT_SECONDS = 60.0
POST_CARD = "slack.post_card"  # the outbox kind that posts a request's card
_GUARD_RETRIES = 5


class Directory(Protocol):
    """Who is who in Slack (implemented over the Web API with a cache)."""

    async def group_members(self, group_id: str) -> frozenset[str]:
        """Members of a user group; raises LookupError if Slack does not know the group."""
        ...


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


@dataclass(frozen=True)
class DecideResult:
    request: Request
    won: bool


class Service:
    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        waiters: Waiters | None = None,
        directory: Directory | None = None,
        id_factory: Callable[[str], str] = new_id,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics or Metrics()
        self.clock = clock or SystemClock()
        self.waiters = waiters or Waiters()
        self.directory = directory
        self.new_id = id_factory
        self._after_commit: list[Callable[[str], None]] = []
        self._on_decided: list[Callable[[Request], None]] = []
        self.default_timing: Timing | None = None  # set from settings by bot.web.build

    def after_commit(self, fn: Callable[[str], None]) -> None:
        """Run `fn(request_id)` after every committed change (wakes the outbox dispatcher)."""
        self._after_commit.append(fn)

    def on_decided(self, fn: Callable[[Request], None]) -> None:
        """Run `fn(request)` with the decided request after a decision commits in this process.

        Every decision (click, timeout, cancel) commits through `decide` in some process, so this
        reaches whoever must act on it without a read or a cross-process notification.
        """
        self._on_decided.append(fn)

    def changed(self, request_id: str) -> None:
        """Wake waiters and the outbox after a unit that changed `request_id` committed (timers use it)."""
        self._committed(request_id)

    def _committed(self, request_id: str) -> None:
        self.waiters.wake(request_id)
        for fn in self._after_commit:
            try:
                fn(request_id)
            except Exception:  # a wake-up hook must never undo a committed decision
                log.exception("after-commit hook failed", extra={"request_id": request_id})

    # -- submit -----------------------------------------------------------

    async def submit(
        self, spec: ApprovalSpec, *, idempotency_key: str | None = None, body_hash: str | None = None
    ) -> tuple[Request, bool]:
        """Store a new pending request and enqueue its card. Returns (request, created)."""
        if idempotency_key is not None:
            existing = await self._idempotent(idempotency_key, body_hash)
            if existing is not None:
                return existing, False
        request = self.new_request(spec, idempotency_key=idempotency_key, body_hash=body_hash)
        try:
            async with self.store.unit() as unit:
                await self.stage(unit, request, people=spec.approver_users)
        except DuplicateIdempotencyKey:
            assert idempotency_key is not None
            existing = await self._idempotent(idempotency_key, body_hash)
            if existing is None:  # pragma: no cover - the key holder vanished: nothing deletes requests
                raise
            return existing, False
        self.submitted(request)
        return request, True

    def new_request(
        self, spec: ApprovalSpec, *, idempotency_key: str | None = None, body_hash: str | None = None
    ) -> Request:
        """The pending request `spec` describes (not stored yet: see `stage`)."""
        now = self.clock.now()
        timing = spec.timing if spec.timing is not None else self.default_timing
        timers = initial_state(timing, now) if timing is not None else None
        return Request(
            id=self.new_id("qst" if spec.kind is Kind.QUESTION else "apr"),
            kind=spec.kind,
            status=Status.PENDING,
            action=spec.action,
            summary=spec.summary,
            risk=spec.risk,
            channel=spec.channel,
            created_at=now,
            updated_at=now,
            context=spec.context,
            preview=spec.preview,
            approvers=spec.approvers,
            callback_url=spec.callback_url,
            requested_by=spec.requested_by,
            thread_ts=spec.thread_ts,
            idempotency_key=idempotency_key,
            body_hash=body_hash,
            extra=dict(spec.extra),
            timing=timing,
            timers=timers,
            next_due_at=next_due(timers) if timers is not None else None,
        )

    async def stage(self, unit: Unit, request: Request, *, people: Iterable[str] = ()) -> None:
        """Write a new request, its audit row and its card post in `unit` (a caller's transaction).

        After that unit commits, call `submitted(request)`.
        """
        await unit.insert_request(request)
        await unit.append_audit(
            AuditEvent(request.id, "created", request.created_at, request.requested_by, {"risk": request.risk.value})
        )
        await unit.enqueue(
            outbox_item(request.id, POST_CARD, f"post:{request.id}", request.created_at)
        )
        # App Home's per-user index: direct approvers and the members of listed user groups.
        approvers = user_ids([*request.approvers, *people])
        await unit.add_people(request.id, "approver", approvers, request.created_at)
        await republish_homes(unit, approvers, f"{request.id}:v{request.version}", request.created_at)

    def submitted(self, request: Request) -> None:
        """Counts and wake-ups once the unit that staged `request` has committed."""
        self.metrics.requests_created.labels(request.kind.value, request.risk.value).inc()
        self._committed(request.id)

    async def _idempotent(self, key: str, body_hash: str | None) -> Request | None:
        async with self.store.unit() as unit:
            existing = await unit.find_by_idempotency_key(key)
        if existing is not None and existing.body_hash != body_hash:
            raise IdempotencyMismatch(
                f"Idempotency-Key {key!r} was already used for request {existing.id} with a different body"
            )
        return existing

    # -- read ---------------------------------------------------------------

    async def get(self, request_id: str) -> Request:
        request = await self.store.get_request(request_id)
        if request is None:
            raise NotFound(f"no request with id {request_id!r}")
        return request

    async def wait(self, request_id: str, timeout: float) -> Request:
        """Return as soon as the request leaves `pending`, or when `timeout` seconds pass (not before)."""
        if timeout <= 0:
            return await self.get(request_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(timeout, MAX_WAIT_SECONDS)
        # Register before reading: a decision committed after the read still wakes us. A wake-up for
        # anything else (a reminder, an escalation, a snooze) is not an answer: read again, wait on.
        with self.waiters.register(request_id) as event:
            while True:
                event.clear()
                request = await self.get(request_id)
                remaining = deadline - loop.time()
                if not request.is_pending or remaining <= 0:
                    return request
                try:
                    await asyncio.wait_for(event.wait(), remaining)
                except TimeoutError:
                    return await self.get(request_id)

    async def list(
        self, *, status: Status | None, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Request]:
        return await self.store.list_requests(status=status, limit=limit, after=after)

    # -- authorization ------------------------------------------------------

    async def may_decide(self, request: Request, user_id: str) -> bool:
        """Listed approvers (users, or members of listed user groups) may decide; no list: anyone."""
        if user_id in (request.extra.get("not_by") or ()):  # e.g. the person who started an agent run
            return False
        if not request.approvers:
            return True
        if user_id in request.approvers:
            return True
        for entry in request.approvers:
            if entry.startswith("S") and self.directory is not None:
                try:
                    if user_id in await self.directory.group_members(entry):
                        return True
                except LookupError:
                    log.warning("unknown user group %s on request %s", entry, request.id)
        return False

    # -- decide ---------------------------------------------------------------

    async def decide(
        self,
        request_id: str,
        outcome: Outcome,
        *,
        via: Via,
        actor: Actor | None = None,
        params: dict[str, Any] | None = None,
        changes: tuple[Change, ...] = (),
        comment: str | None = None,
        read: Request | None = None,
    ) -> DecideResult:
        """Record the one decision. The loser of a race gets `won=False` and the winner's request.

        `read`: the request as the caller just read it, to save reading it again; if it is stale
        the guarded write fails and the request is re-read.
        """
        for attempt in range(_GUARD_RETRIES):
            request = read if attempt == 0 and read is not None and read.id == request_id else await self.get(request_id)
            if not request.is_pending:
                return DecideResult(request, won=False)
            now = self.clock.now()
            decision = Decision(
                outcome=outcome,
                params=request.action.params if params is None else params,
                changes=changes,
                comment=comment,
                decided_by=actor,
                decided_at=now,
                via=via,
            )
            decided = request.evolve(
                status=next_status(request.kind, request.status, outcome),
                decision=decision,
                updated_at=now,
                next_due_at=None,
            )
            async with self.store.unit() as unit:
                if not await unit.update_request(decided, expected_version=request.version):
                    continue  # someone wrote first: re-read and see whether it is still pending
                await unit.insert_decision(request.id, decision)
                await unit.append_audit(
                    AuditEvent(
                        request.id,
                        "decided",
                        now,
                        actor.id if actor else None,
                        {"outcome": outcome.value, "via": via.value, "changes": [c.to_json() for c in changes]},
                    )
                )
                await self._enqueue_decision_effects(unit, decided, now)
                await unit.notify(request.id)
            self.metrics.decisions.labels(outcome.value, via.value).inc()
            decided = decided.evolve(version=request.version + 1)
            self._committed(request.id)
            for fn in self._on_decided:
                try:
                    fn(decided)
                except Exception:  # like after-commit hooks: never undo a committed decision
                    log.exception("on-decided hook failed", extra={"request_id": request.id})
            return DecideResult(decided, won=True)
        return DecideResult(await self.get(request_id), won=False)

    async def _enqueue_decision_effects(self, unit: Unit, request: Request, now: datetime) -> None:
        await unit.enqueue(outbox_item(request.id, "slack.update_card", f"card:{request.id}:decided", now))
        if request.callback_url:
            assert request.decision is not None
            body = {"type": "approval.decided", "request": request_json(request)}
            await unit.enqueue(
                outbox_item(
                    request.id, "webhook", f"webhook:{request.id}:decided", now, url=request.callback_url, body=body
                )
            )
        # Everyone whose App Home listed it, and the decider ("Decided by you recently").
        decider = [request.decision.decided_by.id] if request.decision and request.decision.decided_by else []
        await enqueue_homes(unit, await unit.home_users_of(request.id, decider), f"{request.id}:decided", now)

    async def redeliver(self, request_id: str) -> str:
        """Send the decided request's webhook again (a new delivery id); returns that id."""
        request = await self.get(request_id)
        if request.is_pending or request.decision is None:
            raise Conflict("request is still pending: there is no decision to deliver yet")
        if not request.callback_url:
            raise InvalidInput("this request has no callback_url", details=[{"field": "callback_url",
                                                                             "message": "not set"}])
        now = self.clock.now()
        body = {"type": "approval.decided", "request": request_json(request)}
        key = f"webhook:{request.id}:redeliver:{now.timestamp():.6f}"
        async with self.store.unit() as unit:
            await unit.enqueue(outbox_item(request.id, "webhook", key, now, url=request.callback_url, body=body))
            await unit.append_audit(AuditEvent(request.id, "webhook_redeliver", now, None, {"delivery": key}))
        self._committed(request.id)
        return key

    async def cancel(self, request_id: str, *, actor: Actor | None = None, reason: str | None = None) -> DecideResult:
        return await self.decide(request_id, Outcome.CANCELLED, via=Via.API, actor=actor, comment=reason)

    # -- card bookkeeping (called by the outbox) ------------------------------

    async def record_card(self, unit: Unit, request_id: str, channel: str, ts: str) -> None:
        """Store where the card was posted. Runs inside the outbox item's own unit."""
        request = await unit.get_request(request_id)
        if request is None or request.card_ts:
            return
        now = self.clock.now()
        updated = request.evolve(card_channel=channel, card_ts=ts, updated_at=now)
        if not await unit.update_request(updated, expected_version=request.version):
            raise RuntimeError("request changed while storing its card ts")  # the unit rolls back; retried
        await unit.append_audit(AuditEvent(request_id, "posted", now, None, {"channel": channel, "ts": ts}))



def outbox_item(request_id: str, kind: str, key: str, now: datetime, **payload: Any) -> OutboxItem:
    """A side effect of a request, delivered in order with the request's other effects."""
    return OutboxItem.due(kind, key, now, ordered_by=request_id, payload={"request_id": request_id, **payload})


def request_json(request: Request) -> dict[str, Any]:
    """The request as the agent API and webhooks show it."""
    return {
        "id": request.id,
        "kind": request.kind.value,
        "status": request.status.value,
        "action": {
            "name": request.action.name,
            "params": request.action.params,
            "params_schema": request.action.params_schema,
        },
        "summary": request.summary,
        "context": request.context,
        "preview": {"kind": request.preview.kind, **request.preview.data} if request.preview else None,
        "risk": request.risk.value,
        "channel": request.channel,
        "approvers": list(request.approvers),
        "callback_url": request.callback_url,
        "requested_by": request.requested_by,
        "created_at": iso(request.created_at),
        "updated_at": iso(request.updated_at),
        "card": {"channel": request.card_channel, "ts": request.card_ts} if request.card_ts else None,
        "decision": request.decision.to_json() if request.decision else None,
        "timing": request.timing.to_json() if request.timing else None,
        "timers": state_json(request.timers) if request.timers else None,
    }
