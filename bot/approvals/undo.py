"""Use cases of the undo window (the rules: bot/domain/undo.py): hold an approval, let it go when the
window ends, take it back.

- `hold_approval` runs inside `Service.decide`'s guarded unit, in place of the decision: the request
  stays pending with the approval held and is due at the window's end (a stored timer: any replica's
  sweep writes it, after a restart too). The process that held it also arms an in-memory timer so the
  agent hears on time, not at the next sweep; whichever comes first writes it, the other finds nothing.
- `release` writes the held approval as the decision (`Service.decide(releasing=...)`, on the version
  it read: an Undo that won meanwhile leaves it nothing to write).
- `undo`: the approver, before the window ends, puts the request back to pending (guarded on the
  version too: it and the release never both happen). A batch's items that click decided are pending
  again; the grants the approval would have made are never written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from bot.domain.grants import Grant
from bot.domain.model import Actor, AuditEvent, Outcome, Request, iso
from bot.domain.timing import next_due
from bot.domain.undo import Held, held, hold, release as released
from bot.outbox import effects
from bot.approvals.types import DecideResult, LostRace
from storage.base import Unit
from storage.grants import GrantStore

# bot.approvals.service.Service (which imports this module: typed loosely to keep imports one-way).
Service = Any

log = logging.getLogger(__name__)


def and_grants(also: Callable[[Unit], Awaitable[None]] | None,
               grants: tuple[Grant, ...]) -> Callable[[Unit], Awaitable[None]]:
    """`also`, then `grants` written (each with its `grant_created` audit row), in the decision's unit."""
    async def both(unit: Unit) -> None:
        if also is not None:
            await also(unit)
        for grant in grants:
            await GrantStore.add_in(unit, grant)
    return both


async def hold_approval(service: Service, unit: Unit, request: Request, approval: Held, now: datetime) -> DecideResult:
    """Hold `approval` of `request` in its window (in `Service.decide`'s unit, on its version guard)."""
    waiting = hold(request, approval, now)
    if not await unit.update_request(waiting, expected_version=request.version):
        raise LostRace(request.id)
    data: dict[str, Any] = {"via": approval.via.value, "until": iso(approval.until)}
    if approval.items:
        data["items"] = [i.outcome.value if i.outcome else None for i in approval.items]
    if approval.grants:
        data["grants"] = [g.id for g in approval.grants]
    await unit.append_audit(AuditEvent(request.id, "approval_held", now, approval.actor.id, data))
    await unit.enqueue(effects.update_card(request.id, f"card:{request.id}:held:v{request.version + 1}", now))
    waiting = waiting.evolve(version=request.version + 1)
    unit.after_commit(lambda: _armed(service, waiting, approval))
    return DecideResult(waiting, won=True, held=True)


def _armed(service: Service, waiting: Request, approval: Held) -> None:
    service.known.put(waiting)  # a second click is checked on the held state, without a read
    delay = max(0.0, (approval.until - service.clock.now()).total_seconds())
    loop = asyncio.get_running_loop()
    loop.call_later(delay, lambda: service.undo_window.later(waiting.id))


class UndoWindow:
    """Releases and Undos of held approvals, for one Service."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self._tasks: set[asyncio.Task[None]] = set()

    def later(self, request_id: str) -> None:
        """The in-memory timer fired: release now if the window has ended by the service's clock."""
        task = asyncio.get_running_loop().create_task(self._release_quietly(request_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _release_quietly(self, request_id: str) -> None:
        try:
            await self.release(request_id)
        except Exception:  # the stored timer is still due: the sweep writes it
            log.exception("releasing a held approval failed", extra={"request_id": request_id})

    async def release(self, request_id: str, *, read: Request | None = None) -> DecideResult | None:
        """Write the held approval of `request_id` as its decision if its window has ended; None if
        there is nothing to write (no hold, not yet, or an Undo or another process got there first)."""
        request = read if read is not None else await self.service.get(request_id)
        approval = held(request)
        if approval is None or self.service.clock.now() < approval.until:
            return None
        result = await self.service.decide(
            request.id, Outcome.APPROVED, via=approval.via, actor=approval.actor, params=approval.params,
            changes=approval.changes, comment=approval.comment, extra=approval.extra, read=request,
            only_on_read=True, releasing=approval, items=approval.items, grants=approval.grants)
        return result if result.won else None

    async def undo(self, request_id: str, actor: Actor) -> str | None:
        """Take back `actor`'s held approval; None when done, else why nothing changed (for the person)."""

        async def change(unit: Unit, request: Request) -> str | None:
            approval = held(request)
            if approval is None:
                return "There is no approval waiting to run on this request, so there is nothing to undo."
            if approval.actor.id != actor.id:
                return f"Only <@{approval.actor.id}>, who approved it, can undo this approval. Nothing was changed."
            now = self.service.clock.now()
            if now >= approval.until:
                return "Too late to undo: the window has ended and the approval is on its way to the agent."
            back = released(request, next_due(request.timers) if request.timers else None, actor, now)
            if not await unit.update_request(back, expected_version=request.version):
                raise LostRace(request.id)
            data: dict[str, Any] = {"approved_at": iso(approval.at), "until": iso(approval.until)}
            if approval.items:
                data["items"] = [i.outcome.value if i.outcome else None for i in approval.items]
            if approval.grants:
                data["grants_dropped"] = [g.id for g in approval.grants]  # never written: nothing to revoke
            await unit.append_audit(AuditEvent(request.id, "undone", now, actor.id, data))
            await unit.enqueue(effects.update_card(request.id, f"card:{request.id}:undone:v{request.version + 1}", now))
            back = back.evolve(version=request.version + 1)
            unit.after_commit(lambda: self.service.known.put(back))
            unit.after_commit(lambda: self.service.stats.counted("undone", back))
            return None

        result = await self.service.guarded(request_id, change)
        if result.ran:
            why: str | None = result.value
            return why
        if result.settled:
            return (f"Too late to undo: this request is already {result.request.status.value}. Nothing was changed.")
        return "The request kept changing while you undid it. Please try again."
