"""Use cases: submit, decide, cancel, wait. The only caller of storage.

Every state change is one unit: the guarded request update, its decision, its
audit row and its outbox rows commit together; the unit's after-commit hooks then
wake waiters (and the store wakes the outbox dispatcher). Every change to a pending
request goes through `guarded`: a writer that loses the version guard re-reads and,
if the request is no longer pending, reports the winner instead of overwriting.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Protocol, TypeVar

from bot.approvals.reads import Reads
from bot.process.clock import Clock, SystemClock, new_id
from bot.live.just_committed import Fresh
from bot.live.pending_states import Known
from bot.domain.model import (
    Actor,
    AuditEvent,
    Change,
    Decision,
    Kind,
    Outcome,
    Request,
    Status,
    Via,
    iso,
)
from bot.domain.delivery_state import is_undelivered
from bot.domain.batch import Choice, Item, decide_items
from bot.domain.grants import OWNER_KEY, Grant
from bot.domain.params_hash import params_sha256
from bot.domain.timing import Timing
from bot.domain.transitions import next_status
from bot.domain.undo import HELD_KEY, UNDONE_KEY, Held, without_hold, window as undo_window
from bot.domain.votes import Tally, Vote, cast, votes_json
from bot.errors import Conflict, IdempotencyMismatch, InvalidInput, NotFound, TooManyPending
from bot.outbox import effects
from bot.approvals.access import Access, Directory
from bot.approvals.homes import home_candidates, user_ids
from bot.process.metrics import Metrics
from bot.live.waiters import InFlight, Waiters
from bot.approvals.stats import Stats
from bot.approvals.undo import UndoWindow, and_grants as _and_grants, hold_approval
from bot.approvals.types import (ApprovalSpec as ApprovalSpec, DecideResult as DecideResult, Guarded as Guarded,
                                LostRace as LostRace, StaleCheck as StaleCheck)
from bot.domain.outbox import OutboxItem
from storage.base import DuplicateIdempotencyKey, Expect, Store, Unit

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_WAIT_SECONDS = 60.0
_GUARD_RETRIES = 5


def _decided_card(request_id: str) -> str:
    """The dedupe key of a decision's card update."""
    return f"card:{request_id}:decided"


class _AlreadyVoted(Exception):
    """The votes table refused a second vote by one person (rolls the unit back)."""


class SubmitGate(Protocol):
    """Policy at submit (bot/approvals/gate.py's PolicyGate): what to write for a spec, and writing it."""

    async def check(
        self, service: Service, spec: ApprovalSpec, *, idempotency_key: str | None = None,
        body_hash: str | None = None, verify_later: bool = False,
    ) -> Any: ...

    async def stage(self, service: Service, unit: Unit, checked: Any) -> None: ...

    async def write(self, service: Service, checked: Any) -> None:
        """`stage` in a unit of its own (Service.submit); returns once it committed."""

    def recheck_edit(self, request: Request, params: dict[str, Any]) -> str | None: ...


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
        default_timing: Timing | None = None,
        gate: SubmitGate | None = None,
        access: Access | None = None,
        max_pending: int | None = None,
    ) -> None:
        self.store = store
        self.reads = Reads(store)  # what the edges read (they write only through the use cases)
        self.max_pending = max_pending  # per API token (SIGNOFF_MAX_PENDING_PER_TOKEN); None: no cap
        self._staging: Counter[str] = Counter()  # per token: pending requests counted, not committed yet
        self.metrics = metrics or Metrics()
        self.clock = clock or SystemClock()
        self.waiters = waiters or Waiters()
        self.directory = directory
        self.access = access or Access(directory)
        self.new_id = id_factory
        self._on_decided: list[Callable[[Request], None]] = []
        self.default_timing = default_timing
        self.gate = gate  # policy, grants and delegation at submit (bot/approvals/gate.py)
        self.fresh = Fresh()  # requests as committed here, for the card delivery the commit enqueued
        self.known = Known()  # pending requests as last committed here, for a click's check (bot/live/pending_states.py)
        self.in_flight = InFlight(self.waiters)  # decisions being written here, for `wait`
        self.undo_window = UndoWindow(self)
        # Time to decide (bot/approvals/stats.py); a first view stamped is read afresh by the next click here.
        self.stats = Stats(store, self.metrics, self.clock, stamped=self.known.forget)
        self.on_decided(self.stats.decided)  # approvals held in their tier's undo window (bot/approvals/undo.py)

    def on_decided(self, fn: Callable[[Request], None]) -> None:
        """Run `fn(request)` with the decided request after a decision commits in this process.

        Every decision (click, timeout, cancel) commits through `decide` in some process, so this
        reaches whoever must act on it without a read or a cross-process notification.
        """
        self._on_decided.append(fn)

    def touch(self, unit: Unit, request_id: str) -> None:
        """`unit` changes `request_id`: once it commits, wake whoever waits on the request here.

        (The outbox dispatcher is woken by the store itself when a unit enqueued something.)
        """
        unit.after_commit(lambda: self.waiters.wake(request_id))

    async def guarded(
        self, request_id: str, change: Callable[[Unit, Request], Awaitable[T]], *, read: Request | None = None,
        retries: int = _GUARD_RETRIES, shared: bool = False,
    ) -> Guarded[T]:
        """Apply `change` to the pending request in one unit, retrying on a lost version race.

        `change(unit, request)` writes with `write(unit, updated, request)` (or `unit.update_request`
        guarded on `request.version`) and returns its result; a lost guard raises `LostRace`, which
        rolls the unit back and starts again from a fresh read. A request that is (or becomes) no
        longer pending is returned `settled`, untouched. `read`: the request as the caller just read
        it, to save one read; if it is stale the guard fails and it is read again.
        `shared`: the unit may hold other shared changes that were waiting at the same time
        (`Store.run_change(shared=True)`); `change` must then be safe to run again from the start.
        """
        request = read if read is not None and read.id == request_id else await self.get(request_id)
        for _attempt in range(retries):
            if not request.is_pending:
                return Guarded(request)

            async def attempt(unit: Unit, request: Request = request) -> T:
                self.touch(unit, request_id)  # runs only if the change commits
                return await change(unit, request)

            try:
                value = await self.store.run_change(attempt, shared=shared)
            except LostRace:
                request = await self.get(request_id)
                continue
            return Guarded(request, value, ran=True)
        return Guarded(request)

    @staticmethod
    async def write(unit: Unit, updated: Request, read: Request) -> None:
        """The version-guarded write of `updated` over `read`; raises LostRace if someone wrote first."""
        if not await unit.update_request(updated, expected_version=read.version):
            raise LostRace(read.id)

    # -- submit -----------------------------------------------------------

    async def submit(
        self, spec: ApprovalSpec, *, idempotency_key: str | None = None, body_hash: str | None = None,
        probe: bool = True,
    ) -> tuple[Request, bool]:
        """Store a new pending request and enqueue its card. Returns (request, created).

        `probe=False`: the key is most likely new (a Claude Code hook's call id), so it is not looked up
        first: the write itself finds a taken key (as it does when two submits race) and the request
        holding it is read then. Policy is evaluated before that write either way."""
        if idempotency_key is not None and probe:
            existing = await self._idempotent(idempotency_key, body_hash)
            if existing is not None:
                return existing, False
        try:
            try:
                request = await self._check_and_stage(spec, idempotency_key, body_hash, verify_later=True)
            except StaleCheck:  # the gate's cached view (a tool's grants) changed: check again, reading afresh
                request = await self._check_and_stage(spec, idempotency_key, body_hash, verify_later=False)
        except DuplicateIdempotencyKey:
            assert idempotency_key is not None
            existing = await self._idempotent(idempotency_key, body_hash)
            if existing is None:  # pragma: no cover - the key holder vanished: nothing deletes requests
                raise
            return existing, False
        return request, True

    async def _check_and_stage(self, spec: ApprovalSpec, idempotency_key: str | None, body_hash: str | None, *,
                               verify_later: bool) -> Request:
        """Policy's check of `spec` and its unit. `verify_later`: the gate may rely on what it cached and
        verify it in the unit (raising StaleCheck, the unit rolled back, when that was out of date)."""
        if self.gate is not None:
            checked = await self.gate.check(self, spec, idempotency_key=idempotency_key, body_hash=body_hash,
                                            verify_later=verify_later)
            request: Request | None = checked.request
            assert request is not None  # record_defaults: every evaluated API request is recorded
        else:
            request = self.new_request(spec, idempotency_key=idempotency_key, body_hash=body_hash)
        owner = request.extra.get(OWNER_KEY) if self.max_pending is not None and request.is_pending else None
        if owner is not None:
            self._staging[owner] += 1  # counted before the read: two submits at once both see each other
        try:
            if owner is not None:
                await self._within_cap(owner)
            if self.gate is not None:
                await self.gate.write(self, checked)
            else:
                async with self.store.unit() as unit:
                    await self.stage(unit, request, people=spec.approver_users)
        finally:
            if owner is not None:
                self._staging[owner] -= 1
                if not self._staging[owner]:
                    del self._staging[owner]
        return request

    async def _within_cap(self, owner: str) -> None:
        """TooManyPending unless the token `owner` has fewer than `max_pending` pending requests, those
        this process is writing right now included: in one process it is never passed (a request that
        commits meanwhile may be counted twice: the cap errs on the safe side). Behind N replicas it can be passed by what the others
        have in flight at that moment. A decision or a timeout frees a slot."""
        assert self.max_pending is not None
        # Read before the count: a request that commits meanwhile is then counted twice, never missed.
        others = self._staging[owner] - 1
        pending = await self.store.count_pending(owner) + others
        if pending >= self.max_pending:
            raise TooManyPending(
                f"this token has {pending} requests waiting for a person, the most it may have at once "
                f"({self.max_pending}); retry once some are decided, cancelled or timed out",
                details=[{"field": "Authorization", "message": f"at most {self.max_pending} pending requests per token"}])

    def new_request(
        self, spec: ApprovalSpec, *, idempotency_key: str | None = None, body_hash: str | None = None
    ) -> Request:
        """The pending request `spec` describes (not stored yet: see `stage`)."""
        return spec.pending(self.new_id("qst" if spec.kind is Kind.QUESTION else "apr"), self.clock.now(),
                            self.default_timing, idempotency_key=idempotency_key, body_hash=body_hash)

    async def stage(self, unit: Unit, request: Request, *, people: Iterable[str] = (),
                    expects: Sequence[Expect] = ()) -> None:
        """Write a new request, its audit row and its card post in `unit` (a caller's transaction),
        the unit's last write. `expects`: reads the caller relied on, verified with the write
        (Unit.insert_pending).

        Counting it and waking whoever waits happen when, and only if, that unit commits.
        """
        # App Home's per-user index: direct approvers and the members of listed user groups; a Home
        # refresh for those of them who have opened App Home. All of it in one statement on PostgreSQL.
        approvers = user_ids([*request.approvers, *people])
        post = effects.post_card(request.id, request.created_at)
        await unit.insert_pending(
            request,
            AuditEvent(request.id, "created", request.created_at, request.requested_by, {"risk": request.risk.value}),
            post, approvers,
            home_candidates(approvers, f"{request.id}:v{request.version}", request.created_at), expects=expects)
        counter = self.metrics.requests_created.labels(request.kind.value, request.risk.value)
        unit.after_commit(counter.inc)
        unit.after_commit(lambda: self.fresh.put(post.dedupe_key, request))  # the post renders it (bot/live/just_committed.py)
        unit.after_commit(lambda: self.known.put(request))
        self.touch(unit, request.id)

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

    async def wait(
        self, request_id: str, timeout: float, *, check: Callable[[Request], object] | None = None
    ) -> Request:
        """Return as soon as the request leaves `pending` or its card is known undeliverable (nobody
        will see it: bot.domain.delivery_state), or when `timeout` seconds pass (not before).

        `check(request)` runs on the first read, before any waiting (it raises to refuse the caller).
        A decision committed in this process hands the decided request to the waiter (what it wrote
        is what a read would return), so a woken long-poll answers without reading it back. A wake-up
        while this process is deciding the request is not read on either: on PostgreSQL the decision's
        own NOTIFY can reach the listener before the decision's result reaches its writer; the decision
        hands over the request when it commits, or, if it writes nothing, wakes the waiter to read.
        """
        if timeout <= 0:
            request = await self.get(request_id)
            if check is not None:
                check(request)
            return request
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(timeout, MAX_WAIT_SECONDS)
        # Register before reading: a decision committed after the read still wakes us. A wake-up for
        # anything else (a reminder, an escalation, a snooze) is not an answer: read again, wait on.
        with self.waiters.register(request_id) as event:
            request = await self.get(request_id)
            if check is not None:
                check(request)
            while True:
                remaining = deadline - loop.time()
                if not request.is_pending or is_undelivered(request) or remaining <= 0:
                    return request
                try:
                    # Not wait_for: it wraps the wait in a task of its own, one more turn of the event loop
                    # after the wake-up, in which the outbox's Slack calls for the same decision ran first.
                    async with asyncio.timeout_at(deadline):
                        await event.wait()
                except TimeoutError:
                    return await self.get(request_id)
                settled = event.settled
                event.clear()
                if settled is None and loop.time() < deadline and self.in_flight.hold(request_id):
                    continue  # this process's decision of it is in flight: it hands it over, or wakes us again
                if settled is None:
                    self.metrics.longpoll_rereads.inc()
                request = settled if settled is not None else await self.get(request_id)

    async def list(
        self, *, status: Status | None, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Request]:
        return await self.store.list_requests(status=status, limit=limit, after=after)

    async def find_by_idempotency_key(self, key: str) -> Request | None:
        async with self.store.unit() as unit:
            return await unit.find_by_idempotency_key(key)

    async def may_decide(self, request: Request, user_id: str, *, within: float | None = None) -> bool:
        """Whether `user_id` may decide `request` (see bot/approvals/access.py; `within`: a bound on group lookups)."""
        return await self.access.may_decide(request, user_id, within=within)

    def recheck_edit(self, request: Request, params: dict[str, Any]) -> str | None:
        """Why an edit (already valid against the action's schema) may not be approved, or None.

        The gate re-evaluates the edited call under policy: an edit that turns the call into one a
        deny rule refuses is refused in the modal. Runs before the modal's ack: in memory, fast.
        """
        return self.gate.recheck_edit(request, params) if self.gate is not None else None

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
        only_on_read: bool = False,
        also: Callable[[Unit], Awaitable[None]] | None = None,
        items: tuple[Item, ...] | None = None,
        extra: dict[str, Any] | None = None,
        releasing: Held | None = None,
        grants: tuple[Grant, ...] = (),
    ) -> DecideResult:
        """Record the one decision. The loser of a race gets `won=False` and the winner's request.

        `read`: the request as the caller just read it, to save reading it again; if it is stale
        the guarded write fails and the request is re-read.
        A person's approval (via a button or a modal) is a vote towards the request's quorum: until
        the quorum is reached it is stored as a vote (`counted=True`, still pending); a second vote by
        the same person writes nothing (`duplicate=True`). Each vote is its own guarded write: the
        request's version guard and the votes table's (request, voter) key, in one transaction.
        `only_on_read`: decide on `read` as it is, or not at all: if the request changed since, nothing is
        written and `stale=True` comes back with the request as read now, for the caller to check again
        (a click checked on the state bot/live/pending_states.py held).
        `items`: a batch's items with their outcomes, decided on `read` (implies `only_on_read`: if the
        request changed since, nothing is written and the caller decides again on the fresh request).
        `also(unit)`: more writes that belong to this decision (a remembered grant), committed with
        the final decision or not at all (a vote that only counts towards the quorum runs nothing).
        `extra`: keys merged into the request's `extra` with the final decision (e.g. the Claude
        suggestion a person accepted), likewise never with a vote that only counts.
        `grants`: grants this approval makes (a person's "Approve & remember"), written with the final
        decision like `also`, or kept in the hold until the window ends.
        A person's approval that completes a request whose tier has an undo window is held in it
        (`held=True`, still pending: bot/approvals/undo.py), a batch's last click and one that makes grants
        too; `releasing`: that held approval, written now as the decision, when the window ends (decided
        at the click's time).
        """
        if grants:
            also = _and_grants(also, grants)
        vote = outcome is Outcome.APPROVED and actor is not None and via in (Via.BUTTON, Via.MODAL)

        async def record(unit: Unit, request: Request) -> DecideResult:
            now = self.clock.now()
            if (request.undo_until is not None and releasing is None and outcome is not Outcome.CANCELLED
                    and via is not Via.API):
                return DecideResult(request, won=False)  # held: its window's end, an Undo or a cancel moves it
            if (only_on_read or items is not None) and read is not None and request.version != read.version:
                # Checked (or its batch items decided) on an older version: nothing written, the caller
                # checks again on the request as read now.
                return DecideResult(request, won=False, stale=True)
            votes = request.votes
            if vote and actor is not None:
                tally = cast(request.votes, request.quorum, actor.id)
                if tally is Tally.DUPLICATE:
                    return DecideResult(request, won=False, duplicate=True)
                votes = (*request.votes, Vote(actor, now))
                if tally is Tally.COUNTED:
                    return await self._count_vote(unit, request, votes, now)
                if releasing is None and (also is None or grants) and (items is not None or not request.items):
                    window = undo_window(request)
                    if window is not None:
                        return await hold_approval(self, unit, request, Held(
                            actor, via, now, now + window, params, changes, comment, extra, items, grants), now)
            decided_items = items if items is not None else request.items
            if items is None and request.items and outcome in (Outcome.APPROVED, Outcome.REJECTED):
                # Decided as a whole (a timeout, the API): every undecided item gets that outcome.
                decided_items = decide_items(request.items, dict.fromkeys(range(len(request.items)),
                                                                          Choice(outcome, via=via)), actor)
            final = request.action.params if params is None else params
            decision = Decision(
                outcome=outcome,
                params=final,
                changes=changes,
                comment=comment,
                decided_by=actor,
                decided_at=now if releasing is None else releasing.at,  # a held approval: its click
                via=via,
                votes=votes if outcome is Outcome.APPROVED else request.votes,
                params_sha256=params_sha256(final),
                items=decided_items,
            )
            decided = request.evolve(
                status=next_status(request.kind, request.status, outcome),
                decision=decision,
                updated_at=now,
                next_due_at=None,
                votes=decision.votes,
                items=decision.items,
                extra={**request.extra, **extra} if extra else request.extra,
                undo_until=None,
            )
            if HELD_KEY in decided.extra or UNDONE_KEY in decided.extra:
                decided = decided.evolve(extra=without_hold(decided.extra))
            data: dict[str, Any] = {"outcome": outcome.value, "via": via.value,
                                    "changes": [c.to_json() for c in changes], "params_sha256": decision.params_sha256}
            if len(decision.votes) > 1:
                data["votes"] = votes_json(decision.votes)
            if decision.items:
                data["items"] = [i.outcome.value if i.outcome else None for i in decision.items]
            audit = AuditEvent(request.id, "decided", now, actor.id if actor else None, data)
            reaches_quorum = request.quorum > 1 and len(votes) > len(request.votes)

            async def then(unit: Unit) -> None:  # what the decision writes besides itself
                if reaches_quorum and not await unit.insert_vote(request.id, votes[-1]):  # the vote that reached it
                    raise _AlreadyVoted
                if also is not None:
                    await also(unit)

            if releasing is not None:
                data["held_until"] = iso(releasing.until)
            if not await unit.decide_request(decided, request.version, audit, self._decision_effects(decided, now),
                                             home=partial(effects.publish_home, key=f"{request.id}:decided", now=now),
                                             decider=actor.id if actor else None,
                                             then=then if reaches_quorum or also is not None else None):
                raise LostRace(request.id)
            decided = decided.evolve(version=request.version + 1)
            unit.after_commit(lambda: self._decided(decided))
            return DecideResult(decided, won=True)

        self.in_flight.begin(request_id)
        try:
            # A vote may lose the guard to each earlier vote of a quorum (every loser re-reads): more tries.
            # Shared: the decisions of a burst of clicks commit a few at a time, not one transaction each.
            result = await self.guarded(request_id, record, read=read, shared=True,
                                        retries=_GUARD_RETRIES * 20 if vote else _GUARD_RETRIES)
        except _AlreadyVoted:
            return DecideResult(await self.get(request_id), won=False, duplicate=True)
        finally:
            self.in_flight.end(request_id)
        if result.ran:
            assert result.value is not None
            return result.value
        if result.settled:
            return DecideResult(result.request, won=False)
        return DecideResult(await self.get(request_id), won=False)

    async def _count_vote(self, unit: Unit, request: Request, votes: tuple[Vote, ...], now: datetime) -> DecideResult:
        """Store one more approval of a pending quorum request (in the guarded unit)."""
        counted = request.evolve(votes=votes, updated_at=now)
        await self.write(unit, counted, request)
        if not await unit.insert_vote(request.id, votes[-1]):
            raise _AlreadyVoted
        await unit.append_audit(AuditEvent(request.id, "voted", now, votes[-1].voter.id,
                                           {"votes": len(votes), "quorum": request.quorum}))
        await unit.enqueue(effects.update_card(request.id, f"card:{request.id}:vote:{len(votes)}", now))
        await unit.notify(request.id)
        return DecideResult(counted.evolve(version=request.version + 1), won=True, counted=True)

    def _decided(self, decided: Request) -> None:
        assert decided.decision is not None
        self.known.forget(decided.id)
        self.waiters.wake(decided.id, decided)  # after touch's wake-up: hands them the decided request
        self.fresh.put(_decided_card(decided.id), decided)  # its card update renders it (bot/live/just_committed.py)
        self.metrics.decisions.labels(decided.decision.outcome.value, decided.decision.via.value).inc()
        for fn in self._on_decided:
            try:
                fn(decided)
            except Exception:  # like after-commit hooks: never undo a committed decision
                log.exception("on-decided hook failed", extra={"request_id": decided.id})

    @staticmethod
    def _decision_effects(request: Request, now: datetime) -> tuple[OutboxItem, ...]:
        """The outbox items of a decision: the card update, the agent's webhook. (The App Homes' items
        follow them: `Unit.decide_request` finds whose Home listed it, and the decider's.)"""
        hook = effects.decided_webhook(request, now)
        card = effects.update_card(request.id, _decided_card(request.id), now)
        return (card,) if hook is None else (card, hook)

    async def redeliver(self, request_id: str) -> str:
        """Send the decided request's webhook again (a new delivery id); returns that id."""
        request = await self.get(request_id)
        if request.is_pending or request.decision is None:
            raise Conflict("request is still pending: there is no decision to deliver yet")
        if not request.callback_url:
            raise InvalidInput("this request has no callback_url", details=[{"field": "callback_url",
                                                                             "message": "not set"}])
        now = self.clock.now()
        hook = effects.decided_webhook(request, now, again=True)
        assert hook is not None  # it has a callback_url
        async with self.store.unit() as unit:
            await unit.enqueue(hook)
            await unit.append_audit(AuditEvent(request.id, "webhook_redeliver", now, None,
                                               {"delivery": hook.dedupe_key}))
        return hook.dedupe_key

    async def cancel(self, request_id: str, *, actor: Actor | None = None, reason: str | None = None) -> DecideResult:
        return await self.decide(request_id, Outcome.CANCELLED, via=Via.API, actor=actor, comment=reason)
