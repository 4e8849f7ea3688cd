"""Decide: the one decision of a request (a person's click, the API, the clock, a cancel), and its effects.

The loser of a race gets the winner's request back. A person's approval is a vote towards the
request's quorum; an approval that completes a request whose tier has an undo window is held in it
(bot/approvals/undo.py). The decision, its audit row, its card update, its webhook and the App Home
refreshes commit in one unit (`Unit.decide_request`: one statement on PostgreSQL).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial
from typing import Any

from bot.approvals.access import Access
from bot.approvals.changes import GUARD_RETRIES, RequestChanges
from bot.approvals.types import DecideResult, LostRace
from bot.approvals.undo import UndoWindow, and_grants as _and_grants, hold_approval
from bot.domain.batch import Choice, Item, decide_items
from bot.domain.grants import Grant
from bot.domain.model import Actor, AuditEvent, Change, Decision, Outcome, Request, Via, iso
from bot.domain.outbox import OutboxItem
from bot.domain.params_hash import params_sha256
from bot.domain.transitions import next_status
from bot.domain.undo import HELD_KEY, UNDONE_KEY, Held, without_hold, window as undo_window
from bot.domain.votes import Tally, Vote, cast, votes_json
from bot.errors import Conflict, InvalidInput
from bot.outbox import effects
from storage.base import Unit

log = logging.getLogger(__name__)


class _AlreadyVoted(Exception):
    """The votes table refused a second vote by one person (rolls the unit back)."""


class Deciding(RequestChanges):
    """The decide use case (a part of `Service`)."""

    access: Access  # who may decide (bot/approvals/access.py)
    undo_window: UndoWindow

    async def may_decide(self, request: Request, user_id: str, *, within: float | None = None) -> bool:
        """Whether `user_id` may decide `request` (see bot/approvals/access.py; `within`: a bound on group lookups)."""
        return await self.access.may_decide(request, user_id, within=within)

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
        unless: Callable[[str, Unit], Awaitable[bool]] | None = None,
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
        A person's approval that completes a request whose tier has an undo window is held in it
        (`held=True`, still pending: bot/approvals/undo.py); `releasing`: that held approval, written now
        as the decision, when the window ends (decided at the click's time). `grants`: grants this
        approval makes, written with the final decision, or kept in the hold until the window ends.
        `unless(request_id, unit)`: checked in the decision's unit after its time is taken; True writes
        nothing (`waiting=True`). The clock's decision passes "a person's stored click names it": a click
        stored before the timeout's time is seen there, so a timeout never beats an acked click.
        """
        if grants:
            also = _and_grants(also, grants)
        vote = outcome is Outcome.APPROVED and actor is not None and via in (Via.BUTTON, Via.MODAL)

        async def record(unit: Unit, request: Request) -> DecideResult:
            now = self.clock.now()
            if unless is not None and await unless(request.id, unit):
                return DecideResult(request, won=False, waiting=True)
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
                                        retries=GUARD_RETRIES * 20 if vote else GUARD_RETRIES)
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
        self.fresh.put(effects.decided_card_key(decided.id), decided)  # its card update renders it (bot/live/just_committed.py)
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
        card = effects.decided_card(request.id, now)
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
