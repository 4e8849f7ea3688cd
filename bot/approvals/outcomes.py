"""Use case: record on a decided request that the action it allowed did not succeed when it ran.

Called by the agent runner in the unit that stores the call's result, so the result and what the
card, App Home and the API show about it commit together (or not at all). The request is decided,
so nothing else races for its status; its version still guards the write (a card's ts, a timer's
bookkeeping may be written meanwhile): a lost guard re-reads inside the same unit and tries again.
The card update and the Home refreshes have keys named for the call, so a replay after a crash
(or a second recording) enqueues nothing new and the card shows the failure once.
"""

from __future__ import annotations

from bot.approvals.homes import enqueue_homes
from bot.outbox import effects
from bot.domain.model import AuditEvent
from bot.domain.outcomes import RunOutcome, with_outcome
from storage.base import Unit

_RETRIES = 5


async def record_run_outcome(unit: Unit, request_id: str, call: str, outcome: RunOutcome) -> bool:
    """Store `outcome` of the call `call` (its tool_use_id) on the request: on the request itself, or
    on that call's item of a batch card. False if it was recorded already or the request is gone.
    Enqueues the card update and the Home refreshes of the people who see it."""
    item: str | None = None
    for _ in range(_RETRIES):
        request = await unit.get_request(request_id)
        if request is None:
            return False
        item = call if request.items else None
        extra = with_outcome(request.extra, outcome, item=item)
        if extra is None:
            return False
        updated = request.evolve(extra=extra, updated_at=max(request.updated_at, outcome.at))
        if await unit.update_request(updated, expected_version=request.version):
            break
    else:
        return False
    key = f"{request_id}:outcome:{call}"
    data = {"item": item, **outcome.to_json()}
    await unit.append_audit(AuditEvent(request_id, f"run_{outcome.status.value}", outcome.at, None, data))
    await unit.enqueue(effects.update_card(request_id, f"card:{key}", outcome.at))
    decided_by = request.decision.decided_by if request.decision is not None else None
    deciders = [i.decided_by.id for i in request.items if i.decided_by is not None]
    if decided_by is not None:
        deciders.append(decided_by.id)
    await enqueue_homes(unit, await unit.home_users_of(request_id, also=deciders), key, outcome.at)
    return True
