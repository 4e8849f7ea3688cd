"""What a delivery's result writes, in the unit that marks its outbox item done (bot/outbox/dispatcher.py).

The Slack deliveries (bot/slack/) call Slack and hand back one of these as their result's `apply`:
they never write themselves. Each write is safe to run again (the dispatcher's unit may be retried):
guarded on the request's version, or keyed so that a second run stores nothing new.

    permalinks       the card permalinks found for an App Home
    escalated        an escalation's notice: the people it reached, their DMs and Home refreshes
    pages_to_post    a batch card's further pages, enqueued once the card's ts is stored
    page_posted      a batch page's ts, its audit row and the card update that shows it
    undelivered      a card Slack refused for good: the request marked, long-polls woken, the webhook
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from bot.approvals.homes import republish_homes
from bot.domain.batch import page_ts
from bot.domain.delivery_state import DELIVERY_KEY
from bot.domain.model import AuditEvent, Request
from bot.domain.outbox import OutboxItem
from bot.domain.values import iso
from bot.outbox import effects
from bot.process.clock import Clock
from storage.base import CARD_TS_TRIES, Unit

Write = Callable[[Unit], Awaitable[None]]
"""A delivery's writes, run in the unit that finishes its outbox item."""


def permalinks(links: dict[str, str]) -> Write:
    """Store each request's card permalink (request id -> link)."""

    async def apply(unit: Unit) -> None:
        for request_id, link in links.items():
            await unit.set_card_permalink(request_id, link)

    return apply


def escalated(request: Request, item: OutboxItem, payload: dict[str, Any], people: list[str], permalink: str | None,
              clock: Clock) -> Write:
    """An escalation's or hand-back's notice (`item`, whose payload is `payload`) reached `people`: the card's
    permalink if it had none, the people indexed for their App Home, a DM each, their Homes refreshed."""

    async def apply(unit: Unit) -> None:
        now = clock.now()
        if permalink and not request.card_permalink:
            await unit.set_card_permalink(request.id, permalink)
        if payload["kind"] == "escalate":
            await unit.add_people(request.id, "escalated", people, now)
        if payload.get("add") and request.approvers:  # an empty list means anyone may decide already
            await unit.add_people(request.id, "approver", people, now)
        for user in people:
            await unit.enqueue(effects.dm(request.id, f"dm:{item.dedupe_key}:{user}", now,
                                          user=user, notice=payload, permalink=permalink))
        # Targets named directly had their Home refreshed by the escalating unit; members of groups not.
        expanded = [p for p in people if p not in payload["to"]]
        await republish_homes(unit, expanded, f"{item.dedupe_key}:people", now)

    return apply


def pages_to_post(first: Write | None, request: Request, pages: int, clock: Clock) -> Write:
    """`first` (the card's own writes), then a post of each of a batch card's pages after the first."""

    async def apply(unit: Unit) -> None:
        if first is not None:
            await first(unit)
        now = clock.now()
        for page in range(1, pages):
            await unit.enqueue(effects.post_page(request.id, page, now))

    return apply


def page_posted(request_id: str, page: int, ts: str, clock: Clock) -> Write:
    """A batch page's ts in the request's `extra["pages"]` (unless one is stored), audited, and the card
    updated to show the request's latest state."""

    async def apply(unit: Unit) -> None:
        now = clock.now()
        for _ in range(CARD_TS_TRIES):  # a timer's write in between is no failure: read again
            request = await unit.get_request(request_id)
            if request is None or page_ts(request, page):
                return
            pages = {**(request.extra.get("pages") or {}), str(page): ts}
            updated = request.evolve(extra={**request.extra, "pages": pages}, updated_at=now)
            if await unit.update_request(updated, expected_version=request.version):
                break
        else:
            raise RuntimeError("request kept changing while storing a page ts")  # rolled back; retried
        await unit.append_audit(AuditEvent(request_id, "page_posted", now, None, {"page": page, "ts": ts}))
        # The request may have changed between rendering and storing: show its latest state.
        await unit.enqueue(effects.update_card(request_id, f"card:{request_id}:page:{page}", now))

    return apply


def undelivered(request_id: str, details: dict[str, Any], now: datetime,
                *, touch: Callable[[Unit, str], None]) -> Write:
    """A request whose card Slack refused for good (the state is read in bot.domain.delivery_state): it
    gets `extra["delivery"]`, other processes' long-polls are NOTIFYed, and an agent that gave a
    `callback_url` gets an `approval.undelivered` webhook. `touch` wakes this process's long-polls once
    it commits."""

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
        hook = effects.undelivered_webhook(marked, now)
        if hook is not None:
            await unit.enqueue(hook)

    return apply
