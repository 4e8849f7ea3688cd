"""Use case: read the decision record of the last days and say what policy could stop asking (or deny).

The record is read in pages by creation time (requests created before the window but decided in it
are not counted: the window is a lower bound on the evidence, never an upper one); the judgement is
bot.domain.history's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from bot.domain.history import Decided, HistorySuggestion, Thresholds, suggest
from bot.domain.model import Request, Status
from storage.base import Store

PAGE = 500


async def history_suggestions(store: Store, now: datetime, thresholds: Thresholds = Thresholds()
                              ) -> list[HistorySuggestion]:
    since = now - timedelta(days=thresholds.days)
    decided: list[Decided] = []
    for status in (Status.APPROVED, Status.REJECTED):
        after: tuple[datetime, str] = (since, "")
        while True:
            page = await store.list_requests(status=status, limit=PAGE, after=after)
            for request in page:
                decided.extend(_decided(request))
            if len(page) < PAGE:
                break
            after = (page[-1].created_at, page[-1].id)
    return suggest(decided, now, thresholds)


def _decided(request: Request) -> Iterator[Decided]:
    decision = request.decision
    if decision is None:
        return
    if not request.items:
        yield Decided(request.action.name, request.action.params, decision.outcome, decision.via,
                      decision.decided_by.id if decision.decided_by else None, decision.decided_at, request.risk,
                      edited=bool(decision.changes))
        return
    for item in decision.items or request.items:
        if item.outcome is None:
            continue
        actor = item.decided_by or decision.decided_by
        yield Decided(item.action.name, item.action.params, item.outcome, item.via or decision.via,
                      actor.id if actor else None, decision.decided_at, request.risk, edited=bool(item.changes))
