"""The outbox's rows, as the dispatcher (bot/outbox/dispatcher.py) reads and writes them: when the next
item falls due, claiming due items under a lease, and finishing deliveries with their results.

A result's writes (its `apply`, its audit rows, the card ts it brings) commit with the item's done,
retry, postpone or dead mark, never without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from bot.domain.model import AuditEvent
from bot.domain.outbox import CardPosted, OutboxItem
from bot.outbox.results import Done, Result, Retry
from storage.base import Store
from storage.group_commit import GroupCommit


class OutboxRows:
    """The dispatcher's reads and writes of the outbox. Results are written in groups (`GroupCommit`):
    deliveries that finish while one result unit is being written share the next one; a failing group
    is written again item by item, so one item's failure never loses another's."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._results: GroupCommit[tuple[OutboxItem, Result, datetime]] = GroupCommit(self._write_group)
        # Told of the card ts each group stored, once it committed (the dispatcher's listeners).
        self.cards_stored: Callable[[Sequence[tuple[CardPosted, datetime]]], None] = lambda cards: None

    async def next_due(self) -> datetime | None:
        """When the next pending item falls due (None: none is pending)."""
        return await self.store.next_outbox_due()

    async def claim(self, now: datetime, *, limit: int, lease_seconds: float) -> list[OutboxItem]:
        """Due items, at most `limit`, each leased to this caller for `lease_seconds` and its attempt counted."""
        return await self.store.claim_outbox(now, limit=limit, lease_seconds=lease_seconds)

    async def finish(self, item: OutboxItem, result: Result, now: datetime) -> None:
        """Write one delivery's result, in the next group of results; returns once it committed."""
        await self._results.submit((item, result, now))

    async def _write_group(self, group: Sequence[tuple[OutboxItem, Result, datetime]]) -> None:
        self.cards_stored(await self._write(group))

    async def _write(self, group: Sequence[tuple[OutboxItem, Result, datetime]]) -> list[tuple[CardPosted, datetime]]:
        """Several deliveries' results in one unit: each item's own writes (`apply`, audit) in its
        order, then the done marks together. A group never holds two ordered items of one request:
        a request's next item starts only once its previous one's result is written."""
        if all(isinstance(result, Done) and result.apply is None for _, result, _ in group):
            # Card posts and updates and the like: cards' ts, audit rows and done marks only (one
            # statement on PostgreSQL).
            audits = [a for _, result, _ in group if isinstance(result, Done) for a in result.audit]
            cards = [(result.card, now) for _, result, now in group if isinstance(result, Done) and result.card]
            stored = await self.store.outbox_finished([(item.id, now) for item, _, now in group if item.id is not None],
                                                      audits, cards)
            return [(card, at) for card, at in cards if card.request_id in stored]
        stored_cards: list[tuple[CardPosted, datetime]] = []
        async with self.store.unit() as unit:
            done: list[tuple[int, datetime]] = []
            audit: list[AuditEvent] = []
            for item, result, now in group:
                assert item.id is not None
                if isinstance(result, Done):
                    if result.card is not None and await unit.record_card(result.card, now):
                        stored_cards.append((result.card, now))
                    if result.apply is not None:
                        await result.apply(unit)
                    audit.extend(result.audit)
                    done.append((item.id, now))
                elif isinstance(result, Retry) and result.waiting:
                    await unit.outbox_postpone(item.id, now + timedelta(seconds=result.after))
                elif isinstance(result, Retry):
                    at = now + timedelta(seconds=result.after)
                    await unit.outbox_retry(item.id, at, result.error, definite=result.definite)
                else:
                    if result.apply is not None:
                        await result.apply(unit)
                    await unit.append_audits(result.audit)
                    await unit.outbox_dead(item.id, now, result.error)
            await unit.append_audits(audit)
            await unit.outbox_done_many(done)
        return stored_cards
