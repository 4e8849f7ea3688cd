"""Storage of the similar-requests cards (bot/approvals/similar.py), on the engines of a `SqlStore`.

A request is on one card at most, ever (`similar_members`' primary key): replicas adding the same request
to a card, or two cards, store it once. A card's id is deterministic in its group, so two replicas making
the same card make one. Writes take the caller's `Unit`, so a card, its members and its outbox items
commit together.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.similar import Card, Shape
from storage.base import Unit
from storage.similar_schema import similar_cards, similar_members
from storage.sql import SqlStore, SqlUnit


def _sql(unit: Unit) -> SqlUnit:
    assert isinstance(unit, SqlUnit), "similar cards live in the SQL store"
    return unit


def _shape(value: Any) -> Shape:
    return tuple((str(a), str(b), str(c)) for a, b, c in value)


class SimilarStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store

    async def _cards(self, conn: AsyncConnection, where: Any) -> list[Card]:
        rows = (await conn.execute(sa.select(similar_cards).where(where).order_by(similar_cards.c.created_at,
                                                                                   similar_cards.c.id))).all()
        if not rows:
            return []
        members: dict[str, list[str]] = {}
        for m in (await conn.execute(
                sa.select(similar_members.c.card_id, similar_members.c.request_id)
                .where(similar_members.c.card_id.in_([r.id for r in rows]))
                .order_by(similar_members.c.added_at, similar_members.c.request_id))).all():
            members.setdefault(m.card_id, []).append(m.request_id)
        return [Card(r.id, r.channel, r.tool, _shape(r.shape), tuple(members.get(r.id, ())), r.state, r.ts,
                     r.closed_at is not None) for r in rows]

    async def open_cards(self) -> list[Card]:
        """Every card with requests still pending (not closed), oldest first, with its members."""
        async with self.store.engine.connect() as conn:
            return await self._cards(conn, similar_cards.c.closed_at.is_(None))

    async def card(self, card_id: str) -> Card | None:
        async with self.store.engine.connect() as conn:
            found = await self._cards(conn, similar_cards.c.id == card_id)
        return found[0] if found else None

    @staticmethod
    async def create(unit: Unit, card: Card, now: datetime) -> bool:
        """Insert `card` (its members too) unless a card with its id exists; True if this call made it."""
        sql = _sql(unit)
        made = await sql.conn.execute(sql._insert_ignore_keys(similar_cards, {
            "id": card.id, "channel": card.channel, "tool": card.tool, "shape": [list(p) for p in card.shape],
            "created_at": now, "state": card.state}, ["id"]))
        if made.rowcount != 1:
            return False
        await SimilarStore.add_members(unit, card.id, card.members, now)
        return True

    @staticmethod
    async def add_members(unit: Unit, card_id: str, request_ids: Iterable[str], now: datetime) -> list[str]:
        """Put each request on the card unless it is on one already; the ids this call added."""
        sql = _sql(unit)
        added = []
        for request_id in request_ids:
            result = await sql.conn.execute(sql._insert_ignore_keys(similar_members, {
                "request_id": request_id, "card_id": card_id, "added_at": now}, ["request_id"]))
            if result.rowcount == 1:
                added.append(request_id)
        return added

    @staticmethod
    async def set_state(unit: Unit, card_id: str, state: str, closed_at: datetime | None) -> None:
        """What the card's last enqueued message shows; `closed_at`: nothing is pending any more."""
        values: dict[str, Any] = {"state": state}
        if closed_at is not None:
            values["closed_at"] = closed_at
        await _sql(unit).conn.execute(similar_cards.update().where(similar_cards.c.id == card_id).values(**values))

    @staticmethod
    async def set_ts(unit: Unit, card_id: str, ts: str) -> None:
        """The posted message's ts (kept if one is stored already)."""
        await _sql(unit).conn.execute(similar_cards.update().where(
            similar_cards.c.id == card_id, similar_cards.c.ts.is_(None)).values(ts=ts))
