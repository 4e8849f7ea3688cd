"""Marking a request whose card Slack refused for good (the state is read in bot.domain.delivery_state).

In the outbox item's own unit: the request gets `extra["delivery"]`, other processes' long-polls are
NOTIFYed, and an agent that gave a `callback_url` gets an `approval.undelivered` webhook.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from bot.domain.delivery_state import DELIVERY_KEY, is_undelivered
from bot.outbox import effects
from bot.domain.values import iso
from bot.domain.wire import request_json
from bot.approvals.reads import Reads
from storage.base import Unit

UNDELIVERED_EVENT = "approval.undelivered"


def mark_undelivered(request_id: str, details: dict[str, Any], now: datetime,
                     *, touch: Callable[[Unit, str], None]) -> Callable[[Unit], Awaitable[None]]:
    """The outbox unit's work; `touch` wakes this process's long-polls once it commits."""

    async def apply(unit: Unit) -> None:
        request = await unit.get_request(request_id)
        if request is None or request.card_ts or not request.is_pending:
            return
        delivery = {"status": "failed", **details, "failed_at": iso(now)}
        marked = request.evolve(extra={**request.extra, DELIVERY_KEY: delivery}, updated_at=now)
        if not await unit.update_request(marked, expected_version=request.version):
            raise RuntimeError("request changed while marking it undelivered")  # the unit rolls back; retried
        await unit.notify(request_id)
        touch(unit, request_id)
        if request.callback_url:
            body = {"type": UNDELIVERED_EVENT, "request": request_json(marked)}
            await unit.enqueue(effects.webhook(request_id, f"webhook:{request_id}:undelivered", now,
                                               url=request.callback_url, body=body))

    return apply


def undelivered_check(reads: Reads) -> Callable[[list[str]], Awaitable[list[str]]]:
    """For the SQLite cross-process watcher: which waited-on requests another process marked."""

    async def check(ids: list[str]) -> list[str]:
        found = [await reads.request(i) for i in ids]
        return [r.id for r in found if r is not None and is_undelivered(r)]

    return check
