"""Use case: one digest card for each group of similar pending requests in a channel, kept up to date.

At each sweep (safe in every process), the pending requests created in the last day are read (at most CAP,
the oldest first; at most once a minute per process) and planned (bot.domain.similar.plan): alike requests
on no card join the open card of their shape, and each new group of at least `min_size` gets a card (its id
deterministic in the group, so replicas make it once) with its post enqueued in the same unit.

A card follows its requests: whenever what it shows changes (one of them decided, by a person, the clock, a
cancel or the API, or a new alike request joined), an update is enqueued keyed by the new state
(`similar:{card}:{state}`), so the change is shown once however many processes notice it, and the outbox
delivers it after the post, rendered from the requests' state at delivery time (so a late update still shows
the latest truth), across restarts. Who notices: the process that decided (`decided`, after its commit: at
once), and every sweep in every process (`refresh` of each open card), which also covers a crash between a
decision's commit and its notice, and cards another replica made. When nothing is left pending the card's
final tally is enqueued and the card closes.

Deciding its requests is each request's own decision (bot/slack/similar_handlers.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any

from bot.approvals.delivery_results import Write
from bot.domain.model import Request, Status
from bot.domain.similar import Card, Digest, Group, card_id, plan, state_of
from bot.outbox import effects
from bot.process.clock import Clock
from storage.base import Store, Unit
from storage.similar import SimilarStore

log = logging.getLogger(__name__)

CAP = 2000  # pending requests read per tick at most
PAGE = 500
RECENT = timedelta(days=1)  # how far back a tick looks: bursts are recent
EVERY = timedelta(minutes=1)  # grouping at most this often per process (sweeps run every 15 s)


class SimilarRequests:
    def __init__(self, store: Store, cards: SimilarStore, clock: Clock, *, min_size: int) -> None:
        self.store = store
        self.cards = cards
        self.clock = clock
        self.min_size = min_size  # 0: no new cards
        self._ticked: datetime | None = None
        self._on_card: dict[str, str] = {}  # request id -> the open card it is on, as last read here
        # Runs a refresh after the deciding commit (bot/process/app.py: the process's background tasks).
        self.spawn: Callable[[Coroutine[Any, Any, Any]], object] | None = None

    async def pending(self) -> list[Request]:
        """The pending requests created in the last RECENT, the oldest first (at most CAP)."""
        found: list[Request] = []
        after: tuple[datetime, str] = (self.clock.now() - RECENT, "")
        while len(found) < CAP:
            page = await self.store.list_requests(status=Status.PENDING, limit=PAGE, after=after)
            found.extend(page)
            if len(page) < PAGE:
                break
            after = (page[-1].created_at, page[-1].id)
        return found[:CAP]

    def _remember(self, cards: list[Card]) -> None:
        self._on_card = {rid: card.id for card in cards for rid in card.members}

    async def tick(self) -> int:
        """Group (at most once a minute), then bring every open card up to date; how many cards this made."""
        now = self.clock.now()
        cards = await self.cards.open_cards()
        made = 0
        if self.min_size > 0 and (self._ticked is None or not timedelta(0) <= now - self._ticked < EVERY):
            self._ticked = now
            planned = plan(await self.pending(), cards, self.min_size)
            for joining, ids in planned.joins.items():
                async with self.store.unit() as unit:
                    await self.cards.add_members(unit, joining, ids, now)
            for group in planned.new:
                made += await self._create(group, now)
            if planned.joins or planned.new:
                cards = await self.cards.open_cards()
        self._remember(cards)
        for card in cards:
            await self.refresh(card)
        return made

    async def _create(self, group: Group, now: datetime) -> int:
        card = Card(card_id(group), group.channel, group.tool, group.shape, group.ids,
                    state_of((i, Status.PENDING.value) for i in group.ids))
        async with self.store.unit() as unit:
            if not await self.cards.create(unit, card, now):
                return 0  # another replica (or an earlier tick) made it
            await unit.enqueue(effects.similar_post(card.id, now))
        return 1

    async def refresh(self, card: Card) -> bool:
        """Enqueue `card`'s update if what it shows changed (and close it when nothing is pending); True if
        this call enqueued it."""
        statuses = await self.store.statuses(card.members)
        state = state_of((rid, statuses[rid].value) for rid in card.members if rid in statuses)
        if state == card.state:
            return False
        now = self.clock.now()
        closing = not any(s is Status.PENDING for s in statuses.values())
        async with self.store.unit() as unit:
            enqueued = await unit.enqueue(effects.similar_update(card.id, state, now))
            await self.cards.set_state(unit, card.id, state, now if closing else None)
        return enqueued

    def decided(self, request: Request) -> None:
        """After a decision commits here (Service.on_decided): refresh its card at once, if it is on one."""
        on = self._on_card.get(request.id)
        if on is None or self.spawn is None:
            return
        self.spawn(self._refresh_card(on))

    async def _refresh_card(self, on: str) -> None:
        try:
            card = await self.cards.card(on)
            if card is not None and not card.closed:
                await self.refresh(card)
        except Exception:  # the next sweep refreshes it
            log.exception("could not refresh similar card %s", on)

    # -- what its deliveries read and write (bot/slack/similar_delivery.py) ----------------------------------

    async def card(self, on: str) -> Card | None:
        return await self.cards.card(on)

    async def digest(self, card: Card) -> Digest:
        """What `card` shows now: its requests as they are."""
        found = [await self.store.get_request(rid) for rid in card.members]
        return Digest(card, tuple(r for r in found if r is not None))

    def posted(self, on: str, ts: str) -> Write:
        """The card's post went out at `ts`: stored with the post's done mark."""
        async def apply(unit: Unit) -> None:
            await self.cards.set_ts(unit, on, ts)

        return apply
