"""Timer use cases: sweep due requests (remind, escalate, time out), snooze, escalate by hand, hand back.

The database is the coordinator. Every process runs the same sweep (bot/process/jobs.py); a sweep claims
due rows in one unit (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so replicas split the rows; SQLite:
the unit is the one writer), asks the pure plan (bot/domain/timing.py) what is due, writes the new
timer state with the version guard, and enqueues the Slack side effects in the same unit under
deterministic outbox keys (`remind:{id}:{n}`, `escalate:{id}:{loop}:{level}`). Running the same
tick twice, or in two replicas, therefore does nothing the second time: the row is no longer due,
and an effect enqueued again under the same key is stored once.

The claim reads only the timing and schedule columns; a round's reminders are written together
(`Unit.write_reminders`: one statement on PostgreSQL), each row under its own version guard, and
a row whose version moved is simply not reminded. Escalations and timeouts read the whole request.

Timeouts go through `Service.decide(via=timeout)`, the guarded path clicks use, so a click racing
the timeout has exactly one winner; the loser's side reads the winner.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.approvals.checked import Recheck, guarded_checked
from bot.process.clock import Clock
from bot.domain.durations import format_duration
from bot.domain.model import Actor, AuditEvent, Outcome, Request, Via, iso
from bot.domain.timing import (
    Escalate,
    Expire,
    Remind,
    TimerState,
    Timing,
    after_escalate,
    after_escalate_to_person,
    after_hand_back,
    after_remind,
    next_action,
    next_due,
    next_level,
    snoozed,
)
from bot.domain.transitions import IllegalTransition, next_status
from bot.outbox import effects
from bot.approvals.homes import republish_homes, user_ids
from bot.approvals.service import Guarded, LostRace, Service
from storage.base import DueRow, Reminded, Unit

log = logging.getLogger(__name__)

SNOOZE = timedelta(hours=1)
# Due rows claimed, planned and written per unit. SQLite's unit holds the file's one write lock (a batch
# of 100 takes about 6 ms, and every click's decision waits behind it); PostgreSQL's claim locks only the
# rows it took, so it takes more at once: fewer round trips and commits per row (bench.sweep, 1,000 due
# among 10,000: 104-120 µs per due row at 500 against 131-144 µs at 100).
BATCH = 100
PG_BATCH = 500
MAX_ROUNDS = 50  # per sweep; whatever is left is due at the next tick
_OUTCOME_WORDS = {Outcome.EXPIRED: "expired", Outcome.REJECTED: "rejected", Outcome.APPROVED: "approved"}


@dataclass
class SweepReport:
    reminded: int = 0
    escalated: int = 0
    expired: int = 0
    released: int = 0  # held approvals written once their undo window ended
    rounds: int = 0


@dataclass(frozen=True)
class Moved:
    """A hand move (snooze, escalate, hand back) that happened; `request` is the new state."""

    request: Request
    text: str = ""


@dataclass(frozen=True)
class Refused:
    """A hand move that could not happen; nothing was written. `text` says why, to the person."""

    text: str


def batch_for(dialect: str) -> int:
    return PG_BATCH if dialect == "postgresql" else BATCH


class Timers:
    def __init__(self, service: Service, clock: Clock, *, batch: int | None = None) -> None:
        self.service = service
        self.store = service.store
        self.clock = clock
        self.batch = batch if batch is not None else batch_for(self.store.dialect)
        self.sweeper = f"{socket.gethostname()}:{os.getpid()}"  # in audit rows: which replica acted
        # Whether a person's stored, not yet handled Slack input names a request (bot/approvals/received.py),
        # asked inside the timeout's own decision unit: its timeout waits for the next sweep, so a click
        # acked before the timeout's time (or replayed after a crash) is not beaten by the clock. None: no
        # inbox (nothing to wait for).
        self.input_open: Callable[[str, Unit], Awaitable[bool]] | None = None
        # Further stored timers run at the end of each sweep (the similar-requests cards: bot/approvals/similar.py).
        self.after_sweep: list[Callable[[], Awaitable[Any]]] = []

    # -- the sweep ----------------------------------------------------------------

    async def sweep(self) -> SweepReport:
        """Perform everything due now; safe to run at the same time in every process."""
        report = SweepReport()
        stuck: set[str] = set()
        for _ in range(MAX_ROUNDS):
            report.rounds += 1
            claimed, timeouts, releases = await self._claim_round(self.clock.now(), report, stuck)
            for request_id in releases:  # held approvals whose undo window ended (bot/approvals/undo.py)
                try:
                    if await self.service.undo_window.release(request_id) is not None:
                        report.released += 1
                    else:  # undone meanwhile, or written elsewhere: not again in this sweep
                        stuck.add(request_id)
                except Exception:
                    log.exception("releasing a held approval failed", extra={"request_id": request_id})
                    stuck.add(request_id)
            for request, step in timeouts:
                try:
                    if not await self._expire(request, step, report):
                        stuck.add(request.id)  # a person's acked input is still to be handled: next sweep
                except Exception:  # one bad row must not stop the others; it stays due and is logged
                    log.exception("timeout failed", extra={"request_id": request.id})
                    stuck.add(request.id)
            if claimed == 0:
                break
        try:  # the weekly digests are stored timers too (bot/approvals/stats.py)
            await self.service.stats.digest_tick()
        except Exception:
            log.exception("weekly digest failed; the next sweep tries again")
        for extra in self.after_sweep:
            try:
                await extra()
            except Exception:
                log.exception("%s failed; the next sweep tries again", getattr(extra, "__qualname__", extra))
        return report

    async def _claim_round(
        self, now: datetime, report: SweepReport, stuck: set[str]
    ) -> tuple[int, list[tuple[Request, Expire]], list[str]]:
        changed: list[str] = []
        timeouts: list[tuple[Request, Expire]] = []
        releases: list[str] = []
        async with self.store.unit() as unit:
            due = [row for row in await unit.claim_due(now, limit=self.batch) if row.id not in stuck]
            reminders: list[Reminded] = []
            for row in due:
                if row.undo_until is not None:  # an approval held in its undo window: nothing else is due
                    if row.undo_until <= now:
                        releases.append(row.id)  # written after this unit, on the guarded decide path
                    continue
                step = next_action(row.timing, row.timers, now)
                if isinstance(step, Remind):  # the common case: planned and written from the claimed columns
                    reminders.append(_reminded(row, step, now, self.sweeper))
                    continue
                # Rarer steps need the whole request (approvers, escalation record): read it in this unit,
                # which holds the row (PostgreSQL: locked by the claim; SQLite: the one writer).
                request = await unit.get_request(row.id)
                if request is None or request.version != row.version:  # cannot happen while the claim holds it
                    stuck.add(row.id)  # not again in this sweep; the next tick sees it afresh
                    continue
                if isinstance(step, Expire):
                    timeouts.append((request, step))  # decided after this unit, on the guarded decide path
                elif isinstance(step, Escalate):
                    if await self._escalate(unit, request, step, now, holders=self._holders(request)):
                        report.escalated += 1
                        changed.append(request.id)
                else:  # nothing due after all (a stale next_due_at): put the row right
                    fixed = request.evolve(next_due_at=next_due(request.timers or TimerState()))
                    if await unit.update_request(fixed, expected_version=request.version):
                        changed.append(request.id)
            # One batch write; a row whose version moved meanwhile is not reminded (and not counted).
            written = await unit.write_reminders(reminders)
            report.reminded += len(written)
            changed += written
            for request_id in changed:
                self.service.touch(unit, request_id)
        return len(due), timeouts, releases

    async def _remind(self, unit: Unit, request: Request, step: Remind, now: datetime) -> bool:
        assert request.timing is not None and request.timers is not None
        timers = after_remind(request.timing, request.timers, now)
        if not await self._write(unit, request, timers, now):
            return False
        await unit.append_audit(AuditEvent(request.id, "reminded", now, None,
                                           {"number": step.number, "of": step.of, "sweeper": self.sweeper}))
        await unit.enqueue(effects.remind(request.id, step.number, step.of, now))
        return True

    async def _escalate(
        self, unit: Unit, request: Request, step: Escalate, now: datetime, *, holders: tuple[str, ...],
        by: Actor | None = None, note: str | None = None,
    ) -> bool:
        timing = request.timing or Timing()
        timers = after_escalate(timing, request.timers or TimerState(), step, now, holders=holders,
                                by=by.id if by else None, note=note)
        targets = step.level.notify
        approvers = _with(request.approvers, targets) if step.level.add_as_approvers else request.approvers
        if not await self._write(unit, request, timers, now, approvers=approvers):
            return False
        key = f"escalate:{request.id}:{step.loop}:{step.number}"
        await self._record_escalation(
            unit, request, now, key=key, targets=targets, add=step.level.add_as_approvers, by=by, note=note,
            data={"level": step.number, "of": step.of, "loop": step.loop},
        )
        return True

    async def _record_escalation(
        self, unit: Unit, request: Request, now: datetime, *, key: str, targets: tuple[str, ...], add: bool,
        by: Actor | None, note: str | None, data: dict[str, Any],
    ) -> None:
        audit = {**data, "to": list(targets), "via": "hand" if by else "timer", "note": note, "sweeper": self.sweeper}
        await unit.append_audit(AuditEvent(request.id, "escalated", now, by.id if by else None, audit))
        direct = user_ids(targets)
        await unit.add_people(request.id, "escalated", direct, now)
        if add:
            await unit.add_people(request.id, "approver", direct, now)
        await unit.enqueue(effects.escalate(request.id, key, now, to=list(targets), add=add,
                                            by=by.id if by else None, note=note, **data))
        await unit.enqueue(effects.update_card(request.id, f"card:{key}", now))
        await republish_homes(unit, [*direct, *([by.id] if by else [])], f"{request.id}:v{request.version + 1}", now)
        unit.after_commit(lambda: self.service.stats.counted("escalated", request))

    async def _write(
        self, unit: Unit, request: Request, timers: TimerState, now: datetime, **changes: Any
    ) -> bool:
        # Remember every approver the request has had (see TimerState.approvers_seen).
        seen = tuple(dict.fromkeys([*timers.approvers_seen, *request.approvers, *changes.get("approvers", ())]))
        timers = timers.evolve(approvers_seen=seen)
        updated = request.evolve(timers=timers, next_due_at=next_due(timers), updated_at=now, **changes)
        return await unit.update_request(updated, expected_version=request.version)

    async def _write_or_lose(
        self, unit: Unit, request: Request, timers: TimerState, now: datetime, **changes: Any
    ) -> None:
        if not await self._write(unit, request, timers, now, **changes):
            raise LostRace(request.id)

    @staticmethod
    def _holders(request: Request) -> tuple[str, ...]:
        """Who has the request now: the latest escalation's targets, else its approvers."""
        state = request.timers or TimerState()
        return state.escalated_to or request.approvers

    async def _expire(self, request: Request, step: Expire, report: SweepReport) -> bool:
        """False: a person's stored, unhandled input names the request (checked in the decision's own
        unit, after its time is taken): nothing written, the next sweep tries again."""
        outcome = step.outcome
        try:
            next_status(request.kind, request.status, outcome)
        except IllegalTransition:
            outcome = Outcome.EXPIRED  # e.g. a question cannot be "rejected": it expires
        comment = f"No decision within {format_duration(step.after)}; {_OUTCOME_WORDS[outcome]} by default."
        result = await self.service.decide(request.id, outcome, via=Via.TIMEOUT, comment=comment,
                                           unless=self.input_open)
        if result.waiting:
            return False
        if result.won:
            report.expired += 1
        else:  # someone decided first: the timeout is the side that is told, here
            decision = result.request.decision
            log.info("timeout of %s lost: already %s%s", request.id, result.request.status.value,
                     f" via {decision.via.value}" if decision else "", extra={"request_id": request.id})
        return True

    # -- moves by hand ---------------------------------------------------------------

    async def _guarded(self, request_id: str, change: Callable[[Unit, Request], Awaitable[Moved | Refused]],
                       recheck: Recheck | None) -> Guarded[Moved | Refused] | str:
        """`recheck`: the person's right to make the move, checked on every state it is written on."""
        if recheck is None:
            return await self.service.guarded(request_id, change)
        return await guarded_checked(self.service, request_id, recheck, change)

    async def snooze(self, request_id: str, actor: Actor, duration: timedelta = SNOOZE, *,
                     recheck: Recheck | None = None) -> Moved | Refused:
        """Delay the next reminder (not the escalation, not the timeout) by `duration`."""

        async def change(unit: Unit, request: Request) -> Moved | Refused:
            now = self.clock.now()
            timers = snoozed(request.timers or TimerState(), now, duration)
            if timers is None:
                return Refused("No reminders are left for this request, so there is nothing to snooze.")
            await self._write_or_lose(unit, request, timers, now)
            data = {"until": iso(timers.snoozed_until), "next_reminder_at": iso(timers.remind_at)}
            await unit.append_audit(AuditEvent(request.id, "snoozed", now, actor.id, data))
            return Moved(request.evolve(timers=timers, next_due_at=next_due(timers), version=request.version + 1))

        return _moved(await self._guarded(request_id, change, recheck), "snoozed it")

    async def escalate(
        self, request_id: str, actor: Actor, *, to_person: str | None, note: str | None, step_back: bool,
        recheck: Recheck | None = None,
    ) -> Moved | Refused:
        """Move the request up now: to `to_person`, or (None) to the next configured level."""

        async def change(unit: Unit, request: Request) -> Moved | Refused:
            now = self.clock.now()
            timing, state = request.timing or Timing(), request.timers or TimerState()
            holders = (actor.id,)
            if to_person is None:
                step = next_level(timing, state)
                if step is None:
                    return Refused("This request has no further escalation level; pick a person instead.")
                written = await self._escalate(unit, request, step, now, holders=holders, by=actor, note=note)
            else:
                written = await self._escalate_to_person(unit, request, to_person, now, actor, note)
            if not written:
                raise LostRace(request.id)
            moved = await unit.get_request(request.id)
            assert moved is not None
            text = ""
            if step_back:
                moved, text = await self._step_back(unit, moved, actor, now)
            return Moved(moved, text)

        return _moved(await self._guarded(request_id, change, recheck), "escalated it")

    async def _escalate_to_person(
        self, unit: Unit, request: Request, person: str, now: datetime, actor: Actor, note: str | None
    ) -> bool:
        timers = after_escalate_to_person(request.timers or TimerState(), person, by=actor.id, note=note)
        if not await self._write(unit, request, timers, now, approvers=_with(request.approvers, (person,))):
            return False
        await self._record_escalation(unit, request, now, key=f"escalate:{request.id}:v{request.version + 1}",
                                      targets=(person,), add=True, by=actor, note=note, data={})
        return True

    async def _step_back(self, unit: Unit, request: Request, actor: Actor, now: datetime) -> tuple[Request, str]:
        """The escalator leaves the approvers (they asked not to decide alone, or at all)."""
        if actor.id not in request.approvers:
            if request.approvers:
                return request, "You approve this request through a user group, so you remain one of its approvers."
            return request, "Anyone may decide this request, so you could not step back from it."
        remaining = tuple(a for a in request.approvers if a != actor.id)
        if not remaining:
            return request, "You are its only approver, so you remain one."
        stepped = request.evolve(approvers=remaining, updated_at=now)
        if not await unit.update_request(stepped, expected_version=request.version):
            raise RuntimeError("request changed inside its own unit")  # cannot happen: we hold the writer
        await unit.remove_people(request.id, "approver", [actor.id])
        await unit.append_audit(AuditEvent(request.id, "stepped_back", now, actor.id, {}))
        return stepped.evolve(version=request.version + 1), ""

    async def hand_back(self, request_id: str, actor: Actor, *, note: str | None,
                        recheck: Recheck | None = None) -> Moved | Refused:
        """Return an escalated request to whoever escalated it, with a comment."""

        async def change(unit: Unit, request: Request) -> Moved | Refused:
            state = request.timers or TimerState()
            if not state.escalated or not state.escalated_from:
                return Refused("This request was not escalated, so there is nobody to hand it back to.")
            if not state.may_hand_back(actor.id):  # checked on the state it is written on
                return Refused("Only someone this request was escalated to can hand it back. Nothing was changed.")
            now = self.clock.now()
            back_to = state.escalated_from
            # Approval goes back only to those who had it: a notify-only holder is told, not promoted.
            had_it = set(state.approvers_seen) | set(request.approvers)
            restored = tuple(p for p in back_to if p in had_it)
            timers = after_hand_back(request.timing or Timing(), state, now, by=actor.id, note=note)
            await self._write_or_lose(unit, request, timers, now, approvers=_with(request.approvers, restored))
            key = f"handback:{request.id}:v{request.version + 1}"
            await unit.append_audit(AuditEvent(request.id, "handed_back", now, actor.id,
                                               {"to": list(back_to), "note": note}))
            await unit.remove_people(request.id, "escalated", [actor.id])
            await unit.add_people(request.id, "approver", user_ids(restored), now)
            await unit.enqueue(effects.handback(request.id, key, now, to=list(back_to), add=bool(restored), by=actor.id,
                                                note=note))
            await unit.enqueue(effects.update_card(request.id, f"card:{key}", now))
            await republish_homes(unit, [actor.id, *back_to], f"{request.id}:v{request.version + 1}", now)
            return Moved(request.evolve(timers=timers, version=request.version + 1))

        return _moved(await self._guarded(request_id, change, recheck), "handed it back")


def _moved(result: Guarded[Moved | Refused] | str, doing: str) -> Moved | Refused:
    """A hand move's answer to the person: what happened, or why nothing did."""
    if isinstance(result, str):  # the person may not make it on the request as it is now
        return Refused(result)
    if result.ran:
        assert result.value is not None
        return result.value
    if result.settled:
        return Refused(f"This request is already {result.request.status.value}. Nothing was changed.")
    return Refused(f"The request kept changing while you {doing}. Please try again.")


def _with(approvers: tuple[str, ...], added: Iterable[str]) -> tuple[str, ...]:
    """`approvers` plus `added`. No list means anyone may decide already: adding would restrict it."""
    if not approvers:
        return approvers
    return tuple(dict.fromkeys([*approvers, *added]))


def _reminded(row: DueRow, step: Remind, now: datetime, sweeper: str) -> Reminded:
    """The reminder `step` of a claimed row: its new reminder columns, audit event and outbox item."""
    timers = after_remind(row.timing, row.timers, now)
    return Reminded(
        row.id, row.version, timers.reminders_sent, timers.remind_at, next_due(timers), now,
        AuditEvent(row.id, "reminded", now, None, {"number": step.number, "of": step.of, "sweeper": sweeper}),
        effects.remind(row.id, step.number, step.of, now),
    )
