"""Use case: offer one digest card for each group of similar pending requests in a channel.

At each sweep (safe in every process; at most once a minute per process), the pending requests created
in the last day are read (at most CAP, the oldest first) and grouped
(bot.domain.similar); each group of at least `min_size` gets a card, enqueued as one outbox item keyed by
its channel, its shape and the day (`similar:{channel}:{shape}:{YYYY-MM-DD}`): the outbox stores a key
once, so replicas, restarts and repeated sweeps post it once, and a shape gets at most one card a day.
The card is rendered when enqueued (bot/slack/similar_cards.py) and names its requests; deciding them
is each request's own decision (bot/slack/similar_handlers.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from bot.domain.model import Request, Status
from bot.domain.similar import Group, groups
from bot.outbox import effects
from bot.process.clock import Clock
from storage.base import Store

log = logging.getLogger(__name__)

CAP = 2000  # pending requests read per tick at most
PAGE = 500
RECENT = timedelta(days=1)  # how far back a tick looks: bursts are recent
EVERY = timedelta(minutes=1)  # a tick at most this often per process (sweeps run every 15 s)


class SimilarRequests:
    def __init__(self, store: Store, clock: Clock, *, min_size: int,
                 render: Callable[[Group, list[Request]], dict[str, Any]] | None = None) -> None:
        self.store = store
        self.clock = clock
        self.min_size = min_size  # 0: off
        self.render = render  # set by bot/process/app.py
        self._ticked: datetime | None = None

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

    async def tick(self) -> int:
        """Enqueue a card for each group that has none today; how many this call enqueued."""
        if self.min_size <= 0 or self.render is None:
            return 0
        now = self.clock.now()
        if self._ticked is not None and timedelta(0) <= now - self._ticked < EVERY:
            return 0
        self._ticked = now
        pending = await self.pending()
        by_id = {r.id: r for r in pending}
        enqueued = 0
        for group in groups(pending, self.min_size):
            key = f"{group.key}:{now:%Y-%m-%d}"
            message = self.render(group, [by_id[i] for i in group.ids])
            async with self.store.unit() as unit:
                if await unit.enqueue(effects.channel_message(group.channel, key, now, message)):
                    enqueued += 1
        return enqueued
