"""Use cases: record on a decided request what happened when the action it allowed ran.

Two callers, one write. The agent runner records a call's outcome in the unit that stores the call's
result (`record_run_outcome`), so the result and what the card, App Home and the API show about it
commit together (or not at all). An agent reports its own outcome through the API
(`report_outcome`): only for an approved request (or an approved item of a batch), once; the same
report again is answered as it was, a different one is a conflict and changes nothing.

The request is decided, so nothing else races for its status; its version still guards the write
(a card's ts, a timer's bookkeeping may be written meanwhile): a lost guard re-reads inside the same
unit and tries again. The card update and the Home refreshes have keys named for the call, so a
replay after a crash (or a second recording) enqueues nothing new and the card shows the outcome once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.approvals.homes import enqueue_homes
from bot.approvals.service import Service
from bot.errors import Conflict, InvalidInput, NotFound
from bot.outbox import effects
from bot.domain.model import AuditEvent, Outcome, Request, Status
from bot.domain.outcomes import RunOutcome, outcome_of, with_outcome
from storage.base import Unit

_RETRIES = 5
WHOLE = "request"  # the call key of a single request's reported outcome


class OutcomeConflict(Conflict):
    """A different outcome was already reported for this request (or item): 409, nothing changes."""

    code = "outcome_already_reported"


@dataclass(frozen=True)
class Reported:
    request: Request
    outcome: RunOutcome
    created: bool  # False: the same report was recorded before (answered as it was)


async def record_run_outcome(unit: Unit, request_id: str, call: str, outcome: RunOutcome) -> bool:
    """Store `outcome` of the call `call` (its tool_use_id) on the request: on the request itself, or
    on that call's item of a batch card. False if it was recorded already or the request is gone.
    Enqueues the card update and the Home refreshes of the people who see it."""
    for _ in range(_RETRIES):
        request = await unit.get_request(request_id)
        if request is None:
            return False
        item = call if request.items else None
        if await _write(unit, request, call, item, outcome.against(_approved(request, item))):
            return True
        if outcome_of(request.extra, item=item) is not None:
            return False
    return False


async def report_outcome(service: Service, request_id: str, report: RunOutcome, *, item: str | None) -> Reported:
    """An agent's execution receipt for an approved request (or an approved item `item` of a batch)."""
    async with service.store.unit() as unit:
        for _ in range(_RETRIES):
            request = await unit.get_request(request_id)
            if request is None:
                raise NotFound(f"no request {request_id}")
            approved = _approved_or_refuse(request, item)
            recorded = outcome_of(request.extra, item=item)
            if recorded is not None:
                if recorded.same_report(report):
                    return Reported(request, recorded, False)
                raise OutcomeConflict(
                    f"an outcome ({recorded.status.value}) was already reported for {request_id}"
                    f"{' item ' + item if item else ''}; a different one is refused",
                    details=[{"field": "status", "message": "already reported", "recorded": recorded.to_json()}])
            outcome = report.against(approved)
            if await _write(unit, request, item or WHOLE, item, outcome):
                stored = await unit.get_request(request_id)
                service.touch(unit, request_id)  # a long-poll on it sees the receipt
                return Reported(stored or request, outcome, True)
    raise Conflict(f"request {request_id} kept changing; report the outcome again")


def _approved(request: Request, item: str | None) -> dict[str, Any] | None:
    if item is not None:
        found = next((i for i in request.items if i.key == item), None)
        return found.final_params if found is not None and found.outcome is Outcome.APPROVED else None
    decision = request.decision
    return decision.params if decision is not None and decision.outcome is Outcome.APPROVED else None


def _approved_or_refuse(request: Request, item: str | None) -> dict[str, Any]:
    """The parameters that were approved: an outcome is only for an action a decision let run."""
    if request.items and item is None:
        raise InvalidInput("this request is a batch: say which item ran (`item`: its key)",
                           details=[{"field": "item", "message": "required for a batch"}])
    if item is not None and not any(i.key == item for i in request.items):
        raise InvalidInput(f"the request has no item {item!r}", details=[{"field": "item", "message": "unknown"}])
    approved = _approved(request, item) if request.status is Status.APPROVED or item is not None else None
    if approved is None:
        what = f"item {item}" if item else "the request"
        raise Conflict(f"{what} was not approved (status {request.status.value}): there is nothing to report "
                       "an outcome for")
    return approved


async def _write(unit: Unit, request: Request, call: str, item: str | None, outcome: RunOutcome) -> bool:
    """Store `outcome` under the request's version guard, with its audit row, card update and Home
    refreshes. False if one was recorded already or the guard was lost (the caller re-reads)."""
    extra = with_outcome(request.extra, outcome, item=item)
    if extra is None:
        return False
    updated = request.evolve(extra=extra, updated_at=max(request.updated_at, outcome.at))
    if not await unit.update_request(updated, expected_version=request.version):
        return False
    key = f"{request.id}:outcome:{call}"
    data = {"item": item, **outcome.to_json()}
    await unit.append_audit(AuditEvent(request.id, f"run_{outcome.status.value}", outcome.at, None, data))
    await unit.enqueue(effects.update_card(request.id, f"card:{key}", outcome.at))
    decided_by = request.decision.decided_by if request.decision is not None else None
    deciders = [i.decided_by.id for i in request.items if i.decided_by is not None]
    if decided_by is not None:
        deciders.append(decided_by.id)
    await enqueue_homes(unit, await unit.home_users_of(request.id, also=deciders), key, outcome.at)
    return True
