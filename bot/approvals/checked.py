"""A person's decision is written only on a state of the request its check saw.

A click or a form is checked (is the request pending, is this person one of its approvers, may they
approve what they asked for) on the request as read, and only then decided. Between the two, any
other write of the request may land: an escalation that takes the person away, another replica's
change of its approvers, another vote. `decide_checked` decides on the checked version only
(`Service.decide(only_on_read=True)`); if the request moved on, nothing is written and the person
is checked again on the request as the decision found it, so a decision is never recorded on a
state of the request its check did not see.
`guarded_checked` does the same for a person's other changes (snooze, escalate, hand back).

What is not part of the request's row is checked as of the check, not versioned with it: a user
group's members (Slack's, cached for minutes) and whether a delegation has ended (`/signoff back`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from bot.domain.model import Outcome, Request
from bot.approvals.service import DecideResult, Guarded, Service
from storage.base import Unit

T = TypeVar("T")

# Why `person` may not decide the request as it is now (a note to tell them), or None: they may.
Recheck = Callable[[Request], Awaitable[str | None]]

# How often a decision is checked again because its request moved on meanwhile: each time some other
# write landed between its check and its decision (a quorum's votes land one after another).
RECHECKS = 100
KEPT_CHANGING = ("This request kept changing while your decision was being recorded, so it was not. "
                 "Try again to decide it as it is now.")


async def decide_checked(service: Service, read: Request, recheck: Recheck, outcome: Outcome,
                         **decide: Any) -> DecideResult:
    """`Service.decide(outcome, **decide)` on `read` if `recheck(read)` lets it through, else on the
    first later state it lets through; `refused` (nothing written) when a state it checked does not."""
    state = read
    for _ in range(RECHECKS):
        refusal = await recheck(state)
        if refusal is not None:
            return DecideResult(state, won=False, refused=refusal)
        result = await service.decide(state.id, outcome, read=state, only_on_read=True, **decide)
        if not result.stale:
            return result
        state = result.request
    return DecideResult(state, won=False, refused=KEPT_CHANGING)


async def guarded_checked(service: Service, request_id: str, recheck: Recheck,
                          change: Callable[[Unit, Request], Awaitable[T]]) -> Guarded[T] | str:
    """`Service.guarded(change)`, run only on a state `recheck` lets through: if the request moved on
    between the check and the write, it is checked again on the row as the write found it. The refusal
    (str) when a state it checked does not let it through; nothing written."""
    state = await service.get(request_id)
    for _ in range(RECHECKS):
        if state.is_pending:
            refusal = await recheck(state)
            if refusal is not None:
                return refusal
        result = await service.guarded(request_id, change, read=state, retries=1)
        if result.ran or result.settled:
            return result
        state = result.request  # lost the guard: the row as the write found it
    return Guarded(state)
